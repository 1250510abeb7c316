"""Compare: two runs side by side, calls aligned by call path, differences marked; page and API."""
from __future__ import annotations

import pytest

from dag.recording.compare import aligned

from .replays import llm_nodes, recorded, started_from

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_and_its_fork_compared_through_the_api(api, user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    first, second = llm_nodes(original)
    forked = started_from(api, f"/api/sessions/{original.pk}/fork/", {"node": second.seq, "reply": "changed"})
    body = api.get(f"/api/sessions/compare/?a={original.pk}&b={forked.pk}").json()
    assert body["a"]["id"] == str(original.pk) and body["b"]["id"] == str(forked.pk)
    rows = {(row["path"], row["occurrence"]): row for row in body["rows"]}
    assert list(rows) == [("two_questions", 0), ("two_questions/llm", 0), ("two_questions/llm", 1)]
    assert set(rows["two_questions/llm", 0]["differences"]) - {"duration"} == {"tokens"}  # served: free
    assert {"output", "tokens"} <= set(rows["two_questions/llm", 1]["differences"])
    assert rows["two_questions/llm", 1]["b"]["output"]["text"] == "changed"
    assert "output" in rows["two_questions", 0]["differences"]  # its result holds the changed answer
    assert body["different"] == 3


def test_a_replay_compares_equal_but_for_timing_and_tokens(api, user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    replay = started_from(api, f"/api/sessions/{original.pk}/replay/")
    body = api.get(f"/api/sessions/compare/?a={original.pk}&b={replay.pk}").json()
    for row in body["rows"]:
        assert set(row["differences"]) <= {"duration", "tokens"}  # a replayed call costs no tokens


def test_the_compare_page_marks_what_differs_and_a_call_only_one_run_made(
        logged_in, api, user, debug_functions, provider_calls):
    one = recorded(user, "asks_more_when")
    two = recorded(user, "asks_more_when", extra=True)
    page = logged_in.get(f"/sessions/compare/?a={one.pk}&b={two.pk}").content.decode()
    assert 'data-path="asks_more_when/llm"' in page
    assert 'data-differences="missing"' in page and "not called" in page
    assert '<dd class="mono small differs">' in page
    assert "call differs" in page or "calls differ" in page


def test_only_your_own_sessions_are_compared(client, api, user, other_user, debug_functions, provider_calls):
    mine, theirs = recorded(user, "two_questions"), recorded(other_user, "two_questions")
    assert api.get(f"/api/sessions/compare/?a={mine.pk}&b={theirs.pk}").status_code == 404
    assert api.get(f"/api/sessions/compare/?a={mine.pk}").json() == {"b": ["give a session's id"]}
    client.force_login(user)
    assert client.get(f"/sessions/compare/?a={mine.pk}&b={theirs.pk}").status_code == 404
    client.logout()
    assert client.get(f"/sessions/compare/?a={mine.pk}&b={mine.pk}").status_code == 302  # to the login


def node(node_id, name, parent=None, kind="code", output=None):
    return {"id": node_id, "seq": node_id, "parent": parent, "kind": kind, "name": name, "input": {},
            "output": output, "status": "completed", "usage": None, "duration_ms": 1, "error": ""}


def test_calls_only_b_made_are_placed_after_the_last_call_both_made():
    a = [node(1, "main"), node(2, "step", 1), node(3, "end", 1)]
    b = [node(11, "main"), node(12, "step", 11), node(13, "extra", 11), node(14, "end", 11)]
    rows = aligned(a, b)
    assert [(key[0], bool(left), bool(right)) for key, left, right in rows] == [
        ("main", True, True), ("main/step", True, True), ("main/extra", False, True), ("main/end", True, True)]
