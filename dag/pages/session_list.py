"""The session list page (`/sessions/`): the caller's sessions, filtered, paginated, live.

Thin: the filters narrow one query, the rows take their totals in two more (`dag.live.list_rows`), and
static/js/session_list.js keeps the rows current over `ws/sessions/` (`SessionListConsumer`).
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponseBadRequest
from django.shortcuts import render

from ..live.list_rows import rows_for
from ..live.views import TERMINAL_STATUSES
from ..models import Session
from .session_filters import BadFilter, SessionFilters

SESSIONS_PER_PAGE = 50
LIST_STREAM_PATH = "/ws/sessions/"


@login_required
def session_list(request):
    try:
        filters = SessionFilters.from_query(request.GET)
    except BadFilter as exc:
        # With a content_type given Django adds no charset, and the message quotes what was typed.
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    own = Session.objects.filter(owner=request.user)
    # Counted over every other filter, so each count says what choosing that status would show.
    counts = dict(filters.apply(own, by_status=False).order_by().values_list("status").annotate(n=Count("id")))
    statuses = [{"value": None, "label": "All", "count": sum(counts.values()), "active": not filters.status}] + [
        {"value": value, "label": label, "count": counts.get(value, 0), "active": filters.status == value}
        for value, label in Session.Status.choices]
    page = Paginator(filters.apply(own).order_by("-created_at"), SESSIONS_PER_PAGE).get_page(
        request.GET.get("page"))
    functions = sorted(set(own.order_by().values_list("function", flat=True).distinct()) | (
        {filters.function} if filters.function else set()))
    return render(request, "sessions/list.html", {
        "page": page, "rows": rows_for(page.object_list), "statuses": statuses, "filters": filters,
        "functions": functions, "terminal": TERMINAL_STATUSES, "stream_path": LIST_STREAM_PATH,
        # New runs belong at the top only of the first page of everything.
        "takes_new_runs": page.number == 1 and not filters.narrowed, "page_size": SESSIONS_PER_PAGE})
