"""What a run waiting for a person costs: database connections and CPU of a worker holding runs that wait
for approval and runs that are paused, beside a run that goes on.

On a scratch PostgreSQL database and the Redis of REDIS_URL, with one real
`celery -A openprogram_web worker --pool threads` process (the project's default concurrency and pool;
stopped by PID), this process launches attended sessions and measures the worker over WINDOW_S in
three states:

- idle: no run;
- waiting: a quarter, then all, of WAITING `careful_agent` runs, each waiting for a person to approve
  its `publish_note` call, and PAUSED `slow_count` runs, each paused at a boundary (as POST .../pause/
  does, through `dag.runs.steering`);
- beside a running one: the same, plus one `slow_count` that counts on (a call every 50 ms).

For each: the worker's CPU seconds in the window (/proc) and the peak of the database connections it
holds (pg_stat_activity by application name, sampled every ~50 ms: its connection pool's, idle ones
included, with its writer's, its heartbeat's, its reaper's and its stop watcher's). The floor: from a
quarter of the runs to all of them, the connections and the CPU do not grow (a connection per run
would add one for each). Every run is stopped at the end. Needs PostgreSQL (BENCH_PG_URL) and Redis
(REDIS_URL); without them it says why and exits 0. Runs in about a minute on 2 cores.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._cpu import process_seconds  # noqa: E402 (after the path is set)
from bench._pg import scratch_database  # noqa: E402
from bench._pg_activity import ActivitySampler  # noqa: E402
from bench._workers import Worker  # noqa: E402
from bench.bench_scaled import REDIS_URL, redis_missing, setup_django  # noqa: E402

WAITING = int(os.environ.get("BENCH_STEERING_WAITING", "20"))
PAUSED = int(os.environ.get("BENCH_STEERING_PAUSED", "20"))
WINDOW_S = 10.0
BOUND_S = 120.0  # a bound on the runs reaching their wait, never a figure
WORKER_LABEL = "bench-steering-worker"
LONG_COUNT = {"n": 10_000, "delay_s": 0.05}


def poll_until(condition, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"bench_steering: {what} did not happen within {BOUND_S:g} s")
        time.sleep(0.1)


def window(worker: Worker, url: str) -> dict:
    """The worker's CPU seconds over WINDOW_S and the peak of its connections meanwhile."""
    sampler = ActivitySampler(url).start()
    before = process_seconds(worker.pid)
    time.sleep(WINDOW_S)
    cpu = process_seconds(worker.pid) - before
    peaks = sampler.stop()
    return {"cpu_s": cpu, "connections": peaks["by_label"].get(WORKER_LABEL, 0)}


def launch_waiting(users: list, waiting: int, paused: int) -> list:
    """`waiting` runs waiting for approval and `paused` runs paused, one user each (the active-run limit)."""
    from dag.models import Node, Session
    from dag.runs import steering
    from dag.runs.launch import launch

    owners = iter(users)
    asking = [launch(next(owners), "careful_agent", {"task": f"note {i}"}) for i in range(waiting)]
    counting = [launch(next(owners), "slow_count", LONG_COUNT) for _ in range(paused)]
    for session in counting:
        poll_until(lambda: Node.objects.filter(session=session).exists(), "a count to start")
        steering.set_pause(session, True)
    ids = [session.pk for session in asking + counting]
    phases = ["awaiting_approval"] * waiting + ["paused"] * paused
    poll_until(lambda: [s.phase for s in Session.objects.filter(pk__in=ids).order_by("created_at")] == phases,
               "every run to wait for approval or be paused")
    return ids


def measure(url: str, log_dir: Path, env: dict) -> dict:
    from django.contrib.auth import get_user_model

    from dag.runs.launch import launch
    from dag.runs.lifecycle import request_stop
    users = [get_user_model().objects.create(username=f"bench-steering-{i}") for i in range(WAITING + PAUSED + 1)]
    worker = Worker(WORKER_LABEL, env, log_dir).wait_ready()
    ids = []
    try:
        figures = {"idle": window(worker, url)}
        quarter = (WAITING // 4, PAUSED // 4)
        ids = launch_waiting(users, *quarter)
        figures[f"{sum(quarter)} waiting"] = window(worker, url)
        ids += launch_waiting(users[sum(quarter):-1], WAITING - quarter[0], PAUSED - quarter[1])
        figures[f"{WAITING + PAUSED} waiting"] = window(worker, url)
        running = launch(users[-1], "slow_count", LONG_COUNT)
        ids.append(running.pk)
        poll_until(lambda: running.__class__.objects.get(pk=running.pk).status == "running", "the running one")
        figures["beside a running one"] = window(worker, url)
    finally:
        for session_id in ids:
            request_stop(session_id)
        worker.stop()
    return figures


def main() -> None:
    missing = redis_missing()
    if missing:
        print(f"bench_steering: not run: {missing}")
        return
    with scratch_database("bench_steering") as url:
        if url is None:
            return
        log_dir = Path(tempfile.mkdtemp(prefix="bench-steering-"))
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": REDIS_URL, "CELERY_BROKER_URL": REDIS_URL,
               "OPENPROGRAM_EXECUTOR": "celery", "OPENPROGRAM_VAR_DIR": str(log_dir), "OPENPROGRAM_MODEL": "sim",
               "OPENPROGRAM_FUNCTION_MODULES": "examples.functions",
               "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
               "OPENPROGRAM_CELERY_QUEUE": f"bench-steering-{os.getpid()}"}
        setup_django(env)
        from django.db import connections
        try:
            figures = measure(url, log_dir, env)
        finally:
            connections.close_all()
    print(f"One worker, {WAITING} runs waiting for approval and {PAUSED} paused; {WINDOW_S:g} s windows:")
    print(f"{'state':<24}{'worker CPU s':>14}{'its connections':>18}")
    for state, figure in figures.items():
        print(f"{state:<24}{figure['cpu_s']:>14.2f}{figure['connections']:>18}")
    few, many = (figure for state, figure in figures.items() if state.endswith(" waiting"))
    added = WAITING + PAUSED - sum((WAITING // 4, PAUSED // 4))
    print(f"{added} more waiting runs: {many['connections'] - few['connections']:+d} connections (one per run would "
          f"be +{added}), {(many['cpu_s'] - few['cpu_s']) * 1000 / WINDOW_S / added:+.3f} ms of CPU per run per "
          f"second (the rest is the worker's own: its stop watcher's poll, heartbeat and reaper)")


if __name__ == "__main__":
    main()
