"""The session list's filters: function, status, a date range, a text search over the arguments and a
lowest cost.

Read from the page's query string (`function`, `status`, `from`, `to`, `q`, `min_cost`; dates as
YYYY-MM-DD in the server's time zone, both ends included; `min_cost` in US dollars, the runs whose model
calls of known cost add up to at least that), combined with AND. The search matches the arguments as JSON
text, case-insensitively, on SQLite and PostgreSQL alike: SQLite stores JSON with non-ASCII characters
escaped (`caf\\u00e9`) where PostgreSQL's jsonb text has them plain, and both escape quotes (`\\"`), so a
term is matched as typed and in each way JSON would write it (`search_forms`).
"""
from __future__ import annotations

import datetime
import json
import math
import re
from dataclasses import dataclass

from django.db.models import OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from ..models import Node, Session
from ..recording.totals import known_cost_sum

MAX_SEARCH_CHARS = 200
MAX_FUNCTION_CHARS = 200
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class BadFilter(ValueError):
    """A filter parameter of the session list is malformed; the message names it and what it takes."""


@dataclass(frozen=True)
class SessionFilters:
    function: str = ""
    status: str = ""
    date_from: datetime.date | None = None
    date_to: datetime.date | None = None
    search: str = ""
    min_cost: float | None = None

    @classmethod
    def from_query(cls, params) -> "SessionFilters":
        """The filters of a query string (a QueryDict or dict); BadFilter naming a malformed one."""
        status = params.get("status", "").strip()
        if status and status not in Session.Status.values:
            raise BadFilter(f"unknown status filter {status!r}; allowed: {', '.join(Session.Status.values)}")
        function = _text(params, "function", "function", MAX_FUNCTION_CHARS)
        search = _text(params, "q", "q (the search)", MAX_SEARCH_CHARS)
        filters = cls(function=function, status=status, date_from=_date(params, "from"),
                      date_to=_date(params, "to"), search=search, min_cost=_money(params, "min_cost"))
        if filters.date_from and filters.date_to and filters.date_to < filters.date_from:
            raise BadFilter(f"to ({filters.date_to}) is before from ({filters.date_from})")
        return filters

    @property
    def narrowed(self) -> bool:
        """Whether any filter is set (a new run then may not belong on the page)."""
        return any((self.function, self.status, self.date_from, self.date_to, self.search,
                    self.min_cost is not None))

    def apply(self, sessions: QuerySet, *, by_status: bool = True) -> QuerySet:
        """`sessions` narrowed by every filter (without the status one if not `by_status`: the counts
        per status are counted over the others)."""
        if self.function:
            sessions = sessions.filter(function=self.function)
        if by_status and self.status:
            sessions = sessions.filter(status=self.status)
        start = _start_of(self.date_from) if self.date_from else None
        if start is not None:
            sessions = sessions.filter(created_at__gte=start)
        end = _start_of(self.date_to, days_after=1) if self.date_to else None
        if end is not None:
            sessions = sessions.filter(created_at__lt=end)
        if self.search:
            matches = Q()
            for form in search_forms(self.search):
                matches |= Q(args_text__icontains=form)
            sessions = sessions.annotate(args_text=Cast("args", TextField())).filter(matches)
        if self.min_cost is not None:
            costs = (Node.objects.filter(session=OuterRef("pk"), kind=Node.Kind.LLM).order_by()
                     .values("session").annotate(total=known_cost_sum()).values("total"))
            sessions = sessions.annotate(run_cost=Subquery(costs)).filter(run_cost__gte=self.min_cost)
        return sessions


def search_forms(term: str) -> list[str]:
    """The term as typed and as JSON text writes it inside a string, escaped all ASCII (SQLite's
    stored JSON) or escaping only quotes and controls (PostgreSQL's jsonb as text); each also in lower
    and upper case, as escapes: SQLite's LIKE folds the case of ASCII letters only, so "É" stored as
    \u00c9 would never match a search for "é" (\u00e9) otherwise. On SQLite a term whose non-ASCII
    letters differ in case among themselves from the stored text ("éÉ" for "Éé") still finds nothing."""
    forms = []
    for cased in (term, term.lower(), term.upper()):
        forms += [cased, json.dumps(cased)[1:-1], json.dumps(cased, ensure_ascii=False)[1:-1]]
    return list(dict.fromkeys(forms))


def _text(params, name: str, called: str, max_chars: int) -> str:
    value = params.get(name, "").strip()
    if len(value) > max_chars:
        raise BadFilter(f"{called} must be at most {max_chars} characters")
    if "\x00" in value:  # no stored text holds one, and PostgreSQL refuses it in a query
        raise BadFilter(f"{called} cannot contain a NUL character")
    return value


def _money(params, name: str) -> float | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise BadFilter(f"{name} must be a number of US dollars >= 0, such as 0.5; got {text!r}")
    return value


def _date(params, name: str) -> datetime.date | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        # fromisoformat() also reads 20250310, 2025-W10-1 and +2025-03-10; the page promises only this form.
        if not _DATE_TEXT.fullmatch(text):
            raise ValueError(text)
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"{name} must be a date as YYYY-MM-DD, such as 2025-03-10; got {text!r}") from None


def _start_of(day: datetime.date, days_after: int = 0) -> datetime.datetime | None:
    """The start of `day` (plus `days_after` days) in the server's zone, as UTC; None where that is past
    either end of the calendar (the day after 9999-12-31; 0001-01-01 east of UTC): such a bound
    leaves out no session, so there is none to apply."""
    try:
        moment = datetime.datetime.combine(day + datetime.timedelta(days=days_after), datetime.time.min)
        return timezone.make_aware(moment).astimezone(datetime.timezone.utc)
    except OverflowError:
        return None
