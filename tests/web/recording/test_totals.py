"""A run's totals are read from its nodes: nodes by status, model calls and tokens, refusals by kind."""
from datetime import datetime, timedelta, timezone

import pytest

from dag.live.list_rows import run_duration
from dag.models import Session
from dag.recording.totals import empty_totals, session_totals, totals_for, wall_ms, warning_text
from runtime import agentic_function

from ..dag_helpers import model_call, new_session, recording

pytestmark = pytest.mark.django_db(transaction=True)


# Kept out of the global tool registry: imported at collection, outside any test's isolated registry,
# these common names would collide with other tests' tools (test_context_render's `leaf`).
@agentic_function(register_globally=False)
def leaf(text: str) -> str:
    """Repeat the text."""
    model_call(f"say {text}", reply=f"{text} {text}")
    return text


@agentic_function(register_globally=False)
def root() -> str:
    """Call two leaves."""
    model_call("plan the work now", reply="two leaves")
    return leaf("a") + leaf("b")


def test_totals_count_nodes_by_status_and_sum_model_calls_and_tokens():
    session = new_session("root")
    with recording(session):
        root()
    totals = session_totals(session.id)
    assert totals["counts"] == {"completed": 6}
    # Tokens as model_call reports them: words in the prompt and in the reply.
    assert totals["usage"] == {"llm_calls": 3, "input_tokens": 4 + 2 + 2, "output_tokens": 2 + 2 + 2}
    assert totals["refusals"] == {"depth": 0, "budget": 0, "loop": 0, "denied": 0}


def test_refused_calls_are_counted_by_what_refused_them():
    @agentic_function
    def deep(n: int = 0) -> int:
        """Recurse until the guard says no, then stop."""
        try:
            return deep(n + 1)
        except RecursionError:
            return n

    session = new_session("deep")
    with recording(session):
        deep()
    totals = session_totals(session.id)
    assert totals["counts"] == {"completed": 5, "refused": 1}
    assert totals["refusals"] == {"depth": 1, "budget": 0, "loop": 0, "denied": 0}
    assert warning_text(totals["refusals"]) == "1 refused"


def test_totals_for_many_sessions_answers_each_and_empty_ones():
    busy, idle = new_session("root"), new_session("idle")
    with recording(busy):
        root()
    totals = totals_for([busy.id, idle.id])
    assert totals[busy.id]["usage"]["llm_calls"] == 3
    assert totals[idle.id] == empty_totals()


def test_warning_text_names_each_kind_of_refusal():
    assert warning_text({"depth": 0, "budget": 0}) == ""
    assert warning_text({"depth": 2, "budget": 1}) == "2 refused · 1 over budget"
    assert warning_text({"depth": 0, "budget": 1}) == "1 over budget"
    assert warning_text({"depth": 0, "budget": 0, "loop": 1}) == "1 loop"
    assert warning_text({"depth": 1, "budget": 0, "loop": 2}) == "1 refused · 2 loops"


START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("fields, now, wall, shown", [
    ({"status": "queued"}, None, None, ""),
    ({"status": "running", "started_at": START}, START + timedelta(seconds=1.125), 1125, "running"),
    ({"status": "completed", "started_at": START, "finished_at": START + timedelta(milliseconds=59950)},
     None, 59950, "60.0 s"),
    ({"status": "cancelled", "finished_at": START}, None, None, ""),  # stopped before it started
    ({"status": "interrupted", "started_at": START}, None, None, ""),  # ended without recording its end
    ({"status": "completed", "started_at": START, "finished_at": START - timedelta(seconds=1)}, None, 0, "0 ms"),
])
def test_wall_time_and_the_lists_duration_come_from_one_computation(fields, now, wall, shown):
    session = Session(function="entry", **fields)
    assert wall_ms(session, now) == wall
    assert run_duration(session) == shown
