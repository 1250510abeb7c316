"""The call tree of a session drawn for a terminal with `rich`, from node dicts (`Node.as_dict()`).

It reads like the session page's tree: each call with its status, duration, tokens, cost and nesting
(`depth 3 · nested 2 of 5`), the run's cost beside the session, and more than FOLD_THRESHOLD
consecutive calls of one function under one caller folded into a single `name ×N` line with their
status counts (static/js/live/tree_model.js).
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Optional

from django.utils import timezone
from rich.text import Text
from rich.tree import Tree

from runtime.function import max_recursion_depth

from ..recording.totals import cost_text, format_usd
from ..recording.values import preview
from .durations import format_duration, node_duration_ms

STATUS_STYLES = {"running": "yellow", "completed": "green", "error": "red", "cancelled": "magenta",
                 "refused": "bold red", "interrupted": "red", "queued": "dim"}
# As the page draws them (static/js/dom.js STATUS_ICONS).
STATUS_ICONS = {"queued": "○", "running": "●", "completed": "✓", "error": "✕", "cancelled": "⊘",
                "refused": "⊗", "interrupted": "⚠"}
FOLD_THRESHOLD = 10  # as the page: more than this many consecutive same-name siblings fold into one line


def node_label(node: dict, now: Optional[datetime] = None) -> Text:
    """`name(args)  status  duration  depth D · nested N of 5  → result`, user text kept plain (no markup)."""
    label = Text()
    if node["kind"] == "llm":
        label.append("model call", style="cyan")
        if node.get("model"):
            label.append(f" {node['model']}", style="dim")
    else:
        label.append(node["name"], style="bold")
        label.append(f"({preview(node.get('input') or {}, 60)})", style="dim")
    label.append(f"  {node['status']}", style=STATUS_STYLES.get(node["status"], ""))
    duration = format_duration(node_duration_ms(node, now))
    if duration:
        label.append(f"  {duration}", style="dim")
    tokens = _tokens(node.get("usage"))
    if tokens:
        label.append(f"  {tokens}", style="dim")
    cost = (node.get("usage") or {}).get("cost_usd")
    if cost is not None:
        label.append(f"  {format_usd(cost)}", style="dim")
    if node["kind"] == "code":
        label.append(f"  depth {node['depth']}", style="dim")
        if node["name_depth"]:  # only agentic calls are counted by the recursion guard
            label.append(f" · nested {node['name_depth']} of {max_recursion_depth()}", style="dim")
    if node["status"] == "completed" and node.get("output") is not None and node["kind"] == "code":
        label.append(f"  → {preview(node['output'], 60)}")
    if node.get("error"):
        label.append(f"  {preview(node['error'], 100)}", style="red")
    return label


def fold_label(run: list[dict]) -> Text:
    """`name ×N  ✓ 498 ● 1 ✕ 1`: a folded run of calls, counted by status as the page counts them."""
    first = run[0]
    label = Text()
    label.append("≡ ", style="dim")
    label.append(f"{'model call' if first['kind'] == 'llm' else first['name']} ×{len(run)}", style="bold")
    for status, count in Counter(node["status"] for node in run).items():
        label.append(f"  {STATUS_ICONS.get(status, status)} {count}", style=STATUS_STYLES.get(status, ""))
    return label


def build_tree(session: dict, nodes: dict[int, dict], latest: int | None = None,
               now: Optional[datetime] = None) -> Tree:
    """A rich Tree of the session; `nodes` by id, in any order.

    With `latest`, only the most recent `latest` nodes (and the callers they hang from) are drawn, so a
    long run shows where it is now within a terminal's height. The calls left out are counted on a line
    "… N earlier calls not shown" among their own siblings: at the level of the calls it stands for.
    Running calls' durations run to `now` (default: the clock).
    """
    root = Tree(Text.assemble((session["function"], "bold"), f"  session {session['id']}  ",
                              (session["status"], STATUS_STYLES.get(session["status"], "")),
                              (f"  {run_cost(nodes.values())}".rstrip(), "dim")))
    children: dict[Optional[int], list[dict]] = {}
    for node in sorted(nodes.values(), key=lambda item: item["seq"]):
        # A node whose caller is not (yet) among those read hangs from the session, as it would be drawn.
        parent = node["parent"] if node["parent"] in nodes else None
        children.setdefault(parent, []).append(node)
    shown = _latest_with_callers(nodes, latest) if latest is not None else None
    _add_children(root, None, children, shown, now or timezone.now())
    return root


def _add_children(branch: Tree, parent: Optional[int], children: dict, shown: Optional[set],
                  now: datetime) -> None:
    hidden = 0
    for entry in _fold(children.get(parent, [])):
        if shown is not None and not any(node["id"] in shown for node in entry):
            hidden += sum(_subtree_size(node, children) for node in entry)
            continue
        if hidden:
            branch.add(_elision(hidden))
            hidden = 0
        if len(entry) > 1:
            branch.add(fold_label(entry))  # folded, as on the page: its calls' own calls are not drawn
        else:
            call = branch.add(node_label(entry[0], now))
            if _raised_here(entry[0], children):
                call.add(Text(entry[0]["traceback"].rstrip(), style="red"))
            _add_children(call, entry[0]["id"], children, shown, now)
    if hidden:
        branch.add(_elision(hidden))


def _raised_here(node: dict, children: dict) -> bool:
    """True if `node` failed with a traceback none of its calls has: the exception was raised in its own
    body, so its traceback is drawn under it (its callers' show the same frames and more)."""
    return bool(node.get("traceback")) and not any(child.get("traceback") for child in children.get(node["id"], ()))


def _fold(siblings: list[dict]) -> list[list[dict]]:
    """The siblings as entries: a run of more than FOLD_THRESHOLD calls of one kind and name is one entry,
    every other call an entry of its own (tree_model.js `foldRuns`)."""
    entries: list[list[dict]] = []
    start = 0
    for end in range(1, len(siblings) + 1):
        if end < len(siblings) and (siblings[end]["name"], siblings[end]["kind"]) == (
                siblings[start]["name"], siblings[start]["kind"]):
            continue
        run = siblings[start:end]
        entries.extend([run] if len(run) > FOLD_THRESHOLD else [[node] for node in run])
        start = end
    return entries


def _subtree_size(node: dict, children: dict) -> int:
    size, stack = 0, [node]
    while stack:
        current = stack.pop()
        size += 1
        stack.extend(children.get(current["id"], []))
    return size


def _elision(count: int) -> Text:
    return Text(f"… {count} earlier call{'s' if count != 1 else ''} not shown", style="dim")


def run_cost(nodes) -> str:
    """The run's cost from its node dicts, as `dag.recording.totals` words it ("" before any model call)."""
    calls = [node for node in nodes if node["kind"] == "llm"]
    if not calls:
        return ""
    known = [node["usage"]["cost_usd"] for node in calls if (node.get("usage") or {}).get("cost_usd") is not None]
    unknown = sum(1 for node in calls if node["status"] == "completed"
                  and (node.get("usage") or {}).get("cost_usd") is None)
    return cost_text(sum(known) if known or not unknown else None, unknown)


def _tokens(usage: Optional[dict]) -> str:
    """`235→66 tok` as the page writes a model call's tokens; "" without any."""
    if not usage:
        return ""
    sent, answered = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
    return f"{sent}→{answered} tok" if sent or answered else ""


def _latest_with_callers(nodes: dict[int, dict], latest: int) -> set[int]:
    ordered = sorted(nodes.values(), key=lambda item: item["seq"])
    shown: set[int] = set()
    for node in reversed(ordered[-max(latest, 1):]):
        while node is not None and node["id"] not in shown:
            shown.add(node["id"])
            node = nodes.get(node["parent"])
    return shown
