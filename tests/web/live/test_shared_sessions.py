"""Read-only share links: the owner makes one (POST /api/sessions/{id}/share/) and revokes all at once
(DELETE); anyone holding one, logged in or not, sees the session page and its live stream, read-only,
hidden values hidden; a revoked, expired, forged or another session's link is refused, and a shared page
open when its link is revoked or expires is closed (4403)."""
from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest
from channels.db import database_sync_to_async
from django.core import signing
from django.test import Client
from rest_framework.test import APIClient

from dag import share_links
from dag.models import Session
from dag.runs.launch import launch
from tests.reliability.access_helpers import MODULE, OWN_PAGE, SECRET, stream

from ..launch_helpers import wait_for_end

pytestmark = pytest.mark.django_db(transaction=True)

# What the owner's page offers and a shared page must not: Stop, Run again, Replay, Fork, Delete, Share,
# Download (the export needs a login), the page's way back to the owner's list.
OWNER_CONTROLS = ['data-role="stop"', 'data-role="run-again"', 'data-role="replay"', "data-fork-url",
                  'data-role="delete"', 'data-role="share"', 'data-role="download"', 'class="muted small back" href']


@pytest.fixture
def secret_run(settings, user):
    """A finished run of `uses_secret` (a hidden input) by `user`."""
    settings.OPENPROGRAM_FUNCTION_MODULES = [MODULE]
    return wait_for_end(launch(user, "uses_secret", {"question": "anything?"}))


def api_of(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def share(user, session) -> str:
    """A new share link's path, made by `user` through the API."""
    response = api_of(user).post(f"/api/sessions/{session.pk}/share/")
    assert response.status_code == 200, response.content
    assert response.json()["expires_at"]
    return urlsplit(response.json()["url"]).path


def stream_path(page_path: str) -> str:
    return "/ws" + page_path


def test_only_the_owner_makes_or_revokes_links(secret_run, other_user):
    for client in (api_of(other_user), APIClient()):
        assert client.post(f"/api/sessions/{secret_run.pk}/share/").status_code in (401, 404)
        assert client.delete(f"/api/sessions/{secret_run.pk}/share/").status_code in (401, 404)
    assert api_of(other_user).post(f"/api/sessions/{secret_run.pk}/share/").status_code == 404
    secret_run.refresh_from_db()
    assert secret_run.share_generation == 0


def test_anyone_with_the_link_sees_the_page_read_only_and_nothing_hidden(secret_run, other_user):
    path = share(secret_run.owner, secret_run)
    assert path.startswith(f"/shared/{secret_run.pk}/") and len(path) > 80  # a signature, not a counter
    anonymous, someone_else = Client(), Client()
    someone_else.force_login(other_user)
    for viewer in (anonymous, someone_else):
        response = viewer.get(path)
        page = response.content.decode()
        assert response.status_code == 200
        assert f'data-ws-path="{stream_path(path)}"' in page and "data-read-only" in page
        assert not [control for control in OWNER_CONTROLS if control in page]
        assert SECRET not in page
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


async def test_the_shared_stream_sends_the_snapshot_without_the_hidden_value(secret_run, user):
    path = await database_sync_to_async(share)(user, secret_run)
    accepted, frames, code = await stream(secret_run.pk, OWN_PAGE, stream_path(path))
    assert accepted and frames and code is None
    assert '"type":"snapshot"' in frames[0].replace(" ", "") and str(secret_run.pk) in frames[0]
    assert not [frame for frame in frames if SECRET in frame]


async def test_the_shared_stream_checks_the_origin(secret_run, user):
    path = await database_sync_to_async(share)(user, secret_run)
    accepted, _, _ = await stream(secret_run.pk, [(b"origin", b"http://evil.example"), OWN_PAGE[1]],
                                  stream_path(path))
    assert not accepted


async def test_revoking_refuses_every_link_and_closes_open_shared_streams(secret_run, user, settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600  # a close that arrives came from the revocation itself
    from channels.testing import WebsocketCommunicator

    from openprogram_web.asgi import application

    first = await database_sync_to_async(share)(user, secret_run)
    second = await database_sync_to_async(share)(user, secret_run)
    comm = WebsocketCommunicator(application, stream_path(first), headers=OWN_PAGE)
    assert (await comm.connect(timeout=30))[0]
    assert (await comm.receive_json_from(timeout=30))["type"] == "snapshot"

    revoked = await database_sync_to_async(api_of(user).delete)(f"/api/sessions/{secret_run.pk}/share/")

    assert revoked.status_code == 204
    closed = await comm.receive_output(timeout=30)
    assert (closed["type"], closed.get("code")) == ("websocket.close", 4403), closed
    await comm.disconnect()
    for path in (first, second):
        assert (await database_sync_to_async(Client().get)(path)).status_code == 404
        assert (await stream(secret_run.pk, OWN_PAGE, stream_path(path)))[2] == 4403
    fresh = await database_sync_to_async(share)(user, secret_run)  # a new link works again
    assert (await database_sync_to_async(Client().get)(fresh)).status_code == 200


async def test_an_expired_forged_or_other_sessions_link_is_refused(secret_run, user, settings, monkeypatch):
    other = await database_sync_to_async(Session.objects.create)(owner=user, function="entry",
                                                                 status=Session.Status.COMPLETED)
    path = await database_sync_to_async(share)(user, secret_run)
    token = path.rstrip("/").rsplit("/", 1)[1]
    refused = [f"/shared/{other.pk}/{token}/",  # another session's link
               f"/shared/{secret_run.pk}/{token[:-2]}xx/",  # a forged signature
               f"/shared/{secret_run.pk}/0:1vTmW5:{'A' * 43}/"]
    for page in refused:
        assert (await database_sync_to_async(Client().get)(page)).status_code == 404, page
        assert (await stream(secret_run.pk, OWN_PAGE, stream_path(page)))[2] == 4403, page

    settings.OPENPROGRAM_SHARE_DAYS = 7
    later = time.time() + 7 * 86400 + 60
    monkeypatch.setattr(signing.time, "time", lambda: later)
    assert (await database_sync_to_async(Client().get)(path)).status_code == 404
    assert (await stream(secret_run.pk, OWN_PAGE, stream_path(path)))[2] == 4403
    assert share_links.generation_of(secret_run.pk, token) is None


async def test_each_link_has_its_own_cap_of_open_sockets(secret_run, user, settings, monkeypatch):
    settings.OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER = 1
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600
    from channels.testing import WebsocketCommunicator

    from openprogram_web.asgi import application

    leaked = await database_sync_to_async(share)(user, secret_run)
    later = time.time() + 60  # a link made another second is another token
    monkeypatch.setattr(signing.time, "time", lambda: later)
    teammates = await database_sync_to_async(share)(user, secret_run)
    assert teammates != leaked
    held = WebsocketCommunicator(application, stream_path(leaked), headers=OWN_PAGE)
    assert (await held.connect(timeout=30))[0]
    assert (await held.receive_json_from(timeout=30))["type"] == "snapshot"
    try:
        # The leaked link is at its cap; the teammate's link of the same session is not held by it.
        assert (await stream(secret_run.pk, OWN_PAGE, stream_path(leaked)))[2] == 4429
        accepted, frames, code = await stream(secret_run.pk, OWN_PAGE, stream_path(teammates))
        assert accepted and frames and code != 4429, code
    finally:
        await held.disconnect()
