"""Celery worker processes for a scaled bench: started with the project's default settings, stopped by PID.

Each worker gets PGAPPNAME (libpq's application name) set to its label, so that pg_stat_activity tells
whose connections the database holds (bench/_pg_activity.py); so does every other process the bench
starts.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY_S = 90.0  # a bound on start-up (Django, Celery, Redis) on a busy machine


class Worker:
    """`celery -A openprogram_web worker --pool threads` with the concurrency the project defaults to."""

    def __init__(self, label: str, env: dict, log_dir: Path):
        self.label = label
        self.log_path = Path(log_dir) / f"{label}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "openprogram_web", "worker", "--pool", "threads",
             "-n", f"{label}@%h", "--loglevel", "INFO", "--without-mingle", "--without-gossip"],
            cwd=ROOT, env={**env, "PGAPPNAME": label}, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> "Worker":
        deadline = time.monotonic() + READY_S
        while " ready." not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.label} did not start:\n{self.log()[-3000:]}")
            time.sleep(0.1)
        return self

    def rss_bytes(self) -> int:
        """The worker process's resident memory now (Linux /proc; its writer process not counted)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) * 1024

    def stop(self) -> None:
        """SIGTERM (Celery's warm shutdown), then SIGKILL if it has not ended within 30 s."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()
