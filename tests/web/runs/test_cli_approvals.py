"""`run_function` asks on a terminal whether a call may run, and runs unattended when no one can answer."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

from dag.live.cli_approvals import question, read_answer
from dag.models import Node, Session
from examples.functions import CAREFUL_PREFIX

from ...database_url import database_url
from ..launch_helpers import wait_for
from .test_cli import ROOT


def run_function_child(*arguments: str, stdin) -> subprocess.Popen:
    environ = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1",
               "COLUMNS": "200"}  # no line of the answer wrapped
    return subprocess.Popen([sys.executable, "manage.py", "run_function", *arguments], cwd=ROOT, env=environ,
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answered_on_a_terminal(owner, typed: bytes) -> tuple[subprocess.CompletedProcess, Session]:
    """Run careful_agent with a pseudo-terminal as standard input, type `typed` once its call waits."""
    terminal, its_side = os.openpty()
    child = run_function_child("careful_agent", "task=hello", stdin=its_side)
    os.close(its_side)
    try:
        session = wait_for(lambda: Session.objects.filter(owner=owner).first(), 60, "the CLI's session")
        wait_for(lambda: Node.objects.filter(session=session, status="awaiting_approval").exists(), 60,
                 "the call to wait for approval")
        os.write(terminal, typed)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        os.close(terminal)
    session.refresh_from_db()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), session


@pytest.mark.django_db(transaction=True)
def test_yes_on_the_terminal_approves_the_call(local_user):
    done, session = answered_on_a_terminal(local_user, b"y\n")
    assert done.returncode == 0, done.stderr
    assert f'approve publish_note(text="{CAREFUL_PREFIX}hello")? [y/N/reason]' in done.stdout
    assert session.attended and f"published: {CAREFUL_PREFIX}hello" in done.stdout


@pytest.mark.django_db(transaction=True)
def test_a_reason_on_the_terminal_denies_the_call_with_it(local_user):
    done, session = answered_on_a_terminal(local_user, b"not on a Friday\n")
    assert "approval to run tool 'publish_note' was denied: not on a Friday" in done.stdout
    assert Node.objects.get(session=session, name="publish_note").refusal == "denied"


@pytest.mark.django_db(transaction=True)
def test_without_a_terminal_the_run_is_unattended(local_user):
    child = run_function_child("careful_agent", "task=hello", stdin=subprocess.DEVNULL)
    out, err = child.communicate(timeout=120)
    session = Session.objects.get(owner=local_user)
    assert child.returncode == 0, err
    assert not session.attended and "approve" not in out
    assert not Node.objects.filter(session=session, name="publish_note").exists()


@pytest.mark.parametrize("typed, meant", [("y", (True, "")), ("YES", (True, "")), ("", (False, "")),
                                          ("n", (False, "")), ("  too risky ", (False, "too risky"))])
def test_what_is_typed_reads_as_an_answer(typed, meant):
    assert read_answer(typed) == meant


def test_the_question_shows_the_call_as_it_would_be_made():
    assert question({"tool": "pay", "arguments": {"to": "ann", "amount": 5}}) == \
        'approve pay(to="ann", amount=5)? [y/N/reason] '
