"""Stopping a run: persist the request, then make the run's next function entry or model call raise.

A stop is written to the session row first (`cancel_requested`), so it survives a stop pressed before the
run started and reaches a run in another process. A run in this process is signalled at once through
an in-memory event; runs elsewhere learn of it from one watcher thread per process that polls the flag
for all of its active runs together, and, with Redis, sooner: after the commit the stop is published on
Redis pub/sub (STOP_CHANNEL), where one listener thread per process that runs sessions turns it into the
local signal. The message is only a wake-up: lost (Redis down, a listener still subscribing), the poll
finds the flag anyway. A run that does not end within `conf.CANCEL_DEADLINE_S` of its stop is finished
`cancelled` by `finish_overdue_cancellations`, which the reaper calls. The pre-invocation hook itself only reads that event, so it adds no
database query to a call (and works inside async functions, where the ORM may not be used).

The watcher and the listener carry steering too (`dag.runs.steering`): `read_also` adds a reader the
watcher calls on each poll, `listen_also` a channel the listener wakes it for.

Hooks are process-global, so the hook acts only on a call made in a run's own context: `watch()` puts the
run's StopSignal in a ContextVar that its calls (and the threads and tasks they copy context into) see.
The hook is installed while at least one run is watched, and removed when the last one ends.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Callable, Iterator, Optional

from django.db import connection, transaction
from django.utils import timezone

from runtime import CancelledError, add_pre_invocation_hook, interrupt, remove_pre_invocation_hook

from ..conf import conf
from ..models import Session
from ..recording import write_path
from .daemon import DaemonThread

log = logging.getLogger(__name__)

# The Redis pub/sub channel stop wake-ups go on; each message is a session id.
STOP_CHANNEL = "openprogram:stop"
# Seconds a listener that lost Redis waits before subscribing again (the poll covers the gap).
RESUBSCRIBE_S = 2.0

STOPPED = "stopped"
SHUTDOWN = "shutdown"
LEASE_LOST = "lease lost"  # the session was written off (reaped, ended elsewhere) or another worker holds it


class StopSignal:
    """The stop state of one run in this process."""

    def __init__(self, session_id):
        self.session_id = str(session_id)
        # STOPPED (by request), SHUTDOWN (the process is exiting) or LEASE_LOST (dag.runs.leases)
        self.reason: Optional[str] = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._wakers: list[Callable[[], None]] = []
        # Rung by the stop and by steering (a pause asked for): the run's model calls wait on it.
        self.bell = interrupt.Bell()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def on_set(self, waker: Callable[[], None]) -> None:
        """Call `waker()` when the stop comes (a wait of the run's that must end at once: dag.runs.steering)."""
        with self._lock:
            self._wakers.append(waker)

    def set(self, reason: str = STOPPED) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason  # before the event: whoever sees it set reads the reason
            self._event.set()
            wakers = list(self._wakers)
        self.bell.ring()
        for waker in wakers:
            waker()

    def raise_if_set(self) -> None:
        if self._event.is_set():
            raise CancelledError(f"session {self.session_id} was stopped" + _BECAUSE.get(self.reason, ""))


_BECAUSE = {SHUTDOWN: " because the server is shutting down",
            LEASE_LOST: " because this worker lost its lease (the session was written off or is held elsewhere)"}


_current_signal: ContextVar[Optional[StopSignal]] = ContextVar("openprogram_stop_signal", default=None)
_active: dict[str, StopSignal] = {}
_active_lock = threading.Lock()
_watched = 0  # runs inside watch() in this process
# Set by `shut_down_local_runs` (the process is exiting): a run that registers afterwards, claimed just
# before, is stopped at once too instead of running on through the shutdown.
_shutting_down: Optional[str] = None


def _stop_hook(event) -> None:
    signal = _current_signal.get()
    if signal is not None:
        signal.raise_if_set()


@contextmanager
def watch(session_id) -> Iterator[StopSignal]:
    """Make calls in this block stop when session `session_id` is stopped."""
    signal = StopSignal(session_id)
    global _watched
    with _active_lock:
        if _shutting_down is not None:
            signal.set(_shutting_down)
        _active[signal.session_id] = signal
        _watched += 1
        if _watched == 1:  # the hook is installed only while some run is watched: no cost otherwise
            add_pre_invocation_hook(_stop_hook, rings_bell=True)
    _watcher.ensure()
    if conf.STOP_PUBSUB and conf.REDIS_URL:
        _listener.ensure(conf.REDIS_URL)
    token = _current_signal.set(signal)
    bell_token = interrupt.use_bell(signal.bell)
    try:
        # A stop persisted before the signal was registered (between a run's claim and here) found
        # nothing to signal, and the watcher may poll only after the run's first calls; any later stop
        # finds the signal registered.
        if write_path.borrowed(f"session {signal.session_id}'s stop flag",
                                 Session.objects.filter(pk=signal.session_id, cancel_requested=True).exists):
            signal.set(STOPPED)
        yield signal
    finally:
        interrupt.reset_bell(bell_token)
        _current_signal.reset(token)
        with _active_lock:
            if _active.get(signal.session_id) is signal:
                del _active[signal.session_id]
            _watched -= 1
            if _watched == 0:
                remove_pre_invocation_hook(_stop_hook)


# What else the watcher reads for the runs of this process on each poll, after their stop flags: each
# reader gets the ids of the runs watched here (dag.runs.steering reads answers and pauses).
_readers: list[Callable[[list[str]], None]] = []
# Set to make the watcher poll now instead of at the end of its pause (a wake-up for a reader).
_poll_now = threading.Event()


def read_also(reader: Callable[[list[str]], None]) -> None:
    """Have the watcher call `reader(session ids)` on each poll, in its thread and with its connection."""
    if reader not in _readers:
        _readers.append(reader)


def poll_now() -> None:
    """Make the watcher poll at once (a reader's wake-up: something it reads has changed)."""
    _poll_now.set()


def _watch_flags() -> None:
    """Signal this process's runs whose stop was requested elsewhere, and call the other readers; exits
    when no run is active."""
    try:
        while True:
            _poll_now.wait(conf.pause_s("STOP_POLL_S"))
            _poll_now.clear()
            with _active_lock:
                pending = {sid: sig for sid, sig in _active.items() if not sig.is_set}
                watched = list(_active)
                if not _active:
                    _watcher.forget()
                    return
            try:
                # One connection for the watcher's life (not one per poll); dropped only on a failure.
                if pending:
                    stopped = Session.objects.filter(pk__in=list(pending), cancel_requested=True).values_list(
                        "pk", flat=True)
                    for session_id in stopped:
                        pending[str(session_id)].set(STOPPED)
                for reader in _readers:
                    reader(watched)
            except Exception:  # a database hiccup must not end the watcher; the next poll reconnects
                log.exception("stop watcher could not read cancel flags")
                connection.close()
    finally:
        connection.close()


def publish_stop(session_id) -> None:
    """Once the current transaction commits, wake the process running the session (if pub/sub is on)."""
    publish_wakeup(STOP_CHANNEL, session_id)


def publish_wakeup(channel: str, session_id) -> None:
    """Once the current transaction commits, publish the session's id on `channel` (one `listen_also`
    names) if pub/sub is on: a wake-up only, the change it announces is in the database."""
    if conf.STOP_PUBSUB and conf.REDIS_URL:
        url, key = conf.REDIS_URL, str(session_id)
        transaction.on_commit(lambda: _publish(url, channel, key))


def _publish(url: str, channel: str, session_id: str) -> None:
    try:
        _publisher(url).publish(channel, session_id)
    except Exception as exc:  # the change is persisted; the run's process finds it by its poll
        log.warning("wake-up %s of session %s not published on Redis (%s); its run finds it by polling "
                    "the database", channel, session_id, exc)


_publishers: dict = {}


def _publisher(url: str):
    import redis

    client = _publishers.get(url)
    if client is None:
        # Short timeouts: a Redis that does not answer must not hold up the stop request.
        client = _publishers[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    return client


def _listen(url: str) -> None:
    """Turn stop messages on STOP_CHANNEL into local signals, for the life of the process.

    While Redis is away the listener resubscribes every RESUBSCRIBE_S and the log says so once per
    outage (a warning when it goes, an info when it is back), not once per attempt.
    """
    import redis

    down_since = None
    while True:
        client = None
        try:
            # No socket timeout (redis-py 8 would drop the idle subscription after 5 s); health checks
            # find a dead connection instead.
            client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=None,
                                          health_check_interval=15)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            for channel in _wakeups:
                pubsub.subscribe(channel)
            if down_since is not None:
                log.info("stop wake-ups from Redis back after %.1f s", time.monotonic() - down_since)
                down_since = None
            while True:
                message = pubsub.get_message(timeout=1.0)
                if message and message.get("type") == "message":
                    channel, data = (part.decode() if isinstance(part, bytes) else str(part)
                                     for part in (message.get("channel", STOP_CHANNEL), message["data"]))
                    _wakeups.get(channel, signal_local)(data)
        except Exception as exc:
            if down_since is None:
                down_since = time.monotonic()
                log.warning("stop wake-ups from Redis unavailable (%s); stops reach this process's runs by "
                            "the database poll until it is back (said once until then)", exc)
            time.sleep(RESUBSCRIBE_S)
        finally:
            if client is not None:
                client.close()


# One of each per process. The watcher starts and ends under the registry's lock: it decides to end
# when no run is registered, and a run registering meanwhile must find it gone and start another.
_watcher = DaemonThread("openprogram-stop-watcher", _watch_flags, lock=_active_lock)
_listener = DaemonThread("openprogram-stop-listener", _listen, lock=_active_lock)


def finish_overdue_cancellations(deadline_s: Optional[float] = None) -> int:
    """Finish `cancelled` every session still running `deadline_s` (default `conf.CANCEL_DEADLINE_S`)
    after its stop was requested; returns how many. For the reaper, in any process.

    A run that is stuck (in code that never reaches a checkpoint, on a worker that stopped answering)
    would otherwise show `cancelling` forever. The finish is the write path's compare-and-set, so a run
    that ends on its own at the same moment keeps its own ending, and open nodes end `cancelled`.
    """
    deadline_s = conf.CANCEL_DEADLINE_S if deadline_s is None else deadline_s
    cutoff = timezone.now() - timedelta(seconds=deadline_s)
    overdue = Session.objects.filter(status=Session.Status.RUNNING, cancel_requested=True,
                                     cancel_requested_at__lt=cutoff).values_list("pk", "cancel_requested_at")
    finished = 0
    for session_id, requested_at in overdue:
        signal_local(session_id)  # if the run is here after all, it stops at its next call
        finished += write_path.finish_session(session_id, Session.Status.CANCELLED, error=(
            f"stopped: the run did not end within {deadline_s:g} s of the stop requested at "
            f"{requested_at:%Y-%m-%d %H:%M:%S} UTC, so it was finished without it"))
    return finished


def signal_local(session_id, reason: str = STOPPED) -> bool:
    """Signal the run of `session_id` if it runs in this process; True if it does."""
    with _active_lock:
        signal = _active.get(str(session_id))
    if signal is None:
        return False
    signal.set(reason)
    return True


# The channels the listener subscribes to, each with what a message on it does with the session id.
_wakeups: dict[str, Callable[[str], object]] = {STOP_CHANNEL: signal_local}


def listen_also(channel: str, handler: Callable[[str], object]) -> None:
    """Have the listener subscribe to `channel` too and call `handler(session id)` for each message (at
    import, before the listener's first subscription)."""
    _wakeups[channel] = handler


def local_runs() -> list[str]:
    """The ids of the sessions whose runs are going on in this process."""
    with _active_lock:
        return list(_active)


def stop_local_runs(reason: str = SHUTDOWN) -> int:
    """Signal every run in this process; returns how many."""
    with _active_lock:
        signals = list(_active.values())
    for signal in signals:
        signal.set(reason)
    return len(signals)


def shut_down_local_runs() -> int:
    """The process is exiting: signal every run in it, and every run that registers from now on (one
    claimed a moment ago, not yet watched, would otherwise run on through the shutdown); how many were
    running. For the process's own exit paths only: nothing undoes it."""
    global _shutting_down
    with _active_lock:
        _shutting_down = SHUTDOWN
    return stop_local_runs(SHUTDOWN)
