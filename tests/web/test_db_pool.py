"""PostgreSQL's connection pool (settings: OPENPROGRAM_DB_POOL_SIZE): a connection given back is taken
again, not reopened; one the server closed meanwhile is replaced, not handed out; and a database that
cannot be reached fails a request when its wait ends, the reason logged."""
import os
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from .launch_helpers import wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the pool is PostgreSQL's")]


def in_a_thread(work):
    """What `work()` returns, run in a thread of its own (its own Django connection, given back after)."""
    answer = []

    def run():
        try:
            answer.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return answer[0]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def backends() -> set[int]:
    """The pids of the backends serving this database now, this test's own connection's among them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction reads the same view each time
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {pid for (pid,) in cursor.fetchall()}


def test_a_connection_given_back_is_taken_again_not_reopened():
    in_a_thread(backend_pid)  # the pool holds at least that one now (earlier tests may have left more)
    before = backends()
    assert in_a_thread(backend_pid) in before  # a pooled backend, not a new one


def test_a_pooled_connection_the_server_closed_is_replaced_when_taken():
    pooled = in_a_thread(backend_pid)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pooled])
    wait_for(lambda: pooled not in backends(), 60, "the terminated backend to end")
    replaced = in_a_thread(backend_pid)  # without the check when taken, this query would fail
    assert replaced != pooled


def test_a_database_that_cannot_be_reached_fails_the_request_when_the_wait_ends_and_the_log_says_why():
    """The pool connects in the background and retries, so the caller's error is the wait's end; the
    reason (here: no such database) is in the log, not lost."""
    url = urlsplit(os.environ["DATABASE_URL"])._replace(path="/no_such_database_of_openprogram").geturl()
    code = ("import django; django.setup()\n"
            "from django.db import connection\n"
            "try:\n    connection.ensure_connection()\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], timeout=120,
                          capture_output=True, text=True,
                          env={**os.environ, "DATABASE_URL": url, "OPENPROGRAM_DB_POOL_TIMEOUT_S": "1",
                               "DJANGO_SETTINGS_MODULE": "openprogram_web.settings"})
    assert done.stdout.strip() == "OperationalError couldn't get a connection after 1.00 sec"
    assert 'database "no_such_database_of_openprogram" does not exist' in done.stderr
