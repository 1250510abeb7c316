"""Scale-out: sessions per second on Celery workers beside the embedded default, and cross-process stops.

The same I/O-bound workload everywhere: SESSIONS sessions of `io_agent` (bench/_io_functions.py), each
making CALLS model calls to a provider that waits WAIT_S like a real one, all launched at once. Measured
from the first launch to the last session's end:

- the embedded default (its own process: SQLite, the in-process pool of 8 threads);
- one Celery worker (8 threads), then two, on PostgreSQL + Redis, launched from this process as the web
  process would; the ratio two/one;
- the latency of a stop from this process to a run on a worker, to `cancelled` in the database, with
  the Redis pub/sub wake-up and with the database poll alone.

Needs PostgreSQL and Redis (DATABASE_URL, REDIS_URL, default the local ones `make test` uses); without
them it says why and exits 0. Runs on a scratch database it creates and drops; workers are stopped by PID.
"""
from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
PG_URL = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/openprogram"
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
SESSIONS = int(os.environ.get("BENCH_SCALED_SESSIONS", "64"))
CALLS = 5
THREADS = 8  # per worker, and the embedded pool
STOP_TRIALS = int(os.environ.get("BENCH_SCALED_STOP_TRIALS", "10"))
WORKLOAD = {
    "OPENPROGRAM_FUNCTION_MODULES": "examples.functions,bench._io_functions",
    "OPENPROGRAM_MODEL": "bench._io_functions.WaitingProvider:io",
    "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
    "LOG_LEVEL": "WARNING",
}


def services_missing() -> str | None:
    """Why PostgreSQL + Redis cannot be used here, or None."""
    try:
        import psycopg
        import redis
        psycopg.connect(PG_URL, connect_timeout=3).close()
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2).ping()
    except Exception as exc:
        return f"PostgreSQL ({PG_URL}) and Redis ({REDIS_URL}) must both answer: {type(exc).__name__}: {exc}"
    return None


def setup_django(env: dict) -> None:
    os.environ.update(env)
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)


def owner():
    from django.contrib.auth import get_user_model
    return get_user_model().objects.create(username=f"bench-scaled-{uuid.uuid4().hex[:8]}")


def workload(user, sessions: int = SESSIONS) -> dict:
    """Launch `sessions` io_agent runs at once; sessions/s and node events/s until the last one ends."""
    from dag.models import Node, Session
    from dag.runs.launch import launch

    started = time.perf_counter()
    ids = [launch(user, "io_agent", {"calls": CALLS}).pk for _ in range(sessions)]
    rows = Session.objects.filter(pk__in=ids)
    while rows.exclude(status__in=Session.TERMINAL).exists():
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    statuses = set(rows.values_list("status", flat=True))
    events = 2 * Node.objects.filter(session_id__in=ids).count()  # each node is entered, then exited
    return {"sessions_s": sessions / elapsed, "events_s": events / elapsed, "elapsed": elapsed,
            "statuses": sorted(statuses)}


def embedded() -> None:
    """The child process: the embedded default on a scratch SQLite database; prints its figures as JSON."""
    scratch = tempfile.mkdtemp(prefix="bench-scaled-")
    setup_django({**WORKLOAD, "OPENPROGRAM_VAR_DIR": scratch, "DATABASE_URL": "", "REDIS_URL": "",
                  "OPENPROGRAM_EXECUTOR": "inprocess", "OPENPROGRAM_EXECUTOR_WORKERS": str(THREADS)})
    user = owner()
    workload(user, THREADS)  # warm-up: imports, connections, the pool's threads
    print(json.dumps(workload(user)))


def start_worker(env: dict, name: str, log_dir: str) -> subprocess.Popen:
    log = open(os.path.join(log_dir, f"{name}.log"), "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "openprogram_web", "worker", "--pool", "threads",
         "--concurrency", str(THREADS), "-n", f"{name}@%h", "--loglevel", "INFO", "--without-mingle",
         "--without-gossip"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while " ready." not in open(log.name).read():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker {name} did not start:\n{open(log.name).read()[-2000:]}")
        time.sleep(0.1)
    return process


def stop_workers(workers: list) -> None:
    for process in workers:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
    for process in workers:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
    workers.clear()


def stop_latency(user, trials: int) -> list[float]:
    """Seconds from request_stop in this process to `cancelled` stored, for runs on a worker."""
    from dag.models import Node, Session
    from dag.runs import lifecycle
    from dag.runs.launch import launch

    samples = []
    for _ in range(trials):
        session = launch(user, "slow_count", {"n": 1000, "delay_s": 0.2})
        while Node.objects.filter(session=session).count() < 3:
            time.sleep(0.005)
        time.sleep(random.uniform(0, 0.3))
        started = time.perf_counter()
        lifecycle.request_stop(session.pk)
        while not Session.objects.filter(pk=session.pk, status=Session.Status.CANCELLED).exists():
            time.sleep(0.002)
        samples.append(time.perf_counter() - started)
    return samples


def row(name: str, figures: dict) -> None:
    print(f"{name:<34} {figures['sessions_s']:8.1f} sessions/s {figures['events_s']:9.0f} node events/s   "
          f"({SESSIONS} sessions in {figures['elapsed']:.2f} s; {', '.join(figures['statuses'])})")


def latency_row(name: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    print(f"{name:<34} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   max {ms[-1]:7.1f} ms   (n={len(ms)})")


def main() -> None:
    missing = services_missing()
    if missing:
        print(f"bench_scaled: not run: {missing}")
        return
    done = subprocess.run([sys.executable, __file__, "--embedded"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **WORKLOAD}, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the embedded run failed:\n{done.stderr[-3000:]}")
    embedded_figures = json.loads(done.stdout.strip().splitlines()[-1])

    import psycopg
    scratch_db = f"bench_scaled_{os.getpid()}"
    base = PG_URL.rsplit("/", 1)[0]
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{scratch_db}"')
    log_dir = tempfile.mkdtemp(prefix="bench-scaled-workers-")
    env = {**os.environ, **WORKLOAD, "DATABASE_URL": f"{base}/{scratch_db}", "REDIS_URL": REDIS_URL,
           "CELERY_BROKER_URL": REDIS_URL, "OPENPROGRAM_EXECUTOR": "celery", "OPENPROGRAM_VAR_DIR": log_dir,
           "OPENPROGRAM_CELERY_QUEUE": f"bench-{os.getpid()}"}
    workers: list = []
    try:
        setup_django(env)
        from django.conf import settings
        from django.db import connection

        from dag.conf import conf
        user = owner()
        print(f"I/O-bound sessions ({CALLS} model calls of {0.1:g} s each), {THREADS} threads per process, "
              f"{os.cpu_count()} CPUs")
        row("embedded (SQLite, in-process)", embedded_figures)
        workers.append(start_worker(env, "bench-1", log_dir))
        workload(user, THREADS)  # warm-up
        one = workload(user)
        row("1 Celery worker (PostgreSQL)", one)
        workers.append(start_worker(env, "bench-2", log_dir))
        workload(user, 2 * THREADS)
        two = workload(user)
        row("2 Celery workers (PostgreSQL)", two)
        print(f"{'two workers / one':<34} {two['sessions_s'] / one['sessions_s']:8.2f}x sessions/s")
        random.seed(12)
        latency_row("stop, web -> worker, pub/sub", stop_latency(user, STOP_TRIALS))
        settings.OPENPROGRAM_STOP_PUBSUB = False
        conf.reload()
        latency_row("stop, web -> worker, poll alone", stop_latency(user, STOP_TRIALS))
        connection.close()
    finally:
        stop_workers(workers)
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{scratch_db}" WITH (FORCE)')


if __name__ == "__main__":
    embedded() if sys.argv[1:] == ["--embedded"] else main()
