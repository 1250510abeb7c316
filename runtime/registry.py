"""The one registry of LLM-callable tools, shared by `@agentic_function` and `@function`."""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from .errors import ToolRegistrationError

logger = logging.getLogger("runtime")


class Registry:
    """Tools by name. Changes replace the dict (copy-on-write), so a listing running in another
    thread while a module registering its tools is imported never sees the dict change under it."""

    def __init__(self) -> None:
        self._tools: dict[str, object] = {}
        self._lock = threading.Lock()
        self._mixed_toolsets_told: set[tuple[str, ...]] = set()

    def register(self, tool) -> None:
        """Add `tool` under `tool.tool_name`.

        Re-registering the same function (same module and qualified name, as on a module reload)
        replaces it, and so does a function defined inside another function (a closure, a factory, a
        test) over an earlier such registration of its name from the same module, as in the reference
        implementation. Any other function under a taken name is an error, never a silent swap.
        """
        name = tool.tool_name
        with self._lock:
            existing = self._tools.get(name)
            if existing is not None and existing is not tool and existing.origin != tool.origin \
                    and not _local_redefinition(existing, tool):
                raise ToolRegistrationError(
                    f"tool name {name!r} is already registered by {existing.origin}; "
                    f"{tool.origin} cannot take it. Pass name='...' to one of them, or "
                    f"register_globally=False to keep one out of the registry.")
            self._tools = {**self._tools, name: tool}

    def unregister(self, name: str) -> None:
        with self._lock:
            if name in self._tools:
                self._tools = {n: t for n, t in self._tools.items() if n != name}

    def get(self, name: str):
        return self._tools.get(name)

    def __getitem__(self, name: str):
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise KeyError(f"no tool named {name!r}; registered tools: {known}")
        return tool

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def all(self) -> list:
        return list(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def toolset(self, name: str) -> list:
        """Tools that list `name` in their `toolset=`; "full" is every tool, "none" no tool."""
        if name == "full":
            return self.all()
        if name == "none":
            return []
        tools = [t for t in self._tools.values() if name in t.options.toolset]
        self._tell_mixed_toolset(name, tools)
        return tools

    def _tell_mixed_toolset(self, name: str, tools: list) -> None:
        """Warn, once per toolset and set of modules, when a toolset holds tools of several modules:
        toolset names are global, so an `exec(toolset=...)` written for one module's tools would
        silently offer another module's too."""
        modules = tuple(sorted({_module_of(t) for t in tools}))
        if len(modules) < 2 or (name, *modules) in self._mixed_toolsets_told:
            return
        self._mixed_toolsets_told.add((name, *modules))
        members = "; ".join(f"{module}: {', '.join(t.tool_name for t in tools if _module_of(t) == module)}"
                            for module in modules)
        logger.warning("toolset %r holds tools of %d modules (%s), and exec(toolset=%r) offers them all. "
                       "Give each module's tools a toolset name of their own to keep them apart.",
                       name, len(modules), members, name)

    @contextmanager
    def isolated(self, tools: Optional[dict] = None) -> Iterator["Registry"]:
        """Run a block against a copy of the registry (or `tools`), restoring it afterwards. For tests."""
        with self._lock:
            saved = self._tools
            self._tools = dict(saved if tools is None else tools)
        try:
            yield self
        finally:
            with self._lock:
                self._tools = saved


def _module_of(tool) -> str:
    """The module that defined `tool` (its origin, for a tool object that wraps no function)."""
    fn = getattr(tool, "fn", None)
    return fn.__module__ if fn is not None else tool.origin


def _local_redefinition(existing, tool) -> bool:
    """Both are defined inside functions of the same module (a module-level function is never taken over)."""
    return ("<locals>" in tool.fn.__qualname__ and "<locals>" in existing.fn.__qualname__
            and existing.fn.__module__ == tool.fn.__module__)


registry = Registry()
