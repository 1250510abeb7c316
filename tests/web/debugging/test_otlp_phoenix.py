"""The OpenTelemetry export read back by Arize Phoenix, a receiver teams run: a run's spans, with their
GenAI names and attributes and this project's depth, through Phoenix's own OTLP endpoint and REST API.

Phoenix runs from its own venv (var/phoenix-venv, made by `make phoenix` / bin/ensure-phoenix), on free
ports of 127.0.0.1 with a working directory of the test's; it is stopped by its PID afterwards.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from dag.telemetry import export

from .replays import recorded

ROOT = Path(__file__).resolve().parents[3]
PHOENIX = Path(os.environ.get("PHOENIX_VENV", ROOT / "var" / "phoenix-venv")) / "bin" / "phoenix"
START_BOUND_S = 240  # a bound for a loaded machine, not a timing assertion

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """The URL of a Phoenix server started for these tests."""
    if not os.access(PHOENIX, os.X_OK):
        pytest.fail(f"{PHOENIX} is missing: run `make phoenix` (bin/ensure-phoenix) to install Arize Phoenix")
    port = free_port()
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port())}
    with open(workdir / "phoenix.log", "wb") as log:
        server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_BOUND_S
        while True:
            try:
                get_json(f"{url}/v1/projects")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Phoenix did not start; its log: {(workdir / 'phoenix.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def phoenix_spans(url: str, trace_id: str, count: int) -> list[dict]:
    """The spans of trace `trace_id` Phoenix holds, once it holds `count` of them (it ingests in batches)."""
    deadline = time.monotonic() + 60
    while True:
        spans = [span for span in get_json(f"{url}/v1/projects/default/spans?limit=1000")["data"]
                 if span["context"]["trace_id"] == trace_id]
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_phoenix_receives_a_runs_spans_with_their_names_and_attributes(phoenix, user, provider_calls):
    forwarder = export.start(phoenix, timeout_s=10)
    try:
        session = recorded(user, "research_agent", topic="the recursion guard")
        assert forwarder.flush() and forwarder.dropped == 0
    finally:
        export.stop()
    nodes = session.nodes.order_by("seq")
    spans = phoenix_spans(phoenix, uuid.UUID(str(session.pk)).hex, nodes.count())
    by_seq = {span["attributes"]["openprogram.seq"]: span for span in spans}
    assert set(by_seq) == {node.seq for node in nodes}
    for node in nodes:
        span = by_seq[node.seq]
        attributes = span["attributes"]
        assert attributes["openprogram.depth"] == node.depth and attributes["openprogram.nesting"] == node.name_depth
        assert attributes["openprogram.status"] == node.status and attributes["openprogram.refusal"] == node.refusal
        if node.kind == "llm":
            assert span["name"] == f"chat {node.model}" and attributes["gen_ai.operation.name"] == "chat"
            assert attributes["gen_ai.request.model"] == node.model
            assert attributes["gen_ai.usage.input_tokens"] == node.usage["input_tokens"]
            assert attributes["gen_ai.usage.output_tokens"] == node.usage["output_tokens"]
        elif node.name_depth:
            assert span["name"] == f"invoke_agent {node.name}" and attributes["gen_ai.agent.name"] == node.name
            assert attributes["gen_ai.operation.name"] == "invoke_agent"
        else:
            assert span["name"] == f"execute_tool {node.name}" and attributes["gen_ai.tool.name"] == node.name
            assert attributes["gen_ai.operation.name"] == "execute_tool"
        parent = by_seq[node.parent.seq]["context"]["span_id"] if node.parent else None
        assert span["parent_id"] == parent
    assert {by_seq[0]["attributes"]["gen_ai.agent.name"]} == {"research_agent"}
    assert max(span["attributes"]["openprogram.depth"] for span in spans) >= 2  # the wiki agent it delegated to
