"""The function catalog: the agentic functions a user may launch, from OPENPROGRAM_FUNCTION_MODULES.

Functions are found on the listed modules themselves rather than only in the tool registry: the
registry also holds leaf tools and whatever else a process imported, while the catalog is exactly what
the setting names. Each function found is (re-)registered so that a model's "full" toolset sees it
even after a test's isolated registry dropped it (registration is idempotent for the same function).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from runtime import registry
from runtime.function import Tool

from ..conf import conf


class UnknownFunction(LookupError):
    """No launchable function has this name."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        listed = ", ".join(known) or "none (check OPENPROGRAM_FUNCTION_MODULES)"
        super().__init__(f"unknown function {name!r}; available functions: {listed}")


@dataclass(frozen=True)
class CatalogEntry:
    tool: Tool

    @property
    def name(self) -> str:
        return self.tool.tool_name

    @property
    def label(self) -> str:
        return self.tool.label

    @property
    def description(self) -> str:
        return self.tool.doc

    @property
    def spec(self) -> dict:
        return self.tool.spec

    def as_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "description": self.description, "spec": self.spec}


def _tools_defined_in(module) -> list[Tool]:
    return [value for value in vars(module).values()
            if isinstance(value, Tool) and value.__module__ == module.__name__]


def entries() -> list[CatalogEntry]:
    """Every launchable function, sorted by name."""
    found: dict[str, Tool] = {}
    for module_name in conf.FUNCTION_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(f"OPENPROGRAM_FUNCTION_MODULES lists {module_name!r}, which cannot be "
                              f"imported: {exc}") from exc
        for tool in _tools_defined_in(module):
            if tool.options.as_tool and tool.options.register_globally:
                registry.register(tool)
            if tool.agentic:
                found[tool.tool_name] = tool
    return [CatalogEntry(found[name]) for name in sorted(found)]


def get(name: str) -> CatalogEntry:
    """The catalog entry called `name`, or UnknownFunction listing the names that exist."""
    all_entries = entries()
    for entry in all_entries:
        if entry.name == name:
            return entry
    raise UnknownFunction(name, [entry.name for entry in all_entries])
