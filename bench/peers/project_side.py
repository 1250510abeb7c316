"""This project's side of `bench/bench_peers.py`: run by the project's venv, answers one JSON line a request.

Models are scripted (a Provider that answers from the request: no network, no keys). The recorded-call
row uses the DjangoRecorder on a throwaway SQLite database in a scratch var/ directory, as
`bench/bench_recorder.py` does; Django is set up on the first such request only.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, ROOT]

# A scratch var/ (its SQLite database included), removed at exit: never the one `make run` serves.
SCRATCH = tempfile.TemporaryDirectory(prefix="bench-peers-project-")
os.environ["OPENPROGRAM_VAR_DIR"] = SCRATCH.name
os.environ["DATABASE_URL"] = f"sqlite:///{os.path.join(SCRATCH.name, 'bench.sqlite3')}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
os.environ["LOG_LEVEL"] = "WARNING"
for _key in ("REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENPROGRAM_MODEL"):
    os.environ.pop(_key, None)

from _worker import ScriptCapReached, mean_ms, outcome, per_call_us, serve  # noqa: E402

from runtime import Budget, Runtime, agentic_function, function  # noqa: E402
from runtime.messages import ModelReply, ToolCall  # noqa: E402
from runtime.providers import Provider  # noqa: E402


class Responder(Provider):
    """A scripted model: `respond(request)` gives each reply; counts calls; past `cap` it raises."""

    name = "bench-responder"
    default_model = "scripted"

    def __init__(self, respond, cap=None, delay_s=0.0):
        super().__init__()
        self.respond, self.cap, self.delay_s = respond, cap, delay_s
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            if self.cap is not None and self.calls >= self.cap:
                raise ScriptCapReached(f"the scripted model's cap of {self.cap} calls was reached")
            self.calls += 1
            n = self.calls
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.respond(request, n)


def _tool_results(request) -> int:
    return sum(1 for m in request.messages if m.get("role") == "tool")


def _call(name, n, **arguments):
    return ModelReply(tool_calls=[ToolCall(f"call_{n}_{name}", name, arguments)])


# --- 1. the standalone wrapper --------------------------------------------------------------------

def plain(x):
    return x


@agentic_function(register_globally=False)
def agentic(x):
    return x


def wrapper(number=10_000, repeat=3) -> dict:
    return {"plain_us": per_call_us(lambda: plain(1), number, repeat),
            "agentic_us": per_call_us(lambda: agentic(1), number, repeat)}


# --- 2. a recorded call: DjangoRecorder on SQLite ------------------------------------------------

_django = {}


def _setup_django():
    if not _django:
        import django
        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from dag.models import Session
        try:
            from dag.recording.recorder import DjangoRecorder
        except ImportError:  # before the dag/ sub-packages
            from dag.recorder import DjangoRecorder
        try:
            from dag.recording.write_path import queue_session
        except ImportError:  # before the one write path: an older checkout measured for comparison
            def queue_session(owner, **fields):
                return Session.objects.create(owner=owner, **fields)
        call_command("migrate", verbosity=0)
        owner = get_user_model().objects.create(username=f"bench-peers-{uuid.uuid4().hex[:8]}")
        _django.update(queue_session=queue_session, DjangoRecorder=DjangoRecorder, owner=owner)
    return _django


@agentic_function(register_globally=False)
def leaf(i: int, note: str = "a short argument") -> dict:
    """A leaf call: what a tool call inside a run looks like."""
    return {"i": i, "ok": True}


def recorded(calls=300) -> dict:
    from runtime import use_recorder
    d = _setup_django()
    recorder = d["DjangoRecorder"](d["queue_session"](d["owner"], function="bench-peers"))
    with use_recorder(recorder):
        leaf(-1)
        started = time.perf_counter()
        for i in range(calls):
            leaf(i)
        elapsed = time.perf_counter() - started
    return {"ms_per_call": elapsed / calls * 1e3}


# --- 3. a four-level delegation chain -------------------------------------------------------------

@agentic_function(register_globally=False)
def chain_d(task: str, runtime) -> str:
    """Level D: answers."""
    return runtime.exec(task, tools=[])


@agentic_function(register_globally=False)
def chain_c(task: str, runtime) -> str:
    """Level C: delegates to D."""
    return runtime.exec(task, tools=[chain_d])


@agentic_function(register_globally=False)
def chain_b(task: str, runtime) -> str:
    """Level B: delegates to C."""
    return runtime.exec(task, tools=[chain_c])


@agentic_function(register_globally=False)
def chain_a(task: str, runtime) -> str:
    """Level A: delegates to B."""
    return runtime.exec(task, tools=[chain_b])


def _delegate_once(request, n):
    """Each level: one tool call to the next level (the one tool it is offered), then an answer."""
    names = request.tool_names()
    if names and not _tool_results(request):
        return _call(names[0], n, task="go one level down")
    return ModelReply(text=f"answer {n}")


def chain(runs=20) -> dict:
    provider = Responder(_delegate_once)
    runtime = Runtime(provider=provider)
    answers = []
    ms = mean_ms(lambda: answers.append(chain_a("delegate", runtime=runtime)), runs)
    return {"ms_per_run": ms, "model_calls_per_run": provider.calls / (runs + 1), "answer": answers[-1]}


# --- 4. runaway self-delegation -------------------------------------------------------------------

@agentic_function
def runaway(task: str, runtime) -> str:
    """Handle the task (the model keeps handing it back to this very function)."""
    return runtime.exec(task)  # the default toolset: every registered tool, this function included


def _always_self(request, n):
    return _call("runaway", n, task="handle it")


def runaway_row(setting: str, cap=2000) -> dict:
    provider = Responder(_always_self, cap=cap)
    runtime = Runtime(provider=provider)
    if setting == "defaults":
        run = lambda: runaway("handle it", runtime=runtime)  # noqa: E731
    elif setting == "max_depth=1":
        def run():
            with Budget(max_depth=1):
                return runaway("handle it", runtime=runtime)
    else:
        raise ValueError(f"unknown runaway setting {setting!r}")
    result = outcome(run, lambda: provider.calls)
    result["cap"] = cap
    result["default_max_llm_calls"] = os.environ.get("OPENPROGRAM_MAX_LLM_CALLS", "unset")
    return result


# --- 5. one budget under fan-out ------------------------------------------------------------------

@function(register_globally=False)
def noop() -> str:
    """Do nothing."""
    return "ok"


@agentic_function(register_globally=False)
def branch(i: int, runtime) -> str:
    """One branch: two tool calls, then an answer (three model calls)."""
    return runtime.exec(f"branch {i}", tools=[noop])


def _fan_out(branches):
    def respond(request, n):
        names = request.tool_names()
        if "branch" in names:
            if _tool_results(request):
                return ModelReply(text="all branches done")
            return ModelReply(tool_calls=[ToolCall(f"call_{n}_{i}", "branch", {"i": i}) for i in range(branches)])
        if _tool_results(request) < 2:
            return _call("noop", n)
        return ModelReply(text="branch done")
    return respond


def fan_out(trials=50, branches=16, max_llm_calls=10, delay_s=0.001) -> dict:
    admitted, receives = [], set()
    for _ in range(trials):
        provider = Responder(_fan_out(branches), delay_s=delay_s)
        runtime = Runtime(provider=provider)

        def run():
            with Budget(max_llm_calls=max_llm_calls):
                return runtime.exec("fan out", tools=[branch])
        result = outcome(run, lambda: provider.calls)
        admitted.append(result["calls"])
        receives.add(result["receives"].split(":")[0])
    return {"max": max(admitted), "min": min(admitted), "trials": trials,
            "demand": 1 + branches * 3 + 1, "receives": sorted(receives)}


if __name__ == "__main__":
    serve({"wrapper": wrapper, "recorded": recorded, "chain": chain, "runaway": runaway_row,
           "fan_out": fan_out})
