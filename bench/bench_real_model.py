"""A real model on a real server: how often it calls the function it runs in, with and without the
situational note, and how many model calls a forced runaway makes before the guard ends it.

By default it starts llama-cpp-python's server with SmolLM2-135M-Instruct (tests/models/llama_server.py;
`make model-server` installs both). That model is too weak to show the note's effect: its choice of
tool hardly depends on the prompt, so the two self-call rates differ by chance. To measure a model
that reads its prompt, point the bench at your own server: OPENAI_BASE_URL (and OPENAI_API_KEY if it
takes one) and OPENPROGRAM_MODEL=openai:<model>. BENCH_TRIALS sets the trials per condition (5).

"Without the note" removes the runtime's situational text blocks from every user turn before they are
sent (the refusal note goes with them: it is the same channel). Figures only, no assertions.
"""
import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Literal

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime import ExecLimitExceeded, Runtime, agentic_function, function  # noqa: E402
from runtime.providers.base import split_model_spec  # noqa: E402
from runtime.providers.openai_provider import to_openai_messages  # noqa: E402
from tests.models.llama_server import (HOW_TO_ENABLE, CountingProvider, ModelServer, model_path,  # noqa: E402
                                       provider_on)

TRIALS = int(os.environ.get("BENCH_TRIALS") or 5)
TOPICS = ["the history of tea", "how bees make honey", "why the sky is blue", "the tallest mountain",
          "how tides work", "the first computer", "what rust is", "how a compass works"]


class Observed(CountingProvider):
    """Keeps every request it sends, beside CountingProvider's outcomes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests: list = []

    def complete(self, request, check=None):
        self.requests.append(request)
        return super().complete(request, check)


class WithoutNote(Observed):
    """The same model, never shown the runtime's situational text."""

    def complete(self, request, check=None):
        return super().complete(dataclasses.replace(request, messages=[_without_note(m) for m in request.messages]),
                                check)


def _without_note(message: dict) -> dict:
    if message["role"] != "user" or isinstance(message["content"], str):
        return message
    return {**message, "content": [b for b in message["content"] if b.get("source") != "situational"]}


@function(register_globally=False)
def lookup(topic: str) -> str:
    """Look a topic up in the encyclopedia and return what it says."""
    return f"The encyclopedia's entry on {topic}."


@agentic_function(register_globally=False)
def research(topic: str, runtime=None) -> str:
    """Research a topic and answer in one sentence."""
    # One model call: the first choice is what is measured (a tool call ends the exec at its limit).
    return runtime.exec(f"Research {topic} and answer in one sentence.", tools=[research, lookup], max_iterations=1)


@agentic_function(register_globally=False)
def delegate(topic: Literal["news", "weather"], runtime=None) -> str:
    """Summarise the latest on a topic, by handing it on."""
    return runtime.exec(f"Summarise the latest {topic}.", tools=[delegate], tool_choice="required", max_iterations=3)


def self_calls(model: Observed) -> int:
    for index in range(TRIALS):
        try:
            research(TOPICS[index % len(TOPICS)], runtime=Runtime(provider=model))
        except ExecLimitExceeded:
            pass
    return sum(any(call.name == "research" for call in getattr(reply, "tool_calls", ()))
               for reply in model.outcomes)


def runaway(model: Observed) -> str:
    try:
        delegate("news", runtime=Runtime(provider=model))
        ended = "returned an answer"
    except Exception as exc:  # what ends the run is the figure
        ended = f"{type(exc).__name__}: {str(exc)[:60]}"
    return f"{len(model.outcomes):>6}   {ended}"


def prompt_tokens(model: Observed, request) -> int:
    """The server's count of the request's prompt tokens (one generated token, its text unused)."""
    client = model.make_client(model.timeout_s)
    try:
        answer = client.chat.completions.create(model=model.model, messages=to_openai_messages(request), max_tokens=1)
    finally:
        client.close()
    return answer.usage.prompt_tokens


def run(make) -> None:
    noted, bare = make(Observed), make(WithoutNote)
    rows = [(label, self_calls(model), model) for label, model in (("with the situational note", noted),
                                                                    ("without it", bare))]
    first = noted.requests[0]
    added = prompt_tokens(noted, first) - prompt_tokens(noted, dataclasses.replace(
        first, messages=[_without_note(m) for m in first.messages]))
    print(f"{'first choice in `research` (offered itself and `lookup`)':58} {'self-calls':>10} {'rate':>6}")
    for label, count, _ in rows:
        print(f"{label:58} {f'{count}/{TRIALS}':>10} {count / TRIALS:6.0%}")
    print(f"prompt tokens the note adds to the first user turn: {added}")
    print(f"\n{'forced runaway (`delegate` must call itself)':58} {'model calls':>11}   how the run ended")
    for label, cls in (("with the situational note", Observed), ("without it", WithoutNote)):
        print(f"{label:58} {runaway(make(cls))}")


def main() -> None:
    print(f"== a real model: self-calls over {TRIALS} trials per condition, a forced runaway")
    if os.environ.get("OPENAI_BASE_URL"):
        _, name = split_model_spec(os.environ.get("OPENPROGRAM_MODEL") or "openai:default")
        print(f"model {name!r} at {os.environ['OPENAI_BASE_URL']}")
        run(lambda cls: cls(name or "default", max_tokens=256, timeout_s=600))
        return
    gguf = model_path()
    if gguf is None:
        print(f"skipped: {HOW_TO_ENABLE}")
        return
    print("SmolLM2-135M-Instruct on llama-cpp-python's server (one thread): too weak a model to show the note's "
          "effect;\nset OPENAI_BASE_URL and OPENPROGRAM_MODEL=openai:<model> to measure a stronger one")
    server = ModelServer(gguf, Path(tempfile.mkdtemp(prefix="bench-real-model-")) / "server.log")
    try:
        server.wait_until_serving()
        run(lambda cls: provider_on(server, cls))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
