"""`manage.py run_function` as a newcomer first uses it: a page address to open, a model to choose, and a
Ctrl-C at any moment that ends in one line."""
from __future__ import annotations

import runpy
import signal
import sys

import pytest

from dag.models import Session

from .test_cli import failure, run, run_function_in_a_child

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_page_is_a_full_address_a_terminal_can_open(local_user, settings):
    output = run("slow_count", "n=1", "delay_s=0")
    assert f"page: http://127.0.0.1:8000/sessions/{Session.objects.get().pk}/" in output

    settings.OPENPROGRAM_SITE_URL = "https://agents.example.com/"
    output = run("slow_count", "n=1", "delay_s=0")
    assert f"page: https://agents.example.com/sessions/{Session.objects.latest('created_at').pk}/" in output


def test_model_chooses_the_runs_model_among_those_offered(local_user):
    run("slow_count", "n=1", "delay_s=0", "--model", "sim:naive")
    assert Session.objects.get().model == "sim:naive"

    error = failure("slow_count", "n=1", "--model", "nonesuch:model")
    assert error.returncode == 2 and "model" in str(error)
    assert Session.objects.count() == 1  # the refused launch made no session


def test_a_ctrl_c_while_django_starts_is_one_line_not_a_traceback(monkeypatch, capsys):
    # Deterministically "during start-up": the interrupt comes out of Django's own entry point.
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr("django.core.management.execute_from_command_line", interrupted)
    monkeypatch.setattr(sys, "argv", ["manage.py", "run_function", "slow_count"])
    try:
        runpy.run_path("manage.py", run_name="__main__")
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C came out of manage.py as a KeyboardInterrupt (a traceback)")
    except SystemExit as exited:
        assert exited.code == 130
    else:
        pytest.fail("manage.py went on after a Ctrl-C")
    assert capsys.readouterr().err == "run_function: interrupted (Ctrl-C)\n"


def test_a_ctrl_c_once_the_run_is_launched_ends_in_one_line(local_user):
    # (A Ctrl-C during start-up: the test above. One sent the moment the process starts could land in the
    # interpreter's own start, before manage.py runs, which no code of ours can reach.)
    with run_function_in_a_child("slow_count", "n=200", "delay_s=0.05") as child:
        child.stdout.readline()  # "Session ... page: ..."
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert child.returncode == 130, (child.returncode, err)
