"""`manage.py run_function`: validation like the form, the drawn tree, the result, exit codes, Ctrl-C."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from dag.models import Node, Session

from ...database_url import database_url
from ..launch_helpers import wait_for

ROOT = Path(__file__).resolve().parents[3]


def run(*args) -> str:
    out = io.StringIO()
    call_command("run_function", *args, stdout=out)
    return out.getvalue()


def failure(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        run(*args)
    return caught.value


@pytest.mark.django_db(transaction=True)
def test_runs_to_completion_drawing_the_tree_and_printing_the_result(local_user):
    output = run("slow_count", "n=3", "delay_s=0")
    session = Session.objects.get()
    assert session.owner == local_user and session.status == "completed" and session.args == {"n": 3, "delay_s": 0.0}
    assert f"Session {session.pk}" in output
    assert "slow_count" in output and output.count("count_step(") == 3  # every child call is drawn
    assert output.rstrip().endswith("3")  # the result


@pytest.mark.django_db(transaction=True)
def test_defaults_apply_to_arguments_not_given(local_user, test_functions):
    run("widgets", "question=hi", "tags=x", "tags=y", "verbose=yes")
    session = Session.objects.get()
    assert session.args["tags"] == ["x", "y"] and session.args["verbose"] is True
    assert session.args["mode"] == "brief" and session.args["count"] == 3 and session.args["title"] == "untitled"
    assert session.result["secret"] == "from-the-default"  # hidden: its default applies


@pytest.mark.django_db(transaction=True)
def test_runs_as_the_named_user(local_user, other_user):
    run("slow_count", "n=1", "delay_s=0", "--user", "bob")
    assert Session.objects.get().owner == other_user


@pytest.mark.parametrize("args, message", [
    (("slow_count", "n=many"), "n: expected an integer, got 'many'"),
    (("slow_count", "count=3"), "unknown argument(s) count for slow_count; parameters are: n, delay_s"),
    (("slow_count", "n"), "arguments are key=value; got 'n'"),
    (("nope",), "unknown function 'nope'"),
    (("slow_count", "--user", "nobody"), "no user named 'nobody'"),
])
def test_invalid_invocations_fail_with_code_2_and_launch_nothing(local_user, args, message):
    error = failure(*args)
    assert message in str(error) and error.returncode == 2
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_without_a_local_user_it_says_what_to_do():
    assert "ensure_local_user" in str(failure("slow_count"))


@pytest.mark.django_db(transaction=True)
def test_a_failed_run_exits_non_zero_with_its_error(local_user, test_functions):
    error = failure("explode", "message=kaboom")
    assert error.returncode == 1 and "ended error" in str(error) and "kaboom" in str(error)


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_the_run_and_exits_130(local_user):
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "manage.py", "run_function", "slow_count", "n=500", "delay_s=0.05"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        session = wait_for(lambda: Session.objects.filter(owner=local_user).first(), 60, "the CLI's session")
        wait_for(lambda: Node.objects.filter(session=session, name="count_step").count() >= 2, 60,
                 "the CLI's run to start counting")
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    session.refresh_from_db()
    assert child.returncode == 130, err
    assert session.status == "cancelled" and session.cancel_requested
    assert "ended cancelled" in err
    assert not Node.objects.filter(session=session, status="running").exists()
    assert Node.objects.filter(session=session, name="count_step").count() < 500


def test_a_long_tree_shows_the_latest_calls_with_their_callers():
    from rich.console import Console

    from dag.live.cli_tree import build_tree

    session = {"id": "s", "function": "f", "status": "running"}
    root = {"id": 1, "seq": 0, "parent": None, "kind": "code", "name": "f", "status": "running", "input": {},
            "depth": 1, "name_depth": 1, "output": None, "error": ""}
    steps = {i: {**root, "id": i, "seq": i - 1, "parent": 1, "name": f"step{i}", "depth": 2, "name_depth": 0,
                 "status": "completed", "output": i} for i in range(2, 12)}
    console = Console(record=True, width=120)
    console.print(build_tree(session, {1: root, **steps}, latest=3))
    text = console.export_text()
    assert "… 7 earlier calls not shown" in text  # 11 nodes: the latest 3 and their caller are drawn
    assert "f({})" in text and "step9(" in text and "step11(" in text and "step8(" not in text
