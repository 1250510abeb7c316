"""What a database holds during a load, sampled every ~50 ms by a thread: its connections (from
pg_stat_activity, by application name) and its sessions running at once.

The processes of a bench each set PGAPPNAME to their own label (bench/_workers.py), so the peaks say
whose connections they were. The sampler's own connection is not counted.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Optional

import psycopg

INTERVAL_S = 0.05
CONNECTIONS = """
    SELECT coalesce(nullif(application_name, ''), '(unnamed)'), count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1"""
RUNNING = "SELECT count(*) FROM dag_session WHERE status = 'running'"


class ActivitySampler:
    """Samples the database at `url` on a thread of its own from `start()` until `stop()`, which returns
    the peaks: `connections` (all at once), `by_label` (each label's own peak), `groups` (for each name
    of `groups`, the connections at once of the labels starting with its prefix), `running` (sessions)."""

    def __init__(self, url: str, groups: Optional[dict[str, str]] = None):
        self.url = url
        self.groups = groups or {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._peaks: dict = {}
        self.error: Optional[BaseException] = None

    def start(self) -> "ActivitySampler":
        self._peaks = {"connections": 0, "by_label": Counter(), "groups": dict.fromkeys(self.groups, 0),
                       "running": 0, "samples": 0}
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="bench-pg-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(10)
        if self.error is not None:
            raise RuntimeError(f"sampling pg_stat_activity failed: {self.error!r}")
        return {**self._peaks, "by_label": dict(sorted(self._peaks["by_label"].items()))}

    def _sample(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True, application_name="bench-sampler") as connection:
                while not self._stop.is_set():
                    self._record(connection.execute(CONNECTIONS).fetchall(),
                                 connection.execute(RUNNING).fetchone()[0])
                    self._stop.wait(INTERVAL_S)
        except BaseException as exc:  # said by stop(), in the bench's thread
            self.error = exc

    def _record(self, by_label: list[tuple[str, int]], running: int) -> None:
        peaks = self._peaks
        peaks["samples"] += 1
        peaks["connections"] = max(peaks["connections"], sum(count for _, count in by_label))
        for label, count in by_label:
            peaks["by_label"][label] = max(peaks["by_label"][label], count)
        for name, prefix in self.groups.items():
            at_once = sum(count for label, count in by_label if label.startswith(prefix))
            peaks["groups"][name] = max(peaks["groups"][name], at_once)
        peaks["running"] = max(peaks["running"], running)
