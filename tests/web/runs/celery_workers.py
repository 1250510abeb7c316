"""Real Celery worker processes for the scaled tests: started on the test database, stopped by PID."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.database_url import database_url as test_database_url

ROOT = Path(__file__).resolve().parents[3]
READY_S = 60.0  # a bound on start-up (Django, Celery, Redis), never a timing assertion


def scaled_only():
    """Skip unless this pass runs on PostgreSQL and Redis (make test's second pass, `test-scaled`)."""
    engine = settings.DATABASES["default"]["ENGINE"]
    return pytest.mark.skipif(not (engine.endswith("postgresql") and settings.REDIS_URL),
                              reason="Celery workers need PostgreSQL and Redis (DATABASE_URL, REDIS_URL)")


def new_queue() -> str:
    """A queue of this test's own: another test run on the same Redis never takes its messages."""
    return f"test-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Worker:
    """One `celery -A openprogram_web worker --pool threads` process on the test database (`database_url`:
    another way to it, e.g. through a proxy the test controls). `concurrency` None: the default's."""

    def __init__(self, tmp_path: Path, queue: str, *, concurrency: int | None = 4, database_url: str = "",
                 **env: str):
        self.name = f"w{uuid.uuid4().hex[:6]}"
        self.log_path = tmp_path / f"{self.name}.log"
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
            # The test database, not the real one.
            "DATABASE_URL": database_url or test_database_url(connection.settings_dict),
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"),
            "OPENPROGRAM_FUNCTION_MODULES": "examples.functions",
            "OPENPROGRAM_CELERY_QUEUE": queue,
            "OPENPROGRAM_MODEL": "sim",
            **env,
        }
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "openprogram_web", "worker", "--pool", "threads",
             *(["--concurrency", str(concurrency)] if concurrency else []), "-n", f"{self.name}@%h",
             "--loglevel", "INFO", "--without-mingle", "--without-gossip"],
            cwd=ROOT, env=environment, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> "Worker":
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if " ready." in self.log():
                return self
            if self.process.poll() is not None:
                raise AssertionError(f"worker {self.name} exited ({self.process.returncode}):\n{self.log()}")
            time.sleep(0.1)
        raise AssertionError(f"worker {self.name} was not ready within {READY_S:g} s:\n{self.log()}")

    def received(self) -> set[str]:
        """Ids of the sessions whose task this worker received."""
        return set(re.findall(r"Task openprogram\.run_session\[([0-9a-f-]+)\] received", self.log()))

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (Celery's warm shutdown) by PID; the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def stop(self) -> None:
        """End the process, whatever it is doing (SIGTERM, then SIGKILL)."""
        if self.process.poll() is None:
            try:
                self._signal(signal.SIGTERM, 30.0)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()

    def _signal(self, signum, timeout: float) -> int:
        if self.process.poll() is None:
            os.kill(self.pid, signum)
        return self.process.wait(timeout)
