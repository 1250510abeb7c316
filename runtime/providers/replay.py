"""Replaying a recorded run: its model calls answered from the recorded replies, no provider asked.

A `ReplayProvider` holds the recorded calls (`RecordedCall`: the call path, the call's place in the run,
its reply) and serves them in order per call path: the first call made at `report/average` gets the
first reply recorded there, and so on. A call the recording has no answer for is a divergence: the
code changed. The replay then stops with `ReplayDiverged`, or, with `then="live"`, goes on with live
calls from there on. A fork (`fork_at`, a recorded call's place) serves every call before that one,
answers that one with `fork_reply` (or live, when None), and asks the model live for everything after.

`ReplayRuntime` is a Runtime whose every model call, whatever `model=` names, goes through the replay,
so a replay makes no provider call even where the code picks a model per call. Where the replay goes
live, the call goes to the provider the runtime would have used. The recording itself is read by
whoever starts the replay (the web app, from its DAG): this module knows nothing of where it came from.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from ..context import Frame, _current_frame
from ..errors import OpenProgramError
from ..messages import ModelReply, ModelRequest, ToolCall
from ..prices import COST_KEY
from ..runtime import Runtime
from .base import Provider

THEN_CHOICES = ("stop", "live")
PATH_SEPARATOR = "/"


class ReplayDiverged(OpenProgramError, RuntimeError):
    """The replayed code asked for a model call the recording has no answer for. `path` is the call
    path of that call; `expected` says what the recording had instead."""

    def __init__(self, path: str, expected: str):
        super().__init__(f"replay diverged at {path or '(no function)'}: {expected}; the code no longer makes "
                         f"the calls the recorded run made (replay with then=live to go on with live calls)")
        self.path = path
        self.expected = expected


@dataclass(frozen=True)
class RecordedCall:
    """One model call of the recorded run: where it was made, its place in the run (the node's seq) and
    the reply it got ({"text", "tool_calls": [ToolCall.as_dict(): "id", "name", "arguments", and for
    arguments that did not parse "arguments_error" and "raw_arguments"]})."""

    path: str
    seq: int
    reply: dict


def call_path(frame: Optional[Frame]) -> str:
    """`entry/inner/...`: the names of the recorded functions from the entry call down to `frame` (hidden
    ones are not recorded, so they are not part of a path)."""
    names = []
    while frame is not None:
        if not frame.hidden:
            names.append(frame.name)
        frame = frame.parent
    return PATH_SEPARATOR.join(reversed(names))


def recorded_reply(reply: dict) -> ModelReply:
    """The recorded reply as the model's again, marked replayed; it cost nothing this time. A call whose
    arguments did not parse keeps its error and raw text, so it is refused again, not run with {}."""
    calls = [ToolCall(call.get("id") or "", call.get("name") or "", call.get("arguments") or {},
                      call.get("arguments_error"), call.get("raw_arguments"))
             for call in reply.get("tool_calls") or ()]
    return ModelReply(text=reply.get("text") or "", tool_calls=calls, replayed=True)


class ReplayProvider(Provider):
    """Serves `calls` (RecordedCall, any order) in order per call path; see the module."""

    name = "replay"
    default_model = "replay"

    def __init__(self, calls: Iterable[RecordedCall], *, then: str = "stop", fork_at: Optional[int] = None,
                 fork_reply: Optional[str] = None, model: Optional[str] = None):
        super().__init__(model)
        if then not in THEN_CHOICES:
            raise ValueError(f"then must be one of {', '.join(THEN_CHOICES)}, got {then!r}")
        self.then = then
        self.fork_at = fork_at
        self.fork_reply = fork_reply
        self._queues: dict[str, deque[RecordedCall]] = {}
        for call in sorted(calls, key=lambda call: call.seq):
            self._queues.setdefault(call.path, deque()).append(call)
        self._served: dict[str, int] = {}
        self._live = False
        self._lock = threading.Lock()

    @property
    def live(self) -> bool:
        """True once the replay answers every call live (from its fork point, or a divergence with then=live)."""
        return self._live

    def answer(self, request: ModelRequest, check: Optional[Callable[[], None]], live: Provider) -> ModelReply:
        """The reply to `request`: the recorded one for its call path, or `live`'s when the replay has
        gone live or its path's next recorded call came after the fork point."""
        path = call_path(_current_frame.get())
        with self._lock:
            if not self._live and not self._recorded_after_fork(path):
                recorded = self._next(path)
                if recorded is not None and recorded.seq != self.fork_at:
                    return recorded_reply(recorded.reply)
                self._live = True
                if recorded is not None and self.fork_reply is not None:
                    # The fork's edited reply: given, not replayed; no model was asked, so it cost $0, not
                    # "unknown" (which an unpriced model's zero tokens would read as).
                    free = {"input_tokens": 0, "output_tokens": 0, COST_KEY: 0.0}
                    return ModelReply(text=self.fork_reply, usage=free)
        return live.complete(request, check)

    def _recorded_after_fork(self, path: str) -> bool:
        """Whether the next call recorded at `path` came after the fork point: it is asked live, while
        the replay as a whole has not gone live. Branches that ran in parallel reach their calls in any
        order, so one may reach its calls after the fork point before another reaches the fork point,
        whose earlier calls must still be replayed and whose edited reply must still be given."""
        queue = self._queues.get(path)
        return bool(queue) and self.fork_at is not None and queue[0].seq > self.fork_at

    def _next(self, path: str) -> Optional[RecordedCall]:
        """The recorded call that answers the next call at `path` (at most the fork point); None at a
        divergence this replay goes on live from; ReplayDiverged for one it stops at."""
        queue = self._queues.get(path)
        recorded = queue[0] if queue else None
        if recorded is not None:
            queue.popleft()
            self._served[path] = self._served.get(path, 0) + 1
            return recorded
        if self.then == "live":
            return None
        raise ReplayDiverged(path, self._expected(path))

    def _expected(self, path: str) -> str:
        made = self._served.get(path, 0)
        here = f"the recorded run made {made} model call{'s' if made != 1 else ''} at {path or '(no function)'}"
        waiting = [queue[0] for queue in self._queues.values() if queue]
        if not waiting:
            return f"{here}, and the recording has no call left"
        first = min(waiting, key=lambda call: call.seq)
        return f"{here}; its next call was #{first.seq} at {first.path or '(no function)'}"

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        raise TypeError("a ReplayProvider answers through ReplayRuntime, which gives it the live provider")


class _ThroughReplay(Provider):
    """One call's provider in a ReplayRuntime: the replay, falling back to `live` where it goes live."""

    def __init__(self, replay: ReplayProvider, live: Provider):
        super().__init__(live.model)
        self.name = live.name
        self.replay = replay
        self.live = live

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        return self.replay.answer(request, check, self.live)


class ReplayRuntime(Runtime):
    """A Runtime whose model calls all go through `replay` (see the module); other arguments as Runtime's."""

    def __init__(self, replay: ReplayProvider, **options):
        super().__init__(**options)
        self.replay = replay

    def provider_for(self, model: Optional[str] = None) -> tuple[Provider, Optional[str]]:
        live, name = super().provider_for(model)
        return _ThroughReplay(self.replay, live), name
