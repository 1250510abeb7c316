"""One model call made inside the call chain: hooks, budget, situational prompt, recording.

Every model call, from `llm()` or from a turn of `Runtime.exec`, goes through `call_model`:

1. the pre-invocation hooks run with a `ModelCall` event (a stop raises CancelledError here), and
   again every few milliseconds while the call is in flight, so a stop abandons a slow request;
2. the tree's default bound (`runtime.default_budget`) and an active delegation budget
   (`runtime.budget.reserve_llm_call`) admit the call, committing the tokens used and the cost
   (`runtime.prices`, kept in the reply's `usage["cost_usd"]` when known) afterwards, or releasing
   the admission on failure;
3. the recorder (if any, and the frame not hidden) gets `llm_started` / `llm_finished` around it.

`user_turn` builds the user turn: the situational prompt naming the innermost running agentic function
first, then the recorder's rendered context, then the caller's content. The system prompt is never
touched here, so it is byte-identical at every nesting level of a run.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from . import hooks as _hooks
from . import interrupt
from .budget import check_deadline, reserve_llm_call, time_left
from .context import Frame, _current_budget, _current_recorder
from .default_budget import admit_default_call
from .dispatch import _tool_deadline, check_tool_deadline
from .errors import status_of
from .messages import ModelReply, ModelRequest, clean_usage, normalize_content, text_block, unique_call_ids
from .prices import COST_KEY, call_cost, price_of
from .situation import situational_block


class ModelCall:
    """The hook event for a model call. `in_flight` is True for the repeated checks made while the
    request is waiting on the provider (a hook counting calls should skip those)."""

    __slots__ = ("frame", "request", "in_flight")
    kind = "model_call"

    def __init__(self, frame: Optional[Frame], request: ModelRequest):
        self.frame = frame
        self.request = request
        self.in_flight = False

    @property
    def name(self) -> Optional[str]:
        return self.frame.name if self.frame is not None else None

    def __repr__(self) -> str:
        return f"<ModelCall in {self.name or 'no function'} model={self.request.model!r}>"


def user_turn(content, frame: Optional[Frame]) -> dict:
    blocks = normalize_content(content)
    leading = []
    situational = situational_block(frame)
    if situational is not None:
        leading.append(situational)
    recorder = _current_recorder.get()
    if recorder is not None and frame is not None and not frame.hidden:
        rendered = recorder.render_context(frame)
        if rendered:
            leading.append(text_block(rendered, "context"))
    return {"role": "user", "content": leading + blocks}


def call_model(provider, request: ModelRequest, frame: Optional[Frame], *, call_ids: Optional[set] = None,
               turn: int = 1) -> ModelReply:
    """One model call: hooks, stop and deadline checks, the default and enclosing budgets, the record.

    `call_ids`: the tool-call ids of the model loop so far; the reply's calls get ids unique among them
    (`unique_call_ids`, `turn` naming the made-up ones) before it is recorded, so the recorded reply
    names each call as the tool results that answer it do.
    """
    event = ModelCall(frame, request)
    if _hooks._hooks:
        _hooks.run_pre_invocation_hooks(event)
    check_tool_deadline()
    interrupt.check_abandoned()
    check = _in_flight_check(event)
    model = request.model or provider.model
    price = price_of(provider.name, model)  # before the call: a bad OPENPROGRAM_PRICES costs nothing
    tally = admit_default_call(frame)
    reservation = None
    if _current_budget.get() is not None:
        try:
            reservation = reserve_llm_call(frame)
        except BaseException:
            if tally is not None:
                tally.release()
            raise
    recorder = _current_recorder.get()
    if recorder is not None and frame is not None and frame.hidden:
        recorder = None
    handle = None
    bounded = False
    try:
        request, bounded = _within_budget_time(request)
        if recorder is not None:
            handle = recorder.llm_started(frame, request.for_record())
        try:
            reply = provider.complete(request, check)
        except Exception:
            if bounded:  # the budget's time ran out during the call: that is why it failed
                check_deadline(frame)
            raise
        # Whatever usage a provider reports ("n/a", -100) is counted as non-negative ints, so settling
        # the call below cannot fail and leave its record open or its reservation held.
        reply.usage = usage = clean_usage(reply.usage)
        tokens = usage["input_tokens"] + usage["output_tokens"]
        cost = 0.0 if reply.replayed else call_cost(usage, price)  # a replayed reply is paid for already
        if cost is None:
            usage.pop(COST_KEY, None)
        else:
            usage[COST_KEY] = cost
        if call_ids is not None:
            reply.tool_calls = unique_call_ids(reply.tool_calls, call_ids, turn)
    except BaseException as exc:
        if tally is not None:
            tally.release()
        if reservation is not None:
            reservation.release()
        if recorder is not None:
            recorder.llm_finished(handle, status_of(exc), None, None, exc)
        raise
    try:
        if tally is not None:
            tally.commit(tokens, cost, model)
        if reservation is not None:
            reservation.commit(tokens, cost, model)
    finally:  # the call did happen: its record is closed even if settling it failed
        if recorder is not None:
            recorder.llm_finished(handle, "completed", reply.as_dict(), dict(reply.usage), None)
    return reply


def _within_budget_time(request: ModelRequest) -> tuple[ModelRequest, bool]:
    """`request` with its timeout cut to what an enclosing budget's deadline leaves (`timeout_s`), so a
    hung model server cannot hold a run past it; and whether there is such a deadline."""
    left = time_left()
    if left is None:
        return request, False
    if request.timeout_s is None or left < request.timeout_s:
        request = dataclasses.replace(request, timeout_s=max(left, 0.001))
    return request, True


def _in_flight_check(event: ModelCall):
    """What to run while a request is in flight; None (a plain blocking call) when nothing can stop it."""
    if not _hooks._hooks and _tool_deadline.get() is None and not interrupt.abandonable():
        return None

    def check() -> None:
        event.in_flight = True
        _hooks.run_pre_invocation_hooks(event)
        check_tool_deadline()
        interrupt.check_abandoned()

    # While the run's bell covers every hook (and no awaiting task may give up, which rings nothing),
    # the wait blocks on the bell and the tool's deadline instead of polling: a waiting run costs no CPU.
    bell = interrupt.current_bell()
    if bell is None or not _hooks.all_ring_bells() or interrupt.abandonable():
        return check
    deadline = _tool_deadline.get()
    return interrupt.BellCheck(check, bell, until=deadline[0] if deadline is not None else None)
