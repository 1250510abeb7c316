"""Hand-off of DAG changes to whoever watches them live, called after the change is committed.

Messages are notifications, not the truth: a listener that misses one resynchronises from the database
by revision. `publish` must never block a run or raise into it.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

Listener = Callable[[str, list], None]
_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()


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
    for listener in _listeners:
        try:
            listener(session_id, messages)
        except Exception:  # a broken viewer must not break a run
            log.exception("broadcast listener %r failed", listener)
