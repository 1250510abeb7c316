"""What the broadcaster hands the channel layer: each change encoded once, as a string beside its rev.

The in-memory layer deep-copies every message it is given and Redis packs it, so nested dicts cost
each in proportion to their size; strings cost next to nothing, and one encoding serves every viewer.
"""
import asyncio
import json

import channels.layers

from dag.live import broadcast

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
        await asyncio.to_thread(forwarder.add, "s1", changes)
        deadline = asyncio.get_running_loop().time() + TIMEOUT_S
        while not sent and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(publish_from_a_writer_thread())
    [(group, message)] = sent
    assert group == broadcast.group_name("s1")
    assert message["type"] == broadcast.BATCH_EVENT and message["revs"] == [1, 2]
    assert all(isinstance(text, str) for text in message["items"])  # nothing nested for the layer to copy
    assert [json.loads(text) for text in message["items"]] == [changes[1], changes[0]]
