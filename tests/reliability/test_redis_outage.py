"""Item 17: a Redis outage. It closed every stream with 1011 and wrote a traceback per flush (1,167 in
5 s); now the log says it once (one warning as the layer starts failing, one info when it is back), and
streams are closed with 4503 so clients reconnect and resync from the database by revision.

The first tests break the layer in this process (both passes); the last cuts real Redis for a few
seconds under a live server through a TCP proxy the test controls (the scaled pass, PostgreSQL + Redis),
with session streams and a live session list (`ws/sessions/`) open through it.
"""
import asyncio
import json
import logging
import re
import threading
import time
from urllib.parse import urlsplit

import pytest
from channels.layers import InMemoryChannelLayer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection
from redis.exceptions import ConnectionError as RedisConnectionError
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from dag.live import layer_outage
from dag.live.broadcast import LayerForwarder
from dag.live.frames import encoded_runs
from dag.live.layer_outage import CLOSE_TRY_AGAIN_LATER, LayerOutage, outage
from dag.live.session_list_notify import _group_send, owner_group
from dag.models import Session
from dag.routing import websocket_urlpatterns
from tests.web.runs.celery_workers import scaled_only

from .figures import record
from .live_runs import START_S, database_view, start_server, still_running, viewer, wait_for_end  # noqa: F401
from .stream_client import StreamClient
from .tcp_proxy import TcpProxy

OUTAGE_LOGGER = "dag.live.layer_outage"
WAIT_S = 30.0  # a bound on one step on a loaded machine (a socket's open or close), never a measure


def outage_lines(caplog, level):
    return [r for r in caplog.records if r.name == OUTAGE_LOGGER and r.levelno == level]


# --- the outage notice ---------------------------------------------------------------------------

def test_an_outage_is_said_once_when_it_starts_and_once_when_it_ends(caplog, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(LayerOutage, "clock", staticmethod(lambda: now[0]))
    notice = LayerOutage()
    caplog.set_level(logging.INFO, OUTAGE_LOGGER)
    before = notice.clock()
    now[0] += 0.5
    for _ in range(50):
        notice.failed("sending live changes", RedisConnectionError("Connection refused"))
    notice.reached(before)  # began before the outage: it got through just ahead of the cut
    now[0] += 3
    notice.reached(notice.clock())
    notice.reached(notice.clock())
    assert [r.getMessage()[:45] for r in outage_lines(caplog, logging.WARNING)] == [
        "channel layer (Redis) unreachable: sending li"]
    assert len(outage_lines(caplog, logging.INFO)) == 1
    assert "after 3.0 s (50 layer calls failed" in outage_lines(caplog, logging.INFO)[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records)  # no traceback

    notice.failed("a stream", RedisConnectionError("closed"))  # a broken pooled connection, just after
    assert len(outage_lines(caplog, logging.WARNING)) == 1
    now[0] += layer_outage.SETTLE_S
    notice.failed("a stream", RedisConnectionError("closed"))  # later: a new outage
    assert len(outage_lines(caplog, logging.WARNING)) == 2


@pytest.fixture
def fresh_outage():
    """The process's outage state, as at start-up, before and after the test."""
    outage.__dict__.update(LayerOutage().__dict__)
    yield outage
    outage.__dict__.update(LayerOutage().__dict__)


class UnreachableLayer(InMemoryChannelLayer):
    """A layer whose server is gone: every call fails the way channels_redis's do."""

    async def _refuse(self, *args, **kwargs):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    group_add = group_discard = group_send = receive = _refuse


async def test_flushes_to_an_unreachable_layer_log_one_warning_without_a_traceback(caplog, fresh_outage):
    caplog.set_level(logging.INFO)
    layer = UnreachableLayer()
    for rev in range(1, 201):
        await LayerForwarder._send(layer, "some-session", encoded_runs([{"type": "node", "rev": rev}]))
    assert len(outage_lines(caplog, logging.WARNING)) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.fixture
def unreachable_layer(settings):
    from channels.layers import channel_layers
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.UnreachableLayer"}}
    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


def create_session(user) -> Session:
    try:
        return Session.objects.create(owner=user, function="entry")
    finally:
        connection.close()  # made in a thread of its own


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", ["a session's stream", "the session list"])
async def test_streams_on_an_unreachable_layer_close_with_try_again_later(user, unreachable_layer, caplog,
                                                                          fresh_outage, stream):
    caplog.set_level(logging.INFO)
    session = await asyncio.to_thread(create_session, user)
    path = f"/ws/sessions/{session.pk}/" if stream == "a session's stream" else "/ws/sessions/"
    for _ in range(3):
        comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        comm.scope["user"] = user
        assert (await comm.connect(timeout=WAIT_S))[0]
        closed = await comm.receive_output(timeout=WAIT_S)  # the app's exception would be raised here
        assert closed == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER,
                          "reason": "live updates unavailable; reconnect"}
        await comm.wait(timeout=WAIT_S)
    assert len(outage_lines(caplog, logging.WARNING)) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_list_notifications_to_an_unreachable_layer_log_one_warning_without_a_traceback(
        unreachable_layer, caplog, fresh_outage):
    caplog.set_level(logging.INFO)
    for update in range(200):  # a list update of each of 20 running sessions, 10 times over
        await _group_send(owner_group(1), f"session-{update % 20}")
    assert len(outage_lines(caplog, logging.WARNING)) == 1
    assert "telling session lists" in outage_lines(caplog, logging.WARNING)[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING
                and r.name != OUTAGE_LOGGER]


async def test_a_list_notification_that_gets_through_ends_the_outage(caplog, fresh_outage):
    caplog.set_level(logging.INFO)
    outage.failed("telling session lists", RedisConnectionError("Connection refused"))
    await _group_send(owner_group(1), "some-session")  # the in-memory layer of the test settings
    assert len(outage_lines(caplog, logging.INFO)) == 1


# --- a real outage under a live server ------------------------------------------------------------

CLIENTS = 3
OUTAGE_S = 3.0  # how long Redis stays cut: the run goes on writing meanwhile
FOLLOW_S = 180.0
# A run far longer than the test (10,000 steps of 20 ms): it is still going when Redis is back, whatever
# the machine's load, and ends when the test stops it.
LONG_RUN = {"n": 10_000, "delay_s": 0.02}


@pytest.fixture
def redis_proxy():
    target = urlsplit(settings.REDIS_URL)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 6379)
    yield proxy
    proxy.close()


def database_rev(session_id) -> int:
    try:
        return Session.objects.get(pk=session_id).rev
    finally:
        connection.close()  # read in a thread of its own


class ListClient:
    """The live session list as static/js/session_list.js keeps it: on every connect it watches one
    session's row; it reconnects on every close but 4401; `close_codes` says how the server ended each
    socket and `statuses` the session's status in each row received."""

    def __init__(self, ws_url: str, session_id: str, cookie: str):
        self.url = f"{ws_url}/ws/sessions/"
        self.origin = ws_url.replace("ws", "http", 1)
        self.cookie = cookie
        self.session_id = session_id
        self.close_codes: list[int | None] = []
        self.statuses: list[str] = []
        self.resyncs = 0  # `rows` answers to a watch: one per socket that got through

    async def follow(self, until_status: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self.statuses and self.statuses[-1] == until_status):
            assert time.monotonic() < deadline, f"the list never showed the run {until_status}: {self.statuses}"
            try:
                await asyncio.wait_for(self._run_once(until_status), max(0.1, deadline - time.monotonic()))
            except (OSError, asyncio.TimeoutError, InvalidHandshake):
                pass
            await asyncio.sleep(0.05)

    async def _run_once(self, until_status: str) -> None:
        async with connect(self.url, origin=self.origin, additional_headers={"Cookie": self.cookie},
                           open_timeout=WAIT_S) as socket:
            try:  # the server may have closed the socket already (4503): then sending fails
                await socket.send(json.dumps({"type": "watch", "ids": [self.session_id], "newer_than": None}))
                async for frame in socket:
                    message = json.loads(frame)
                    self.resyncs += message["type"] == "rows"
                    rows = message["rows"] if message["type"] == "rows" else [message["row"]]
                    self.statuses += [row["status"] for row in rows if row["id"] == self.session_id]
                    if self.statuses and self.statuses[-1] == until_status:
                        return
            except ConnectionClosed:
                pass
            self.close_codes.append(socket.close_code)


async def until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {WAIT_S:g} s"
        await asyncio.sleep(0.05)


async def watch_through_an_outage(server, viewer, session_id, proxy) -> tuple[list, ListClient, int, int]:
    clients = [StreamClient(server.ws_url, session_id, viewer.cookie) for _ in range(CLIENTS)]
    session_list = ListClient(server.ws_url, session_id, viewer.cookie)
    following = [asyncio.create_task(client.follow(FOLLOW_S)) for client in clients]
    listing = asyncio.create_task(session_list.follow("cancelled", FOLLOW_S))
    await until(lambda: all(client.rev for client in clients) and session_list.resyncs,
                "every client live, the run under way")
    resyncs_before = session_list.resyncs  # none can get through while Redis is cut: joining its group fails
    proxy.cut()
    cut_at = await asyncio.to_thread(database_rev, session_id)
    await asyncio.sleep(OUTAGE_S)
    restored_at = await asyncio.to_thread(database_rev, session_id)
    proxy.restore()
    # Back: every stream resynced past the outage, and the list resynced after its socket was closed.
    await until(lambda: all(client.rev > restored_at for client in clients)
                and session_list.resyncs > resyncs_before, "every client live again after the outage")
    await asyncio.to_thread(viewer.stop, server, session_id)
    await asyncio.gather(*following, listing)
    return clients, session_list, cut_at, restored_at


@scaled_only()
def test_a_redis_outage_is_logged_once_and_clients_converge_to_the_database(start_server, viewer, redis_proxy):
    server = start_server(redis_url=redis_proxy.url("redis", urlsplit(settings.REDIS_URL).path))
    session_id = viewer.launch(server, "slow_count", LONG_RUN)
    clients, session_list, cut_at, restored_at = asyncio.run(
        watch_through_an_outage(server, viewer, session_id, redis_proxy))

    session = wait_for_end(session_id)
    state, rows = database_view(session_id)
    lost = sum(client.differences(state, rows) for client in clients)
    record("redis-outage", sessions=1, nodes=len(rows), faults=1, lost=lost)
    assert restored_at > cut_at, "the run wrote nothing while Redis was cut: the test proved nothing"
    assert session.status == "cancelled", session.error  # still running until the test stopped it
    assert lost == 0
    assert still_running([session_id]) == []
    assert all(CLOSE_TRY_AGAIN_LATER in client.close_codes and 1011 not in client.close_codes
               for client in clients)
    assert CLOSE_TRY_AGAIN_LATER in session_list.close_codes and 1011 not in session_list.close_codes
    assert session_list.statuses[-1] == "cancelled"
    log = server.log()
    assert server.trouble() == []
    assert len(re.findall(rf"WARNING {OUTAGE_LOGGER}: channel layer \(Redis\) unreachable", log)) == 1
    assert len(re.findall(rf"INFO {OUTAGE_LOGGER}: channel layer \(Redis\) reachable again", log)) == 1


# --- password checks while the login throttle's Redis is down ----------------------------------------

THROTTLE_LOGGER = "dag.accounts.throttles"
RIGHT = {"username": "alice", "password": "alice-password-1"}


@pytest.fixture
def throttles_on_redis_at(settings, monkeypatch):
    """Point the login throttle's count at a Redis at the URL given, with its outage notice fresh."""
    from dag.accounts import throttles

    monkeypatch.setattr(throttles, "_outage", throttles._OutageNotice())

    def point_at(url: str) -> None:
        settings.CACHES = {**settings.CACHES, "throttles": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
            "KEY_PREFIX": settings.CACHES["throttles"]["KEY_PREFIX"]}}

    return point_at


def closed_port() -> int:
    """A local port nothing listens on (bound, then closed, so no other service has it right now)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def throttle_lines(caplog, level):
    return [r for r in caplog.records if r.name == THROTTLE_LOGGER and r.levelno == level]


def assert_refused_unchecked(api_answer, page_answer) -> None:
    assert api_answer.status_code == 503 and api_answer["Content-Type"] == "application/json"
    assert int(api_answer["Retry-After"]) > 0 and "Try again" in api_answer.json()["detail"]
    assert page_answer.status_code == 503 and page_answer["Content-Type"] == "text/plain; charset=utf-8"
    assert int(page_answer["Retry-After"]) > 0 and b"Try again" in page_answer.content


@pytest.mark.django_db
def test_with_the_throttles_redis_down_password_checks_are_a_503_logged_once(user, admin_user,
                                                                            throttles_on_redis_at, caplog):
    from django.test import Client
    from rest_framework.test import APIClient

    throttles_on_redis_at(f"redis://127.0.0.1:{closed_port()}/0")
    caplog.set_level(logging.INFO)
    for _ in range(5):
        assert_refused_unchecked(APIClient().post("/api/token/", RIGHT, format="json"),
                                 Client().post("/accounts/login/", {**RIGHT, "next": "/"}))
    admin = Client().post("/admin/login/", {"username": admin_user.username, "password": "password"})
    assert admin.status_code == 503 and int(admin["Retry-After"]) > 0
    assert len(throttle_lines(caplog, logging.WARNING)) == 1
    assert "unreachable" in throttle_lines(caplog, logging.WARNING)[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.skipif(not settings.REDIS_URL, reason="cuts a real Redis (REDIS_URL) off through a TCP proxy")
@pytest.mark.django_db
def test_password_checks_resume_when_the_throttles_redis_is_back(user, throttles_on_redis_at, redis_proxy, caplog):
    from django.test import Client
    from rest_framework.test import APIClient

    throttles_on_redis_at(redis_proxy.url("redis", urlsplit(settings.REDIS_URL).path))
    caplog.set_level(logging.INFO)
    assert APIClient().post("/api/token/", RIGHT, format="json").status_code == 200
    redis_proxy.cut()
    for _ in range(3):
        assert_refused_unchecked(APIClient().post("/api/token/", RIGHT, format="json"),
                                 Client().post("/accounts/login/", {**RIGHT, "next": "/"}))
    redis_proxy.restore()
    assert APIClient().post("/api/token/", RIGHT, format="json").status_code == 200
    assert Client().post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302
    assert len(throttle_lines(caplog, logging.WARNING)) == 1
    back = throttle_lines(caplog, logging.INFO)
    assert len(back) == 1 and "reachable again (6 attempts refused" in back[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
