"""Which tools one `Runtime.exec` offers the model, and why each of the others is not offered.

Order of resolution:
1. The candidates: `tools=[...]` exactly; else `toolset=`; else the policy's "toolset"; else
   DEFAULT_TOOLSET ("full": every registered tool, the running agentic function included).
2. `tools_allow` and the policy's "allow" keep only the names they list (both: the intersection).
3. `tools_deny`, the policy's "deny" and, in unattended mode, the configured unattended deny list
   remove names. Nothing here adds the running function's own name: the situational prompt tells
   the model not to call it.
4. In unattended mode a tool that always requires approval is not offered (registered or passed in
   `tools=`); nor is a tool whose `requires_env` is unset, whose `can_use()` is falsy, or whose
   `unsafe_in` lists the current source.

Every registered tool left out gets a reason, so a model that calls it anyway gets a clear refusal.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from .context import _current_tool_policy
from .registry import registry

# What a bare `exec` offers: every registered tool, the running function included (seed 000).
DEFAULT_TOOLSET = "full"
LOAD_TOOLS = "load_tools"
NOT_CHOSEN = "not in this call's tools or toolset"


@dataclass
class OfferedTools:
    """The outcome of resolution. Deferred tools are callable but ship only their name until loaded."""

    tools: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)
    loaded: set = field(default_factory=set)

    def specs(self) -> list[dict]:
        specs = [t.spec for name, t in self.tools.items() if not t.options.defer or name in self.loaded]
        waiting = self.deferred()
        if waiting and LOAD_TOOLS not in self.tools:
            specs.append(load_tools_spec({name: self.tools[name] for name in waiting}))
        return specs

    def deferred(self) -> list[str]:
        return [name for name, t in self.tools.items() if t.options.defer and name not in self.loaded]

    def refusal(self, name: str) -> str:
        """Why `name` may not be called in this exec."""
        reason = self.refused.get(name) or (NOT_CHOSEN if name in registry else None)
        if reason is not None:
            return f"tool {name!r} is not available here: {reason}"
        offered = ", ".join(self.tools) or "none"
        return f"there is no tool named {name!r}; the tools you may call are: {offered}"


@contextmanager
def tool_policy(*, deny: Optional[Iterable[str]] = None, allow: Optional[Iterable[str]] = None,
                source: Optional[str] = None, toolset: Optional[str] = None) -> Iterator[dict]:
    """Apply a tool policy to every `exec` made inside the block (the seed's `_current_tool_policy`).

    In nested blocks the "deny" lists add up and the "allow" lists intersect, so those only narrow;
    `source` and `toolset` given here replace the outer block's. Yields the policy in force, as a dict of
    the seed's shape.
    """
    outer = _current_tool_policy.get() or {}
    policy = dict(outer)
    if deny is not None:
        policy["deny"] = sorted(set(outer.get("deny") or ()) | _as_names(deny, "deny"))
    if allow is not None:
        names = _as_names(allow, "allow")
        policy["allow"] = sorted(names & set(outer["allow"]) if outer.get("allow") is not None else names)
    if source is not None:
        policy["source"] = source
    if toolset is not None:
        policy["toolset"] = toolset
    token = _current_tool_policy.set(policy)
    try:
        yield policy
    finally:
        _current_tool_policy.reset(token)


def load_tools_spec(deferred: dict) -> dict:
    listing = "; ".join(f"{name}: {(tool.description or '').splitlines()[0][:120] if tool.description else ''}"
                        for name, tool in deferred.items())
    return {"name": LOAD_TOOLS,
            "description": "Load the full schema of deferred tools so you can call them. Deferred tools: " + listing,
            "parameters": {"type": "object", "additionalProperties": False, "required": ["names"],
                           "properties": {"names": {"type": "array", "items": {"type": "string"},
                                                    "description": "names of the tools to load"}}}}


def _as_names(value: Any, field_name: str) -> Optional[set]:
    if value is None:
        return None
    if isinstance(value, str):
        return {value}
    if isinstance(value, Iterable):
        names = list(value)
        if all(isinstance(n, str) for n in names):
            return set(names)
    raise TypeError(f"{field_name} must be a list of tool names, got {value!r}")


def _candidates(tools: Any, toolset: Any) -> list:
    if tools is not None:
        if isinstance(tools, str) or _is_tool(tools):
            tools = [tools]  # one tool given alone, not a string to take letter by letter
        elif not isinstance(tools, Iterable):
            raise TypeError(f"tools= takes a list of decorated functions or registered tool names, got {tools!r}")
        found = []
        for item in tools:
            if isinstance(item, str):
                found.append(registry[item])  # KeyError names the known tools
            elif _is_tool(item):
                found.append(item)
            else:
                raise TypeError(f"tools= takes decorated functions or registered tool names, got {item!r}")
        return found
    names = [toolset] if isinstance(toolset, str) else list(toolset) if isinstance(toolset, Iterable) else None
    if names is None or not all(isinstance(name, str) for name in names):
        raise TypeError(f"toolset= takes a toolset name or a list of them, got {toolset!r}")
    seen: dict = {}
    empty = []
    for name in names:
        members = registry.toolset(name)
        if not members and name not in ("full", "none"):
            empty.append(name)
        for tool in members:
            seen.setdefault(tool.tool_name, tool)
    if not seen and empty:
        # A misspelt toolset would otherwise offer the model no tool at all, silently. (Beside toolsets
        # that have tools, an empty one, e.g. an optional plugin's, is left alone.)
        known = sorted({n for tool in registry.all() for n in tool.options.toolset})
        raise ValueError(f"toolset {empty[0]!r}: no registered tool is in it; the toolsets are "
                         f"{', '.join(['full', 'none', *known])}")
    return list(seen.values())


def _is_tool(item: Any) -> bool:
    return hasattr(item, "spec") and hasattr(item, "tool_name")


def unattended_deny(runtime) -> set:
    """The names configured as denied in unattended mode (tools that need approval are refused apart)."""
    if not getattr(runtime, "unattended", False):
        return set()
    return set(getattr(runtime, "unattended_deny", ()) or ())


def resolve_offered_tools(runtime, *, tools=None, toolset=None, tools_allow=None, tools_deny=None,
                          policy: Optional[dict] = None) -> OfferedTools:
    policy = policy or {}
    chosen_toolset = toolset if toolset is not None else policy.get("toolset") or DEFAULT_TOOLSET
    candidates = _candidates(tools, chosen_toolset)
    allow = _as_names(tools_allow, "tools_allow")
    policy_allow = _as_names(policy.get("allow"), "policy 'allow'")
    if allow is not None and policy_allow is not None:
        allow &= policy_allow
    elif policy_allow is not None:
        allow = policy_allow
    deny_reasons = {name: "denied by tools_deny" for name in _as_names(tools_deny, "tools_deny") or ()}
    deny_reasons.update({name: "denied by the tool policy" for name in _as_names(policy.get("deny"), "policy 'deny'") or ()})
    deny_reasons.update({name: "not allowed in unattended mode (on the unattended deny list)"
                         for name in unattended_deny(runtime)})
    source = policy.get("source") or getattr(runtime, "source", None)
    unattended = bool(getattr(runtime, "unattended", False))

    offered = OfferedTools()
    for tool in candidates:
        reason = _unavailable(tool, allow, deny_reasons, source, unattended)
        if reason is None:
            offered.tools[tool.tool_name] = tool
        else:
            offered.refused[tool.tool_name] = reason
    return offered


def _unavailable(tool, allow: Optional[set], deny_reasons: dict, source: Optional[str],
                 unattended: bool) -> Optional[str]:
    """Why `tool` is not offered, or None when it is."""
    name = tool.tool_name
    if allow is not None and name not in allow:
        return "not in the allowed tools"
    if name in deny_reasons:
        return deny_reasons[name]
    options = tool.options
    if unattended and options.requires_approval is True:
        return "not allowed in unattended mode: it requires approval, and no one is here to approve it"
    missing = [var for var in options.requires_env if not os.environ.get(var)]
    if missing:
        return f"needs environment variable(s) {', '.join(missing)}"
    if source is not None and source in options.unsafe_in:
        return f"unsafe when the source is {source!r}"
    if options.can_use is not None:
        try:
            usable = options.can_use()
        except Exception as exc:  # a broken predicate hides its tool rather than breaking the run
            return f"can_use raised {type(exc).__name__}: {exc}"
        if not usable:
            return "its can_use() check says it cannot be used now"
    return None
