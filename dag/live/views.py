"""Pages of the live view: the caller's sessions (filterable by status) and one session's live tree.

Both are thin: the list is one query with counts, the session page is a shell whose tree, gauge and
details are filled by static/js/session_page.js from the websocket stream.
"""
from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render

from runtime import max_recursion_depth

from ..conf import conf
from ..models import Session
from ..runs.launch_budget import describe

SESSIONS_PER_PAGE = 50
# For the pages' scripts (`data-terminal`), so the browser never keeps its own list.
TERMINAL_STATUSES = sorted(str(value) for value in Session.TERMINAL)


@login_required
def session_list(request):
    status = request.GET.get("status", "")
    if status and status not in Session.Status.values:
        allowed = ", ".join(Session.Status.values)
        return HttpResponseBadRequest(f"unknown status filter {status!r}; allowed: {allowed}",
                                      content_type="text/plain")
    own = Session.objects.filter(owner=request.user)
    counts = dict(own.order_by().values_list("status").annotate(n=Count("id")))
    filters = [{"value": "", "label": "All", "count": sum(counts.values()), "active": not status}] + [
        {"value": value, "label": label, "count": counts.get(value, 0), "active": status == value}
        for value, label in Session.Status.choices]
    shown = own.filter(status=status) if status else own
    page = Paginator(shown.order_by("-created_at"), SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    for session in page.object_list:
        session.duration_text = run_duration(session)
    return render(request, "sessions/list.html", {
        "page": page, "filters": filters, "status": status, "terminal": TERMINAL_STATUSES})


def run_duration(session: Session) -> str:
    """How long a run took ("1.4 s", "2 m 5 s"), "running" while it runs, "" if it never started."""
    if session.started_at is None:
        return ""
    if session.finished_at is None:
        return "running" if not session.is_terminal else ""
    seconds = (session.finished_at - session.started_at).total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} m {seconds} s"


@login_required
def session_detail(request, session_id: uuid.UUID):
    session = get_object_or_404(Session, pk=session_id, owner=request.user)
    return render(request, "sessions/detail.html", {
        "session": session,
        "launch_budget": describe(session.launch_budget),
        "ceiling": max_recursion_depth(),
        "terminal": TERMINAL_STATUSES,
        "heartbeat_s": conf.WS_HEARTBEAT_S,
    })
