"""OpenTelemetry export: each ended node a span with the GenAI names and attributes and this project's
depth, one trace per session, received by a real OTLP/HTTP receiver; an unreachable one costs the run
nothing but a counted warning."""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording.write_path import process_writer
from dag.recording.write_path.writer_process import ProcessWriter
from dag.telemetry import export
from dag.telemetry.span_process import MAX_QUEUED, CountedExporter

from ...database_url import database_url
from .otlp_receiver import OtlpReceiver
from .replays import recorded

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def receiver():
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def exporting():
    """Start the export to a URL (as OPENPROGRAM_OTLP_ENDPOINT would at start-up); stopped after the test."""
    yield lambda url: export.start(url, timeout_s=2)
    export.stop()


@pytest.fixture(params=["thread", "process"])
def writer(request, monkeypatch):
    """Runs recorded by a writer thread, or by a writer process (as the server runs), whose encoded
    changes the serving process must hand over undecoded: decoding them here would fail."""
    if request.param == "thread":
        yield request.param
        return

    class Undecodable:
        @staticmethod
        def loads(text):
            raise AssertionError("the serving process decoded a writer process's changes")
    monkeypatch.setattr(broadcast, "json", Undecodable)
    with process_writer.use_writer(ProcessWriter()):
        yield request.param


def by_seq(spans, session) -> dict:
    return {span["attributes"]["openprogram.seq"]: span for span in spans
            if span["traceId"] == uuid.UUID(str(session.pk)).hex}


def test_every_node_is_a_span_of_its_sessions_trace(receiver, exporting, writer, user, debug_functions,
                                                     provider_calls):
    forwarder = exporting(receiver.url)
    session = recorded(user, "two_questions")
    assert forwarder.flush()
    spans = by_seq(receiver.spans, session)
    nodes = {node.seq: node for node in Node.objects.filter(session=session)}
    assert set(spans) == set(nodes)
    entry, first, second = spans[0], spans[1], spans[2]
    assert entry["name"] == "invoke_agent two_questions" and entry["parentSpanId"] == ""
    expected = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "two_questions", "openprogram.depth": 1,
                "openprogram.nesting": 1, "openprogram.refusal": "", "openprogram.status": "completed"}
    assert entry["attributes"].items() >= expected.items()
    assert entry["resource"]["service.name"] == "openprogram-web"
    model = nodes[1].model
    assert first["name"] == f"chat {model}" and first["parentSpanId"] == entry["spanId"]
    assert first["attributes"]["gen_ai.operation.name"] == "chat"
    assert first["attributes"]["gen_ai.request.model"] == model
    assert first["attributes"]["gen_ai.usage.input_tokens"] == nodes[1].usage["input_tokens"]
    assert first["attributes"]["gen_ai.usage.output_tokens"] == nodes[1].usage["output_tokens"]
    assert second["attributes"]["openprogram.depth"] == 1 and second["status"] == {"code": "STATUS_CODE_OK"}


def test_plain_tools_failures_and_refusals_are_exported_as_such(receiver, exporting, user, debug_functions,
                                                               provider_calls):
    forwarder = exporting(receiver.url)
    failed = recorded(user, "report", numbers=[])
    assert forwarder.flush()
    spans = by_seq(receiver.spans, failed)
    divide = spans[2]
    assert divide["name"] == "execute_tool divide" and divide["attributes"]["gen_ai.tool.name"] == "divide"
    assert divide["attributes"]["openprogram.status"] == "error" and divide["attributes"]["error.type"] == "ZeroDivisionError"
    assert divide["status"]["code"] == "STATUS_CODE_ERROR"
    [exception] = divide["events"]
    assert exception["name"] == "exception" and "return a / b" in exception["attributes"]["exception.stacktrace"]
    assert spans[1]["parentSpanId"] == spans[0]["spanId"] and spans[2]["parentSpanId"] == spans[1]["spanId"]


def test_a_refused_call_carries_its_refusal(receiver, exporting, user, provider_calls):
    forwarder = exporting(receiver.url)
    session = recorded(user, "runaway_agent", task="Summarise the notes")
    assert forwarder.flush()
    spans = by_seq(receiver.spans, session).values()
    refused = [span for span in spans if span["attributes"]["openprogram.status"] == "refused"]
    assert refused and all(span["attributes"]["openprogram.refusal"] == "depth" for span in refused)
    assert max(span["attributes"]["openprogram.nesting"] for span in spans) == 6


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again: nothing listens there


def test_an_unreachable_receiver_drops_the_spans_with_a_counted_warning(exporting, writer, user, debug_functions,
                                                                       provider_calls, caplog):
    forwarder = exporting(f"http://127.0.0.1:{free_port()}")
    with caplog.at_level(logging.WARNING, logger="dag.telemetry.export"):
        session = recorded(user, "two_questions")
        forwarder.flush()
        # The receiver is now taken for away: the next run's spans are dropped where they are published.
        later = recorded(user, "two_questions")
        forwarder.flush()
    assert session.status == later.status == "completed"
    assert forwarder.dropped == 6 and forwarder.exported == 0 and forwarder.forwarded == 3
    assert "OpenTelemetry: 3 span(s) dropped so far" in caplog.text and "OPENPROGRAM_OTLP_ENDPOINT" in caplog.text
    assert caplog.text.count("span(s) dropped so far") == 1  # warned once a minute, not per batch


def test_while_the_receiver_is_away_nothing_is_handed_over_and_spans_resume_after(receiver, exporting, user,
                                                                                   debug_functions, provider_calls,
                                                                                   monkeypatch):
    """A batch the receiver did not take: for AWAY_S the nodes that end are dropped (counted) in the
    serving process, never handed to the span process; after it, they are sent again and taken."""
    now = [1000.0]
    monkeypatch.setattr(export, "_clock", lambda: now[0])
    forwarder = exporting(receiver.url)
    receiver.refusing = True
    refused = recorded(user, "two_questions")
    forwarder.flush()
    assert (forwarder.forwarded, forwarder.dropped) == (3, 3)
    away = recorded(user, "two_questions")
    forwarder.flush()
    assert (forwarder.forwarded, forwarder.dropped) == (3, 6)
    receiver.refusing = False
    now[0] += export.AWAY_S
    back = recorded(user, "two_questions")
    assert forwarder.flush()
    assert (forwarder.forwarded, forwarder.exported, forwarder.dropped) == (6, 3, 6)
    assert set(by_seq(receiver.spans, back)) == {0, 1, 2}
    assert not by_seq(receiver.spans, refused) and not by_seq(receiver.spans, away)


class Outcomes(SpanExporter):
    """An exporter whose batches succeed or fail as told."""

    def __init__(self):
        self.result = SpanExportResult.SUCCESS

    def export(self, spans):
        return self.result


def test_the_span_process_builds_no_more_spans_than_its_processor_holds_and_counts_the_rest():
    """Spans past what the SDK's queue holds would be built, then dropped by it uncounted: they are
    dropped unbuilt and counted instead; and what was sent before a failed batch was known is dropped."""
    outcomes, reports = Outcomes(), []
    exporter = CountedExporter(outcomes, reports.append)
    assert exporter.take(MAX_QUEUED + 100, failures_known=0) == MAX_QUEUED
    assert exporter.totals == {"exported": 0, "dropped": 100, "failures": 0}
    exporter.export([None] * 500)  # 500 of them sent: room for 500 more
    assert exporter.take(600, failures_known=0) == 500
    outcomes.result = SpanExportResult.FAILURE
    exporter.export([None] * 10)
    assert reports[-1] == {"exported": 500, "dropped": 210, "failures": 1}
    assert exporter.take(5, failures_known=0) == 0  # sent before the serving process knew of the failure
    assert exporter.take(5, failures_known=1) == 5
    assert exporter.totals == {"exported": 500, "dropped": 215, "failures": 1}


def test_the_endpoint_setting_is_checked(settings):
    from django.core.exceptions import ImproperlyConfigured

    from dag.conf import conf
    settings.OPENPROGRAM_OTLP_ENDPOINT = "127.0.0.1:4318"
    with pytest.raises(ImproperlyConfigured, match="OPENPROGRAM_OTLP_ENDPOINT must be an http:// or https:// URL"):
        conf.OTLP_ENDPOINT
    assert export.traces_url("http://h:6006") == "http://h:6006/v1/traces"
    assert export.traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_the_setting_exports_a_cli_runs_spans_before_it_exits(receiver, local_user):
    """OPENPROGRAM_OTLP_ENDPOINT in the environment of `manage.py run_function`: its run's spans are sent
    by the time the command has exited."""
    environ = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
               "OPENPROGRAM_OTLP_ENDPOINT": receiver.url, "OPENPROGRAM_FUNCTION_MODULES": "tests.web.debugging.debug_functions"}
    for name in ("OPENPROGRAM_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        environ.pop(name, None)
    done = subprocess.run([sys.executable, "manage.py", "run_function", "two_questions"], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    session = Session.objects.get()
    assert set(by_seq(receiver.spans, session)) == {0, 1, 2}
