"""On the in-memory layer, a session run by another process (`run_function`, a worker) is still live:
the consumer reads it from the database at a short interval instead of waiting for the heartbeat."""
import asyncio
import threading

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection

from dag.live import broadcast
from dag.models import Session
from dag.recording import write_path
from dag.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 5  # a bound on each message, far above the 0.2 s poll: no timing is asserted
OTHER = "another-host:4242"


@pytest.fixture(autouse=True)
def in_memory_layer_and_a_slow_heartbeat(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 60  # the heartbeat would repair too, but only after a minute
    from channels.layers import channel_layers
    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


@pytest.fixture
def unheard(monkeypatch):
    """Writes as another process makes them: committed, but never published to this process's layer."""
    monkeypatch.setattr(broadcast, "publish", lambda session_id, messages: None)


def run_elsewhere(session_id, steps: int, started: threading.Event) -> None:
    try:
        started.wait(TIMEOUT)
        for index in range(steps):
            node = write_path.create_node(session_id, lease=OTHER, kind="code", name=f"step_{index}")
            write_path.finish_node(node, lease=OTHER, status="completed", output=index)
        write_path.finish_session(session_id, "completed", result=steps, lease=OTHER)
    finally:
        connection.close()


async def test_a_run_in_another_process_reaches_the_stream_without_the_layer(user, unheard):
    session = await asyncio.to_thread(lambda: Session.objects.create(owner=user, function="entry"))
    await asyncio.to_thread(write_path.claim_session, session.pk, worker=OTHER)
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session.pk}/")
    comm.scope["user"] = user
    assert (await comm.connect(timeout=TIMEOUT))[0]
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    assert snapshot["type"] == "snapshot" and snapshot["nodes"] == []
    started = threading.Event()
    writer = threading.Thread(target=run_elsewhere, args=(session.pk, 3, started))
    writer.start()
    started.set()
    nodes, status = {}, None
    while status != "completed" or len(nodes) < 3 or any(n["status"] != "completed" for n in nodes.values()):
        frame = await comm.receive_json_from(timeout=TIMEOUT)
        assert frame["type"] in ("snapshot", "snapshot_more", "heartbeat")
        for node in frame.get("nodes", []):
            nodes[node["id"]] = node
        if frame.get("session"):
            status = frame["session"]["status"]
    await asyncio.to_thread(writer.join, TIMEOUT)
    await comm.disconnect()
    assert sorted(node["name"] for node in nodes.values()) == ["step_0", "step_1", "step_2"]
