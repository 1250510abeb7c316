"""What the exec loop adds around a model call, and what one SDK request costs locally.

Prints figures (never asserted in tests). Run: .venv/bin/python bench/bench_exec.py

1. exec overhead: one `Runtime.exec` that makes one model call, against calling the provider directly
   with the same request (an instant in-memory provider, so only the runtime's work is measured).
2. a tool round trip: exec with one tool call and a final answer (two model calls, one dispatch).
3. recording: the same exec with a no-op Recorder installed, as a ratio to none.
4. an OpenAI-protocol request through the official SDK against a local fake server (per attempt a
   fresh client sharing one TLS context), against the raw HTTP round trip with http.client.
5. stop latency: from a stop being signalled while a request hangs to the caller getting CancelledError.
"""
from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import threading
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime import (CancelledError, Recorder, add_pre_invocation_hook, function,  # noqa: E402
                     remove_pre_invocation_hook, use_recorder)
from runtime.messages import ModelReply, ModelRequest, ToolCall  # noqa: E402
from runtime.providers import Provider  # noqa: E402
from runtime.providers.openai_provider import OpenAIProvider  # noqa: E402
from runtime.retry import RetryPolicy  # noqa: E402
from runtime.runtime import Runtime  # noqa: E402
from tests.unit.fakes.protocols import OpenAIWire  # noqa: E402
from tests.unit.fakes.server import FakeServer, hang  # noqa: E402


class Instant(Provider):
    """Answers at once; asks for one `ping` call first when the task says so."""

    name = "instant"

    def complete(self, request, check=None):
        if request.tools and not any(m["role"] == "tool" for m in request.messages):
            return ModelReply(tool_calls=[ToolCall("c1", "ping", {})])
        return ModelReply(text="done")


@function
def ping() -> str:
    """Ping."""
    return "pong"


def best(fn, number, repeat=5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    provider = Instant()
    runtime = Runtime(provider=provider)
    request = ModelRequest(system="", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    direct = best(lambda: provider.complete(request), 20_000)
    one_call = best(lambda: runtime.exec("hi", toolset="none"), 5_000)
    print(f"provider.complete directly:         {direct * 1e6:8.2f} µs")
    print(f"exec, one model call, no tools:     {one_call * 1e6:8.2f} µs  (runtime adds {(one_call - direct) * 1e6:.2f} µs)")
    round_trip = best(lambda: runtime.exec("hi", tools=[ping]), 2_000)
    print(f"exec, one tool call + answer:       {round_trip * 1e6:8.2f} µs")
    with use_recorder(Recorder()):
        recorded = best(lambda: runtime.exec("hi", tools=[ping]), 2_000)
    print(f"same with a no-op recorder:         {recorded * 1e6:8.2f} µs  (ratio {recorded / round_trip:.2f})")

    responses = [OpenAIWire.answer("ok")] * 400
    with FakeServer(responses) as server:
        sdk = OpenAIProvider("fake", api_key="k", base_url=OpenAIWire.base_url(server.url), retry=RetryPolicy(0))
        sdk.complete(request)  # imports, TLS context
        through_sdk = best(lambda: sdk.complete(request), 50, repeat=3)
        body = json.dumps({"model": "fake", "messages": []})
        host, port = server.url.removeprefix("http://").split(":")

        def raw():
            conn = http.client.HTTPConnection(host, int(port))
            conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
            conn.getresponse().read()
            conn.close()
        raw_http = best(raw, 50, repeat=3)
    print(f"openai SDK request, local server:   {through_sdk * 1e3:8.2f} ms  "
          f"(raw http.client: {raw_http * 1e3:.2f} ms, ratio {through_sdk / raw_http:.1f})")

    print(f"stop latency, request in flight:    {stop_latency(request) * 1e3:8.2f} ms  (median of 5)")


def stop_latency(request) -> float:
    stop = threading.Event()
    stopped_at = [0.0]

    def stop_button(event):
        if stop.is_set():
            raise CancelledError("stop")
    add_pre_invocation_hook(stop_button)
    samples = []
    try:
        for _ in range(5):
            stop.clear()
            with FakeServer([hang]) as server:
                sdk = OpenAIProvider("fake", api_key="k", base_url=OpenAIWire.base_url(server.url))

                def press():
                    server.arrived.wait(10)
                    stopped_at[0] = time.perf_counter()
                    stop.set()
                threading.Thread(target=press, daemon=True).start()
                try:
                    Runtime(provider=sdk).llm("hang")
                except CancelledError:
                    samples.append(time.perf_counter() - stopped_at[0])
    finally:
        remove_pre_invocation_hook(stop_button)
    return statistics.median(samples)


if __name__ == "__main__":
    main()
