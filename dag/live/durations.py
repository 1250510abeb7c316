"""Durations written as the session page writes them (static/js/dom.js `formatDuration`), for the terminal
and the session list.

Rounding follows JavaScript's, not Python's: `toFixed` and `Math.round` round a tie up, where Python's
`round` and format specs round it to even (1,125 ms would read "1.12 s" here and "1.13 s" on the page).
Both round the same binary double (1,005 ms is 1.00499... s, "1.00 s" on both), so the value is taken
into Decimal from the float `ms / 1000` that JavaScript computes, then rounded half up.
"""
from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Optional

from ..models import duration_ms


def _half_up(seconds: float, places: int) -> Decimal:
    """`seconds` rounded to `places` decimals with ties up, as JavaScript's toFixed and Math.round do."""
    return Decimal(seconds).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def format_duration(ms: Optional[int]) -> str:
    """"12 ms", "1.40 s", "12.3 s", "2 m 0 s"; "" for None."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60000:  # 59,950 ms is "60.0 s", as on the page: the unit follows ms, not the rounded figure
        return f"{_half_up(ms / 1000, 2 if ms < 10000 else 1)} s"
    # Rounded before splitting: 119.7 s is "2 m 0 s", not "1 m 60 s".
    seconds = int(_half_up(ms / 1000, 0))
    return f"{seconds // 60} m {seconds % 60} s"


def node_duration_ms(node: dict, now: datetime) -> Optional[int]:
    """A node's `duration_ms`, or for a running one the time since it started (to `now`)."""
    if node.get("duration_ms") is not None:
        return node["duration_ms"]
    if node.get("status") == "running" and node.get("started_at"):
        return duration_ms(datetime.fromisoformat(node["started_at"]), now)
    return None
