"""Replay: a new session of the same function and arguments whose model calls are answered from the
recorded replies (no provider call, no cost); a divergence is named, or goes on live when asked."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from dag.models import Session
from dag.runs.launch import create_session
from dag.runs.lifecycle import run_session

from . import debug_functions
from .replays import llm_nodes, recorded, started_from, tree

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = [
    ("wiki_agent", {"question": "How does the recursion guard work?", "mode": "detailed"}),
    ("research_agent", {"topic": "the recursion guard", "notes": "depth ceiling"}),
    ("runaway_agent", {"task": "Summarise the notes"}),
    ("slow_count", {"n": 3, "delay_s": 0}),
]


@pytest.mark.parametrize("function, args", EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_a_replay_of_each_example_has_the_same_tree_and_calls_no_model(api, user, provider_calls, function, args):
    original = recorded(user, function, **args)
    made = len(provider_calls)
    replay = started_from(api, f"/api/sessions/{original.pk}/replay/")
    assert len(provider_calls) == made  # not one live model call
    assert replay.function == original.function and replay.args == original.args
    assert (replay.status, replay.result) == (original.status, original.result)
    assert tree(replay) == tree(original)
    assert replay.replay_of_id == original.pk
    assert api.get(f"/api/sessions/{replay.pk}/").json()["replay_of"] == str(original.pk)
    calls = llm_nodes(replay)
    assert all(node.replayed for node in calls) and not any(node.replayed for node in llm_nodes(original))
    assert all(node.usage["input_tokens"] == node.usage["output_tokens"] == 0 for node in calls)  # no cost


@pytest.fixture
def extra_call_after_recording():
    yield debug_functions.EXTRA_CALL
    debug_functions.EXTRA_CALL["on"] = False


def test_a_call_the_recording_has_no_answer_for_stops_the_replay_naming_it(
        api, user, debug_functions, provider_calls, extra_call_after_recording):
    original = recorded(user, "asks_more_when")
    extra_call_after_recording["on"] = True  # the code changed since the run was recorded
    made = len(provider_calls)
    replay = started_from(api, f"/api/sessions/{original.pk}/replay/")
    assert replay.status == "error" and len(provider_calls) == made
    assert replay.error.startswith("ReplayDiverged: replay diverged at asks_more_when:")
    assert "the recorded run made 1 model call at asks_more_when, and the recording has no call left" in replay.error
    first, second = llm_nodes(replay)
    assert first.replayed and second.status == "error" and "ReplayDiverged" in second.error


def test_then_live_goes_on_with_live_calls_from_the_divergence(
        api, user, debug_functions, provider_calls, extra_call_after_recording):
    original = recorded(user, "asks_more_when")
    extra_call_after_recording["on"] = True
    made = len(provider_calls)
    replay = started_from(api, f"/api/sessions/{original.pk}/replay/", {"then": "live"})
    assert replay.status == "completed" and len(replay.result) == 2
    assert len(provider_calls) == made + 1  # the call the recording had no answer for, and only it
    first, second = llm_nodes(replay)
    assert first.replayed and not second.replayed
    assert replay.result[0] == original.result[0]


@pytest.mark.parametrize("body, field", [({"then": "later"}, "then"), ([1], "detail")])
def test_a_wrong_request_is_named(api, user, debug_functions, provider_calls, body, field):
    original = recorded(user, "asks_more_when")
    response = api.post(f"/api/sessions/{original.pk}/replay/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert Session.objects.count() == 1


def test_another_users_session_cannot_be_replayed(api, other_user, debug_functions, provider_calls):
    theirs = recorded(other_user, "asks_more_when")
    assert api.post(f"/api/sessions/{theirs.pk}/replay/", {}, format="json").status_code == 404
    assert api.post("/api/sessions/not-an-id/replay/", {}, format="json").status_code == 404


def test_run_function_replays_a_session_drawing_its_tree(local_user, debug_functions, provider_calls):
    original = recorded(local_user, "two_questions")
    made = len(provider_calls)
    out = io.StringIO()
    call_command("run_function", "--replay", str(original.pk), stdout=out)
    replay = Session.objects.exclude(pk=original.pk).get()
    assert replay.replay_of_id == original.pk and replay.result == original.result and len(provider_calls) == made
    text = " ".join(out.getvalue().split())
    assert f"Session {replay.pk}, a replay of {original.pk}" in text and "two_questions(" in text


@pytest.mark.parametrize("args, message", [
    (("--replay", "not-an-id"), "no session 'not-an-id' of local to replay"),
    (("two_questions", "--replay", "x"), "give no function, arguments or --budget with it"),
    ((), "name the function to run (or --replay SESSION_ID)"),
])
def test_run_function_replay_mistakes_are_named(local_user, debug_functions, args, message):
    with pytest.raises(CommandError) as caught:
        call_command("run_function", *args, stdout=io.StringIO())
    assert message in str(caught.value) and caught.value.returncode == 2


def test_a_replay_whose_original_was_deleted_before_it_ran_ends_saying_so(user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    replay = create_session(user, original.function, original.args,
                            origin={"replay_of": original, "replay_options": {"then": "stop"}})
    original.delete()
    made = len(provider_calls)
    run_session(replay.pk)
    replay.refresh_from_db()
    assert replay.status == "error" and "was deleted before it ran" in replay.error and len(provider_calls) == made
