"""Replays and forks (issue 40) served from a recording: a fork of a run whose branches ran in parallel
(the branches of a replay may reach their calls in another order than the recording's, and a call
recorded after the fork point in one branch must not turn the whole replay live before the fork point
in another branch is reached), and recorded tool calls replayed as the model made them."""
from runtime import agentic_function, function
from runtime.providers import ScriptedProvider
from runtime.providers.replay import RecordedCall, ReplayProvider, ReplayRuntime


@agentic_function(name="first_branch", register_globally=False)
def first_branch(runtime=None) -> str:
    """Ask the model twice."""
    return runtime.llm("one") + " " + runtime.llm("two")


@agentic_function(name="second_branch", register_globally=False)
def second_branch(runtime=None) -> str:
    """Ask the model once."""
    return runtime.llm("three")


# Recorded: first_branch's two calls (#1, #2), then second_branch's (#3).
TWO_BRANCHES = [RecordedCall("first_branch", 1, {"text": "recorded-1"}),
                RecordedCall("first_branch", 2, {"text": "recorded-2"}),
                RecordedCall("second_branch", 3, {"text": "recorded-3"})]


def test_a_later_call_of_another_branch_answered_first_leaves_the_fork_point_in_place():
    # The fork edits #2; the replay meets second_branch's call first, as a parallel run may.
    live = ScriptedProvider(["live-3"])
    runtime = ReplayRuntime(ReplayProvider(TWO_BRANCHES, then="live", fork_at=2, fork_reply="EDITED"), provider=live)
    assert second_branch(runtime=runtime) == "live-3"  # after the fork point: asked live
    assert first_branch(runtime=runtime) == "recorded-1 EDITED"  # before it: replayed; at it: the edit
    assert len(live.requests) == 1


def test_a_sequential_fork_replays_before_the_point_and_goes_live_after_it():
    live = ScriptedProvider(["live-3"])
    replay = ReplayProvider(TWO_BRANCHES, then="live", fork_at=2, fork_reply="EDITED")
    runtime = ReplayRuntime(replay, provider=live)
    assert first_branch(runtime=runtime) == "recorded-1 EDITED"
    assert replay.live and second_branch(runtime=runtime) == "live-3"


def test_a_call_whose_arguments_did_not_parse_is_replayed_unparsed_and_again_not_run():
    ran = []

    @function(name="ping", register_globally=False)
    def ping(note: str = "") -> str:
        """Ping."""
        ran.append(note)
        return "pong"

    @agentic_function(name="pinger", register_globally=False)
    def pinger(runtime=None) -> str:
        """Ping once."""
        return runtime.exec("ping", tools=[ping])

    # As ToolCall.as_dict recorded it: the model's arguments were not JSON, so the call was not run.
    malformed = {"id": "c1", "name": "ping", "arguments": {}, "raw_arguments": "{note: hi",
                 "arguments_error": "arguments are not valid JSON (Expecting property name)"}
    recording = [RecordedCall("pinger", 1, {"text": "", "tool_calls": [malformed]}),
                 RecordedCall("pinger", 2, {"text": "done"})]
    live = ScriptedProvider([])
    assert pinger(runtime=ReplayRuntime(ReplayProvider(recording), provider=live)) == "done"
    assert ran == [] and live.requests == []
