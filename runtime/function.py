"""`@agentic_function` and `@function`: a recorded, guarded, self-describing tool from a plain function.

The wrapper's hot path runs on every call, standalone or recorded, so it does as little as it can:
hooks only if installed, the guard and the frame stack as one ContextVar push, runtime injection only
for functions that declare a runtime parameter, and recording only when a recorder is installed.
"""
from __future__ import annotations

import functools
import inspect
import sys
import types
import typing
from typing import Any, Callable, Optional

from . import hooks as _hooks
from . import recorder as _recording
from .binding import argument_binder
from .budget import Budget, admit_frame, enter_frame, exit_frame
from .context import (Frame, FrameMap, _current_budget, _current_recorder, _current_runtime,  # noqa: F401
                      _current_tool_policy, _recursion_depth, _system_override)
from .errors import BudgetExceeded, DepthCeilingExceeded, ToolRegistrationError, status_of
from .options import (TOOL_NAME, ToolOptions, build_tool_options, check_expose, check_input,
                      check_render_range)
from .registry import registry
from .runtime import create_runtime
from .spec import (RUNTIME_PARAMS, argument_errors, build_parameters, raise_for_errors,
                   to_python)

# --- the recursion guard (seed 000) ------------------------------------------------------------
# Per-name nesting depth: {function name: how many frames of that name are open in this chain}.
# `_recursion_depth` (imported above) is the ContextVar holding that map; it also carries the frame stack.
# `_current_tool_policy` (imported above, set with `runtime.tool_policy`) is the seed's tool policy.
_MAX_AGENTIC_RECURSION_DEPTH = 5

# Bound methods looked up once: `var.get` builds a new method object on every attribute access, and
# the hot path below would otherwise pay for six of them per call.
_depth_get, _depth_set, _depth_reset = _recursion_depth.get, _recursion_depth.set, _recursion_depth.reset
_recorder_get, _budget_get, _runtime_get = _current_recorder.get, _current_budget.get, _current_runtime.get


def max_recursion_depth() -> int:
    """The per-name depth ceiling in force: how many nested frames of one name run before the next is refused."""
    return _MAX_AGENTIC_RECURSION_DEPTH


class Tool:
    """A decorated function: callable as before, and a tool with a `spec` a model can call."""

    agentic = False

    def __init__(self, fn: Callable, options: ToolOptions, *, expose: str = "io",
                 render_range: Optional[dict] = None, input_meta: Optional[dict] = None,
                 system: Optional[str] = None, budget: Any = None):
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            # The call would only create the generator: its body would run after the frame closed,
            # outside the guard, the budgets and the record.
            raise ToolRegistrationError(
                f"{fn.__qualname__} is a generator function; a decorated function must return its "
                f"result (collect the items into a list) rather than yield them")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options = options
        self.signature = inspect.signature(fn)
        self.bind_arguments = argument_binder(self.signature)
        self.tool_name = options.name or fn.__name__
        if options.as_tool and not TOOL_NAME.fullmatch(self.tool_name):
            # Offered to a model under it, the name would make the provider refuse the whole request.
            raise ToolRegistrationError(
                f"{fn.__qualname__}: its tool name {self.tool_name!r} is not 1 to 64 ASCII letters, digits, "
                f"'_' or '-' (what model APIs accept); give it one with name=..., or as_tool=False")
        self.doc = inspect.getdoc(fn) or ""
        self.origin = f"{fn.__module__}.{fn.__qualname__}"
        self.is_async = inspect.iscoroutinefunction(fn)
        self.expose = check_expose(expose)
        self.render_range = check_render_range(render_range)
        if system is not None and not isinstance(system, str):
            raise ValueError(f"system must be a string (the system prompt) or None, got {system!r}")
        if budget is not None and not isinstance(budget, Budget):
            raise ValueError(f"budget must be a runtime.Budget(...) or None, got {budget!r}")
        self.system = system
        self.budget = budget
        self._hidden = self.expose == "hidden"
        names = list(self.signature.parameters)
        self.is_method = bool(names) and names[0] in ("self", "cls")
        defaults = {n: p.default for n, p in self.signature.parameters.items() if p.default is not p.empty}
        self.input = check_input(input_meta, names, defaults)
        try:
            self.hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward references: fall back to raw annotations
            self.hints = {n: p.annotation for n, p in self.signature.parameters.items()}
        self.runtime_params = tuple(
            (name, index if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) else None)
            for index, (name, param) in enumerate(self.signature.parameters.items())
            if name in RUNTIME_PARAMS)
        self.hidden_from_record = frozenset(
            [n for n, _ in self.runtime_params] + (names[:1] if self.is_method else []))
        # Only functions that declare a runtime, set a system prompt or carry a budget need `_setup`.
        self._needs_setup = bool(self.runtime_params) or system is not None or budget is not None
        try:
            parameters = options.parameters or build_parameters(
                self.signature, self.hints, self.input, skip_first=self.is_method)
        except ValueError as exc:
            raise ValueError(f"{fn.__qualname__}: {exc}") from None
        # Parameters the runtime fills or hides: a model must not set them, even through **kwargs.
        self.closed_to_models = self.hidden_from_record | {
            name for name, meta in self.input.items() if meta.get("hidden")}
        self.spec = {"name": self.tool_name,
                     "description": options.description if options.description is not None else self.doc,
                     "parameters": parameters}

    @property
    def label(self) -> str:
        return self.options.label or self.tool_name.replace("_", " ").capitalize()

    @property
    def description(self) -> str:
        return self.spec["description"]

    # -- entering and leaving a call ----------------------------------------------------------

    def _open(self, args: tuple, kwargs: dict):
        """The part of entry every call pays: a frame, the hooks, the guard, the frame pushed.

        Returns the frame and the token that pops it (and this call's guard count) again.
        """
        prev = _depth_get()
        parent = getattr(prev, "frame", None)
        frame = Frame(self, parent, args, kwargs)
        if parent is None and _recording._active and _recorder_get() is None:
            _recording.warn_if_context_lost(self.tool_name)
        if self._hidden or (parent is not None and parent.hidden):
            frame.hidden = True
        if _hooks._hooks:
            _hooks.run_pre_invocation_hooks(frame)
        pushed = FrameMap(prev) if prev else FrameMap()
        if self.agentic:
            # The per-name depth ceiling (seed 000): refuse a sixth nested frame of one name.
            name = self.tool_name
            cur = prev.get(name, 0) if prev else 0
            frame.name_depth = cur + 1
            if cur >= _MAX_AGENTIC_RECURSION_DEPTH:
                error = DepthCeilingExceeded(f"agentic function {name} exceeded max nesting depth "
                                             f"{_MAX_AGENTIC_RECURSION_DEPTH} — possible runaway recursion",
                                             function=name, limit=_MAX_AGENTIC_RECURSION_DEPTH)
                self._refuse(frame, error)
                raise error
            pushed[name] = cur + 1
        pushed.frame = frame
        return frame, _depth_set(pushed)

    def _enter(self, frame: Frame, token, args: tuple, kwargs: dict):
        """The rest of a full entry: budget, runtime, `system=`, and the recorder told.

        Returns the (possibly runtime-filled) arguments and the state `_exit` undoes.
        """
        extras = None
        if self._needs_setup or (self.agentic and _budget_get() is not None):
            extras = self._refusing_on_breach(frame, token, self._setup, frame, args, kwargs)
            args, kwargs = extras[-2], extras[-1]
        state = (token, extras)
        recorder = _recorder_get()
        if recorder is not None and not frame.hidden:
            try:
                recorder.function_entered(frame)
            except BaseException:
                self._exit(frame, state, "error", None, None, record=False)
                raise
        return args, kwargs, state

    def _refusing_on_breach(self, frame: Frame, token, step, *args):
        """`step(*args)`, a part of entry; if it raises, the frame is popped, and a budget breach is
        recorded as this call refused."""
        try:
            return step(*args)
        except BaseException as exc:
            _depth_reset(token)
            if isinstance(exc, BudgetExceeded):
                self._refuse(frame, exc)
            raise

    def _setup(self, frame: Frame, args: tuple, kwargs: dict):
        """The less common part of entry: budget scope, runtime injection, `system=`."""
        budget_token = runtime_token = owned = system_token = None
        try:
            if self.budget is not None:
                budget_token = enter_frame(frame, self.budget)
            elif self.agentic:
                admit_frame(frame)
            runtime = _runtime_get()
            if self.runtime_params:
                runtime, owned, args, kwargs = self._inject(runtime, args, kwargs)
            elif self.system is not None and runtime is None:
                runtime = owned = create_runtime()
            if runtime is not None and runtime is not _runtime_get():
                runtime_token = _current_runtime.set(runtime)
            frame.runtime = runtime
            if self.system is not None:
                system_token = _system_override.set({**(_system_override.get() or {}), runtime: self.system})
        except BaseException:
            self._teardown(frame, (budget_token, runtime_token, owned, system_token, args, kwargs))
            raise
        return budget_token, runtime_token, owned, system_token, args, kwargs

    def _teardown(self, frame: Frame, extras: tuple) -> None:
        """Undo `_setup`, innermost first."""
        budget_token, runtime_token, owned, system_token = extras[:4]
        try:
            if system_token is not None:
                _system_override.reset(system_token)
            if runtime_token is not None:
                _current_runtime.reset(runtime_token)
            if owned is not None:
                owned.close()
        finally:
            if budget_token is not None:
                exit_frame(budget_token)

    def _exit(self, frame: Frame, state: tuple, status: str, output: Any,
              error: Optional[BaseException], record: bool = True) -> None:
        """Everything after the body, on return and on exception alike."""
        token, extras = state
        frame.status = status
        try:
            recorder = _recorder_get() if record else None
            if recorder is not None and not frame.hidden:
                recorder.function_exited(frame, status, output, error)
        finally:
            try:
                if extras is not None:
                    self._teardown(frame, extras)
            finally:
                _depth_reset(token)

    def _refuse(self, frame: Frame, error: BaseException) -> None:
        frame.status = "refused"
        recorder = _recorder_get()
        if recorder is not None and not frame.hidden:
            recorder.function_refused(frame, error)

    def _inject(self, runtime, args: tuple, kwargs: dict):
        """Fill every runtime parameter the caller left empty with one runtime.

        The runtime is the one the caller passed, else the call chain's, else a new one this call owns
        (and closes on exit).
        """
        given = None
        for name, index in self.runtime_params:
            value = kwargs.get(name)
            if value is None and index is not None and index < len(args):
                value = args[index]
            if value is not None:
                given = value
                break
        owned = None
        if given is not None:
            runtime = given
        elif runtime is None:
            runtime = owned = create_runtime()
        positional = None
        for name, index in self.runtime_params:
            if index is not None and index < len(args):
                if args[index] is None:
                    positional = positional or list(args)
                    positional[index] = runtime
            elif kwargs.get(name) is None:
                kwargs[name] = runtime
        return runtime, owned, (tuple(positional) if positional else args), kwargs

    # -- calling ------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        frame, token = self._open(args, kwargs)
        if self._needs_setup or _recorder_get() is not None:
            args, kwargs, state = self._enter(frame, token, args, kwargs)
            try:
                result = self.fn(*args, **kwargs)
            except BaseException as exc:
                self._exit(frame, state, status_of(exc), None, exc)
                raise
            self._exit(frame, state, "completed", result, None)
            return result
        # Fast path: a standalone call with no runtime to inject and no recorder. Under a budget the
        # frame is admitted (its depth checked), which sets nothing that would need undoing.
        if self.agentic and _budget_get() is not None:
            self._refusing_on_breach(frame, token, admit_frame, frame)
        try:
            result = self.fn(*args, **kwargs)
        except BaseException as exc:
            frame.status = status_of(exc)
            raise
        finally:
            _depth_reset(token)
        frame.status = "completed"
        return result

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return BoundTool(self, instance)

    def validate(self, arguments: Any) -> dict:
        """Check model-given arguments against the spec and convert them to Python values.

        Raises ToolArgumentError naming the parameter and what was expected.
        """
        errors = argument_errors(self.spec["parameters"], arguments)
        if isinstance(arguments, dict):
            for name in self.closed_to_models.intersection(arguments):
                errors.setdefault(name, []).append("not an argument a model may set")
        raise_for_errors(self.tool_name, errors)
        return {k: to_python(v, self.hints.get(k, inspect.Parameter.empty)) for k, v in arguments.items()}

    def execute(self, /, **kwargs):
        """Call with arguments from a model: validated against `spec` first."""
        return self(**self.validate(kwargs))

    def __repr__(self) -> str:
        kind = "agentic_function" if self.agentic else "function"
        return f"<{kind} {self.tool_name} ({self.origin})>"


class AsyncTool(Tool):
    """The same wrapper for `async def` functions: calling it returns a coroutine."""

    async def _run(self, args: tuple, kwargs: dict):
        # No fast path here: an await costs far more than the full entry does.
        frame, token = self._open(args, kwargs)
        args, kwargs, state = self._enter(frame, token, args, kwargs)
        try:
            result = await self.fn(*args, **kwargs)
        except BaseException as exc:
            self._exit(frame, state, status_of(exc), None, exc)
            raise
        self._exit(frame, state, "completed", result, None)
        return result

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs)


class BoundTool:
    """A tool decorated on a method, bound to an instance: `obj.method(...)`, `obj.method.execute(...)`."""

    __slots__ = ("tool", "instance")

    def __init__(self, tool: Tool, instance: Any):
        self.tool = tool
        self.instance = instance

    def __call__(self, *args, **kwargs):
        return self.tool(self.instance, *args, **kwargs)

    def execute(self, /, **kwargs):
        return self.tool(self.instance, **self.tool.validate(kwargs))

    def __getattr__(self, name: str):
        return getattr(self.tool, name)

    def __repr__(self) -> str:
        return f"<bound {self.tool!r} of {self.instance!r}>"


def _decorate(fn: Callable, *, agentic: bool, expose: str = "io", render_range=None, input=None,
              system=None, budget=None, **tool_options):
    options = build_tool_options(tool_options)
    if options.available_if is not None:
        try:
            available = options.available_if()
        except Exception:
            available = False
        if not available:
            return fn
    cls = AsyncTool if inspect.iscoroutinefunction(fn) else Tool
    tool = cls(fn, options, expose=expose, render_range=render_range, input_meta=input,
                system=system, budget=budget)
    tool.agentic = agentic
    if options.as_tool and options.register_globally and not tool.is_method:
        registry.register(tool)
    return tool


def agentic_function(fn: Optional[Callable] = None, /, *, expose: str = "io",
                     render_range: Optional[dict] = None, input: Optional[dict] = None,
                     system: Optional[str] = None, budget: Any = None, **tool_options):
    """Turn a function into an agentic function: recorded as a code node, guarded, and a tool.

    Use bare (`@agentic_function`) or with arguments (`@agentic_function(expose="full", ...)`).
    `expose`, `render_range`, `input`, `system` and `budget` are agentic-specific; every other keyword is
    a tool-registration option (see `runtime.options.ToolOptions`).
    """
    def decorate(f: Callable):
        return _decorate(f, agentic=True, expose=expose, render_range=render_range, input=input,
                         system=system, budget=budget, **tool_options)
    return decorate(fn) if fn is not None else decorate


def function(fn: Optional[Callable] = None, /, **tool_options):
    """Register a plain leaf tool: a code node when called, no guard, no runtime required."""
    for agentic_only in ("budget", "system"):
        if agentic_only in tool_options:
            raise ToolRegistrationError(f"@function does not take {agentic_only}=: it is for @agentic_function, "
                                        f"whose calls run a model")

    def decorate(f: Callable):
        return _decorate(f, agentic=False, **tool_options)
    return decorate(fn) if fn is not None else decorate


class _CallableModule(types.ModuleType):
    """`runtime.function` is both this module and the `@function` decorator.

    The package exports the decorator as `runtime.function`, which would otherwise shadow this module
    and break `import runtime.function` / `runtime.function._recursion_depth` (the guard's documented
    names). Making the module callable lets both spellings mean what users expect.
    """

    def __call__(self, fn: Optional[Callable] = None, /, **tool_options):
        return function(fn, **tool_options)


sys.modules[__name__].__class__ = _CallableModule
