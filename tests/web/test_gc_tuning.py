"""Serving processes run with the garbage collector tuned for recording (`openprogram_web.gc_tuning`).
Each check runs in a child process, which starts with CPython's defaults (this test process is tuned
too, by tests/conftest.py)."""
import os
import subprocess
import sys
from pathlib import Path

from openprogram_web.gc_tuning import THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]


def collector_after(code: str, tmp_path) -> tuple[tuple[int, ...], int]:
    """The thresholds and the frozen-object count a child process has once `code` has run."""
    report = "import gc; print(*gc.get_threshold()); print(gc.get_freeze_count())"
    env = {**os.environ, "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings"}
    child = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
    out = child.stdout.splitlines()
    return tuple(int(value) for value in out[-2].split()), int(out[-1])


def test_django_alone_keeps_the_defaults(tmp_path):
    thresholds, frozen = collector_after("import django; django.setup()", tmp_path)
    assert thresholds != THRESHOLDS and frozen == 0


def test_the_asgi_application_tunes_the_collector_once_loaded(tmp_path):
    thresholds, frozen = collector_after("import openprogram_web.asgi", tmp_path)
    assert thresholds == THRESHOLDS
    assert frozen > 10_000  # Django and the app, out of the collector's rounds


def test_a_celery_worker_tunes_the_collector_at_its_start(tmp_path):
    code = "from celery.signals import worker_init; import openprogram_web.celery; worker_init.send(sender=None)"
    thresholds, frozen = collector_after(code, tmp_path)
    assert thresholds == THRESHOLDS and frozen > 10_000
