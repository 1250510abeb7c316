"""Shared by the replay, fork and compare tests: recording a run, counting model calls, reading a tree."""
from __future__ import annotations

import pytest

from dag.models import Node, Session
from dag.runs.lifecycle import run_session
from runtime.providers.sim import SimProvider

from ..launch_helpers import wait_for_end


@pytest.fixture
def provider_calls(monkeypatch):
    """The live model calls made (the offline simulation's), as a list that grows with each."""
    calls = []
    complete = SimProvider.complete

    def counted(self, request, check=None):
        calls.append(request)
        return complete(self, request, check)
    monkeypatch.setattr(SimProvider, "complete", counted)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENPROGRAM_MODEL", "WIKI_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return calls


def recorded(owner, function: str, **args) -> Session:
    """A session of `function(**args)`, run to its end here."""
    session = Session.objects.create(owner=owner, function=function, args=args)
    run_session(session.pk)
    session.refresh_from_db()
    return session


def started_from(api, path: str, body: dict | None = None) -> Session:
    """The session a POST to `path` started, once it has ended."""
    response = api.post(path, body or {}, format="json")
    assert response.status_code == 201, response.json()
    return wait_for_end(Session.objects.get(pk=response.json()["id"]))


def tree(session: Session) -> list[tuple]:
    """The session's calls as comparable rows: place, caller's place, kind, name, arguments (of a code
    call), output and status."""
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    seq_of = {node.pk: node.seq for node in nodes}
    return [(node.seq, seq_of.get(node.parent_id), node.kind, node.name,
             node.input if node.kind == Node.Kind.CODE else None, node.output, node.status) for node in nodes]


def llm_nodes(session: Session) -> list[Node]:
    return list(Node.objects.filter(session=session, kind=Node.Kind.LLM).order_by("seq"))
