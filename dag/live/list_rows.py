"""The rows of the session list, as the page renders them and as the live list sends them.

One row per session: its function, phase and warning ("completed · 1 refused"), nodes, duration,
model calls, tokens and cost. The figures come from `dag.recording.totals.totals_for`, two queries for a
whole page, never one per row. The row's HTML comes from one template (`sessions/_row.html`), which the
page includes and the live list sends, so a row changed live reads exactly like a row loaded.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable

from django.template.loader import render_to_string

from ..models import Session
from ..recording.totals import cost_text, totals_for, wall_ms, warning_text
from .durations import format_duration

ROW_TEMPLATE = "sessions/_row.html"
# The most rows one watch of the live list asks for (a page shows 50), and the most newer runs it adds.
MAX_WATCHED = 100


@dataclass(frozen=True)
class ListRow:
    session: Session
    duration: str
    llm_calls: int
    input_tokens: int
    output_tokens: int
    warning: str
    cost: str  # "$0.0120", "$0.0120 · unknown for 2 calls" (dag.recording.totals.cost_text)

    def as_message(self) -> dict:
        """What the live list sends for this row: where it belongs (id, created_at), its HTML, and its
        status and phase as data, so the page can act on a run's state (e.g. its filter counts, or
        whether to keep following it) without parsing the HTML."""
        return {"id": str(self.session.id), "status": self.session.status, "phase": self.session.phase,
                "created_at": self.session.created_at.isoformat(), "html": render_row(self)}


def rows_for(sessions: Iterable[Session]) -> list[ListRow]:
    """The rows of `sessions`, in their order, with their totals read in two queries."""
    sessions = list(sessions)
    totals = totals_for(session.pk for session in sessions)
    rows = []
    for session in sessions:
        entry = totals[session.pk]
        usage = entry["usage"]
        cost = cost_text(entry["cost_usd"], entry["cost_unknown_calls"]) if usage["llm_calls"] else ""
        rows.append(ListRow(session=session, duration=run_duration(session), llm_calls=usage["llm_calls"],
                            input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"],
                            warning=warning_text(entry["refusals"]), cost=cost))
    return rows


def render_row(row: ListRow) -> str:
    return render_to_string(ROW_TEMPLATE, {"row": row})


def owned_row_messages(owner, session_ids: Iterable, newer_than=None, limit: int = MAX_WATCHED) -> list[dict]:
    """Live-list messages for those of `session_ids` that `owner` owns, and for the owner's sessions
    created after `newer_than` (a datetime, or None for none), newest first, at most `limit` of each."""
    ids = list(session_ids)[:limit]
    own = Session.objects.filter(owner=owner)
    found = list(own.filter(pk__in=ids)) if ids else []
    if newer_than is not None:
        found += own.filter(created_at__gt=newer_than).order_by("-created_at")[:limit]
    by_id = {session.pk: session for session in found}
    ordered = sorted(by_id.values(), key=lambda session: session.created_at, reverse=True)
    return [row.as_message() for row in rows_for(ordered)]


def owned_row_message(owner, session_id) -> dict | None:
    """The live-list message of one session if `owner` owns it, else None."""
    try:
        session_id = uuid.UUID(str(session_id))
    except ValueError:
        return None
    messages = owned_row_messages(owner, [session_id])
    return messages[0] if messages else None


def run_duration(session: Session) -> str:
    """How long a run took, written as the session page writes it; "running" while it runs, "" if it never
    started (or ended without recording its end)."""
    if session.started_at is not None and session.finished_at is None and not session.is_terminal:
        return "running"
    return format_duration(wall_ms(session))
