"""Durations written as the session page writes them (static/js/dom.js `formatDuration`), for the terminal."""
from __future__ import annotations

from datetime import datetime
from typing import Optional


def format_duration(ms: Optional[int]) -> str:
    """"12 ms", "1.40 s", "12.3 s", "2 m 0 s"; "" for None."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60000:
        return f"{ms / 1000:.{2 if ms < 10000 else 1}f} s"
    # Rounded (half up, as JavaScript's Math.round) before splitting: 119.7 s is "2 m 0 s", not "1 m 60 s".
    seconds = int(ms / 1000 + 0.5)
    return f"{seconds // 60} m {seconds % 60} s"


def node_duration_ms(node: dict, now: datetime) -> Optional[int]:
    """A node's `duration_ms`, or for a running one the time since it started (to `now`)."""
    if node.get("duration_ms") is not None:
        return node["duration_ms"]
    if node.get("status") == "running" and node.get("started_at"):
        return max(0, int((now - datetime.fromisoformat(node["started_at"])).total_seconds() * 1000))
    return None
