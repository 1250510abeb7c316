"""The Runtime: what an agentic function talks to a model through.

`Runtime.exec(content=[...])` runs the inner tool-calling loop; `llm(content)` makes one model call.
The system prompt is held on the runtime and stays byte-identical across nested calls (prompt caching):
situational text about *where* the call is goes at the start of the user turn instead.
"""
from __future__ import annotations

from typing import Optional

DEFAULT_TOOLSET = "full"

_SITUATIONAL_TEMPLATE = (
    "[Execution context] You are currently running INSIDE the agentic function `{fn_name}`.\n"
    "The tool list may include `{fn_name}` itself — do NOT call it. Calling `{fn_name}`\n"
    "re-enters where you are now and causes infinite recursion. Use lower-level tools\n"
    "(search / read-write files / run code) to do the work directly."
)


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


class Runtime:
    """Holds the provider, the constant system prompt and the model; closed when its owner returns."""

    def __init__(self, provider=None, system: Optional[str] = None, model: Optional[str] = None):
        self.provider = provider
        self.system = system
        self.model = model
        self.closed = False

    def close(self) -> None:
        self.closed = True


def create_runtime(**overrides) -> Runtime:
    """A runtime configured from the environment (the offline simulated model by default)."""
    return Runtime(**overrides)
