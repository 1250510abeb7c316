"""The inner agent loop behind `Runtime.exec`: ask the model, run its tool calls, repeat, answer.

The loop ends with the model's answer, or with an error: `max_iterations` model calls without an answer
is `ExecLimitExceeded`, never a result. When the depth ceiling refused a call this frame's model made,
the next turn tells the model so (a user turn after the tool results; the system prompt is untouched).
Tool-call ids are made unique within the exec (a repeated or missing one gets the turn and the call's
index) before the reply joins the conversation, so every result pairs with exactly one call.
"""
from __future__ import annotations

import time
from typing import Optional

from .context import _current_frame, _current_runtime, _current_tool_policy
from .dispatch import Dispatcher
from .errors import ExecLimitExceeded, OpenProgramError
from .messages import ModelRequest, text_block
from .model_call import call_model, user_turn
from .policy import OfferedTools, resolve_offered_tools
from .situation import refusal_note
from .spec import is_number, short_repr

TOOL_CHOICES = ("auto", "none", "required")


class ExecTimeout(OpenProgramError, TimeoutError):
    """`Runtime.exec` ran past its `timeout_s`."""


def check_tool_choice(tool_choice, offered: OfferedTools) -> None:
    if tool_choice in TOOL_CHOICES:
        return
    if not isinstance(tool_choice, str):
        raise TypeError(f"tool_choice must be 'auto', 'none', 'required' or a tool name, got {tool_choice!r}")
    if tool_choice not in offered.tools:
        raise ValueError(f"tool_choice={tool_choice!r} forces a tool this exec does not offer "
                         f"({offered.refusal(tool_choice)})")


def run_exec(runtime, content, *, tools=None, toolset=None, tools_allow=None, tools_deny=None,
             tool_choice="auto", max_iterations: int = 20, timeout_s: Optional[float] = None,
             model: Optional[str] = None) -> str:
    if not isinstance(max_iterations, int) or isinstance(max_iterations, bool) or max_iterations < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}")
    if timeout_s is not None and not (is_number(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {short_repr(timeout_s)}")
    token = _current_runtime.set(runtime) if _current_runtime.get() is not runtime else None
    try:
        return _loop(runtime, content, tools=tools, toolset=toolset, tools_allow=tools_allow,
                     tools_deny=tools_deny, tool_choice=tool_choice, max_iterations=max_iterations,
                     timeout_s=timeout_s, model=model)
    finally:
        if token is not None:
            _current_runtime.reset(token)


def _loop(runtime, content, *, tools, toolset, tools_allow, tools_deny, tool_choice, max_iterations,
          timeout_s, model) -> str:
    """The loop itself, with `runtime` current so the tools it calls run on it too."""
    frame = _current_frame.get()
    provider, model_name = runtime.provider_for(model)
    offered = resolve_offered_tools(runtime, tools=tools, toolset=toolset, tools_allow=tools_allow,
                                    tools_deny=tools_deny, policy=_current_tool_policy.get())
    check_tool_choice(tool_choice, offered)
    dispatcher = Dispatcher(runtime, offered, frame)
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    system = runtime.system or ""
    messages = [user_turn(content, frame)]
    told_refused: tuple = dispatcher.owner.refused_names  # the first user turn already said these
    call_ids: set = set()
    for turn in range(1, max_iterations + 1):
        remaining = None
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ExecTimeout(f"runtime.exec ran past timeout_s={timeout_s:g}")
        specs = offered.specs()
        request = ModelRequest(system=system, messages=list(messages), tools=specs,
                               tool_choice=tool_choice if specs else "none", model=model_name,
                               timeout_s=remaining)
        reply = call_model(provider, request, frame, call_ids=call_ids, turn=turn)
        runtime.add_usage(reply.usage)
        messages.append(reply.as_message())
        if not reply.tool_calls:
            return reply.text
        if turn == max_iterations:
            break  # no model call is left to read these results: running the tools would be waste
        messages.extend(dispatcher.run(reply.tool_calls))
        refused = dispatcher.owner.refused_names
        if refused != told_refused:
            told_refused = refused
            messages.append({"role": "user", "content": [text_block(refusal_note(refused), "situational")]})
        if tool_choice not in ("auto", "none"):
            tool_choice = "auto"  # a forced call is forced once; then the model may answer
    where = f"in {frame.name} " if frame is not None else ""
    raise ExecLimitExceeded(
        f"runtime.exec {where}made max_iterations={max_iterations} model calls without a final answer "
        f"(the model kept calling tools); raise max_iterations or give the model a task it can finish",
        function=frame.name if frame is not None else None, limit=max_iterations)


def run_llm(runtime, content, *, model: Optional[str] = None, timeout_s: Optional[float] = None) -> str:
    """One model call with no tools: the reply's text."""
    frame = _current_frame.get()
    provider, model_name = runtime.provider_for(model)
    request = ModelRequest(system=runtime.system or "", messages=[user_turn(content, frame)], tools=[],
                           tool_choice="none", model=model_name, timeout_s=timeout_s)
    reply = call_model(provider, request, frame)
    runtime.add_usage(reply.usage)
    return reply.text
