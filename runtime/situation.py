"""The situational prompt (seed 000): what a model is told about where it is running.

It goes at the start of the user turn, never into the system prompt, so the system prompt stays
byte-identical across nested calls (prompt caching). It names the innermost running agentic function,
warning first and its docstring last, and, once a call made from that frame was refused by the depth
ceiling, says so: the model must answer with what it has. A second call of a refused name ends the run
(see `note_refusal` and `runtime.dispatch`).
"""
from __future__ import annotations

import threading
from typing import Optional

from .context import Frame
from .messages import text_block

_SITUATIONAL_TEMPLATE = (
    "[Execution context] You are currently running INSIDE the agentic function `{fn_name}`.\n"
    "The tool list may include `{fn_name}` itself — do NOT call it. Calling `{fn_name}`\n"
    "re-enters where you are now and causes infinite recursion. Use lower-level tools\n"
    "(search / read-write files / run code) to do the work directly."
)
_REFUSED_TEMPLATE = (
    "[Execution context] Calling `{names}` from here was REFUSED by the recursion depth ceiling. "
    "Do not call {them} again: another call ends the whole run with an error. Answer now with what you have."
)

_refusal_lock = threading.Lock()


def _situational_prefix(fn_name: str, fn_doc: str, call_path: Optional[list[str]] = None) -> str:
    """Tell the model which function it is running inside, warning first, docstring last.

    The docstring is what tempts a model to call the function again (it matches the task), so it is
    demoted below the warning. With other agentic functions on the chain, the call path is listed so
    the model can avoid cycles through them too.
    """
    text = _SITUATIONAL_TEMPLATE.format(fn_name=fn_name)
    if call_path and len(call_path) > 1:
        text += "\nCall path: " + " → ".join(call_path)
    if fn_doc and fn_doc.strip():
        text += f"\n\nThis function's job: {fn_doc.strip()}"
    return text


def note_refusal(owner, name: str) -> None:
    """Note that the depth ceiling refused `name` below a call made by `owner`'s model (a Frame, or the
    exec loop's dispatcher outside any function). Two exec loops running at once in one frame share it:
    a refusal either of them got counts for both, as both models speak for that frame."""
    with _refusal_lock:
        if name not in owner.refused_names:
            owner.refused_names = owner.refused_names + (name,)


def refusal_note(names: tuple[str, ...]) -> Optional[str]:
    """The text telling a model that its calls of `names` were refused, or None for no refusal."""
    if not names:
        return None
    return _REFUSED_TEMPLATE.format(names="`, `".join(names), them="it" if len(names) == 1 else "them")


def situational_block(frame: Optional[Frame]) -> Optional[dict]:
    """The situational prompt for a model call made in `frame`, or None outside agentic functions."""
    innermost = frame.innermost_agentic() if frame is not None else None
    if innermost is None:
        return None
    path = []
    current: Optional[Frame] = innermost
    while current is not None:
        if current.tool.agentic:
            path.append(current.name)
        current = current.parent
    path.reverse()
    text = _situational_prefix(innermost.name, innermost.doc, call_path=path)
    refused = refusal_note(innermost.refused_names)
    if refused is not None:
        text += "\n\n" + refused
    return text_block(text, "situational")
