"""Sockets open longer than the channel layer keeps a group membership (its `group_expiry`, a day) go on
hearing live changes: they join their groups again at their heartbeat. And a stream closed because its
session is gone sends nothing more, whatever is still on its way."""
import types

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from dag.live import broadcast, layer_outage
from dag.live.frames import encode_item
from dag.models import Session
from dag.recording import write_path

from .test_consumers import TIMEOUT, communicator, record_node
from .test_session_list_stream import connected, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def a_day_later(monkeypatch):
    """Moves the layers' clock (which dates memberships) past their group expiry, when called; and
    lets the sockets renew their groups at every heartbeat."""
    import channels.layers
    import channels_redis.core

    monkeypatch.setattr(layer_outage, "GROUP_RENEW_S", 0)
    offset = {"s": 0.0}
    real = channels.layers.time
    clock = types.SimpleNamespace(time=lambda: real.time() + offset["s"])
    for module in (channels.layers, channels_redis.core):
        monkeypatch.setattr(module, "time", clock)

    def move():
        offset["s"] += get_channel_layer().group_expiry + 60
    return move


async def test_a_stream_open_for_more_than_a_day_still_hears_live_changes(user, settings, a_day_later):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 0.2
    session = await database_sync_to_async(Session.objects.create)(owner=user, function="f", args={})
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    a_day_later()
    while (await comm.receive_json_from(timeout=TIMEOUT))["type"] != "heartbeat":
        pass  # the beat that renewed the groups, once the day had passed
    await in_thread(record_node, session.pk, name="after a day", status="running")
    while (message := await comm.receive_json_from(timeout=TIMEOUT))["type"] == "heartbeat":
        pass
    # Live, not a repair snapshot the heartbeat read from the database because the change never came.
    assert message["type"] == "node" and message["node"]["name"] == "after a day"
    await comm.disconnect()


async def test_a_list_open_for_more_than_a_day_still_hears_its_rows(user, settings, a_day_later, monkeypatch):
    import asyncio

    settings.OPENPROGRAM_WS_HEARTBEAT_S = 0.2
    settings.OPENPROGRAM_LIST_UPDATE_S = 0
    renewed = asyncio.Event()
    real_renew = layer_outage.ClosesOnLayerOutage.renew_groups

    async def noted_renew(self):
        await real_renew(self)
        if moved:
            renewed.set()

    moved = False
    monkeypatch.setattr(layer_outage.ClosesOnLayerOutage, "renew_groups", noted_renew)
    comm = await connected(user)
    a_day_later()
    moved = True
    await asyncio.wait_for(renewed.wait(), TIMEOUT)
    session = await in_thread(write_path.queue_session, user, function="f", args={})
    message = await comm.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "row" and message["row"]["id"] == str(session.pk)
    await comm.disconnect()


async def test_a_stream_closed_for_a_deleted_session_sends_nothing_more(user, settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600
    session = await database_sync_to_async(Session.objects.create)(owner=user, function="f", args={})
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    # Deleted with its notice to the stream lost (the write path tells it: test_delete_sessions.py).
    await database_sync_to_async(Session.objects.filter(pk=session.pk).delete)()

    def late(rev):
        item = {"type": "node", "rev": rev, "node": {"id": 999, "seq": 0, "rev": rev, "name": "late"}}
        return broadcast.batch_event(rev, rev, encode_item(item))

    group = broadcast.group_name(session.pk)
    await get_channel_layer().group_send(group, late(2))  # a gap: the repair finds the session gone
    closed = await comm.receive_output(timeout=TIMEOUT)
    assert (closed["type"], closed["code"]) == ("websocket.close", 4404)
    await get_channel_layer().group_send(group, late(1))  # a change of it still on its way
    await get_channel_layer().group_send(group, late(3))
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()
