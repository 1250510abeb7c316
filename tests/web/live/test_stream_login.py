"""An open live socket ends with its login: after a logout or a password change, the session list
(`ws/sessions/`) and a session's stream (`ws/sessions/{id}/`) close with 1000 (reconnect), at once after
a logout (told through the channel layer) and otherwise at their next heartbeat, and the reconnect decides: refused after a logout, let in after the browser's own password
change (its session has a new key). A stream whose session changed owner closes with 4404. Before that,
a socket whose login holds goes on as usual. Through the real ASGI stack, so the login is the session
cookie's."""
import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from dag.live.login_check import still_logged_in
from dag.models import Session
from dag.recording import write_path
from dag.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

# A bound on how long the close may take on a loaded machine, never a measure of it.
TIMEOUT = 30
SITE = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]  # a page of the site itself


@pytest.fixture(autouse=True)
def fast_heartbeat(settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 0.2


@pytest.fixture
def session(user):
    return Session.objects.create(owner=user, function="wiki_agent", args={"question": "q"})


def browser_of(user) -> Client:
    """A browser logged in as `user`, as the login page leaves one."""
    client = Client()
    client.force_login(user)
    return client


def socket_of(browser: Client, path: str) -> WebsocketCommunicator:
    """A websocket from one of the site's pages in `browser`, through the whole ASGI stack."""
    from openprogram_web.asgi import application

    cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(application, path, headers=[(b"cookie", cookie), *SITE])


def log_out(browser: Client) -> None:
    assert browser.post("/accounts/logout/").status_code == 302


def change_password(user) -> None:
    """As `manage.py changepassword` (or the password page of another browser) does."""
    user.set_password("a-new-password-2")
    user.save()


def change_own_password(browser: Client) -> None:
    """Through the browser's password page: Django gives its session a new key, which its cookie takes."""
    response = browser.post("/accounts/password_change/", {
        "old_password": "alice-password-1", "new_password1": "a-new-password-3", "new_password2": "a-new-password-3"})
    assert response.status_code == 302


def end_login(how: str, browser: Client, user) -> None:
    log_out(browser) if how == "logout" else change_password(user)


async def close_code(comm) -> int:
    """The code the socket is closed with, skipping what it sends before (heartbeats, rows)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT  # frames keep coming while it stays open: bound the wait as a whole
    while True:
        output = await comm.receive_output(timeout=max(deadline - loop.time(), 0.1))
        if output["type"] == "websocket.close":
            await comm.disconnect()
            return output["code"]


async def heartbeats(comm, count: int) -> None:
    """Read up to the `count`th heartbeat: each is sent only after the login was checked and held."""
    while count:
        message = await comm.receive_json_from(timeout=TIMEOUT)
        count -= message["type"] == "heartbeat"


async def open_stream(browser, session_id) -> WebsocketCommunicator:
    comm = socket_of(browser, f"/ws/sessions/{session_id}/")
    assert (await comm.connect(timeout=TIMEOUT))[0]
    await heartbeats(comm, 2)  # the check passes while the login holds
    return comm


async def open_list(browser) -> WebsocketCommunicator:
    comm = socket_of(browser, "/ws/sessions/")
    assert (await comm.connect(timeout=TIMEOUT))[0]
    await comm.send_json_to({"type": "watch", "ids": []})
    assert await comm.receive_json_from(timeout=TIMEOUT) == {"type": "rows", "rows": []}
    return comm


# --- the check itself ------------------------------------------------------------------------------

def test_a_session_stays_logged_in_until_its_logout_or_password_change(user, other_user):
    browser, other_browser = browser_of(user), browser_of(user)
    key, other_key = browser.session.session_key, other_browser.session.session_key
    assert still_logged_in(key, user.pk) and not still_logged_in(key, other_user.pk)
    log_out(browser)
    assert not still_logged_in(key, user.pk) and still_logged_in(other_key, user.pk)
    change_password(user)
    assert not still_logged_in(other_key, user.pk)
    assert not still_logged_in(None, user.pk)


# --- the session's stream ----------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["logout", "password change"])
async def test_a_stream_closes_to_reconnect_once_its_login_ends_and_the_reconnect_is_refused(user, session, how):
    browser = await database_sync_to_async(browser_of)(user)
    comm = await open_stream(browser, session.pk)
    await database_sync_to_async(end_login)(how, browser, user)
    assert await close_code(comm) == 1000
    again = socket_of(browser, f"/ws/sessions/{session.pk}/")
    assert (await again.connect(timeout=TIMEOUT))[0]  # accepted so that its close code can be heard
    assert await close_code(again) == 4404


async def test_after_the_browsers_own_password_change_its_stream_reconnects(user, session):
    browser = await database_sync_to_async(browser_of)(user)
    comm = await open_stream(browser, session.pk)
    await database_sync_to_async(change_own_password)(browser)
    assert await close_code(comm) == 1000
    await (await open_stream(browser, session.pk)).disconnect()  # the browser's new cookie is let in


async def test_a_stream_closes_with_4404_once_its_session_has_another_owner(user, other_user, session):
    # The owner is checked whatever the login: a scope's own user, as the other stream tests use.
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session.pk}/")
    comm.scope["user"] = user
    assert (await comm.connect(timeout=TIMEOUT))[0]
    await heartbeats(comm, 2)
    await database_sync_to_async(write_path.update_session)(session.pk, owner=other_user)
    assert await close_code(comm) == 4404


# --- the session list --------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["logout", "password change"])
async def test_a_list_closes_to_reconnect_once_its_login_ends_and_the_reconnect_is_refused(user, how):
    browser = await database_sync_to_async(browser_of)(user)
    comm = await open_list(browser)
    await database_sync_to_async(end_login)(how, browser, user)
    assert await close_code(comm) == 1000
    again = socket_of(browser, "/ws/sessions/")
    assert (await again.connect(timeout=TIMEOUT))[0]
    assert await close_code(again) == 4401


async def test_after_the_browsers_own_password_change_its_list_reconnects(user):
    browser = await database_sync_to_async(browser_of)(user)
    comm = await open_list(browser)
    await database_sync_to_async(change_own_password)(browser)
    assert await close_code(comm) == 1000
    await (await open_list(browser)).disconnect()


async def test_a_list_stays_open_while_its_login_holds(user, monkeypatch):
    from dag.live import session_list_consumer

    checked = asyncio.Event()
    real_check = session_list_consumer.login_still_holds

    async def noted_check(scope, who):
        holds = await real_check(scope, who)
        if holds:
            checked.set()
        return holds

    monkeypatch.setattr(session_list_consumer, "login_still_holds", noted_check)
    comm = await open_list(await database_sync_to_async(browser_of)(user))
    await asyncio.wait_for(checked.wait(), TIMEOUT)  # a heartbeat's check found the login holding
    await comm.send_json_to({"type": "watch", "ids": []})
    assert await comm.receive_json_from(timeout=TIMEOUT) == {"type": "rows", "rows": []}
    await comm.disconnect()


# --- a check that fails ------------------------------------------------------------------------------

def failing_check(*args):
    raise RuntimeError("the session store is unreachable")


async def test_a_stream_whose_check_fails_is_closed_to_reconnect_not_left_unchecked(user, session, monkeypatch):
    from dag.live import consumers

    comm = await open_stream(await database_sync_to_async(browser_of)(user), session.pk)
    monkeypatch.setattr(consumers, "owned_rev", failing_check)
    assert await close_code(comm) == 1000  # not one of the page's fatal codes: it reconnects


async def test_a_list_whose_check_fails_is_closed_to_reconnect_not_left_unchecked(user, monkeypatch):
    from dag.live import login_check

    comm = await open_list(await database_sync_to_async(browser_of)(user))
    monkeypatch.setattr(login_check, "still_logged_in", failing_check)
    assert await close_code(comm) == 1000  # not 4401, after which the page would stop reconnecting


# --- told at once, not at the heartbeat --------------------------------------------------------------

@pytest.fixture
def no_heartbeat_in_the_test(settings):
    """A heartbeat later than any test's end: a close that arrives came from being told."""
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600


async def opened(browser, path: str) -> WebsocketCommunicator:
    comm = socket_of(browser, path)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    if path == "/ws/sessions/":
        await comm.send_json_to({"type": "watch", "ids": []})
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] in ("rows", "snapshot")  # it is let in
    return comm


@pytest.mark.parametrize("stream", ["list", "session"])
async def test_the_sockets_of_a_login_close_at_once_when_it_logs_out(user, session, stream, no_heartbeat_in_the_test):
    browser = await database_sync_to_async(browser_of)(user)
    comm = await opened(browser, "/ws/sessions/" if stream == "list" else f"/ws/sessions/{session.pk}/")
    await database_sync_to_async(log_out)(browser)
    assert await close_code(comm) == 1000


async def test_a_logout_closes_only_the_sockets_of_that_login(user, session, no_heartbeat_in_the_test):
    leaving, staying = await database_sync_to_async(browser_of)(user), await database_sync_to_async(browser_of)(user)
    gone, kept = await opened(leaving, f"/ws/sessions/{session.pk}/"), await opened(staying, f"/ws/sessions/{session.pk}/")
    listed = await opened(staying, "/ws/sessions/")
    await database_sync_to_async(log_out)(leaving)
    assert await close_code(gone) == 1000
    # The other browser's sockets stream on: a change of the session still reaches its stream.
    await database_sync_to_async(write_path.create_node)(session.pk, kind="code", name="step")
    message = await kept.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "node" and message["node"]["name"] == "step"
    await listed.send_json_to({"type": "watch", "ids": [str(session.pk)]})
    while (message := await listed.receive_json_from(timeout=TIMEOUT))["type"] == "row":
        continue  # the node's change of the session's row, sent to the list meanwhile
    assert message["type"] == "rows" and [row["id"] for row in message["rows"]] == [str(session.pk)]
    await kept.disconnect()
    await listed.disconnect()


async def test_a_logout_succeeds_when_the_sockets_cannot_be_told(user, monkeypatch, caplog):
    from channels.layers import get_channel_layer

    async def unreachable(*args, **kwargs):
        raise ConnectionError("the channel layer is away")

    monkeypatch.setattr(get_channel_layer(), "group_send", unreachable)
    browser = await database_sync_to_async(browser_of)(user)
    await database_sync_to_async(log_out)(browser)  # a 302 to the login page, as always
    assert "telling the open live sockets" in caplog.text
