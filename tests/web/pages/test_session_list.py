"""The session list page `/sessions/`: only the caller's sessions, filters (function, status, dates,
search over arguments) kept in the links, pagination, per-row totals and warnings, in a fixed number of
queries."""
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dag.live.list_rows import run_duration
from dag.models import Node, Session

from ..live.test_live_views import make

pytestmark = pytest.mark.django_db


def made_on(session, when):
    """Move a session's creation time (auto_now_add leaves no other way)."""
    Session.objects.filter(pk=session.pk).update(created_at=when)
    return session


def add_nodes(session, *, llm_calls=0, refused=0, budget_refused=0, tokens=(10, 5)):
    """Nodes under `session`: an entry call, model calls with `tokens` each, refused calls."""
    seq = iter(range(10_000))
    entry = Node.objects.create(session=session, seq=next(seq), kind="code", name=session.function,
                                status="completed")
    for _ in range(llm_calls):
        Node.objects.create(session=session, seq=next(seq), parent=entry, kind="llm", name="llm",
                            status="completed", usage={"input_tokens": tokens[0], "output_tokens": tokens[1]})
    for refusal, count in (("depth", refused), ("budget:llm_calls", budget_refused)):
        for _ in range(count):
            Node.objects.create(session=session, seq=next(seq), parent=entry, kind="code", name=session.function,
                                status="refused", refusal=refusal)
    Session.objects.filter(pk=session.pk).update(node_count=next(seq))


def listed_ids(response):
    return re.findall(r'<tr data-session="([0-9a-f-]{36})"', response.content.decode())


def row_html(response, session):
    html = response.content.decode()
    start = html.index(f'<tr data-session="{session.id}"')
    return html[start:html.index("</tr>", start)]


def test_the_list_needs_a_login(client):
    response = client.get("/sessions/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_list_shows_only_the_callers_sessions_newest_first(logged_in, user, other_user):
    older = make(user, "wiki_agent")
    newer = make(user, "slow_count", status="running")
    make(other_user, "runaway_agent")
    response = logged_in.get("/sessions/")
    assert response.status_code == 200
    assert listed_ids(response) == [str(newer.id), str(older.id)]
    assert "runaway_agent" not in response.content.decode()


def status_counts(response):
    return {f["value"]: (f["count"], f["active"]) for f in response.context["statuses"]}


def test_status_filter_narrows_the_list_and_counts_each_status(logged_in, user):
    running = make(user, "slow_count", status="running")
    make(user, "wiki_agent", status="completed")
    make(user, "wiki_agent", status="completed")
    response = logged_in.get("/sessions/?status=running")
    assert listed_ids(response) == [str(running.id)]
    counts = status_counts(response)
    assert counts[None] == (3, False)
    assert counts["running"] == (1, True)
    assert counts["completed"] == (2, False)
    assert counts["error"] == (0, False)


def test_function_filter_narrows_the_list_and_the_counts(logged_in, user):
    wiki = make(user, "wiki_agent", status="error")
    make(user, "slow_count", status="completed")
    response = logged_in.get("/sessions/?function=wiki_agent")
    assert listed_ids(response) == [str(wiki.id)]
    counts = status_counts(response)
    assert counts[None] == (1, True) and counts["error"] == (1, False) and counts["completed"] == (0, False)
    # The select offers each of the caller's functions, the chosen one selected.
    html = response.content.decode()
    assert '<option value="wiki_agent" selected>wiki_agent</option>' in html
    assert '<option value="slow_count">slow_count</option>' in html


def test_date_filters_include_both_ends_in_the_servers_time_zone(logged_in, user):
    day = timezone.make_aware(timezone.datetime(2025, 3, 10, 12, 0))
    before = made_on(make(user), day - timedelta(days=1))
    first = made_on(make(user), day.replace(hour=0, minute=0, second=0))
    last = made_on(make(user), day + timedelta(days=1, hours=11, minutes=59))
    after = made_on(make(user), day + timedelta(days=2))
    assert listed_ids(logged_in.get("/sessions/?from=2025-03-10&to=2025-03-11")) == [str(last.id), str(first.id)]
    assert listed_ids(logged_in.get("/sessions/?from=2025-03-11")) == [str(after.id), str(last.id)]
    assert listed_ids(logged_in.get("/sessions/?to=2025-03-09")) == [str(before.id)]


@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Tokyo", "America/Los_Angeles"])
def test_dates_at_either_end_of_the_calendar_bound_nothing(logged_in, user, settings, time_zone):
    settings.TIME_ZONE = time_zone
    session = make(user)
    for query in ("to=9999-12-31", "from=0001-01-01", "from=0001-01-01&to=9999-12-31", "from=9999-12-31"):
        response = logged_in.get(f"/sessions/?{query}")
        assert response.status_code == 200, query
        assert listed_ids(response) == ([] if query == "from=9999-12-31" else [str(session.id)]), query


@pytest.mark.parametrize("query, named", [
    ("status=sleeping", "'sleeping'"), ("from=yesterday", "from must be a date"),
    ("to=2025-13-01", "to must be a date"), ("from=2025-03-02&to=2025-03-01", "is before from"),
    ("q=" + "x" * 201, "at most 200 characters"), ("q=a%00b", "q (the search) cannot contain a NUL"),
    ("function=echo%00", "function cannot contain a NUL"),
    # date.fromisoformat() reads these too, but the page promises YYYY-MM-DD only.
    ("from=20250310", "from must be a date as YYYY-MM-DD"), ("from=2025-W10-1", "from must be a date"),
    ("to=%2B2025-03-10", "to must be a date"), ("from=%D9%A2025-03-10", "from must be a date")])
def test_a_malformed_filter_is_a_400_naming_it(logged_in, query, named):
    response = logged_in.get(f"/sessions/?{query}")
    assert response.status_code == 400
    assert named in response.content.decode()


def test_a_malformed_filters_message_is_text_in_utf_8(logged_in):
    response = logged_in.get("/sessions/?status=caf%C3%A9")
    assert response.status_code == 400 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert "'café'" in response.content.decode("utf-8")


def test_unknown_status_filter_names_the_allowed_values(logged_in):
    body = logged_in.get("/sessions/?status=sleeping").content.decode()
    assert "running" in body and "cancelled" in body


def test_search_matches_arguments_as_text_case_insensitively(logged_in, user, other_user):
    tides = make(user, args={"topic": "Tides of the North Sea", "depth": 2})
    make(user, args={"topic": "volcanoes"})
    make(other_user, args={"topic": "tides"})
    assert listed_ids(logged_in.get("/sessions/?q=tides")) == [str(tides.id)]
    assert listed_ids(logged_in.get("/sessions/?q=NORTH%20sea")) == [str(tides.id)]
    assert listed_ids(logged_in.get("/sessions/?q=nothing-like-it")) == []


def test_search_finds_non_ascii_text_and_quotes_on_every_database(logged_in, user):
    cafe = make(user, args={"question": 'Where is the "Café" de Flore?'})
    make(user, args={"question": "plain"})
    assert listed_ids(logged_in.get("/sessions/?q=café")) == [str(cafe.id)]
    assert listed_ids(logged_in.get('/sessions/?q="Café"')) == [str(cafe.id)]


def test_search_folds_the_case_of_non_ascii_letters_on_every_database(logged_in, user):
    tides = make(user, args={"topic": "Tides at the Café École"})
    for term in ("CAFÉ", "café", "école", "ÉCOLE", "tides at the CAFÉ"):
        assert listed_ids(logged_in.get("/sessions/", {"q": term})) == [str(tides.id)], term


def test_filters_combine(logged_in, user):
    match = make(user, "wiki_agent", status="completed", args={"topic": "tides"})
    make(user, "wiki_agent", status="error", args={"topic": "tides"})
    make(user, "slow_count", status="completed", args={"topic": "tides"})
    make(user, "wiki_agent", status="completed", args={"topic": "rivers"})
    response = logged_in.get("/sessions/?function=wiki_agent&status=completed&q=tid")
    assert listed_ids(response) == [str(match.id)]
    # Counted over the other filters: what each status would show with this function and search.
    counts = status_counts(response)
    assert counts[None] == (2, False) and counts["completed"] == (1, True) and counts["error"] == (1, False)


def test_a_filtered_list_says_nothing_matches(logged_in, user):
    make(user, args={"topic": "tides"})
    html = logged_in.get("/sessions/?q=zzz").content.decode()
    assert "No sessions match these filters" in html


def test_list_is_paginated_and_the_pager_keeps_the_filters(logged_in, user):
    for _ in range(51):
        make(user, args={"topic": "tides"})
    make(user, args={"topic": "rivers"})
    first = logged_in.get("/sessions/?q=tides&function=wiki_agent")
    second = logged_in.get("/sessions/?q=tides&function=wiki_agent&page=2")
    assert len(listed_ids(first)) == 50 and len(listed_ids(second)) == 1
    assert 'href="?q=tides&amp;function=wiki_agent&amp;page=2"' in first.content.decode()
    assert 'href="?q=tides&amp;function=wiki_agent&amp;page=1"' in second.content.decode()


def test_status_links_keep_the_other_filters_and_start_at_the_first_page(logged_in, user):
    make(user, args={"topic": "tides"})
    html = logged_in.get("/sessions/?q=tides&page=1&status=completed").content.decode()
    assert 'href="?q=tides&amp;status=running"' in html
    assert 'href="?q=tides"' in html  # "All" drops the status


def test_each_row_shows_nodes_duration_model_calls_tokens_and_its_warning(logged_in, user):
    start = timezone.now()
    session = make(user, "runaway_agent", status="error", started_at=start,
                   finished_at=start + timedelta(seconds=2.5))
    add_nodes(session, llm_calls=3, refused=2, tokens=(100, 7))
    row = row_html(logged_in.get("/sessions/"), session)
    assert '<td data-label="Nodes" class="num" data-role="nodes">6</td>' in row
    # The cell holds the run's wall time as the one formatter writes it (its figures are tested against
    # the page's own formatter in tests/web/live); here only that an ended run shows one.
    wall = re.search(r'<td data-label="Duration" class="num" data-role="duration">([^<]*)</td>', row).group(1)
    assert wall not in ("", "running") and re.fullmatch(r"[\d.,]+ ?\w+( [\d.,]+ ?\w+)?", wall)
    assert '<td data-label="Model calls" class="num" data-role="llm-calls">3</td>' in row
    assert '<td data-label="Tokens in / out" class="num" data-role="tokens">300 / 21</td>' in row
    assert 'data-role="status">error</span><span class="run-warning" data-role="warning"> · 2 refused</span>' in row


def test_a_completed_run_with_budget_refusals_says_so(logged_in, user):
    session = make(user, status="completed")
    add_nodes(session, refused=1, budget_refused=1)
    assert "completed</span><span class=\"run-warning\" data-role=\"warning\"> · 1 refused · 1 over budget<" in \
        row_html(logged_in.get("/sessions/"), session)


def test_a_clean_run_has_no_warning(logged_in, user):
    session = make(user, status="completed")
    add_nodes(session, llm_calls=1)
    assert "run-warning" not in row_html(logged_in.get("/sessions/"), session)


def test_the_page_takes_the_same_number_of_queries_for_few_rows_and_many(logged_in, user):
    def queries_for_page():
        with CaptureQueriesContext(connection) as queries:
            assert logged_in.get("/sessions/").status_code == 200
        return len(queries)

    for _ in range(3):
        add_nodes(make(user), llm_calls=2, refused=1)
    few = queries_for_page()
    for _ in range(30):
        add_nodes(make(user), llm_calls=2, refused=1)
    assert queries_for_page() == few


def test_the_totals_of_a_page_are_two_queries(user, django_assert_num_queries):
    from dag.live.list_rows import rows_for

    sessions = [make(user) for _ in range(20)]
    for session in sessions:
        add_nodes(session, llm_calls=1)
    with django_assert_num_queries(2):
        rows = rows_for(sessions)
    assert [row.llm_calls for row in rows] == [1] * 20


def test_stop_buttons_only_for_unfinished_runs_and_cancelling_shown(logged_in, user):
    running = make(user, "slow_count", status="running")
    stopping = make(user, "slow_count", status="running", cancel_requested=True)
    done = make(user, "wiki_agent", status="completed")
    response = logged_in.get("/sessions/")
    assert f'data-stop-url="/api/sessions/{running.id}/stop/"' in row_html(response, running)
    assert 'class="badge status-cancelling" data-role="status">cancelling<' in row_html(response, stopping)
    assert "data-stop-url" not in row_html(response, done)


def test_only_the_first_page_of_everything_takes_new_runs(logged_in, user):
    for _ in range(51):
        make(user)
    assert "data-takes-new-runs" in logged_in.get("/sessions/").content.decode()
    assert "data-takes-new-runs" not in logged_in.get("/sessions/?page=2").content.decode()
    assert "data-takes-new-runs" not in logged_in.get("/sessions/?status=running").content.decode()
    # With no session yet the table is there, hidden, for the first run to appear in.
    html = logged_in.get("/sessions/?status=queued").content.decode()
    assert 'data-ws-path="/ws/sessions/"' in html


def test_function_names_are_escaped_in_the_list(logged_in, user):
    make(user, function="<script>alert(1)</script>")
    html = logged_in.get("/sessions/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_durations_read_as_the_session_page_writes_them(user):
    start = timezone.now()
    durations = [run_duration(make(user, started_at=start, finished_at=start + delta))
                 for delta in (timedelta(milliseconds=320), timedelta(seconds=4.25), timedelta(seconds=125))]
    assert durations == ["320 ms", "4.25 s", "2 m 5 s"]
    assert run_duration(make(user, status="running", started_at=start)) == "running"
    assert run_duration(make(user, status="queued")) == ""


def test_a_stopped_run_no_longer_reads_running(user):
    start = timezone.now()
    stopped = make(user, status="cancelled", cancel_requested=True, started_at=start,
                   finished_at=start + timedelta(seconds=1.5))
    assert run_duration(stopped) == "1.50 s"
    # Ended without a finish time (written off before it recorded one): no duration, and not "running".
    assert run_duration(make(user, status="interrupted", started_at=start)) == ""
