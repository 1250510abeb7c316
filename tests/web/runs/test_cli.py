"""`manage.py run_function`: validation like the form, the drawn tree, the result, exit codes, Ctrl-C."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from dag.models import Node, Session
from dag.runs.executors import Executor

from ...database_url import database_url
from ..launch_helpers import wait_for

ROOT = Path(__file__).resolve().parents[3]


def run(*args) -> str:
    out = io.StringIO()
    call_command("run_function", *args, stdout=out)
    return out.getvalue()


def exit_of(*args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a run that ends the command with SystemExit."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as caught:
        call_command("run_function", *args, stdout=out, stderr=err)
    return caught.value.code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["tests.web.runs.cli_functions"]


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
    (("slow_count", "--user", ""), "no user named ''"),  # not the local user
])
def test_invalid_invocations_fail_with_code_2_and_launch_nothing(local_user, args, message):
    error = failure(*args)
    assert message in str(error) and error.returncode == 2
    assert not Session.objects.exists()


@pytest.mark.parametrize("budget, message", [
    # A problem with the budget as a whole: its message alone, never the internal key `__all__`.
    ("foo=1", "invalid --budget: unknown limit(s) 'foo'; the limits are max_depth, max_llm_calls, "
              "max_tokens, timeout_s, max_cost_usd"),
    ("max_depth", "invalid --budget: 'max_depth' is not NAME=VALUE; the limits are max_depth, max_llm_calls, "
                  "max_tokens, timeout_s, max_cost_usd"),
    ("max_cost_usd=-1", "invalid --budget: max_cost_usd: must be from 0.0001 to 1e+06 US dollars, got -1"),
    # A problem with one limit: after the limit's name.
    ("max_llm_calls=0", "invalid --budget: max_llm_calls: must be from 1 to 1000000000, got 0"),
])
def test_an_invalid_budget_fails_with_code_2_saying_what_is_wrong(local_user, budget, message):
    error = failure("slow_count", "--budget", budget)
    assert str(error) == message and error.returncode == 2
    assert not Session.objects.exists()


@pytest.mark.django_db(transaction=True)  # so that a run it wrongly launched would end, and fail the test
@pytest.mark.parametrize("value", ["maybe", "flase", ""])
def test_a_bool_argument_takes_only_the_on_off_words(local_user, test_functions, value):
    error = failure("widgets", "question=hi", f"verbose={value}")
    assert str(error) == f"verbose: expected on or off (1/0, true/false, yes/no, on/off), got {value!r}"
    assert error.returncode == 2 and not Session.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value, meant", [("Off", False), (" on ", True), ("1", True), ("no", False)])
def test_a_bool_argument_reads_each_on_off_word(local_user, test_functions, value, meant):
    run("widgets", "question=hi", f"verbose={value}")
    assert Session.objects.get().args["verbose"] is meant


class DeletingExecutor(Executor):
    """Deletes each session it is given, as someone in the admin might while the CLI watches it."""

    def submit(self, session_id) -> None:
        Session.objects.filter(pk=session_id).delete()


@pytest.mark.django_db(transaction=True)
def test_a_session_deleted_while_watched_ends_the_command_with_one_line(local_user, settings):
    settings.OPENPROGRAM_EXECUTOR = f"{__name__}.DeletingExecutor"
    code, out, err = exit_of("slow_count", "n=1", "delay_s=0")
    session_id = out.split()[1]
    assert code == 1 and not Session.objects.exists()
    assert err.strip() == f"session {session_id} was deleted while running; there is no result to show"


def test_an_integer_too_long_for_python_is_bad_input_not_a_crash(local_user, test_functions):
    error = failure("widgets", "question=hi", 'extra={"n": %s}' % ("9" * 5_000))
    assert "extra: a whole number longer than 4,300 digits" in str(error) and error.returncode == 2
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_without_a_local_user_it_says_what_to_do():
    assert "ensure_local_user" in str(failure("slow_count"))


@pytest.mark.django_db(transaction=True)
def test_a_failed_run_exits_non_zero_with_its_error(local_user, test_functions):
    error = failure("explode", "message=kaboom")
    assert error.returncode == 1 and "ended error" in str(error) and "kaboom" in str(error)


@pytest.mark.django_db(transaction=True)
def test_a_run_that_completed_with_refused_calls_exits_3_saying_so(local_user, cli_functions):
    code, out, err = exit_of("dig")
    session = Session.objects.get()
    assert code == 3 and session.status == "completed" and session.result == 4  # five frames ran
    assert err.strip() == "completed · 1 refused"
    assert out.rstrip().endswith("4")  # the result is still printed


@pytest.mark.django_db(transaction=True)
def test_a_run_that_completed_over_its_budget_exits_3_saying_so(local_user, cli_functions):
    code, _, err = exit_of("dig", "--budget", "max_depth=2")
    assert code == 3 and err.strip() == "completed · 1 over budget"
    assert Session.objects.get().status == "completed"


def test_the_help_lists_the_exit_codes():
    from dag.management.commands.run_function import Command

    help_text = Command().create_parser("manage.py", "run_function").format_help()
    assert "3 completed with refused calls or budget breaches" in " ".join(help_text.split())
    assert "130 cancelled" in help_text
    assert "1 error, interrupted or deleted while running" in " ".join(help_text.split())


@contextmanager
def run_function_in_a_child(*arguments: str, **env: str) -> Iterator[subprocess.Popen]:
    """`manage.py run_function ARGUMENTS` in a process of its own on the test's database; killed if the
    test leaves it running."""
    environ = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1", **env}
    child = subprocess.Popen([sys.executable, "manage.py", "run_function", *arguments], cwd=ROOT, env=environ,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_the_run_and_exits_130(local_user):
    with run_function_in_a_child("slow_count", "n=500", "delay_s=0.05") as child:
        session = wait_for(lambda: Session.objects.filter(owner=local_user).first(), 60, "the CLI's session")
        wait_for(lambda: Node.objects.filter(session=session, name="count_step").count() >= 2, 60,
                 "the CLI's run to start counting")
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    session.refresh_from_db()
    assert child.returncode == 130, err
    assert session.status == "cancelled" and session.cancel_requested
    assert err.strip() == f"cancelled: session {session.pk} was stopped; its calls so far are kept"
    assert "Stopping…" in out  # and no CommandError or traceback: a stop is an expected ending
    assert not Node.objects.filter(session=session, status="running").exists()
    assert Node.objects.filter(session=session, name="count_step").count() < 500


@pytest.mark.django_db(transaction=True)
def test_a_ctrl_c_just_after_the_launch_is_a_stop_request_not_a_keyboard_interrupt(local_user, monkeypatch):
    # The run has started but the tree is not drawn yet: that Ctrl-C must stop the run, not leave it going.
    from dag.management.commands import run_function as command
    from dag.runs.launch import launch

    def launch_then_ctrl_c(*args, **kwargs):
        session = launch(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return session

    monkeypatch.setattr(command, "launch", launch_then_ctrl_c)
    try:
        code, out, err = exit_of("slow_count", "n=200", "delay_s=0.05")
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C raised KeyboardInterrupt instead of requesting a stop")
    session = Session.objects.get()
    assert code == 130 and session.status == "cancelled" and session.cancel_requested
    assert err.strip() == f"cancelled: session {session.pk} was stopped; its calls so far are kept"
    assert "Stopping…" in out


@pytest.mark.django_db(transaction=True)
def test_a_second_ctrl_c_leaves_at_once_and_the_run_in_this_process_ends_interrupted(local_user):
    # The run (here one that no stop reaches) lives in the command's own process: leaving must end its
    # session, or it would read running until a reaper noticed.
    from dag.runs.executors import EXITED_DURING_RUN
    with run_function_in_a_child("deaf_until_released", OPENPROGRAM_FUNCTION_MODULES="tests.web.launch_helpers") as child:
        # Its node, not its session's status: a stop that came between the claim and the call would end
        # the run at the call's entry, before it is deaf to stops.
        entered = wait_for(lambda: Node.objects.filter(session__owner=local_user, name="deaf_until_released",
                                                       status="running").first(), 60, "the CLI's run to start")
        session = entered.session
        child.send_signal(signal.SIGINT)
        wait_for(lambda: Session.objects.filter(pk=session.pk, cancel_requested=True).exists(), 60,
                 "the first Ctrl-C's stop request")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    session.refresh_from_db()
    assert child.returncode == 130, err
    assert "interrupted again; leaving now: the run, in this process, ends interrupted with it" in err
    assert (session.status, session.error) == ("interrupted", EXITED_DURING_RUN)
    assert not Node.objects.filter(session=session, status="running").exists()


SESSION = {"id": "s", "function": "f", "status": "running"}
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
ROOT_NODE = {"id": 1, "seq": 0, "parent": None, "kind": "code", "name": "f", "status": "running", "input": {},
             "depth": 1, "name_depth": 1, "output": None, "error": "", "duration_ms": None,
             "started_at": (NOW - timedelta(seconds=2)).isoformat()}


def child(i: int, parent: int = 1, name: str | None = None, **fields) -> dict:
    return {**ROOT_NODE, "id": i, "seq": i - 1, "parent": parent, "name": name or f"step{i}", "depth": 2,
            "name_depth": 0, "status": "completed", "output": i, "duration_ms": 5, **fields}


def drawn(nodes: list[dict], latest: int | None = None) -> str:
    from rich.console import Console

    from dag.live.cli_tree import build_tree

    console = Console(record=True, width=160)
    console.print(build_tree(SESSION, {node["id"]: node for node in nodes}, latest=latest, now=NOW))
    return console.export_text()


def line_with(text: str, part: str) -> str:
    return next(line for line in text.splitlines() if part in line)


def test_a_long_tree_shows_the_latest_calls_with_their_callers():
    text = drawn([ROOT_NODE] + [child(i) for i in range(2, 12)], latest=3)
    assert "… 7 earlier calls not shown" in text  # 11 nodes: the latest 3 and their caller are drawn
    assert "f({})" in text and "step9(" in text and "step11(" in text and "step8(" not in text


def test_the_elision_line_is_drawn_at_the_level_of_the_calls_it_stands_for():
    # f → a → a3..a8, then f → b → b10..b12.
    a = child(2, name="a")
    inner_a = [child(i, parent=2, name=f"a{i}", depth=3) for i in range(3, 9)]
    b = child(9, name="b")
    inner_b = [child(i, parent=9, name=f"b{i}", depth=3) for i in range(10, 13)]
    tree = [ROOT_NODE, a, *inner_a, b, *inner_b]

    def column(text: str, part: str) -> int:
        return line_with(text, part).index(part)

    # The latest two (b11, b12): a and its six calls are left out among f's children (b's level), and b10
    # among b's (b11's level); neither at the top of the tree.
    text = drawn(tree, latest=2)
    assert column(text, "… 7 earlier calls not shown") == column(text, "b(")
    assert column(text, "… 1 earlier call not shown") == column(text, "b11(")
    assert text.index("… 7 earlier") < text.index("b(") < text.index("… 1 earlier") < text.index("b11(")
    # The latest nine: only a3 is left out, among a's calls.
    text = drawn(tree, latest=9)
    assert column(text, "… 1 earlier call not shown") == column(text, "a4(") > column(text, "a(")


def test_each_call_shows_its_duration_and_a_running_one_its_time_so_far():
    text = drawn([ROOT_NODE, child(2, duration_ms=1234), child(3, duration_ms=7)])
    assert "1.23 s" in line_with(text, "step2(") and "7 ms" in line_with(text, "step3(")
    assert "2.00 s" in line_with(text, "f({})")  # running: started two seconds before `now`


def test_nesting_reads_depth_and_the_per_name_count_never_a_fold_sign():
    text = drawn([ROOT_NODE, child(2, name="f", depth=2, name_depth=2)])
    nested = [line for line in text.splitlines() if "f(" in line][1]
    assert "depth 2 · nested 2 of 5" in nested and "×" not in text


def test_more_than_ten_calls_of_one_function_fold_as_on_the_page():
    steps = [child(i, name="count_step") for i in range(2, 26)] + [child(26, name="count_step", status="error",
                                                                             error="boom", output=None)]
    text = drawn([ROOT_NODE, *steps, child(27, name="done")])
    assert "count_step ×25  ✓ 24  ✕ 1" in text and "count_step(" not in text
    assert "done(" in text
    assert drawn([ROOT_NODE] + [child(i, name="count_step") for i in range(2, 12)]).count("count_step(") == 10
