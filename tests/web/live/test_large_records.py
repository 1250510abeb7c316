"""Large sessions and large records on the live stream: every frame stays under the payload limit, a
record over `NODE_LIMIT` has each of its large values cut to a preview (whichever field holds it), and
a model's usage keeps only a bounded number of numeric counts, so no node can make a session
unviewable."""
import json

import pytest
from channels.db import database_sync_to_async

from dag.live import frames as stream_frames  # `frames` is a local name in these tests
from dag.models import Node, Session
from runtime.messages import clean_usage

from .test_consumers import TIMEOUT, Mirror, communicator, next_frame, record_node

pytestmark = pytest.mark.django_db(transaction=True)

EMOJI = "\U0001F600"  # 12 characters of JSON ("\ud83d\ude00") for one character of text


def node_record(**fields) -> dict:
    """A node record as `Node.as_dict` shapes it, small unless `fields` say otherwise."""
    record = Node(id=7, seq=3, kind="llm", name="ask", rev=9, depth=1).as_dict()
    record.update(fields)
    return record


def live_frames(items: list[dict]) -> list[str]:
    return stream_frames.encoded_live_frames([item["rev"] for item in items],
                                             [stream_frames.encode_item(item) for item in items])


async def test_a_large_snapshot_is_split_into_frames_under_the_payload_limit(user, session):
    def many_nodes():
        Node.objects.bulk_create([Node(session=session, seq=i, kind="code", name="w", rev=i + 1,
                                       input={"text": "x" * 400}) for i in range(3000)])
        Session.objects.filter(pk=session.pk).update(rev=3000, node_count=3000)

    await database_sync_to_async(many_nodes)()
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror, sizes = Mirror(), []
    while mirror.rev is None:
        output = await comm.receive_output(timeout=TIMEOUT)
        sizes.append(len(output["text"]))
        mirror.apply(json.loads(output["text"]))
    await comm.disconnect()
    assert mirror.kinds[0] == "snapshot" and mirror.kinds[1:] == ["snapshot_more"] * (len(sizes) - 1)
    assert len(sizes) >= 2 and max(sizes) <= stream_frames.FRAME_LIMIT
    assert len(mirror.nodes) == 3000 and mirror.rev == 3000


async def test_a_huge_node_is_streamed_with_its_big_fields_cut(user, session):
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    node = await database_sync_to_async(record_node)(session.pk, output="y" * 2_000_000, input={"q": 1})
    text = await next_frame(comm)
    await comm.disconnect()
    assert len(text) <= stream_frames.FRAME_LIMIT
    streamed = json.loads(text)["node"]
    assert streamed["id"] == node.pk and streamed["truncated"] == ["output"]
    assert streamed["input"] == {"q": 1} and streamed["output"].startswith("yyyy")


async def test_a_node_with_a_huge_usage_does_not_keep_its_session_from_opening(user, session):
    # Recorded as it is (an import, or a recorder of one's own): the stream must cope, not the writer.
    usage = {"input_tokens": 1, "output_tokens": 1, "extra": "A" * 1_500_000}
    node = await database_sync_to_async(record_node)(session.pk, kind="llm", usage=usage, publish=False)
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    assert output["type"] == "websocket.send" and len(output["text"]) <= stream_frames.FRAME_LIMIT
    snapshot = json.loads(output["text"])
    assert snapshot["more"] is False
    [streamed] = snapshot["nodes"]
    assert (streamed["id"], streamed["truncated"]) == (node.pk, ["usage"])
    # A preview of its JSON (PostgreSQL's jsonb keeps the keys in an order of its own).
    assert streamed["usage"].startswith('{"') and streamed["usage"].endswith("more characters)")


@pytest.mark.parametrize("field", ["usage", "model", "name", "render_range", "refusal", "expose"])
def test_any_large_field_of_a_node_is_cut(field):
    record = node_record(**{field: "z" * 300_000})
    streamed = json.loads(stream_frames.fit(record))
    assert streamed["truncated"] == [field]
    assert len(json.dumps(streamed[field])) <= stream_frames.PREVIEW_CHARS + 64
    assert {key: streamed[key] for key in ("id", "seq", "rev", "kind")} == {"id": 7, "seq": 3, "rev": 9, "kind": "llm"}


def test_a_node_whose_every_field_is_large_and_hard_to_encode_still_fits():
    # Each character of these takes 12 in JSON: a preview of 2,000 characters would take 24,000.
    record = {key: EMOJI * 100_000 if isinstance(value, (str, type(None))) else value
              for key, value in node_record().items()}
    record["input"] = {"text": '"' * 100_000}  # quotes double when a JSON text is quoted again
    text = stream_frames.fit(record)
    assert len(text) <= stream_frames.NODE_LIMIT
    streamed = json.loads(text)
    assert "input" in streamed["truncated"] and "name" in streamed["truncated"]
    assert all(len(json.dumps(streamed[key])) <= stream_frames.PREVIEW_CHARS + 64 for key in streamed["truncated"])
    frames = stream_frames.snapshot_frames(record, [record] * 3, 9, None, now="t")
    assert all(len(frame) <= stream_frames.FRAME_LIMIT for frame in frames)


def test_a_record_of_too_many_large_fields_keeps_what_places_it():
    record = {**node_record(), **{f"field_{index}": "w" * 3000 for index in range(500)}}
    text = stream_frames.fit(record)
    assert len(text) <= stream_frames.NODE_LIMIT
    streamed = json.loads(text)
    assert streamed["truncated"] == ["*"]
    assert {key: streamed[key] for key in ("id", "seq", "rev", "name")} == {"id": 7, "seq": 3, "rev": 9, "name": "ask"}


def test_a_session_with_a_huge_model_name_is_cut_too():
    session = Session(function="f", args={}, model="m" * 500_000).as_dict()
    [frame] = stream_frames.snapshot_frames(session, [], 0, None, now="t")
    assert len(frame) <= stream_frames.FRAME_LIMIT
    assert json.loads(frame)["session"]["truncated"] == ["model"]
    live = json.loads(stream_frames.encode_item({"type": "session", "rev": 1, "session": session}))
    assert live["session"]["truncated"] == ["model"]


def test_a_large_batch_is_split_into_contiguous_batches_under_the_limit():
    items = [{"type": "node", "rev": rev, "node": {"id": rev, "rev": rev, "output": "z" * 150_000}}
             for rev in range(1, 11)]
    texts = live_frames(items)
    frames = [json.loads(text) for text in texts]
    assert len(frames) >= 2
    assert all(len(text) <= stream_frames.FRAME_LIMIT for text in texts)
    assert [item["rev"] for frame in frames for item in frame["items"]] == list(range(1, 11))
    assert all(frame["type"] == "batch" and frame["rev"] == frame["items"][-1]["rev"] for frame in frames)


def test_one_change_is_sent_as_itself():
    [text] = live_frames([{"type": "node", "rev": 4, "node": {"id": 1, "rev": 4}}])
    assert json.loads(text) == {"type": "node", "rev": 4, "node": {"id": 1, "rev": 4}}


# --- a model's usage ---------------------------------------------------------------------------------

def test_usage_keeps_the_token_counts_as_before():
    assert clean_usage({"input_tokens": 5, "output_tokens": 2}) == {"input_tokens": 5, "output_tokens": 2}
    assert clean_usage({"input_tokens": "n/a", "output_tokens": -5}) == {"input_tokens": 0, "output_tokens": 0}
    assert clean_usage({"input_tokens": True, "output_tokens": 1.5}) == {"input_tokens": 0, "output_tokens": 0}
    assert clean_usage(None) == clean_usage("text") == {"input_tokens": 0, "output_tokens": 0}


def test_usage_keeps_only_other_counts_that_are_finite_numbers():
    usage = {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 4, "cost": 0.25,
             "note": "A" * 1_500_000, "details": {"cached_tokens": 4}, "flag": True, "none": None,
             "inf": float("inf"), "nan": float("nan"), "huge": 2 ** 64, 7: 1, "n" * 65: 1, "n" * 64: 3}
    assert clean_usage(usage) == {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 4, "cost": 0.25,
                                  "n" * 64: 3}


def test_usage_keeps_at_most_32_other_counts():
    usage = {"input_tokens": 1, "output_tokens": 1, **{f"count_{index}": index for index in range(1000)}}
    cleaned = clean_usage(usage)
    assert len(cleaned) == 34
    assert [key for key in cleaned if key.startswith("count_")] == [f"count_{index}" for index in range(32)]


def test_a_usage_stays_whole_when_cutting_the_large_fields_is_enough():
    # The page adds up each call's usage: cut to a preview for an output's sake, its tokens would vanish.
    usage = {"input_tokens": 5, "output_tokens": 7, **{f"count_{i:02}_{'x' * 55}": i for i in range(32)}}
    assert clean_usage(usage) == usage and len(json.dumps(usage)) > stream_frames.PREVIEW_CHARS
    record = node_record(output="y" * 300_000, usage=usage)
    streamed = json.loads(stream_frames.fit(record))
    assert streamed["truncated"] == ["output"] and streamed["usage"] == usage
