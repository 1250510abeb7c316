"""A run's totals, read from its nodes: nodes by status, model calls, tokens and cost, and its warnings.

Read, not stored: each figure is one grouped query over the session's nodes, so it is current while
the run goes and costs nothing on the recording path. `totals_for` answers many sessions in two
queries (the session list); `session_totals` one. `wall_ms` is the run's wall time so far, and
`run_summary` all of it as the API shows it beside a session.

Warnings are what a run's status alone hides: a run that `completed` although the depth guard, a
budget or the repeated-call guard refused some of its calls. `warning_text` words them as the header
and the list show them, e.g. "1 refused", "2 refused · 1 over budget" or "1 loop".

Cost is the sum of the llm nodes' `usage["cost_usd"]` (runtime.prices); a completed model call without
one has no known cost (an unpriced model), counted apart, never as 0: `cost_text` says "$0.0120",
"$0.0120 · unknown for 2 calls" or "unknown for 3 calls".
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Optional

from django.db.models import Count, FloatField, IntegerField, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from ..models import Node, Session, duration_ms


def empty_totals() -> dict:
    return {"counts": {}, "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0},
            "refusals": {"depth": 0, "budget": 0, "loop": 0, "denied": 0}, "cost_usd": 0.0, "cost_unknown_calls": 0}


def refusal_kind(refusal: str) -> str:
    """How a warning counts a refused node: "budget" ("budget:<dimension>"), "loop", "denied" (a person
    said no to a tool call), or "depth"."""
    if refusal.startswith("budget:"):
        return "budget"
    return refusal if refusal in ("loop", "denied") else "depth"


def known_cost_sum():
    """The aggregate of a run's known cost in USD over its llm nodes (None when none is known)."""
    return Sum(Cast(KT("usage__cost_usd"), FloatField()))


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
            entry["refusals"][refusal_kind(row["refusal"])] += row["n"]
    unpriced = Q(status=Node.Status.COMPLETED, usage__cost_usd__isnull=True)
    tokens = (nodes.filter(kind=Node.Kind.LLM).values("session_id").order_by()
              .annotate(llm_calls=Count("id"),
                        input_tokens=Coalesce(Sum(Cast(KT("usage__input_tokens"), IntegerField())), 0),
                        output_tokens=Coalesce(Sum(Cast(KT("usage__output_tokens"), IntegerField())), 0),
                        cost_usd=known_cost_sum(), cost_unknown_calls=Count("id", filter=unpriced)))
    for row in tokens:
        entry = totals[row["session_id"]]
        entry["usage"].update(llm_calls=row["llm_calls"], input_tokens=row["input_tokens"],
                              output_tokens=row["output_tokens"])
        entry["cost_unknown_calls"] = row["cost_unknown_calls"]
        # Nothing known of calls that all lack a cost: null, not a cost of 0.
        known = row["cost_usd"]
        entry["cost_usd"] = round(known, 6) if known is not None else (None if row["cost_unknown_calls"] else 0.0)
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
    """"1 refused", "1 over budget", "2 refused · 1 over budget · 1 loop", or "" when nothing was refused."""
    parts = []
    if refusals.get("depth"):
        parts.append(f"{refusals['depth']} refused")
    if refusals.get("budget"):
        parts.append(f"{refusals['budget']} over budget")
    if refusals.get("loop"):
        parts.append(f"{refusals['loop']} loop{'s' if refusals['loop'] > 1 else ''}")
    return " · ".join(parts)


def format_usd(amount: float) -> str:
    """"$0.0123" below a dollar (a model call often costs a fraction of a cent), "$12.34" above."""
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def cost_text(cost_usd: Optional[float], unknown_calls: int) -> str:
    """A run's cost as the list, the header and the CLI show it: "$0.0120", "$0.0120 · unknown for 2
    calls", "unknown for 3 calls" (no call priced)."""
    unknown = f"unknown for {unknown_calls} call{'s' if unknown_calls != 1 else ''}" if unknown_calls else ""
    if cost_usd is None:
        return unknown
    return f"{format_usd(cost_usd)} · {unknown}" if unknown else format_usd(cost_usd)


def run_summary(session: Session, totals: dict, now: Optional[datetime] = None) -> dict:
    """{"counts", "usage", "warning", "wall_ms", "cost_usd", "cost_unknown_calls"}: what the API adds to a
    session's `as_dict()`."""
    return {"counts": totals["counts"], "usage": totals["usage"], "warning": warning_text(totals["refusals"]),
            "wall_ms": wall_ms(session, now), "cost_usd": totals["cost_usd"],
            "cost_unknown_calls": totals["cost_unknown_calls"]}
