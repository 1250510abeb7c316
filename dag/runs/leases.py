"""Run leases: which process runs a session, renewed by one heartbeat thread per process.

A run claims its session with this process's worker id (`worker_id()`, "hostname:pid") and holds it
(`held(session_id)`) while it runs. One daemon thread per process renews every lease the process holds
every `OPENPROGRAM_HEARTBEAT_S` seconds with one UPDATE (`write_path.renew_leases`), however many runs
there are. If that UPDATE matches fewer sessions than the process runs, some were written off (ended by
a stop, a deadline or the reaper, or held by another worker): their runs are signalled to stop, and
their writes are refused anyway by the write path's fence.

The thread starts with the first lease a process holds (so a Celery worker, the embedded server and
`run_function` all get it from `lifecycle.run_session`) and also starts the reaper (dag.runs.reaper).
Tests drive it without threads or clocks: `beat(now=...)`.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterator, Optional

from django.db import connection
from django.utils import timezone

from ..conf import conf
from ..models import Session
from ..recording import write_path
from . import reaper, stop
from .daemon import DaemonThread

log = logging.getLogger(__name__)


def worker_id() -> str:
    """This process as a lease holder: "hostname:pid" (read each time: a forked child is another worker)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leases:
    """The sessions one worker runs, and the heartbeat that keeps their leases."""

    def __init__(self, worker: Optional[str] = None):
        self._worker = worker
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._thread = DaemonThread("openprogram-heartbeat", self._run)
        self._lost_listeners: list[Callable[[str], None]] = []

    @property
    def worker(self) -> str:
        return self._worker or worker_id()

    @property
    def sessions(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    @contextmanager
    def held(self, session_id) -> Iterator[None]:
        """Keep the lease of `session_id` (already claimed by this worker) renewed in this block."""
        key = str(session_id)
        with self._lock:
            self._held.add(key)
        self.start()
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(key)

    def beat(self, now: Optional[datetime] = None) -> set[str]:
        """Renew this worker's leases in one query; stop the runs whose lease is gone, and return them."""
        held = self.sessions
        if not held:
            return set()
        renewed = write_path.renew_leases(self.worker, held, now or timezone.now())
        if renewed >= len(held):
            return set()
        # Fewer than we run: find which (a run that ended since `held` was read is not lost, just done).
        still = {str(pk) for pk in Session.objects.filter(pk__in=held, worker=self.worker,
                                                           status=Session.Status.RUNNING).values_list("pk", flat=True)}
        with self._lock:
            lost = (held - still) & self._held
            self._held -= lost  # written off: neither renewed nor reported again, even if its run is stuck
        for session_id in lost:
            log.warning("session %s: worker %s lost its lease; stopping its run", session_id, self.worker)
            stop.signal_local(session_id, stop.LEASE_LOST)
            self._tell_lost(session_id)
        return lost

    def add_lost_listener(self, listener: Callable[[str], None]) -> None:
        """Have `listener(session_id)` called (on the heartbeat's thread) for each session a beat finds
        written off, until `remove_lost_listener(listener)`."""
        with self._lock:
            self._lost_listeners.append(listener)

    def remove_lost_listener(self, listener: Callable[[str], None]) -> None:
        with self._lock:
            self._lost_listeners = [known for known in self._lost_listeners if known != listener]

    def _tell_lost(self, session_id: str) -> None:
        with self._lock:
            listeners = list(self._lost_listeners)
        for listener in listeners:
            try:
                listener(session_id)
            except Exception:  # one listener's failure must not cost the others, or the heartbeat
                log.exception("a listener for session %s's lost lease failed", session_id)

    def start(self) -> None:
        """Start the heartbeat thread (and the process's reaper) unless it runs already."""
        self._thread.ensure()
        reaper.start()

    def _run(self) -> None:
        while True:
            time.sleep(conf.pause_s("HEARTBEAT_S"))
            try:
                self.beat()
                if not self.sessions:
                    connection.close()  # kept only while there are leases to renew
            except Exception:  # a database hiccup must not end the heartbeat; the next beat reconnects
                log.exception("heartbeat of worker %s failed", self.worker)
                connection.close()


# The one heartbeat of this process.
process_leases = Leases()
held = process_leases.held
