"""What the load and fault tests share: a live server on this pass's configuration, a user who launches
through its API and watches through its websocket, and the database's view of a session to compare with.

The tests are plain functions (the ORM is synchronous); the websocket clients run in `asyncio.run`.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from dag.models import Node, Session
from tests.web.launch_helpers import wait_for_end as ended_and_measured

from .bounds import START_S
from .servers import LiveServer, server_environment


@dataclass
class Viewer:
    """A user with an API token (to launch) and a session cookie (to open streams)."""
    user: object
    token: str
    cookie: str

    @classmethod
    def create(cls, username: str = "viewer") -> "Viewer":
        from knox.models import AuthToken

        user = get_user_model().objects.create_user(username, password="viewer-password-1")
        client = Client()
        client.force_login(user)
        return cls(user, AuthToken.objects.create(user)[1], f"sessionid={client.cookies['sessionid'].value}")

    def launch(self, server: LiveServer, function: str, args: dict, **extra) -> str:
        """POST /api/sessions/ on the live server; the new session's id."""
        return self.post(server, "/api/sessions/", {"function": function, "args": args, **extra})["id"]

    def stop(self, server: LiveServer, session_id: str) -> dict:
        return self.post(server, f"/api/sessions/{session_id}/stop/", {})

    def post(self, server: LiveServer, path: str, payload: dict) -> dict:
        request = urllib.request.Request(f"{server.url}{path}", data=json.dumps(payload).encode(), method="POST",
                                         headers={"Authorization": f"Token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=START_S) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"POST {path} refused: {exc.code} {exc.read().decode()}") from None


@pytest.fixture
def viewer(transactional_db, fast_hashing):
    return Viewer.create()


@pytest.fixture
def start_server(transactional_db, tmp_path):
    """`start_server(**env)`: a LiveServer on this pass's configuration; every one is stopped at the end."""
    started: list[LiveServer] = []

    def start(*, redis_url: str | None = None, **env: str) -> LiveServer:
        log = tmp_path / f"daphne-{len(started)}.log"
        server = LiveServer(server_environment(tmp_path, redis_url=redis_url, **env), log)
        started.append(server)
        return server

    start.started = started
    yield start
    for server in started:
        server.stop()


def database_view(session_id: str) -> tuple[dict, list[dict]]:
    session = Session.objects.get(pk=session_id)
    return session.as_dict(), [node.as_dict() for node in Node.objects.filter(session=session).order_by("seq")]


def wait_for_end(session_id: str, timeout: float = START_S) -> Session:
    """The session once it ended and was measured (see `tests.web.launch_helpers.wait_for_end`)."""
    return ended_and_measured(Session.objects.get(pk=session_id), timeout)


def still_running(session_ids) -> list[str]:
    """Nodes or sessions among these still `running` (none may be, once they ended)."""
    return ([f"node {node_id}" for node_id in Node.objects.filter(
                session_id__in=session_ids, status=Node.Status.RUNNING).values_list("id", flat=True)]
            + [f"session {pk}" for pk in Session.objects.filter(
                pk__in=session_ids, status=Session.Status.RUNNING).values_list("pk", flat=True)])
