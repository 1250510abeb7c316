"""Faults of the server and the network under a live run: a websocket client dropping and reconnecting 50
times mid-run, and the server SIGKILLed mid-run and started again. Each run ends in a recorded,
explained status, no node stays `running`, and every client ends equal to the database.

The runs are long (slow_count of 10,000 steps) and end when the test ends them (a stop, a kill), so
"mid-run" holds however slow the machine is.
"""
import asyncio
import time

from django.utils import timezone

from dag.models import Node, Session

from .figures import record
from .live_runs import START_S, database_view, start_server, still_running, viewer, wait_for_end  # noqa: F401
from .stream_client import StreamClient

LONG_RUN = {"n": 10_000, "delay_s": 0.05}
DROPS = 50
FOLLOW_S = 120.0


async def wait_until(condition, what: str, timeout_s: float = START_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def drop_storm(server, viewer, session_id) -> StreamClient:
    client = StreamClient(server.ws_url, session_id, viewer.cookie)
    following = asyncio.create_task(client.follow(FOLLOW_S))
    for drop in range(DROPS):
        # Each drop once the client is back and has caught up from the database (a snapshot since its rev).
        await wait_until(lambda: client.snapshots > drop and client.connected, f"reconnection {drop}")
        await client.drop()
    await wait_until(lambda: client.snapshots > DROPS, "the last reconnection")
    await asyncio.to_thread(viewer.stop, server, session_id)
    await following
    return client


def test_a_client_dropping_50_times_mid_run_converges_to_the_database(start_server, viewer):
    server = start_server()
    session_id = viewer.launch(server, "slow_count", LONG_RUN)
    client = asyncio.run(drop_storm(server, viewer, session_id))

    session = wait_for_end(session_id)
    state, rows = database_view(session_id)
    lost = client.differences(state, rows)
    record("faults-drop-storm", sessions=1, nodes=len(rows), faults=DROPS, lost=lost)
    assert session.status == "cancelled" and "stop" in (session.error or "").lower(), session.error
    assert client.snapshots >= DROPS + 1  # a snapshot since its rev after every drop
    assert rows[-1]["seq"] > DROPS  # the run went on writing through the storm
    assert lost == 0
    assert still_running([session_id]) == []
    assert server.trouble() == []


CLIENTS = 2
# A lease shorter than the default, so the restarted server's reaper writes the dead run off within seconds,
# yet 20 heartbeats long: a live server's heartbeat starved by a busy machine does not let its own reaper
# write the run off before the kill.
LEASE = {"OPENPROGRAM_LEASE_S": "10", "OPENPROGRAM_HEARTBEAT_S": "0.5"}


async def kill_and_restart(server, viewer, session_id, tmp_path):
    """SIGKILL the server mid-run and start another on its port; (the clients, the new server, when the
    first was dead)."""
    clients = [StreamClient(server.ws_url, session_id, viewer.cookie) for _ in range(CLIENTS)]
    following = [asyncio.create_task(client.follow(FOLLOW_S)) for client in clients]
    await wait_until(lambda: all(client.rev and client.rev > 10 for client in clients), "the run to be under way")
    # Both block (waiting for the process, polling the port): in threads, so the clients keep reading.
    await asyncio.to_thread(server.kill)
    killed_at = timezone.now()
    restarted = await asyncio.to_thread(server.restart, tmp_path / "daphne-restarted.log")
    await asyncio.gather(*following)  # the clients reconnect to the new server by themselves
    return clients, restarted, killed_at


def test_a_server_killed_mid_run_ends_it_interrupted_and_clients_converge(start_server, viewer, tmp_path):
    server = start_server(**LEASE)
    session_id = viewer.launch(server, "slow_count", LONG_RUN)
    clients, restarted, killed_at = asyncio.run(kill_and_restart(server, viewer, session_id, tmp_path))
    start_server.started.append(restarted)  # stopped with the others

    session = wait_for_end(session_id, timeout=START_S + float(LEASE["OPENPROGRAM_LEASE_S"]))
    state, rows = database_view(session_id)
    lost = sum(client.differences(state, rows) for client in clients)
    record("faults-sigkill", sessions=1, nodes=len(rows), faults=1, lost=lost)
    assert session.status == Session.Status.INTERRUPTED
    # Written off by the restarted server after the kill, not by the live first one on a starved heartbeat.
    assert session.finished_at > killed_at, (session.finished_at, killed_at)
    assert "lease" in session.error and str(server.pid) in session.error, session.error
    assert lost == 0
    assert still_running([session_id]) == []
    assert Node.objects.filter(session_id=session_id, status=Node.Status.INTERRUPTED).exists()
    assert server.trouble() == [] and restarted.trouble() == []
