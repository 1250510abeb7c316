"""Load: 20 concurrent sessions of 500 child calls each on a live server, one websocket client each.

The server is this pass's configuration (servers.py): SQLite and the in-memory layer on the embedded
pass, PostgreSQL and Redis on the scaled one. Every client must end holding what the database holds
(every node, its status and rev, and the session's), no node or session may stay `running`, and the
server must log no error or traceback. Bounded by generous timeouts; nothing is timed.
"""
import asyncio

from .figures import record
from .live_runs import START_S, database_view, start_server, still_running, viewer, wait_for_end  # noqa: F401
from .stream_client import StreamClient

SESSIONS = 20
CHILDREN = 500
FOLLOW_S = 240.0  # a bound for every run and stream on two busy cores


async def watch_all(server, viewer, session_ids):
    clients = [StreamClient(server.ws_url, session_id, viewer.cookie) for session_id in session_ids]
    await asyncio.gather(*(client.follow(FOLLOW_S) for client in clients))
    return clients


def test_twenty_sessions_of_500_nodes_reach_every_client_equal_to_the_database(start_server, viewer):
    server = start_server(OPENPROGRAM_EXECUTOR_WORKERS=str(SESSIONS))
    session_ids = [viewer.launch(server, "slow_count", {"n": CHILDREN, "delay_s": 0}) for _ in range(SESSIONS)]
    clients = asyncio.run(watch_all(server, viewer, session_ids))

    lost = nodes = 0
    for session_id, client in zip(session_ids, clients):
        session = wait_for_end(session_id, START_S)
        assert session.status == "completed", (session.status, session.error)
        state, rows = database_view(session_id)
        assert len(rows) == CHILDREN + 1
        nodes += len(rows)
        lost += client.differences(state, rows)
    record("load", sessions=SESSIONS, nodes=nodes, lost=lost)
    assert lost == 0
    assert still_running(session_ids) == []
    assert server.trouble() == []
