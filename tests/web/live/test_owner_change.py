"""A session an admin gives to another user stops streaming to its old owner at once: the stream closes
with 4404 before it forwards the change of owner or anything recorded after it, whether that change
arrives live or is read from the database to fill a gap. (The heartbeat's check, the backstop, is in
test_stream_login.py.)"""
import pytest
from channels.db import database_sync_to_async

from dag.models import Session
from dag.recording import write_path

from .test_consumers import TIMEOUT, Mirror, communicator, record_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_heartbeat_in_the_test(settings):
    """A heartbeat later than any test's end: a close that arrives came from the change itself."""
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 3600


async def opened_stream(user, session):
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    mirror = Mirror()
    mirror.apply(await comm.receive_json_from(timeout=TIMEOUT))
    return comm, mirror


async def next_output_after(comm) -> dict:
    output = await comm.receive_output(timeout=TIMEOUT)
    await comm.disconnect()
    return output


async def test_the_old_owner_gets_nothing_of_the_session_after_the_admin_gives_it_away(user, other_user, session):
    comm, _ = await opened_stream(user, session)

    def give_away_and_record():
        write_path.update_session(session.pk, owner=other_user)  # as SessionAdmin.save_model does
        record_node(session.pk, name="the new owner's", input={"secret": "the new owner's input"})

    await database_sync_to_async(give_away_and_record)()
    output = await next_output_after(comm)
    assert (output["type"], output.get("code")) == ("websocket.close", 4404), output


async def test_a_change_of_owner_read_from_the_database_to_fill_a_gap_closes_the_stream(user, other_user, session):
    comm, _ = await opened_stream(user, session)

    def give_away_unannounced_and_record():
        # The layer lost the change of owner: the next change reveals a gap, which the database fills.
        Session.objects.filter(pk=session.pk).update(owner=other_user, rev=1)
        record_node(session.pk, name="the new owner's", input={"secret": "the new owner's input"})  # rev 2

    await database_sync_to_async(give_away_unannounced_and_record)()
    output = await next_output_after(comm)
    assert (output["type"], output.get("code")) == ("websocket.close", 4404), output


async def test_a_session_change_of_the_same_owner_streams_on(user, session):
    comm, mirror = await opened_stream(user, session)
    await database_sync_to_async(write_path.update_session)(session.pk, status="running")
    message = await comm.receive_json_from(timeout=TIMEOUT)
    await comm.disconnect()
    mirror.apply(message)
    assert mirror.session["status"] == "running" and mirror.rev == 1
