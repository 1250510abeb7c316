"""The Runtime: what an agentic function talks to a model through.

`Runtime.exec(content=[...])` runs the inner tool-calling loop; `llm(content)` makes one model call.
The system prompt is held on the runtime and stays byte-identical across nested calls (prompt caching):
situational text about *where* the call is goes at the start of the user turn instead.
"""
from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Optional

from . import interrupt
from .context import _current_runtime, _system_override
from .default_budget import close_frameless_tree, open_frameless_tree
from .dispatch import ResultCache
from .environment import unattended_by_default
from .exec_loop import run_exec, run_llm
from .policy import DEFAULT_TOOLSET  # noqa: F401  (the seed's name, read here by users and tests)
from .providers.base import Provider, create_provider, resolve_model, split_model_spec
from .providers.callable import CallableProvider
from .settings_table import read_names, read_text
from .situation import _SITUATIONAL_TEMPLATE, _situational_prefix  # noqa: F401  (the seed's names)


class Runtime:
    """Holds the provider, the constant system prompt and the model; closed when its owner returns.

    `provider` is a `runtime.providers.Provider`, a provider name (`"openai"`), or None to choose from
    `model` and then the environment (OPENPROGRAM_MODEL, API keys; the offline `sim` when none is set).
    `model` is a model spec (`"sim:naive"`, `"openai:gpt-4o-mini"`) or, with a provider given, a model
    name. `call` is a plain function that plays the model (the reference implementation's constructor,
    see `runtime.providers.callable`). `unattended` (default: OPENPROGRAM_UNATTENDED, on) refuses tools that need approval; an
    `approver(tool_name, arguments) -> bool` grants them when attended. `source` names the channel the
    run came from, for tools' `unsafe_in`.
    """

    def __init__(self, provider=None, system: Optional[str] = None, model: Optional[str] = None, *,
                 call: Optional[Callable] = None,
                 unattended: Optional[bool] = None, unattended_deny: Optional[Iterable[str]] = None,
                 source: Optional[str] = None, approver: Optional[Callable[[str, dict], bool]] = None,
                 results_dir: Optional[str] = None):
        if callable(provider) and not isinstance(provider, (Provider, type)):
            call, provider = provider, None  # the reference's first parameter: Runtime(my_llm, model=...)
        if call is not None:
            if provider is not None:
                raise TypeError("Runtime takes provider= or call=, not both")
            provider = CallableProvider(call, model)
        _check_arguments(provider, system, model, unattended)
        self._provider_given = provider
        self._provider: Optional[Provider] = provider if isinstance(provider, Provider) else None
        self._default_model: Optional[str] = None
        self._others: dict[str, Provider] = {}
        self._lock = threading.Lock()
        self._system = system
        self.model = model
        self.unattended = unattended_by_default() if unattended is None else unattended
        deny = unattended_deny if unattended_deny is not None else read_names("OPENPROGRAM_UNATTENDED_DENY")
        self.unattended_deny = tuple(n.strip() for n in (deny.split(",") if isinstance(deny, str) else deny) if n.strip())
        self.source = source if source is not None else read_text("OPENPROGRAM_SOURCE")
        self.approver = approver
        self.results_dir = results_dir
        self.tool_cache = ResultCache()
        self.usage = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
        self.closed = False
        if self._provider is not None and model:
            self._default_model = split_model_spec(model)[1] if ":" in model else model

    @property
    def system(self) -> Optional[str]:
        """The system prompt: the innermost running `system=` function's for this runtime, else its own."""
        overrides = _system_override.get()
        if overrides and self in overrides:
            return overrides[self]
        return self._system

    @system.setter
    def system(self, value: Optional[str]) -> None:
        overrides = _system_override.get()
        if overrides and self in overrides:  # inside a `system=` call: undone when that call ends
            _system_override.set({**overrides, self: value})
        else:
            self._system = value

    # -- the model ----------------------------------------------------------------------------

    @property
    def provider(self) -> Provider:
        """The default provider, resolved on first use (a bad OPENPROGRAM_MODEL fails at the first model call)."""
        if self._provider is None:
            with self._lock:
                if self._provider is None:
                    given = self._provider_given
                    spec = self.model
                    if isinstance(given, str):
                        spec = given if ":" in given or not self.model else f"{given}:{self.model}"
                    name, model = resolve_model(spec)
                    self._default_model = model
                    self._provider = create_provider(name, model)
        return self._provider

    @provider.setter
    def provider(self, value) -> None:
        _check_arguments(value)
        self._provider_given = value
        self._provider = value if isinstance(value, Provider) else None

    def provider_for(self, model: Optional[str] = None) -> tuple[Provider, Optional[str]]:
        """(provider, model name) for one call: the default, or what a per-call `model=` names."""
        default = self.provider
        if model is None:
            return default, self._default_model or default.model
        name, model_name = split_model_spec(model)
        if name is None or name == default.name:
            return default, model_name or default.model
        with self._lock:
            other = self._others.get(name)
            if other is None:
                other = self._others[name] = create_provider(name, model_name)
        return other, model_name or other.model

    def add_usage(self, usage: dict) -> None:
        """Count one model call's tokens into `self.usage` (totals over this runtime's life)."""
        with self._lock:
            self.usage["model_calls"] += 1
            self.usage["input_tokens"] += int(usage.get("input_tokens") or 0)
            self.usage["output_tokens"] += int(usage.get("output_tokens") or 0)

    # -- calling it ---------------------------------------------------------------------------

    def exec(self, content, tools=None, toolset=None, tools_allow=None, tools_deny=None,
             tool_choice="auto", max_iterations: int = 20, timeout_s: Optional[float] = None,
             model: Optional[str] = None, budget=None) -> str:
        """Run the tool-calling loop on `content` (a str or a list of blocks); return the final answer.

        With no `tools`/`toolset`, every registered tool is offered (DEFAULT_TOOLSET), the running
        agentic function included. `budget` (a runtime.Budget) bounds everything this exec does.
        """
        kwargs = dict(tools=tools, toolset=toolset, tools_allow=tools_allow, tools_deny=tools_deny,
                      tool_choice=tool_choice, max_iterations=max_iterations, timeout_s=timeout_s, model=model)
        if budget is not None and not (hasattr(type(budget), "__enter__") and hasattr(type(budget), "__exit__")):
            raise TypeError(f"budget must be a runtime.Budget(...) or None, got {budget!r}")
        tree = open_frameless_tree()
        try:
            if budget is None:
                return run_exec(self, content, **kwargs)
            with budget:
                return run_exec(self, content, **kwargs)
        finally:
            close_frameless_tree(tree)

    async def aexec(self, content, **kwargs) -> str:
        """`exec` from async code: runs in a worker thread (with this context) so the loop stays free.

        Cancelling the awaiting task (`task.cancel()`, `asyncio.wait_for`) abandons the exec: its next
        model call, or the one in flight at a provider that waits on a server, raises CancelledError, so
        the thread stops instead of calling the model for a caller that is gone.
        """
        abandoned = threading.Event()
        try:
            return await asyncio.to_thread(interrupt.run_abandonable, self.exec, abandoned, content, **kwargs)
        except asyncio.CancelledError:
            abandoned.set()
            raise

    def llm(self, content, model: Optional[str] = None, timeout_s: Optional[float] = None) -> str:
        """One model call with no tools; the reply's text."""
        tree = open_frameless_tree()
        try:
            return run_llm(self, content, model=model, timeout_s=timeout_s)
        finally:
            close_frameless_tree(tree)

    def close(self) -> None:
        providers = [self._provider, *self._others.values()] if self._provider is not None else list(self._others.values())
        for provider in providers:
            provider.close()
        self.closed = True

    def __repr__(self) -> str:
        shown = self._provider or self._provider_given or self.model or "from the environment"
        return f"<Runtime provider={shown!r}>"


def create_runtime(**overrides) -> Runtime:
    """A runtime configured from the environment (the offline simulated model by default)."""
    return Runtime(**overrides)


@contextmanager
def use_runtime(runtime: Runtime) -> Iterator[Runtime]:
    """Make `runtime` the call chain's for the block: agentic calls inside it (and `llm()`) run on it
    instead of each creating one from the environment. The caller keeps ownership and closes it."""
    token = _current_runtime.set(runtime)
    try:
        yield runtime
    finally:
        _current_runtime.reset(token)


def llm(content, model: Optional[str] = None, timeout_s: Optional[float] = None) -> str:
    """One model call with no tools, through the runtime of the current call chain.

    Outside any agentic function a fresh runtime is created from the environment and closed after.
    """
    runtime = _current_runtime.get()
    if runtime is not None:
        return runtime.llm(content, model=model, timeout_s=timeout_s)
    runtime = create_runtime()
    try:
        return runtime.llm(content, model=model, timeout_s=timeout_s)
    finally:
        runtime.close()


def _check_arguments(provider, system=None, model=None, unattended=None) -> None:
    """Refuse what Runtime would otherwise ignore for the environment's default model, or misread."""
    if isinstance(provider, type):
        raise TypeError(f"provider must be a Provider instance, a provider name or None, got the class "
                        f"{provider.__name__}: pass {provider.__name__}(...)")
    if provider is not None and not isinstance(provider, (Provider, str)):
        raise TypeError(f"provider must be a Provider instance, a provider name, a callable or None, "
                        f"got {provider!r}")
    for name, value in (("system", system), ("model", model)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string or None, got {value!r}")
    if unattended is not None and not isinstance(unattended, bool):
        raise TypeError(f"unattended must be True, False or None, got {unattended!r}")
