"""Sessions in the API carry their run summary: nodes by status, model calls and tokens, warning, wall time."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dag.models import Node, Session
from dag.recording import write_path

pytestmark = pytest.mark.django_db

NO_USAGE = {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0}


def running_session(owner, started_ago_s: float = 5) -> Session:
    session = Session.objects.create(owner=owner, function="echo", args={"text": "hi"})
    write_path.update_session(session.pk, status="running",
                              started_at=timezone.now() - timedelta(seconds=started_ago_s))
    return session


def add_model_call(session, parent, input_tokens: int, output_tokens: int) -> Node:
    node = write_path.create_node(session.pk, kind="llm", name="llm", depth=2, parent_id=parent.pk,
                                  started_at=timezone.now())
    write_path.finish_node(node, status="completed", usage={"input_tokens": input_tokens,
                                                            "output_tokens": output_tokens})
    return node


def test_a_running_session_answers_its_figures_so_far_and_they_follow_the_run(api, user):
    session = running_session(user, started_ago_s=5)
    entry = write_path.create_node(session.pk, kind="code", name="echo", depth=1, started_at=timezone.now())
    add_model_call(session, entry, 12, 3)
    write_path.create_node(session.pk, kind="code", name="echo", depth=2, parent_id=entry.pk, status="refused",
                           refusal="depth", error="refused", started_at=timezone.now(), finished_at=timezone.now())
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["counts"] == {"running": 1, "completed": 1, "refused": 1}
    assert body["usage"] == {"llm_calls": 1, "input_tokens": 12, "output_tokens": 3}
    assert body["warning"] == "1 refused"
    assert body["wall_ms"] >= 5000  # to now: the run started five seconds ago and has not ended

    add_model_call(session, entry, 30, 7)
    write_path.finish_node(entry, status="completed", output="hi")
    write_path.finish_session(session.pk, "completed", result="hi")
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["counts"] == {"completed": 3, "refused": 1}
    assert body["usage"] == {"llm_calls": 2, "input_tokens": 42, "output_tokens": 10}
    ended = Session.objects.get(pk=session.pk)
    assert body["wall_ms"] == int((ended.finished_at - ended.started_at).total_seconds() * 1000)


def test_budget_refusals_are_worded_as_over_budget(api, user):
    session = running_session(user)
    for refusal in ("depth", "budget:llm_calls", "budget:depth"):
        write_path.create_node(session.pk, kind="code", name="echo", depth=1, status="refused", refusal=refusal)
    assert api.get(f"/api/sessions/{session.pk}/").json()["warning"] == "1 refused · 2 over budget"


def test_launch_and_stop_answer_the_session_with_its_summary(api, user, test_functions,
                                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        launched = api.post("/api/sessions/", {"function": "echo", "args": {"text": "hi"}}, format="json").json()
    assert launched["counts"] == {} and launched["usage"] == NO_USAGE and launched["wall_ms"] is None
    stopped = api.post(f"/api/sessions/{launched['id']}/stop/").json()
    assert stopped["status"] == "cancelled" and stopped["warning"] == "" and stopped["wall_ms"] is None


def make_sessions(owner, count: int) -> None:
    for _ in range(count):
        session = running_session(owner)
        entry = write_path.create_node(session.pk, kind="code", name="echo", depth=1)
        add_model_call(session, entry, 4, 2)


def queries_for_the_list(api) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        body = api.get("/api/sessions/").json()
    return body, [query["sql"] for query in captured.captured_queries]


def test_the_list_reads_every_rows_totals_in_two_queries_whatever_the_page_size(api, user):
    make_sessions(user, 2)
    small, small_queries = queries_for_the_list(api)
    make_sessions(user, 10)
    large, large_queries = queries_for_the_list(api)
    assert len(small["results"]) == 2 and len(large["results"]) == 12
    assert len(large_queries) == len(small_queries)
    node_queries = [sql for sql in large_queries if Node._meta.db_table in sql]
    assert len(node_queries) == 2
    for row in large["results"]:
        assert row["counts"] == {"running": 1, "completed": 1}
        assert row["usage"] == {"llm_calls": 1, "input_tokens": 4, "output_tokens": 2}


def test_each_list_row_is_what_the_session_detail_answers(api, user, other_user):
    make_sessions(user, 3)
    write_path.finish_session(Session.objects.filter(owner=user).first().pk, "completed")
    make_sessions(other_user, 1)
    rows = api.get("/api/sessions/").json()["results"]
    assert len(rows) == 3
    for row in rows:
        detail = api.get(f"/api/sessions/{row['id']}/").json()
        if row["status"] == "running":  # wall time to now moves on between the two requests
            assert row.pop("wall_ms") <= detail.pop("wall_ms")
        assert row == detail
