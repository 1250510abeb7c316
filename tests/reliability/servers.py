"""A live Daphne server for the load and fault tests: a real process on the test database, started,
SIGKILLed and restarted by PID, with its log kept for the assertions.

Which configuration it serves follows this test pass: the test database (SQLite on the embedded pass,
PostgreSQL on the scaled one) and, when this pass has REDIS_URL, the Redis channel layer (or whatever
`redis_url` a test gives, e.g. a proxy in front of Redis it controls); without it the in-memory layer.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.database_url import database_url
from tests.e2e.support import ROOT, DaphneServer

# A line the server logs that the load and fault tests never expect: an error, or a traceback.
TROUBLE = re.compile(r"^(Traceback \(most recent call last\)|.*\bERROR\b|.*\bCRITICAL\b)", re.MULTILINE)


def server_environment(tmp_path: Path, *, redis_url: str | None = None, **extra: str) -> dict:
    """The environment of a server on this pass's test database and layer (see the module docstring)."""
    env = {**os.environ,
           "DATABASE_URL": database_url(connection.settings_dict),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
           "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"),
           "SECRET_KEY": settings.SECRET_KEY,  # the test's session cookies must be the server's
           "OPENPROGRAM_LOGIN_RATE": "off",
           "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER": "0",  # the load test runs 20 sessions of one user
           "PYTHONUNBUFFERED": "1",
           **extra}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    layer = settings.REDIS_URL if redis_url is None else redis_url
    if layer:
        env["REDIS_URL"] = layer
        env.setdefault("CELERY_BROKER_URL", layer)
    else:
        env.pop("REDIS_URL", None)
        env.pop("CELERY_BROKER_URL", None)
    return env


class LiveServer(DaphneServer):
    """`daphne` on 127.0.0.1 as its own process; `port` 0 lets the OS pick (a restart reuses the port)."""

    def __init__(self, env: dict, log_path: Path, port: int = 0):
        self.env, self.log_path = env, log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "daphne"), "-e", f"tcp:port={port}:interface=127.0.0.1",
             "openprogram_web.serve:application"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        self.url = self._wait_for_port()
        self.port = int(self.url.rsplit(":", 1)[1])

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def trouble(self) -> list[str]:
        """The log's error and traceback lines (none is expected)."""
        return [match.group(0) for match in TROUBLE.finditer(self.log())]

    def kill(self) -> None:
        """SIGKILL by PID: the process ends at once, mid-run, with nothing written on its way out."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait(30)
        self._log.close()

    def restart(self, log_path: Path) -> "LiveServer":
        """A new server process on the same port, environment and database."""
        return LiveServer(self.env, log_path, port=self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            super().stop()
        elif not self._log.closed:
            self._log.close()
