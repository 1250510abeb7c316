"""At most `OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER` live sockets per user in one server process, session
streams and session lists together: one past it is closed with 4429, and every way a socket ends gives
its place back."""
import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from dag.live import consumers
from dag.live.socket_limit import CLOSE_TOO_MANY_SOCKETS, OpenSockets, open_sockets
from dag.models import Session
from dag.recording import write_path
from dag.routing import websocket_urlpatterns

from .test_consumers import TIMEOUT, communicator

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def two_sockets_each(settings):
    settings.OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER = 2
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600  # nothing but what a test does closes a socket


def list_socket(user):
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/sessions/")
    comm.scope["user"] = user
    return comm


async def open_stream(user, session):
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    return comm


async def open_list(user):
    comm = list_socket(user)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    await comm.send_json_to({"type": "watch", "ids": []})
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] == "rows"
    return comm


async def refusal(comm) -> dict:
    assert (await comm.connect(timeout=TIMEOUT))[0]  # accepted, so the close code reaches a browser
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    return output


async def test_a_socket_past_the_cap_is_closed_with_4429_streams_and_lists_together(user, session):
    stream, listing = await open_stream(user, session), await open_list(user)
    too_many = {"type": "websocket.close", "code": CLOSE_TOO_MANY_SOCKETS,
                "reason": "too many live views open; close some tabs"}
    assert await refusal(communicator(user, session.pk)) == too_many
    assert await refusal(list_socket(user)) == too_many
    await stream.disconnect()
    stream = await open_stream(user, session)  # the closed one's place is free again
    await listing.disconnect()
    listing = await open_list(user)
    for comm in (stream, listing):
        await comm.disconnect()
    assert open_sockets.held_by(user.pk) == 0


async def test_another_users_sockets_do_not_count(user, other_user, session):
    opened = [await open_stream(user, session), await open_list(user)]
    theirs = await open_list(other_user)
    for comm in (*opened, theirs):
        await comm.disconnect()


async def test_no_cap_when_it_is_0(user, settings):
    settings.OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER = 0
    opened = [await open_list(user) for _ in range(25)]
    assert open_sockets.held_by(user.pk) == 25
    for comm in opened:
        await comm.disconnect()


async def test_sockets_the_server_refuses_or_closes_give_their_place_back(user, other_user, session):
    # Refused after being counted: not the owner's session, a bad parameter; more of them than the cap.
    theirs = await database_sync_to_async(Session.objects.create)(owner=other_user, function="f", args={})
    for comm in [communicator(user, theirs.pk), communicator(user, session.pk, "?since_rev=x"),
                 communicator(user, theirs.pk), communicator(user, theirs.pk)]:
        assert (await refusal(comm))["code"] in (4400, 4404)
    # Closed by the server once open: the session was given to someone else.
    for _ in range(3):
        stream = await open_stream(user, session)
        await database_sync_to_async(write_path.update_session)(session.pk, owner=other_user)
        assert (await stream.receive_output(timeout=TIMEOUT))["code"] == 4404
        await stream.disconnect()
        await database_sync_to_async(write_path.update_session)(session.pk, owner=user)
    assert open_sockets.held_by(user.pk) == 0


async def test_a_socket_whose_consumer_is_cancelled_gives_its_place_back(user, session):
    # As Daphne cancels an application that does not end after its client has gone.
    for _ in range(3):
        stream = await open_stream(user, session)
        stream.future.cancel()
        await stream.wait(timeout=TIMEOUT)
    assert open_sockets.held_by(user.pk) == 0


async def test_a_socket_whose_consumer_fails_gives_its_place_back(user, session, monkeypatch):
    def broken(*args):
        raise RuntimeError("the database is away")

    monkeypatch.setattr(consumers, "owned_session_exists", broken)
    for _ in range(3):  # more than the cap: each failure gave its place back
        comm = communicator(user, session.pk)
        await comm.connect(timeout=TIMEOUT)
        with pytest.raises(RuntimeError, match="the database is away"):
            await comm.wait(timeout=TIMEOUT)  # the consumer ends with the error
    assert open_sockets.held_by(user.pk) == 0


def test_the_count_is_per_user_and_given_back_to_zero():
    counts = OpenSockets()
    assert counts.take("a", 2) and counts.take("a", 2) and not counts.take("a", 2)
    assert counts.take("b", 2)
    counts.give_back("a")
    assert counts.held_by("a") == 1 and counts.take("a", 2)
    for _ in range(2):
        counts.give_back("a")
    assert counts.held_by("a") == 0 and counts.take("a", 0)  # 0: no cap
