"""The call tree of a session drawn for a terminal with `rich`, from node dicts (`Node.as_dict()`)."""
from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from ..recording.values import preview

STATUS_STYLES = {"running": "yellow", "completed": "green", "error": "red", "cancelled": "magenta",
                 "refused": "bold red", "interrupted": "red", "queued": "dim"}


def node_label(node: dict) -> Text:
    """`name(args) -> result  status  depth/name-depth`, user text kept as plain text (no markup)."""
    label = Text()
    if node["kind"] == "llm":
        label.append("model call", style="cyan")
        if node.get("model"):
            label.append(f" {node['model']}", style="dim")
    else:
        label.append(node["name"], style="bold")
        label.append(f"({preview(node.get('input') or {}, 60)})", style="dim")
    label.append(f"  {node['status']}", style=STATUS_STYLES.get(node["status"], ""))
    if node["kind"] == "code":
        label.append(f"  depth {node['depth']}", style="dim")
        if node["name_depth"]:  # only agentic calls are counted by the recursion guard
            label.append(f", {node['name']} ×{node['name_depth']}", style="dim")
    if node["status"] == "completed" and node.get("output") is not None and node["kind"] == "code":
        label.append(f"  → {preview(node['output'], 60)}")
    if node.get("error"):
        label.append(f"  {preview(node['error'], 100)}", style="red")
    return label


def build_tree(session: dict, nodes: dict[int, dict], latest: int | None = None) -> Tree:
    """A rich Tree of the session; `nodes` by id, in any order.

    With `latest`, only the most recent `latest` nodes (and the callers they hang from) are drawn, so a
    long run shows where it is now within a terminal's height; a line says how many were left out.
    """
    root = Tree(Text.assemble((session["function"], "bold"), f"  session {session['id']}  ",
                              (session["status"], STATUS_STYLES.get(session["status"], ""))))
    ordered = sorted(nodes.values(), key=lambda item: item["seq"])
    shown = _latest_with_callers(ordered, nodes, latest) if latest is not None else None
    if shown is not None and len(shown) < len(ordered):
        root.add(Text(f"… {len(ordered) - len(shown)} earlier calls not shown", style="dim"))
    branches: dict[int, Tree] = {}
    for node in ordered:
        if shown is None or node["id"] in shown:
            branches[node["id"]] = branches.get(node["parent"], root).add(node_label(node))
    return root


def _latest_with_callers(ordered: list[dict], nodes: dict[int, dict], latest: int) -> set[int]:
    shown: set[int] = set()
    for node in reversed(ordered[-max(latest, 1):]):
        while node is not None and node["id"] not in shown:
            shown.add(node["id"])
            node = nodes.get(node["parent"])
    return shown
