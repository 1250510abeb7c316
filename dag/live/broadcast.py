"""Hand-off of DAG changes to whoever watches them live, called after the change is committed.

Messages are notifications, not the truth: a listener that misses one resynchronises from the database
by revision. `publish` must never block a run or raise into it.

Two kinds of watcher:
- in-process listeners (`subscribe`), called synchronously in the writer's thread: tests and benchmarks
  use them to see what was published, and the OpenTelemetry export (the CLI's live tree polls the
  database instead, so it works whichever process runs the session). What a writer process encoded
  (`publish_runs`) a listener may take as it is (`take_runs`), rather than decoded;
- websocket consumers, reached through the channel layer group of the session (`group_name`). Runs
  execute in worker threads (or in another process); the in-memory layer's queues belong to the
  server's event loop, so sends go through that loop with `asyncio.run_coroutine_threadsafe`
  (`bind_loop` is called by the consumer on connect). With Redis and no server loop in this process
  (a worker process), a private loop thread does the sending;
- the owner's open session lists, told through `session_list_notify` (throttled per session).

Bursts are coalesced: messages accumulate per session and go out as one layer message per session at
most every `OPENPROGRAM_BROADCAST_WINDOW_S` seconds, so a run writing thousands of nodes a second sends
tens of layer messages, not thousands. A run's end goes at once, with whatever is pending: no burst
follows it, and its viewers wait for nothing else.

A layer message carries a run of changes of contiguous revisions, each already encoded as its websocket
JSON (`frames.encode_item`) in the publishing thread, joined into one string (`frames.encoded_runs`):
`{"type": "dag.batch", "first": R, "last": S, "items": '{"type":"node",...}\\n{"type":"node",...}'}`.
Encoded once here, a change costs the same for one viewer or ten; a viewer sends a run on as one frame
without looking at its changes one by one; and the layer copies one string for nothing, where the
in-memory layer deep-copies every list and dict it is given, element by element (with dicts, that copy
took most of the server loop's time at a few thousand recorded calls per second) and Redis packs them.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Callable

from ..conf import conf
from ..models import Node
from ..thread_names import name_native_thread
from . import session_list_notify
from .frames import RUN_SEPARATOR, encoded_runs, in_rev_order
from .layer_outage import LAYER_UNREACHABLE, outage

log = logging.getLogger(__name__)

Listener = Callable[[str, list], None]
_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()

# The event-loop handler name the consumers implement ("dag.batch" -> SessionConsumer.dag_batch).
BATCH_EVENT = "dag.batch"
# Items per layer message: keeps one message (and a Redis payload) bounded in size.
MAX_ITEMS_PER_MESSAGE = 500


def group_name(session_id) -> str:
    """The channel layer group every viewer of one session joins."""
    return f"dag-session-{session_id}"


def subscribe(listener: Listener) -> None:
    global _listeners
    with _lock:
        if listener not in _listeners:
            _listeners = _listeners + (listener,)


def unsubscribe(listener: Listener) -> None:
    global _listeners
    with _lock:
        _listeners = tuple(item for item in _listeners if item is not listener)


def publish(session_id: str, messages: list[dict]) -> None:
    """Send `messages` (each {"type": "node"|"session", "rev": R, ...}) about one session."""
    if not messages:
        return
    _tell_listeners(session_id, messages)
    _forward(str(session_id), lambda: encoded_runs(messages), messages)


def publish_runs(session_id: str, runs: list[tuple[int, int, str]], ends: list[int]) -> None:
    """`publish` for node changes another process encoded already (`frames.encoded_runs`: a writer
    process's); `ends`: where the changes that end a node are among them (`end_positions`). A listener
    with a `take_runs(session_id, runs, ends)` gets them so; any other, decoded (once for all of them)."""
    if not runs:
        return
    decoded = None
    for listener in _listeners:
        take_runs = getattr(listener, "take_runs", None)
        try:
            if take_runs is not None:
                take_runs(session_id, runs, ends)
                continue
            if decoded is None:
                decoded = [json.loads(text) for _, _, joined in runs for text in joined.split(RUN_SEPARATOR)]
            listener(session_id, decoded)
        except Exception:  # a broken viewer must not break a run
            log.exception("broadcast listener %r failed", listener)
    _forward(str(session_id), lambda: runs, ())


def ended_nodes(messages: list) -> list:
    """The records of the nodes that ended, of published changes."""
    return [message["node"] for message in messages if _ends_a_node(message)]


def end_positions(messages: list) -> list[int]:
    """Where the changes that end a node are among `messages` once in rev order, as `frames.encoded_runs`
    lays them out: a listener of encoded runs finds them there without decoding the rest."""
    return [position for position, message in enumerate(in_rev_order(messages)) if _ends_a_node(message)]


def _ends_a_node(message: dict) -> bool:
    return message.get("type") == "node" and message["node"]["status"] in Node.TERMINAL


# Events for a session's open streams that are no change of it, by the consumers' handler names
# ("dag.deleted" -> dag_deleted): the session was deleted; its share links were revoked.
DELETED_EVENT = "dag.deleted"
SHARES_REVOKED_EVENT = "dag.shares_revoked"


def tell_viewers(session_id: str, event: str) -> None:
    """Send `event` (DELETED_EVENT, SHARES_REVOKED_EVENT) to every open stream of the session, from the
    loop the changes go from. Never raises: a stream that misses it finds out at its next heartbeat."""
    loop = sending_loop()
    if loop is None:
        return  # no consumer can be listening through this process's in-memory layer
    sending = _send_event(group_name(session_id), event)
    try:
        asyncio.run_coroutine_threadsafe(sending, loop)
    except RuntimeError:  # the loop closed between the check and the call
        sending.close()


async def _send_event(group: str, event: str) -> None:
    from channels.layers import get_channel_layer
    try:
        await get_channel_layer().group_send(group, {"type": event})
    except Exception:
        log.warning("telling the streams of %s about %s failed; their heartbeats will find out", group, event,
                    exc_info=True)


def _tell_listeners(session_id: str, messages: list[dict]) -> None:
    for listener in _listeners:
        try:
            listener(session_id, messages)
        except Exception:  # a broken viewer must not break a run
            log.exception("broadcast listener %r failed", listener)


def _forward(session_id: str, runs: Callable[[], list[tuple[int, int, str]]], messages) -> None:
    """Hand the changes to the channel layer (`runs()`, encoded only if anyone could be listening) and
    tell the owner's session lists (`messages`: what `session_list_notify` reads of them; none for
    node changes alone)."""
    try:
        layer_forwarder.add(session_id, runs, at_once=session_list_notify.ends_run(messages))
    except Exception:
        log.exception("broadcast to the channel layer failed")
    try:
        list_notifier.notify(session_id, messages)
    except Exception:
        log.exception("notifying the owner's session lists failed")


def bind_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Tell the forwarder which event loop serves websockets in this process (the latest one wins)."""
    layer_forwarder.bind_loop(loop)


def sending_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop this process sends layer messages from; None when no one could hear them."""
    return layer_forwarder._target_loop()


# The owner's open session lists, told from the same loop as the sessions' streams.
list_notifier = session_list_notify.ListNotifier(sending_loop=sending_loop)


class LayerForwarder:
    """Coalesces published messages per session and sends them to the channel layer from an event loop.

    Thread-safe: `add` may be called from any thread. One flush task at a time drains everything
    pending; a second burst arriving during a flush is picked up by the same task after the window, or
    as soon as something that must go at once arrives (`add(..., at_once=True)`).
    """

    def __init__(self, window_s: float | None = None):
        self._window_s = window_s
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[int, int, str]]] = {}  # runs (frames.encoded_runs)
        self._flush_scheduled = False
        self._last_flush = 0.0
        self._at_once = False  # something pending must not wait out the window
        self._napping: asyncio.Future | None = None  # the flush task's wait for the window, while it waits
        self._server_loop: asyncio.AbstractEventLoop | None = None
        self._private_loop: asyncio.AbstractEventLoop | None = None

    @property
    def window_s(self) -> float:
        return conf.BROADCAST_WINDOW_S if self._window_s is None else self._window_s

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._server_loop is not loop:
                self._server_loop = loop
                # A flush scheduled on a loop that has since closed would never run.
                self._flush_scheduled = False

    def add(self, session_id: str, runs: Callable[[], list[tuple[int, int, str]]], *,
            at_once: bool = False) -> None:
        """Send the changes of `runs()` (`frames.encoded_runs`), called only if anyone could hear them;
        `at_once`: without waiting for the window, everything pending with them."""
        loop = self._target_loop()
        if loop is None:
            return  # no consumer can be listening through this process's in-memory layer
        runs = runs()
        with self._lock:
            self._pending.setdefault(session_id, []).extend(runs)
            self._at_once = self._at_once or at_once
            napping = self._napping if at_once else None
            if self._flush_scheduled:
                if napping is not None:
                    _wake_from_another_thread(napping)
                return
            self._flush_scheduled = True
        try:
            asyncio.run_coroutine_threadsafe(self._flush(), loop)
        except RuntimeError:  # the loop closed between the check and the call
            with self._lock:
                self._flush_scheduled = False
                self._pending.clear()

    def _target_loop(self) -> asyncio.AbstractEventLoop | None:
        loop = self._server_loop
        if loop is not None and not loop.is_closed():
            return loop
        if conf.IN_MEMORY_LAYER:
            return None
        return self._ensure_private_loop()

    def _ensure_private_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._private_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=_run_forever, args=(loop,), name="dag-broadcast", daemon=True).start()
                self._private_loop = loop
            return self._private_loop

    async def _flush(self) -> None:
        from channels.layers import get_channel_layer
        layer = get_channel_layer()
        try:
            while True:
                wait = self._last_flush + self.window_s - time.monotonic()
                if wait > 0:
                    await self._nap(wait)  # let the burst gather into one message
                with self._lock:
                    pending, self._pending, self._at_once = self._pending, {}, False
                    if not pending:
                        self._flush_scheduled = False
                        return
                self._last_flush = time.monotonic()
                for session_id, items in pending.items():
                    await self._send(layer, session_id, items)
        except BaseException:
            # Never leave the flag set by a flush that died (loop shutdown): later adds must schedule.
            with self._lock:
                self._flush_scheduled = False
            raise

    async def _nap(self, seconds: float) -> None:
        """Wait `seconds`, or less if something that must go at once is or becomes pending."""
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        with self._lock:  # `add` reads both under the lock: a wake-up cannot fall between them
            if self._at_once:
                return
            self._napping = woken
        timer = loop.call_later(seconds, _wake, woken)
        try:
            await woken
        finally:
            timer.cancel()
            with self._lock:
                self._napping = None

    @staticmethod
    async def _send(layer, session_id: str, runs: list[tuple[int, int, str]]) -> None:
        for message in batch_events(runs):
            started = outage.clock()
            try:
                await layer.group_send(group_name(session_id), message)
            except LAYER_UNREACHABLE as exc:  # Redis is away: said once per outage; viewers resync
                outage.failed("sending live changes", exc)
                return  # the session's other messages would fail alike
            except Exception:  # not an outage: viewers resync from the database, the log says why
                log.warning("channel layer send for session %s failed", session_id, exc_info=True)
            else:
                outage.reached(started)


def batch_events(runs: list[tuple[int, int, str]]) -> list[dict]:
    """The layer messages for a session's pending runs: in rev order (writers in several threads publish
    after their own commits, so arrival order is not rev order, and sorting here saves the consumers
    most of their gap repairs), runs that continue each other joined, at most MAX_ITEMS_PER_MESSAGE
    changes each."""
    events: list[dict] = []
    parts: list[str] = []
    first = last = 0
    for run_first, run_last, joined in _within_the_limit(sorted(runs, key=lambda run: run[0])):
        if parts and (run_first != last + 1 or run_last - first + 1 > MAX_ITEMS_PER_MESSAGE):
            events.append(batch_event(first, last, RUN_SEPARATOR.join(parts)))
            parts = []
        if not parts:
            first = run_first
        parts.append(joined)
        last = run_last
    if parts:
        events.append(batch_event(first, last, RUN_SEPARATOR.join(parts)))
    return events


def _within_the_limit(runs):
    """The runs, one of more than MAX_ITEMS_PER_MESSAGE changes cut into runs of at most that many."""
    for first, last, joined in runs:
        if last - first < MAX_ITEMS_PER_MESSAGE:
            yield first, last, joined
            continue
        items = joined.split(RUN_SEPARATOR)
        for start in range(0, len(items), MAX_ITEMS_PER_MESSAGE):
            piece = items[start:start + MAX_ITEMS_PER_MESSAGE]
            yield first + start, first + start + len(piece) - 1, RUN_SEPARATOR.join(piece)


def batch_event(first: int, last: int, joined: str) -> dict:
    """The layer message of one run: the changes of revisions `first` to `last`, encoded and joined."""
    return {"type": BATCH_EVENT, "first": first, "last": last, "items": joined}


def _wake(napping: asyncio.Future) -> None:
    if not napping.done():
        napping.set_result(None)


def _wake_from_another_thread(napping: asyncio.Future) -> None:
    try:
        napping.get_loop().call_soon_threadsafe(_wake, napping)
    except RuntimeError:  # its loop has closed: the flush it would wake is gone with it
        pass


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    name_native_thread()
    loop.run_forever()


layer_forwarder = LayerForwarder()
