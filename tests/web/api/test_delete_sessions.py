"""DELETE /api/sessions/{id}/: an owner deletes an ended session with its nodes (204), another user's or
no session is a 404, one still queued or running a 409 naming Stop; the owner's stored size drops at
once, and an open page of the session is told it was deleted."""
import uuid

import pytest
from channels.db import database_sync_to_async
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.recording import write_path
from dag.runs import quotas

from ..live.test_consumers import TIMEOUT, communicator
from ..recording.test_stored_size import recorded

pytestmark = pytest.mark.django_db(transaction=True)


def client_of(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_owner_deletes_an_ended_session_with_its_nodes_and_its_size(user, other_user):
    mine, kept = recorded(user), recorded(user)
    theirs = recorded(other_user)
    before = quotas.stored_bytes(user)
    assert before > 0

    response = client_of(user).delete(f"/api/sessions/{mine.pk}/")

    assert response.status_code == 204
    assert not Session.objects.filter(pk=mine.pk).exists() and not Node.objects.filter(session_id=mine.pk).exists()
    assert quotas.stored_bytes(user) == before - mine.stored_bytes == kept.stored_bytes
    assert Node.objects.filter(session_id=theirs.pk).count() == 3  # the other user's are untouched
    assert client_of(user).get(f"/api/sessions/{mine.pk}/").status_code == 404


def test_another_users_or_no_session_is_not_found_and_stays(user, other_user):
    theirs = recorded(other_user)
    for path in (f"/api/sessions/{theirs.pk}/", f"/api/sessions/{uuid.uuid4()}/", "/api/sessions/not-an-id/"):
        response = client_of(user).delete(path)
        assert response.status_code == 404 and "detail" in response.json()
    assert APIClient().delete(f"/api/sessions/{theirs.pk}/").status_code == 401
    assert Session.objects.filter(pk=theirs.pk).exists()
    assert client_of(other_user).delete(f"/api/sessions/{theirs.pk}/").status_code == 204


@pytest.mark.parametrize("status", [Session.Status.QUEUED, Session.Status.RUNNING])
def test_a_session_still_queued_or_running_is_a_conflict_naming_stop(user, status):
    session = recorded(user, end=None)
    if status == Session.Status.QUEUED:
        session = Session.objects.create(owner=user, function="entry")

    response = client_of(user).delete(f"/api/sessions/{session.pk}/")

    assert response.status_code == 409
    assert response.json()["status"] == status and "stop it first" in response.json()["detail"]
    assert Session.objects.filter(pk=session.pk).exists()
    write_path.record_stop_request(session.pk)
    write_path.finish_session(session.pk, Session.Status.CANCELLED)
    assert client_of(user).delete(f"/api/sessions/{session.pk}/").status_code == 204


async def test_an_open_page_of_the_session_is_told_it_was_deleted(settings, user):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600  # a close that arrives came from the deletion itself
    session = await database_sync_to_async(recorded)(user)
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    assert (await comm.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"

    response = await database_sync_to_async(client_of(user).delete)(f"/api/sessions/{session.pk}/")

    assert response.status_code == 204
    assert await comm.receive_json_from(timeout=TIMEOUT) == {"type": "deleted"}
    closed = await comm.receive_output(timeout=TIMEOUT)
    assert (closed["type"], closed.get("code")) == ("websocket.close", 4410), closed
    await comm.disconnect()
