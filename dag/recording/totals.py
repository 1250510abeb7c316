"""A run's totals, read from its nodes: nodes by status, model calls and tokens, and its warnings.

Read, not stored: each figure is one grouped query over the session's nodes, so it is current while
the run goes and costs nothing on the recording path. `totals_for` answers many sessions in two
queries (the session list); `session_totals` one. `wall_ms` is the run's wall time so far, and
`run_summary` all of it as the API shows it beside a session.

Warnings are what a run's status alone hides: a run that `completed` although the depth guard or a
budget refused some of its calls. `warning_text` words them as the header and the list show them,
e.g. "1 refused" or "2 refused · 1 over budget".
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Optional

from django.db.models import Count, IntegerField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from ..models import Node, Session, duration_ms


def empty_totals() -> dict:
    return {"counts": {}, "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0},
            "refusals": {"depth": 0, "budget": 0}}


def totals_for(session_ids: Iterable) -> dict:
    """{session id: totals} for each of `session_ids`, the sessions' primary keys (UUIDs, as `session.pk`
    holds them) and keyed by them; sessions without nodes get empty totals."""
    ids = list(session_ids)
    totals = {session_id: empty_totals() for session_id in ids}
    if not ids:
        return totals
    nodes = Node.objects.filter(session_id__in=ids)
    by_status = nodes.values("session_id", "status", "refusal").annotate(n=Count("id")).order_by()
    for row in by_status:
        entry = totals[row["session_id"]]
        entry["counts"][row["status"]] = entry["counts"].get(row["status"], 0) + row["n"]
        if row["status"] == Node.Status.REFUSED:
            kind = "budget" if row["refusal"].startswith("budget:") else "depth"
            entry["refusals"][kind] += row["n"]
    tokens = (nodes.filter(kind=Node.Kind.LLM).values("session_id").order_by()
              .annotate(llm_calls=Count("id"),
                        input_tokens=Coalesce(Sum(Cast(KT("usage__input_tokens"), IntegerField())), 0),
                        output_tokens=Coalesce(Sum(Cast(KT("usage__output_tokens"), IntegerField())), 0)))
    for row in tokens:
        usage = totals[row["session_id"]]["usage"]
        usage.update(llm_calls=row["llm_calls"], input_tokens=row["input_tokens"],
                     output_tokens=row["output_tokens"])
    return totals


def session_totals(session_id) -> dict:
    return totals_for([session_id])[session_id]


def wall_ms(session: Session, now: Optional[datetime] = None) -> Optional[int]:
    """Milliseconds from the run's start to its end, or to `now` (default: the clock) while it goes;
    None before it started, and for an ended run that never recorded its end."""
    end = session.finished_at
    if end is None and not session.is_terminal:
        end = now or timezone.now()
    return duration_ms(session.started_at, end)


def warning_text(refusals: dict) -> str:
    """"1 refused", "1 over budget", "2 refused · 1 over budget", or "" when nothing was refused."""
    parts = []
    if refusals.get("depth"):
        parts.append(f"{refusals['depth']} refused")
    if refusals.get("budget"):
        parts.append(f"{refusals['budget']} over budget")
    return " · ".join(parts)


def run_summary(session: Session, totals: dict, now: Optional[datetime] = None) -> dict:
    """{"counts", "usage", "warning", "wall_ms"}: what the API adds to a session's `as_dict()`."""
    return {"counts": totals["counts"], "usage": totals["usage"], "warning": warning_text(totals["refusals"]),
            "wall_ms": wall_ms(session, now)}
