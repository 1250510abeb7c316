"""The live DAG stream `ws/sessions/{id}/`: snapshot, live order, replay, gap repair, access control.

Runs on whichever channel layer the settings choose (in-memory by default, Redis with REDIS_URL).
Changes are written the way the recorder writes them: bump the session's rev, stamp the row, publish
after commit.
"""
import asyncio
import json
import threading

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection, transaction
from django.test import Client

from dag.live import broadcast, frames
from dag.models import Node, Session
from dag.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

# A bound on each wait, not a measure: a busy machine (the suite runs beside a CPU load) may take seconds.
TIMEOUT = 30


# --- writing changes like the recorder ------------------------------------------------------------

def record_node(session_id, node_id=None, *, publish=True, **fields) -> Node:
    """Create (node_id None) or update one node: one revision, one message after commit."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        session.rev += 1
        if node_id is None:
            node = Node(session=session, seq=session.node_count, kind="code", name="step")
            session.node_count += 1
        else:
            node = Node.objects.get(pk=node_id)
        for key, value in fields.items():
            setattr(node, key, value)
        node.rev = session.rev
        node.save()
        session.save(update_fields=["rev", "node_count"])
        message = {"type": "node", "rev": session.rev, "node": node.as_dict()}
        if publish:
            transaction.on_commit(lambda: broadcast.publish(str(session_id), [message]))
    return node


def record_session(session_id, **fields) -> Session:
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        session.rev += 1
        for key, value in fields.items():
            setattr(session, key, value)
        session.save()
        message = {"type": "session", "rev": session.rev, "session": session.as_dict()}
        transaction.on_commit(lambda: broadcast.publish(str(session_id), [message]))
    return session


def run_nodes(session_id, count: int) -> None:
    """A run: `count` nodes entered (running) and exited (completed), then the session completed."""
    record_session(session_id, status="running")
    for index in range(count):
        node = record_node(session_id, name=f"step_{index}", status="running", input={"i": index})
        record_node(session_id, node.pk, status="completed", output=index * 2)
    record_session(session_id, status="completed", result=count)


# --- a client that applies the protocol and checks it ---------------------------------------------

class Mirror:
    """What a browser keeps: nodes by id at their newest rev, the session, and the last rev seen.

    Asserts the protocol: live changes arrive in rev order without gaps after a snapshot.
    """

    def __init__(self, rev=None):
        self.rev = rev
        self.session = None
        self.nodes = {}
        self.kinds = []
        self.snapshot_open = False
        self.full_snapshot = False

    def apply(self, message):
        self.kinds.append(message["type"])
        if message["type"] == "snapshot":
            assert not self.snapshot_open, "a snapshot began before the previous one ended"
            self.full_snapshot = message["since_rev"] is None
            if self.full_snapshot:
                self.nodes = {}
            self.session = message["session"]
            self._snapshot_part(message)
        elif message["type"] == "snapshot_more":
            assert self.snapshot_open, "snapshot_more without a snapshot"
            self._snapshot_part(message)
        elif message["type"] == "batch":
            for item in message["items"]:
                self.apply_change(item)
        elif message["type"] == "heartbeat":
            assert message["rev"] == self.rev
        else:
            self.apply_change(message)

    def _snapshot_part(self, message):
        for node in message["nodes"]:
            self._keep(node)
        self.snapshot_open = message["more"]
        if not message["more"]:  # the revision counts only once the whole snapshot is in
            # A full snapshot's is the one to go on from, even below the client's (a restored database).
            full = self.rev is None or self.full_snapshot
            self.rev = message["rev"] if full else max(self.rev, message["rev"])

    def apply_change(self, item):
        assert not self.snapshot_open, "a live change inside a snapshot"
        assert item["rev"] == self.rev + 1, f"gap or disorder: rev {item['rev']} after {self.rev}"
        self.rev = item["rev"]
        if item["type"] == "node":
            self._keep(item["node"])
        else:
            self.session = item["session"]

    def _keep(self, node):
        known = self.nodes.get(node["id"])
        if known is None or node["rev"] >= known["rev"]:
            self.nodes[node["id"]] = node


async def read_until(communicator, mirror, rev):
    while mirror.rev is None or mirror.rev < rev:
        mirror.apply(await communicator.receive_json_from(timeout=TIMEOUT))
    return mirror


def run_and_close_connection(function, *args):
    """Run `function` in a worker thread, closing the thread's database connection afterwards (an open
    one would keep PostgreSQL from dropping the test database)."""
    try:
        return function(*args)
    finally:
        connection.close()


async def next_frame(communicator) -> str:
    """The next frame's text that is not a heartbeat (those come every 0.2 s here)."""
    while True:
        text = (await communicator.receive_output(timeout=TIMEOUT))["text"]
        if json.loads(text)["type"] != "heartbeat":
            return text


def database_state(session_id):
    session = Session.objects.get(pk=session_id)
    return session.rev, session.status, {node.id: node.as_dict() for node in Node.objects.filter(session=session)}


# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def fast_heartbeat(settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 0.2


def communicator(user, session_id, query=""):
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session_id}/{query}")
    comm.scope["user"] = user
    return comm


async def close_code(comm):
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected  # accepted, so the close code reaches a browser
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()  # let the consumer finish, so nothing waits on the layer after the test
    assert output["type"] == "websocket.close"
    return output["code"]


# --- snapshot, live, replay ----------------------------------------------------------------------

async def test_snapshot_has_the_session_and_all_nodes_in_seq_order(user, session):
    await database_sync_to_async(run_nodes)(session.pk, 3)
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert snapshot["type"] == "snapshot"
    assert snapshot["since_rev"] is None
    assert snapshot["rev"] == 8  # running, 3 x (enter, exit), completed
    assert snapshot["session"]["status"] == "completed"
    assert [node["seq"] for node in snapshot["nodes"]] == [0, 1, 2]
    assert all(node["status"] == "completed" for node in snapshot["nodes"])


async def test_live_changes_arrive_in_rev_order_without_gaps(user, session, settings):
    # No heartbeat during the run: on a busy machine one could find the database ahead of messages still
    # in flight and send a (correct, but here unasked-for) repair snapshot.
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    assert mirror.rev == 0 and mirror.nodes == {}
    await database_sync_to_async(run_nodes)(session.pk, 40)  # 82 changes, published one by one
    await read_until(comm, mirror, 82)
    await comm.disconnect()
    rev, status, nodes = await database_sync_to_async(database_state)(session.pk)
    # Every live change came in rev order, each right after the one before (Mirror.apply_change asserts
    # it); a repair snapshot, should the layer ever lose one, is allowed: what counts is the end state.
    assert (mirror.rev, mirror.session["status"], mirror.nodes) == (rev, status, nodes)
    live = [kind for kind in mirror.kinds if kind not in ("snapshot", "snapshot_more", "heartbeat")]
    assert live and mirror.kinds[0] == "snapshot"


async def test_since_rev_replays_only_later_changes(user, session):
    await database_sync_to_async(run_nodes)(session.pk, 3)  # node 0: revs 2-3, node 1: 4-5, node 2: 6-7
    comm = communicator(user, session.pk, "?since_rev=5")
    await comm.connect(timeout=TIMEOUT)
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert snapshot["since_rev"] == 5
    assert snapshot["rev"] == 8
    assert [node["name"] for node in snapshot["nodes"]] == ["step_2"]
    assert snapshot["session"]["status"] == "completed"


async def test_since_rev_beyond_the_session_sends_everything(user, session):
    await database_sync_to_async(run_nodes)(session.pk, 2)
    comm = communicator(user, session.pk, "?since_rev=999")
    await comm.connect(timeout=TIMEOUT)
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert snapshot["since_rev"] is None and len(snapshot["nodes"]) == 2


async def test_after_a_snapshot_below_its_own_revision_the_client_goes_on_from_the_servers(user, session):
    # The client knows revision 100, the server's database (restored from a backup, say) only 2: the
    # full snapshot it gets is the truth, and the changes after it count from its revision.
    await database_sync_to_async(run_nodes)(session.pk, 0)  # running, completed: rev 2
    comm = communicator(user, session.pk, "?since_rev=100")
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror(rev=100)
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    assert (mirror.kinds, mirror.rev) == (["snapshot"], 2)
    node = await database_sync_to_async(record_node)(session.pk, name="after the restore")  # rev 3
    await read_until(comm, mirror, 3)
    await comm.disconnect()
    assert mirror.nodes[node.pk]["name"] == "after the restore"


async def test_reconnect_mid_run_ends_with_exactly_the_final_state(user, session):
    writer = threading.Thread(target=run_and_close_connection, args=(run_nodes, session.pk, 150))
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    writer.start()
    await read_until(comm, mirror, mirror.rev + 20)
    await comm.disconnect()

    # The run goes on while nobody listens; the client comes back with the last rev it saw.
    await asyncio.sleep(0.05)
    comm = communicator(user, session.pk, f"?since_rev={mirror.rev}")
    await comm.connect(timeout=TIMEOUT)
    await read_until(comm, mirror, 1)
    await asyncio.to_thread(writer.join, TIMEOUT)
    assert not writer.is_alive()
    final_rev = 2 + 150 * 2
    await read_until(comm, mirror, final_rev)
    await comm.disconnect()
    rev, status, nodes = await database_sync_to_async(database_state)(session.pk)
    assert rev == final_rev
    assert (mirror.rev, mirror.session["status"], mirror.nodes) == (rev, status, nodes)


async def test_a_lost_message_is_repaired_from_the_database(user, session):
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    lost = await database_sync_to_async(record_node)(session.pk, name="lost", publish=False)  # rev 1
    await database_sync_to_async(record_node)(session.pk, name="seen")  # rev 2, published
    await read_until(comm, mirror, 2)
    await comm.disconnect()
    assert mirror.nodes[lost.pk]["name"] == "lost"
    assert "snapshot" in mirror.kinds[1:]  # the gap was filled by a database read


async def test_a_run_overlapping_what_was_sent_is_forwarded_from_the_next_revision(user, session):
    earlier = [await database_sync_to_async(record_node)(session.pk, name=f"before_{i}", publish=False)
               for i in range(3)]  # revs 1-3: in the snapshot
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    assert mirror.rev == 3
    later = [await database_sync_to_async(record_node)(session.pk, name=f"after_{i}", publish=False)
             for i in range(2)]  # revs 4-5
    changes = [{"type": "node", "rev": node.rev, "node": node.as_dict()} for node in earlier[1:] + later]
    [(first, last, joined)] = frames.encoded_runs(changes)
    await get_channel_layer().group_send(broadcast.group_name(session.pk), broadcast.batch_event(first, last, joined))
    frame = await comm.receive_json_from(timeout=TIMEOUT)
    mirror.apply(frame)  # asserts each change is the next revision: none of the snapshot's again
    await comm.disconnect()
    assert frame["type"] == "batch" and [item["node"]["name"] for item in frame["items"]] == ["after_0", "after_1"]
    assert "snapshot" not in mirror.kinds[1:]  # no gap: nothing re-read


async def test_changes_in_the_former_layer_format_are_forwarded_too(user, session):
    # A server not yet upgraded (a rolling deploy) lists changes one by one, each with its rev.
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    nodes = [await database_sync_to_async(record_node)(session.pk, name=f"listed_{i}", publish=False)
             for i in range(3)]
    items = [frames.encode_item({"type": "node", "rev": node.rev, "node": node.as_dict()}) for node in nodes]
    await get_channel_layer().group_send(broadcast.group_name(session.pk), {
        "type": broadcast.BATCH_EVENT, "revs": [node.rev for node in nodes][::-1], "items": items[::-1]})
    frame = await comm.receive_json_from(timeout=TIMEOUT)
    mirror.apply(frame)  # in rev order, none missing
    await comm.disconnect()
    assert [item["node"]["name"] for item in frame["items"]] == ["listed_0", "listed_1", "listed_2"]


async def test_the_heartbeat_repairs_a_lost_last_message(user, session):
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    node = await database_sync_to_async(record_node)(session.pk, name="tail", status="completed", publish=False)
    await read_until(comm, mirror, 1)  # no later message reveals the gap; the heartbeat does
    heartbeat = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert mirror.nodes[node.pk]["status"] == "completed"
    assert (heartbeat["type"], heartbeat["rev"]) == ("heartbeat", 1)


async def test_the_snapshot_and_each_heartbeat_say_the_servers_time(user, session, monkeypatch):
    # A browser times a running call from its start, stamped by the server's clock: it needs that
    # clock's now, since its own may be off by hours.
    from datetime import datetime, timezone

    from dag.live import consumers
    moments = [datetime(2026, 12, 2, 8, 0, 0, 250000, tzinfo=timezone.utc),
               datetime(2026, 12, 2, 8, 0, 5, tzinfo=timezone.utc)]  # the snapshot's, then every heartbeat's
    monkeypatch.setattr(consumers.clock, "now", lambda: moments.pop(0) if len(moments) > 1 else moments[0])
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    heartbeat = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert (snapshot["type"], snapshot["now"]) == ("snapshot", "2026-12-02T08:00:00.250000+00:00")
    assert (heartbeat["type"], heartbeat["now"]) == ("heartbeat", "2026-12-02T08:00:05+00:00")


async def test_a_burst_is_coalesced_into_one_batch(user, session):
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    nodes = await database_sync_to_async(
        lambda: [record_node(session.pk, name=f"n{i}", publish=False) for i in range(100)])()
    # Published without yielding to the loop: the forwarder must gather them into one layer message.
    for node in nodes:
        broadcast.publish(str(session.pk), [{"type": "node", "rev": node.rev, "node": node.as_dict()}])
    message = json.loads(await next_frame(comm))
    await comm.disconnect()
    assert message["type"] == "batch"
    assert [item["rev"] for item in message["items"]] == list(range(1, 101))
    assert message["rev"] == 100


async def test_a_batch_is_forwarded_without_the_database_connection_hop(user, session, monkeypatch, settings):
    # Channels closes stale database connections before each handler, by a hop to its sync thread and
    # back; a live batch reads nothing (a gap's repair goes through database_sync_to_async, which does
    # its own), and a busy run sends tens of them a second to every viewer.
    import channels.consumer
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600  # a heartbeat could find the node first, and resend it
    hops = []
    real = channels.consumer.aclose_old_connections

    async def counted():
        hops.append(1)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    assert hops == [1]  # the connect went through Channels' own dispatch, hop included
    await database_sync_to_async(record_node)(session.pk, name="n")  # published as the writer does
    message = json.loads(await next_frame(comm))
    await comm.disconnect()
    assert message["type"] == "node" and message["node"]["name"] == "n"
    assert hops == [1, 1]  # the disconnect's; none for the batch


def test_in_process_listeners_still_receive_every_message(session):
    received = []

    def listener(session_id, messages):
        received.append((session_id, [m["rev"] for m in messages]))

    broadcast.subscribe(listener)
    try:
        record_node(session.pk, name="a")
        record_session(session.pk, status="running")
    finally:
        broadcast.unsubscribe(listener)
    record_node(session.pk, name="after")
    assert received == [(str(session.pk), [1]), (str(session.pk), [2])]


@pytest.mark.parametrize("function, args, ends", [
    ("wiki_agent", {"question": "How does the recursion guard work?"}, "completed"),
    ("runaway_agent", {"task": "Summarise the notes"}, "error"),  # the depth ceiling ends the runaway
])
async def test_a_real_run_streams_exactly_what_it_recorded(user, monkeypatch, function, args, ends):
    """The whole path: executor entry point, recorder, revisions, broadcast, layer, consumer."""
    from dag.runs.lifecycle import run_session

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENPROGRAM_MODEL"):
        monkeypatch.delenv(name, raising=False)  # the offline simulated model
    session = await database_sync_to_async(Session.objects.create)(owner=user, function=function, args=args)
    comm = communicator(user, session.pk)
    await comm.connect(timeout=TIMEOUT)
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    await asyncio.to_thread(run_and_close_connection, run_session, session.pk)
    rev, status, nodes = await database_sync_to_async(database_state)(session.pk)
    await read_until(comm, mirror, rev)
    await comm.disconnect()
    assert status == ends and len(nodes) > 2
    assert (mirror.rev, mirror.session["status"], mirror.nodes) == (rev, status, nodes)


# --- access control and parameters ---------------------------------------------------------------

async def test_another_user_is_closed_with_4404(other_user, session):
    assert await close_code(communicator(other_user, session.pk)) == 4404


async def test_anonymous_is_closed_with_4404(session):
    from django.contrib.auth.models import AnonymousUser
    assert await close_code(communicator(AnonymousUser(), session.pk)) == 4404


async def test_unknown_session_is_closed_with_4404(user):
    assert await close_code(communicator(user, "9b2f3c1e-0000-4000-8000-000000000000")) == 4404


@pytest.mark.parametrize("path_id, query", [
    ("not-a-uuid", ""),
    (None, "?since_rev=abc"),
    (None, "?since_rev=-1"),
    (None, "?since_rev=1&since_rev=2"),
    (None, "?since_rev="),
    (None, "?sinc_rev=3"),
    (None, "?since_rev=%C2%B2"),  # "²": a Unicode digit that int() refuses
])
async def test_bad_id_or_parameter_is_closed_with_4400(user, session, path_id, query):
    assert await close_code(communicator(user, path_id or session.pk, query)) == 4400


async def test_the_real_stack_authenticates_by_session_cookie(user, session):
    from openprogram_web.asgi import application

    def login_cookie():
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    cookie = await database_sync_to_async(login_cookie)()
    page = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]  # a page of the site itself
    headers = [(b"cookie", f"sessionid={cookie}".encode()), *page]
    comm = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/", headers=headers)
    await comm.connect(timeout=TIMEOUT)
    snapshot = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    assert snapshot["type"] == "snapshot" and snapshot["session"]["id"] == str(session.pk)

    anonymous = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/",
                                      headers=page)
    assert await close_code(anonymous) == 4404
