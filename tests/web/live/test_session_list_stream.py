"""The live session list `ws/sessions/`: a user's socket gets the rows of their own sessions as they
change (throttled, the end always), the rows it watches on connect (the resync), and nothing of anyone
else's. Runs on whichever channel layer the settings choose; changes go through the write path."""

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import connection

from dag.recording.write_path import claim_session, create_node, finish_node, finish_session, queue_session
from dag.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

# A bound on how long a message may take on a loaded machine, never a measure: the tests wait for what
# must come, and check that nothing else came by order (`nothing_more`), not by waiting for silence.
TIMEOUT = 30


def list_socket(user):
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/sessions/")
    comm.scope["user"] = user
    return comm


def in_thread(write, *args, **kwargs):
    """Run a write in a worker thread as a run does, closing its connection afterwards."""
    def run():
        try:
            return write(*args, **kwargs)
        finally:
            connection.close()
    return database_sync_to_async(run, thread_sensitive=False)()


async def connected(user):
    comm = list_socket(user)
    ok, _ = await comm.connect(timeout=TIMEOUT)
    assert ok
    await comm.send_json_to({"type": "watch", "ids": []})  # joined and answered: ready for changes
    assert await reply(comm) == {"type": "rows", "rows": []}
    return comm


async def reply(comm) -> dict:
    """The answer to a watch. Row messages before it are skipped: on Redis the announcement of a run
    launched before the socket joined may still be on its way (it is sent from the broadcaster's loop)."""
    message = await comm.receive_json_from(timeout=TIMEOUT)
    while message["type"] == "row":
        message = await comm.receive_json_from(timeout=TIMEOUT)
    return message


async def next_row(comm):
    message = await comm.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "row"
    return message["row"]


async def rows_of(comm, session_id, count) -> list[dict]:
    """The socket's next `count` rows, all of `session_id` (with no throttle, one per write)."""
    rows = [await next_row(comm) for _ in range(count)]
    assert {row["id"] for row in rows} == {str(session_id)}
    return rows


async def nothing_more(comm):
    """Nothing else is waiting on the socket: a `watch` sent now (an id no one has) is answered next."""
    await comm.send_json_to({"type": "watch", "ids": ["00000000-0000-0000-0000-000000000000"]})
    assert await comm.receive_json_from(timeout=TIMEOUT) == {"type": "rows", "rows": []}


async def test_anonymous_is_closed_with_4401():
    comm = list_socket(AnonymousUser())
    ok, _ = await comm.connect(timeout=TIMEOUT)
    assert ok
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    assert output == {"type": "websocket.close", "code": 4401, "reason": "log in to follow your sessions"}


async def test_a_message_that_is_not_json_closes_with_4400(user):
    comm = await connected(user)
    await comm.send_to(text_data="{not json")
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    assert output["type"] == "websocket.close" and output["code"] == 4400


@pytest.mark.parametrize("text", ["[" * 100000, '{"a":' * 50000 + "1" + "}" * 50000])
async def test_json_nested_too_deeply_to_read_closes_with_4400(user, text):
    comm = await connected(user)
    await comm.send_to(text_data=text)
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    assert output["type"] == "websocket.close" and output["code"] == 4400


@pytest.mark.parametrize("newer_than", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "not a time"])
async def test_a_newer_than_utc_cannot_hold_is_ignored_like_any_invalid_one(user, newer_than):
    await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    comm = await connected(user)
    await comm.send_json_to({"type": "watch", "ids": [], "newer_than": newer_than})
    assert await reply(comm) == {"type": "rows", "rows": []}  # no newer runs asked for, as with none
    await comm.disconnect()


def test_newer_than_is_read_as_the_instant_it_names():
    from datetime import datetime, timezone

    from dag.live.session_list_consumer import parse_watch

    _, newer_than = parse_watch({"ids": [], "newer_than": "2026-01-01T05:00:00+05:00"})
    assert newer_than == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_watch({"ids": [], "newer_than": "2026-01-01T05:00:00"}) == ([], None)  # naive: not the page's


async def test_watch_answers_the_own_rows_and_newer_own_runs_only(user, other_user):
    mine = await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    theirs = await in_thread(queue_session, other_user, function="wiki_agent", args={"q": 2})
    newer = await in_thread(queue_session, user, function="slow_count", args={"n": 3})
    await in_thread(queue_session, other_user, function="slow_count", args={"n": 4})
    comm = await connected(user)
    await comm.send_json_to({"type": "watch", "ids": [str(mine.pk), str(theirs.pk), "not-a-uuid", 7]})
    rows = (await reply(comm))["rows"]
    assert [row["id"] for row in rows] == [str(mine.pk)]
    await comm.send_json_to({"type": "watch", "ids": [], "newer_than": mine.created_at.isoformat()})
    rows = (await reply(comm))["rows"]
    assert [row["id"] for row in rows] == [str(newer.pk)]
    assert 'data-role="status">queued</span>' in rows[0]["html"]
    await comm.disconnect()


async def test_rows_change_in_place_as_a_run_goes_and_ends(user, settings):
    settings.OPENPROGRAM_LIST_UPDATE_S = 0
    comm = await connected(user)
    session = await in_thread(queue_session, user, function="wiki_agent", args={"q": "tides"})
    assert (await next_row(comm))["status"] == "queued"  # the launch, announced before the run starts
    await in_thread(claim_session, session.pk, worker="test:1")
    row = await next_row(comm)
    assert row["id"] == str(session.pk) and row["status"] == "running"
    assert 'data-role="status">running</span>' in row["html"]  # the row's own markup says so too
    node = await in_thread(create_node, session.pk, kind="llm", name="llm", status="running")
    await next_row(comm)
    await in_thread(finish_node, node, status="completed", usage={"input_tokens": 12, "output_tokens": 3})
    row = await next_row(comm)
    assert 'data-role="llm-calls">1</td>' in row["html"] and 'data-role="tokens">12 / 3</td>' in row["html"]
    await in_thread(finish_session, session.pk, "completed", result="done")
    while row["status"] != "completed":  # updates may merge: the last one is the end
        row = await next_row(comm)
    assert 'data-role="status">completed</span>' in row["html"] and 'data-role="stop"' not in row["html"]
    await comm.disconnect()


async def test_a_user_only_ever_hears_of_their_own_sessions(user, other_user, settings):
    settings.OPENPROGRAM_LIST_UPDATE_S = 0
    mine_socket, their_socket = await connected(user), await connected(other_user)
    theirs = await in_thread(queue_session, other_user, function="slow_count", args={"n": 2})
    mine = await in_thread(queue_session, user, function="wiki_agent", args={"q": "tides"})
    await in_thread(claim_session, theirs.pk, worker="test:1")
    await in_thread(finish_session, theirs.pk, "completed")
    await in_thread(claim_session, mine.pk, worker="test:1")
    # Each socket's rows of its own writes: the launch, the claim (and the end). The last write is mine:
    # anything before it has arrived, and a row is read when its message arrives, so it is as of then.
    assert (await rows_of(mine_socket, mine.pk, 2))[-1]["status"] == "running"
    assert (await rows_of(their_socket, theirs.pk, 3))[-1]["status"] == "completed"
    await nothing_more(mine_socket)
    await nothing_more(their_socket)
    # Watching someone else's session by id shows nothing of it either.
    await mine_socket.send_json_to({"type": "watch", "ids": [str(theirs.pk)]})
    assert (await mine_socket.receive_json_from(timeout=TIMEOUT))["rows"] == []
    await mine_socket.disconnect()
    await their_socket.disconnect()


async def test_a_busy_run_sends_few_row_updates_and_always_its_end(user, settings):
    settings.OPENPROGRAM_LIST_UPDATE_S = 600  # nothing but the first update and the end within a test
    comm = await connected(user)
    session = await in_thread(queue_session, user, function="slow_count", args={"n": 200})
    await next_row(comm)  # the launch's announcement, outside the throttle
    await in_thread(claim_session, session.pk, worker="test:1")

    def many_nodes():
        for index in range(200):
            finish_node(create_node(session.pk, kind="code", name=f"step_{index}", status="running"),
                        status="completed")
        finish_session(session.pk, "completed", result=200)

    await in_thread(many_nodes)
    rows = [await next_row(comm), await next_row(comm)]
    await nothing_more(comm)
    assert rows[-1]["status"] == "completed" and 'data-role="nodes">200</td>' in rows[-1]["html"]
    await comm.disconnect()


async def test_after_an_owner_change_the_new_owners_lists_hear_of_the_session_and_the_old_ones_not(
        user, other_user, settings):
    from dag.recording.write_path import update_session

    settings.OPENPROGRAM_LIST_UPDATE_S = 0
    old, new = await connected(user), await connected(other_user)
    session = await in_thread(queue_session, user, function="slow_count", args={"n": 2})
    await in_thread(claim_session, session.pk, worker="test:1")
    await rows_of(old, session.pk, 2)  # the launch and the claim: the owner is known to the notifier now
    await in_thread(update_session, session.pk, owner=other_user)  # what the admin's change does
    await in_thread(finish_session, session.pk, "completed")
    # The change and the end, each read with the socket's own user as owner.
    assert (await rows_of(new, session.pk, 2))[-1]["status"] == "completed"
    await nothing_more(old)
    await nothing_more(new)
    await old.disconnect()
    await new.disconnect()


async def test_a_launched_run_appears_on_its_owners_list_at_once_while_it_is_queued(user, other_user, settings):
    settings.OPENPROGRAM_LIST_UPDATE_S = 600  # the launch is told outside the throttle
    mine, theirs = await connected(user), await connected(other_user)
    session = await in_thread(queue_session, user, function="wiki_agent", args={"q": "tides"})
    row = await next_row(mine)
    assert row["id"] == str(session.pk) and row["status"] == "queued"
    assert f'data-session="{session.pk}"' in row["html"]
    # Its first change is not held back by the launch's message.
    await in_thread(claim_session, session.pk, worker="test:1")
    assert (await next_row(mine))["status"] == "running"
    await nothing_more(mine)
    await nothing_more(theirs)  # nor did anyone else hear of it
    await mine.disconnect()
    await theirs.disconnect()


async def test_the_real_stack_refuses_another_origin_and_serves_the_login(user):
    from django.test import Client

    from openprogram_web.asgi import application

    def login_cookie():
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    cookie = (await database_sync_to_async(login_cookie)()).encode()
    site = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", b"sessionid=" + cookie)]
    comm = WebsocketCommunicator(application, "/ws/sessions/", headers=site)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    await comm.send_json_to({"type": "watch", "ids": []})
    assert await comm.receive_json_from(timeout=TIMEOUT) == {"type": "rows", "rows": []}
    await comm.disconnect()
    elsewhere = [(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1"), (b"cookie", b"sessionid=" + cookie)]
    refused = WebsocketCommunicator(application, "/ws/sessions/", headers=elsewhere)
    assert (await refused.connect(timeout=TIMEOUT))[0] is False
