"""Stop latency: from the stop request to the session being `cancelled` in the database.

Issue 6 asks that a stop acts within one second on the examples. Measured here, over several trials each,
with the stop pressed at a random moment once the run is under way:

- `slow_count` (the example, default delay 0.5 s between counts), stopped from this process (the API's
  path: persist the flag, signal the run's event) and from "another process" (only the flag is written;
  the run's watcher thread finds it by polling the database);
- a run on the simulated model making model call after model call (10 ms apart, so that it runs for
  seconds within the default bound of 500 model calls), stopped from this process: the stop lands at a
  model-call boundary.

Runs against a throwaway SQLite database (or DATABASE_URL if set), with the in-process executor.
"""
from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIALS = int(os.environ.get("BENCH_STOP_TRIALS", "15"))
POLL_S = 0.002

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
# A scratch var/ (its SQLite database included), removed at exit: never the one `make run` serves.
SCRATCH = tempfile.TemporaryDirectory(prefix="bench-stop-")
os.environ["OPENPROGRAM_VAR_DIR"] = SCRATCH.name
os.environ["OPENPROGRAM_FUNCTION_MODULES"] = "examples.functions,__main__"
for _key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENPROGRAM_MODEL"):
    os.environ.pop(_key, None)  # the offline simulated model
sys.path.insert(0, ROOT)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from dag.models import Node, Session  # noqa: E402
from dag.recording import write_path  # noqa: E402
from dag.runs import lifecycle  # noqa: E402
from dag.runs.launch import launch  # noqa: E402
from runtime import agentic_function  # noqa: E402
from runtime.runtime import llm  # noqa: E402


@agentic_function
def chatter(rounds: int = 400, pause_s: float = 0.01) -> int:
    """Ask the model one short question after another, `pause_s` apart (a run on the simulated model of
    about 4 s, within the default bound of 500 model calls a run)."""
    for i in range(rounds):
        llm(f"Say something about round {i}.")
        time.sleep(pause_s)
    return rounds


def wait_until(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(POLL_S)
    raise RuntimeError("timed out: the run did not get under way or did not stop")


def trial(owner, function: str, args: dict, stop) -> float:
    """Seconds from the stop request to `cancelled` being stored, for one run."""
    session = launch(owner, function, args)
    wait_until(lambda: Node.objects.filter(session=session).count() >= 3)
    time.sleep(random.uniform(0, 0.5))
    started = time.perf_counter()
    stop(session.pk)
    wait_until(lambda: cancelled(session.pk))
    return time.perf_counter() - started


def cancelled(session_id) -> bool:
    """Whether the session ended `cancelled`; an error naming how it ended if it ended otherwise."""
    status, error = Session.objects.values_list("status", "error").get(pk=session_id)
    if status in Session.TERMINAL and status != Session.Status.CANCELLED:
        raise RuntimeError(f"session {session_id} ended {status}, not stopped: {error}")
    return status == Session.Status.CANCELLED


def from_another_process(session_id) -> None:
    # What a stop in another server process leaves for this one: the persisted flag, no signal.
    write_path.update_session(session_id, unless_terminal=True, cancel_requested=True)


def report(name: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    print(f"{name:<52} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   max {ms[-1]:7.1f} ms   "
          f"(n={len(ms)}; {sum(1 for s in ms if s < 1000)}/{len(ms)} within 1 s)")


def main() -> None:
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create(username=f"bench-stop-{uuid.uuid4().hex[:8]}")
    random.seed(6)
    try:
        print(f"stop latency, request -> session cancelled ({TRIALS} trials each; "
              f"database: {django.db.connection.vendor})")
        cases = [
            ("slow_count(n=1000, delay_s=0.5), stop in-process", "slow_count", {"n": 1000, "delay_s": 0.5},
             lifecycle.request_stop),
            ("slow_count(n=1000, delay_s=0.5), stop from elsewhere", "slow_count", {"n": 1000, "delay_s": 0.5},
             from_another_process),
            ("simulated-model run (model call after model call)", "chatter", {}, lifecycle.request_stop),
        ]
        for name, function, args, stop in cases:
            report(name, [trial(owner, function, args, stop) for _ in range(TRIALS)])
    finally:
        owner.delete()


if __name__ == "__main__":
    main()
