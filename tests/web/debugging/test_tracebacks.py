"""An exception in user code keeps its traceback: the user's file and line in the node's record (API),
the export and the CLI's tree; the runtime's own frames folded into one line."""
from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from dag.models import Node, Session
from dag.runs.lifecycle import run_session

from . import debug_functions

FUNCTIONS_FILE = debug_functions.__file__
DIVIDE_LINE = next(number for number, line in enumerate(open(FUNCTIONS_FILE), 1) if "return a / b" in line)
WHERE = f'File "{FUNCTIONS_FILE}", line {DIVIDE_LINE}, in divide'


def failed_report(owner) -> Session:
    session = Session.objects.create(owner=owner, function="report", args={"numbers": []})
    run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "error" and "ZeroDivisionError" in session.error
    return session


def test_the_api_records_the_failed_calls_traceback_with_the_users_file_and_line(api, user, debug_functions):
    session = failed_report(user)
    nodes = {node["name"]: node for node in api.get(f"/api/sessions/{session.pk}/nodes/").json()}
    divide = nodes["divide"]["traceback"]
    assert WHERE in divide and "return a / b" in divide
    assert divide.rstrip().endswith("ZeroDivisionError: division by zero")
    # The callers' records carry their own frames too: report -> average -> divide.
    report = nodes["report"]["traceback"]
    assert report.index("in report") < report.index("in average") < report.index("in divide")
    # The runtime's wrapper frames between them are folded, one line per run of them.
    assert re.search(r"\[\d+ frames? of the openprogram runtime\]", report)
    assert "runtime/function.py" not in report


def test_the_export_keeps_the_traceback(api, user, debug_functions):
    session = failed_report(user)
    exported = api.get(f"/api/sessions/{session.pk}/export/").json()
    divide = next(node for node in exported["nodes"] if node["name"] == "divide")
    assert WHERE in divide["traceback"]


def test_a_call_that_did_not_fail_has_no_traceback(user, debug_functions):
    session = Session.objects.create(owner=user, function="report", args={"numbers": [2, 4]})
    run_session(session.pk)
    assert set(Node.objects.filter(session=session).values_list("traceback", flat=True)) == {""}


@pytest.mark.django_db(transaction=True)
def test_the_cli_draws_the_traceback_under_the_failed_call(local_user, debug_functions):
    out = io.StringIO()
    with pytest.raises(Exception):
        call_command("run_function", "report", stdout=out)
    text = " ".join(out.getvalue().split())  # the terminal's width wraps long lines
    assert f"line {DIVIDE_LINE}, in divide" in text and "return a / b" in text
    # Drawn once, under divide (the call it was raised in), not again under each caller.
    assert text.count(f"line {DIVIDE_LINE}, in divide") == 1
    assert text.index("divide(") < text.index(f"line {DIVIDE_LINE}, in divide")
