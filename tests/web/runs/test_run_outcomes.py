"""What a run ends with when what it made, or the database, cannot be stored as it is.

Whatever happens, the session ends with a terminal status, and it never reads `completed` with calls
missing from its tree.
"""
from __future__ import annotations

import pytest
from django.db import OperationalError

from dag.models import Node, Session
from dag.recording.write_path import batch_writer, sessions
from dag.runs import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)  # the run's writes commit through the writer


def run(user, function, **args) -> Session:
    session = Session.objects.create(owner=user, function=function, args=args)
    lifecycle.run_session(session.pk)
    return Session.objects.get(pk=session.pk)


def test_an_int_too_long_for_text_is_stored_as_a_stand_in_and_the_run_completes(user, test_functions):
    # Python refuses to turn an int past 4,300 digits into text, and so to encode it as JSON: the result
    # and the node's output had failed the write, leaving the session running for the reaper.
    session = run(user, "power_of_ten", digits=5_000)
    assert session.status == "completed" and session.result == "<int of about 5,000 digits>"
    assert Node.objects.get(session=session).output == "<int of about 5,000 digits>"
    assert run(user, "power_of_ten", digits=4_000).result == 10 ** 4_000  # below the limit: stored whole


def test_the_calls_beside_one_with_a_huge_int_are_all_recorded(user, test_functions):
    session = run(user, "powers_between_echoes")
    assert session.status == "completed" and session.error == ""
    names = list(Node.objects.filter(session=session).order_by("seq").values_list("name", flat=True))
    assert names == ["powers_between_echoes", "echo", "power_of_ten", "echo"]


def disk_error(tx, parts, *args, **kwargs):
    raise OperationalError("disk I/O error")


def test_a_run_whose_calls_could_not_be_recorded_does_not_end_completed(user, test_functions, monkeypatch):
    monkeypatch.setattr(batch_writer, "write_parts", disk_error)  # every batch, on every database
    session = run(user, "echo", text="hi")
    assert session.status == "error" and session.result == "hi"
    assert session.error == ("some of the run's calls could not be recorded, so its tree is incomplete "
                             "(OperationalError: disk I/O error)")


def test_a_failed_run_keeps_its_own_error_beside_the_lost_calls(user, test_functions, monkeypatch):
    monkeypatch.setattr(batch_writer, "write_parts", disk_error)  # every batch, on every database
    session = run(user, "explode", message="boom")
    assert session.status == "error"
    assert session.error == ("RuntimeError: boom; some of the run's calls could not be recorded, so its tree "
                             "is incomplete (OperationalError: disk I/O error)")


def test_a_run_whose_end_the_database_refuses_still_ends_saying_why(user, test_functions, monkeypatch):
    update = sessions.update_session_in
    refused = []

    def refuse_the_first_end(tx, session_id, **fields):
        if fields.get("status") == "completed":
            refused.append(fields["result"])
            raise OperationalError("value too large")
        return update(tx, session_id, **fields)
    monkeypatch.setattr(sessions, "update_session_in", refuse_the_first_end)
    session = run(user, "echo", text="hi")
    assert refused == ["hi"]
    assert session.status == "error" and session.result is None
    assert session.error == "the run ended completed, but its end could not be stored: OperationalError: value too large"
    assert not Node.objects.filter(session=session, status="running").exists()


def test_a_run_whose_runtime_cannot_be_built_ends_error_saying_why(user, test_functions, monkeypatch):
    # A worker started without the system checks (celery or daphne directly) with a bad runtime setting:
    # the session must end saying so, not stay running until the reaper calls its worker dead.
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED", "maybe")
    session = run(user, "echo", text="hi")
    assert session.status == "error" and "OPENPROGRAM_UNATTENDED='maybe' must be on or off" in session.error
