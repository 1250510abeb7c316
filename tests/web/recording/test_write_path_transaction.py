"""WriteTransaction: the recorder's short transactions commit, roll back and publish like atomic() does."""
import pytest
from django.db import IntegrityError, transaction

from dag.models import Session
from dag.recording.write_path.write_transaction import WriteTransaction, placeholders

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db(transaction=True)


def _rename(tx, session, name):
    sql = placeholders('UPDATE "dag_session" SET "function" = %s WHERE "id" = %s', tx.connection.vendor)
    tx.execute(sql, [name, session.pk.hex if tx.connection.vendor == "sqlite" else session.pk])


def _function_of(session):
    return Session.objects.values_list("function", flat=True).get(pk=session.pk)


def _duplicate_of(tx, session):
    """An INSERT of a session row with `session`'s id (SQL and parameters): it fails on the primary key."""
    return placeholders('INSERT INTO "dag_session" ("id") VALUES (%s)', tx.connection.vendor), [session.pk.hex]


def _assert_unchanged_and_usable(session):
    """The failed transaction changed nothing, and the connection takes the next one."""
    assert _function_of(session) == "before"
    with WriteTransaction() as tx:
        _rename(tx, session, "still works")
    assert _function_of(session) == "still works"


def test_a_committed_write_is_kept_and_its_callbacks_run_after_the_commit():
    session = new_session(function="before")
    seen = []
    with WriteTransaction() as tx:
        _rename(tx, session, "after")
        tx.after_commit(lambda: seen.append(_function_of(session)))
        assert seen == []
    assert seen == ["after"]


def test_a_discarded_write_is_rolled_back_and_publishes_nothing():
    session = new_session(function="before")
    seen = []
    with WriteTransaction() as tx:
        _rename(tx, session, "after")
        tx.after_commit(lambda: seen.append("published"))
        tx.discard()
    assert (_function_of(session), seen) == ("before", [])


def test_an_exception_rolls_back_and_propagates():
    session = new_session(function="before")
    with pytest.raises(RuntimeError, match="boom"), WriteTransaction() as tx:
        _rename(tx, session, "after")
        raise RuntimeError("boom")
    assert _function_of(session) == "before"


def test_database_errors_come_out_as_djangos_and_leave_the_connection_usable():
    session = new_session(function="before")
    with pytest.raises(IntegrityError), WriteTransaction() as tx:
        tx.execute(*_duplicate_of(tx, session))
    _assert_unchanged_and_usable(session)


@pytest.mark.parametrize("lean", [True, False])
def test_inside_an_atomic_block_the_outer_rollback_covers_it(lean):
    session = new_session(function="before")
    seen = []
    with pytest.raises(RuntimeError), transaction.atomic():
        with WriteTransaction(lean=lean) as tx:
            _rename(tx, session, "after")
            tx.after_commit(lambda: seen.append("published"))
        assert _function_of(session) == "after"
        raise RuntimeError("the caller changes its mind")
    assert (_function_of(session), seen) == ("before", [])


def test_placeholders_follow_the_driver():
    assert placeholders("a = %s AND b = %s", "sqlite") == "a = ? AND b = ?"
    assert placeholders("a = %s", "postgresql") == "a = %s"


def test_counters_advance_without_returning_where_the_database_lacks_it(monkeypatch):
    # SQLite before 3.35 (which Django 5.2 still supports) has no RETURNING: a separate read then.
    from django.db import connection

    from dag.recording.write_path import sql as write_sql

    session = new_session()
    statements = []
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", False)
    with WriteTransaction() as tx:
        execute = tx.execute
        tx.execute = lambda sql, params=(): statements.append(sql) or execute(sql, params)
        assert write_sql.advance(tx, session.pk, 2, 1) == (2, 1)
    assert not any("RETURNING" in sql for sql in statements)


def test_a_deferred_statement_is_committed_with_the_transaction():
    session = new_session(function="before")
    with WriteTransaction() as tx:
        _rename(tx, session, "first")
        sql = placeholders('UPDATE "dag_session" SET "function" = %s WHERE "id" = %s', tx.connection.vendor)
        tx.defer(sql, ["second", session.pk.hex if tx.connection.vendor == "sqlite" else session.pk])
    assert _function_of(session) == "second"


def test_a_deferred_statement_that_fails_rolls_back_the_whole_transaction():
    # On PostgreSQL it is sent with the COMMIT, so its error comes out of the block's end.
    session = new_session(function="before")
    with pytest.raises(IntegrityError), WriteTransaction() as tx:
        _rename(tx, session, "after")
        tx.defer(*_duplicate_of(tx, session))
    _assert_unchanged_and_usable(session)
