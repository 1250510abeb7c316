"""What the broadcaster hands the channel layer: runs of contiguous revisions, each change encoded once,
joined into one string.

The in-memory layer deep-copies every message it is given, element by element, and Redis packs it, so
nested dicts and lists cost each in proportion to their length; one string costs next to nothing, and
one encoding serves every viewer.
"""
import asyncio
import json
import time

import channels.layers
import pytest

from dag.live import broadcast, frames

# A bound on the wait, not a measure.
TIMEOUT_S = 30


def test_a_layer_message_carries_each_change_encoded_once_in_rev_order(monkeypatch):
    sent = []

    class RecordingLayer:
        async def group_send(self, group, message):
            sent.append((group, message))

    monkeypatch.setattr(channels.layers, "get_channel_layer", lambda: RecordingLayer())
    forwarder = broadcast.LayerForwarder(window_s=0)
    node = {"id": 7, "name": "step", "status": "completed", "input": {"i": [1, 2]}, "output": None}
    changes = [{"type": "node", "rev": 2, "node": node}, {"type": "node", "rev": 1, "node": {**node, "id": 6}}]

    async def publish_from_a_writer_thread():
        forwarder.bind_loop(asyncio.get_running_loop())
        await asyncio.to_thread(forwarder.add, "s1", lambda: frames.encoded_runs(changes))
        deadline = asyncio.get_running_loop().time() + TIMEOUT_S
        while not sent and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(publish_from_a_writer_thread())
    [(group, message)] = sent
    assert group == broadcast.group_name("s1")
    assert message["type"] == broadcast.BATCH_EVENT and (message["first"], message["last"]) == (1, 2)
    assert isinstance(message["items"], str)  # nothing nested for the layer to copy
    assert [json.loads(text) for text in message["items"].split("\n")] == [changes[1], changes[0]]


def change(rev: int, **node) -> dict:
    return {"type": "node", "rev": rev, "node": {"id": rev, "seq": rev, "name": "step\nwith a newline", **node}}


def test_changes_become_runs_of_contiguous_revisions_whatever_order_they_come_in():
    runs = frames.encoded_runs([change(5), change(2), change(3), change(7), change(6)])
    assert [(first, last) for first, last, _ in runs] == [(2, 3), (5, 7)]
    # A newline in a value is escaped by the JSON, so the separator only stands between changes.
    assert [[json.loads(text)["rev"] for text in joined.split("\n")] for _, _, joined in runs] == [[2, 3], [5, 6, 7]]


def test_runs_that_continue_each_other_become_one_message_of_at_most_the_item_limit(monkeypatch):
    monkeypatch.setattr(broadcast, "MAX_ITEMS_PER_MESSAGE", 4)
    runs = frames.encoded_runs([change(rev) for rev in (1, 2, 3, 4, 5, 6, 9)])
    pieces = [frames.encoded_runs([change(rev) for rev in revs])[0] for revs in ((4, 5, 6), (1, 2, 3), (9,))]
    events = broadcast.batch_events(pieces)
    # 1-3 and 4-6 continue each other but would make 6 changes: two messages; 9 follows a gap.
    assert [(event["first"], event["last"]) for event in events] == [(1, 3), (4, 6), (9, 9)]
    assert "\n".join(event["items"] for event in events) == "\n".join(joined for _, _, joined in runs)
    monkeypatch.setattr(broadcast, "MAX_ITEMS_PER_MESSAGE", 500)
    assert [(event["first"], event["last"]) for event in broadcast.batch_events(pieces)] == [(1, 6), (9, 9)]


def test_a_run_longer_than_the_item_limit_goes_in_messages_within_it(monkeypatch):
    monkeypatch.setattr(broadcast, "MAX_ITEMS_PER_MESSAGE", 4)
    [run] = frames.encoded_runs([change(rev) for rev in range(1, 11)])
    events = broadcast.batch_events([run])
    assert [(event["first"], event["last"]) for event in events] == [(1, 4), (5, 8), (9, 10)]
    assert [len(event["items"].split("\n")) for event in events] == [4, 4, 2]
    assert "\n".join(event["items"] for event in events) == run[2]


def test_a_viewer_forwards_what_a_run_holds_after_what_it_has_seen():
    _, _, joined = frames.encoded_runs([change(rev) for rev in range(3, 8)])[0]
    assert [json.loads(text)["rev"] for text in frames.run_after(3, joined, 5).split("\n")] == [6, 7]
    assert frames.run_after(3, joined, 2) == joined
    [frame] = frames.run_frames(6, 7, frames.run_after(3, joined, 5))
    batch = json.loads(frame)
    assert batch["type"] == "batch" and batch["rev"] == 7 and [item["rev"] for item in batch["items"]] == [6, 7]
    [single] = frames.run_frames(7, 7, frames.run_after(3, joined, 6))
    assert json.loads(single) == change(7)


def test_a_run_too_large_for_one_frame_goes_in_several(monkeypatch):
    monkeypatch.setattr(frames, "FRAME_LIMIT", 400)
    _, _, joined = frames.encoded_runs([change(rev, output="x" * 100) for rev in range(1, 11)])[0]
    sent = [json.loads(frame) for frame in frames.run_frames(1, 10, joined)]
    assert len(sent) > 1 and all(len(frame) <= 400 for frame in frames.run_frames(1, 10, joined))
    assert [item["rev"] for frame in sent for item in frame["items"]] == list(range(1, 11))
    assert all(frame["rev"] == frame["items"][-1]["rev"] for frame in sent)


def test_a_session_change_is_found_at_the_start_of_a_change_only():
    nodes = frames.encoded_runs([change(1, output={"type": "session"}), change(2)])[0][2]
    assert '{"type":"session"' in nodes and not frames.run_changes_session(nodes)
    session = {"type": "session", "rev": 3, "session": {"id": "s", "status": "running"}}
    assert frames.run_changes_session(frames.encoded_runs([change(1), change(2), session])[0][2])
    assert frames.run_changes_session(frames.encoded_runs([session])[0][2])


@pytest.fixture
def sent(monkeypatch) -> list[dict]:
    """The layer messages the forwarders send, in order."""
    messages = []

    class RecordingLayer:
        async def group_send(self, group, message):
            messages.append(message)

    monkeypatch.setattr(channels.layers, "get_channel_layer", lambda: RecordingLayer())
    return messages


async def _until_sent(sent: list, count: int = 1) -> None:
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    while len(sent) < count and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)


def _waiting_for_the_window() -> broadcast.LayerForwarder:
    """A forwarder whose next flush would wait out a window far longer than any test's bound: only
    what goes at once can be sent in time."""
    forwarder = broadcast.LayerForwarder(window_s=3600)
    forwarder._last_flush = time.monotonic()  # a flush went just now
    return forwarder


def test_a_runs_end_goes_at_once_with_what_waits_for_the_window(sent):
    forwarder = _waiting_for_the_window()
    ended = {"type": "session", "rev": 3, "session": {"id": "s1", "status": "completed"}}

    async def publish_a_run_from_a_writer_thread():
        forwarder.bind_loop(asyncio.get_running_loop())
        await asyncio.to_thread(forwarder.add, "s1", lambda: frames.encoded_runs([change(1), change(2)]))
        await asyncio.sleep(0.05)
        assert not sent  # the changes wait for the window
        await asyncio.to_thread(forwarder.add, "s1", lambda: frames.encoded_runs([ended]),
                                at_once=broadcast.session_list_notify.ends_run([ended]))
        await _until_sent(sent)

    asyncio.run(publish_a_run_from_a_writer_thread())
    assert [(message["first"], message["last"]) for message in sent] == [(1, 3)]


def test_a_runs_end_pending_before_the_window_starts_is_not_kept_waiting(sent):
    forwarder = _waiting_for_the_window()
    ended = {"type": "session", "rev": 2, "session": {"id": "s1", "status": "cancelled"}}

    async def both_added_before_the_flush_runs():
        forwarder.bind_loop(asyncio.get_running_loop())
        # Added from this loop's own thread, the flush task cannot start before both are pending.
        forwarder.add("s1", lambda: frames.encoded_runs([change(1)]))
        forwarder.add("s1", lambda: frames.encoded_runs([ended]), at_once=True)
        await _until_sent(sent)

    asyncio.run(both_added_before_the_flush_runs())
    assert [(message["first"], message["last"]) for message in sent] == [(1, 2)]
