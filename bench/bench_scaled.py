"""Scale-out under the default settings: one Celery worker against two, and what a waiting run costs.

On a scratch PostgreSQL database and the Redis of REDIS_URL, with a live Daphne server and real
`celery -A openprogram_web worker --pool threads` processes (the project's default concurrency and
connection pool, as dag.conf reads them; each stopped by PID), this process launches sessions as the web
process would and prints, side by side for one worker and for two:

- a CPU-bound recording load: CPU_SESSIONS sessions of CPU_LOAD, model calls to a model that answers at
  once, each followed by tool calls (bench/_waiting_functions.py); recorded calls (nodes) per second,
  and the ratio of two workers to one;
- an I/O-bound load: IO_SESSIONS sessions of IO_LOAD, model calls that each wait, all launched at once;
  the wall time from the first launch to the last end, against the ideal (one session's waits: every
  session waiting at the same time), and the most sessions running at once;
- during the I/O-bound load, the peak of the database's connections (pg_stat_activity sampled every
  ~50 ms, by process) and the latency from a node's commit to its arrival at a websocket client watching
  its session on the live server (p50, p95); and the CPU each session cost, by part (the workers, the
  web server, this process with the websocket clients', the machine's PostgreSQL), their sum beside
  what the cores give in the ideal wall time: a load that needs more queues for CPU, and its latencies
  say so;
- the live view beside waiting runs, on two workers: IO_SESSIONS sessions launched, each watched by a
  client, left waiting on their model; then PROBES runs record their turns (PROBE_LOAD) while those
  wait, and the latency from commit to browser of the probes' node changes is printed beside the same
  probes with no run waiting (the floor, measured in the same run), with the workers' cores while the
  runs only wait: a run that waits should cost nothing, so the two latencies should be alike;
- the memory one waiting run costs: a worker's resident memory with N sessions waiting on their model,
  less its idle memory, over N (N: its concurrency, at most IO_SESSIONS);
- a stop's latency from this process to a run on a worker.

The per-user limit on active runs is left at its default: the sessions are launched by as many bench users
as it takes (each within both its active-run limit and its live-socket limit). Each load has a deadline:
past it, what ended is reported, the rest is stopped, and the bench goes on, so it ends by itself (in
under four minutes on 2 cores). Needs PostgreSQL (BENCH_PG_URL) and Redis (REDIS_URL); without them it says why
and exits 0. The scratch database is named BENCH_SCALED_DATABASE (default bench_scaled) and this process's
id, and dropped at the end.
"""
from __future__ import annotations

import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._live_watch import LiveWatch  # noqa: E402 (after the path is set)
from bench._load_cpu import CpuByPart, LoadCpu  # noqa: E402
from bench._pg import scratch_database  # noqa: E402
from bench._pg_activity import ActivitySampler  # noqa: E402
from bench._scaled_report import print_table  # noqa: E402
from bench._workers import Worker  # noqa: E402

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
DATABASE_PREFIX = os.environ.get("BENCH_SCALED_DATABASE", "bench_scaled")
CPU_SESSIONS = 24
# Each context rendered for a model call reads the session's earlier calls, so a run of hundreds of model
# calls measures that read more than the recording: 20 agent turns of a model call and 60 tool calls.
CPU_LOAD = {"calls": 20, "wait_ms": 0, "steps": 60}
IO_SESSIONS = int(os.environ.get("BENCH_SCALED_SESSIONS", "300"))
IO_LOAD = {"calls": 2, "wait_ms": 2000}
IDEAL_S = IO_LOAD["calls"] * IO_LOAD["wait_ms"] / 1000
# Runs recording turns while the others wait (a model that answers in 100 ms, then two tool calls): about
# 60 node changes a second each, the pace of agents a person watches.
PROBES, PROBE_LOAD = 4, {"calls": 20, "wait_ms": 100, "steps": 2}
WAITING_FOREVER = {"calls": 1, "wait_ms": 600_000}  # stopped by the bench once measured
QUIET_S = 3.0  # the window the workers' CPU is read in while the runs only wait
CPU_DEADLINE_S, IO_DEADLINE_S, SETTLE_S = 45.0, 60.0, 30.0
STOP_TRIALS = 8
LAUNCHERS = 8  # threads launching at once
WORKER_LABEL = "bench-worker"
WORKLOAD = {
    "OPENPROGRAM_FUNCTION_MODULES": "examples.functions,bench._waiting_functions",
    "OPENPROGRAM_MODEL": "bench._waiting_functions.SleepingProvider",
    "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
}


def redis_missing() -> str | None:
    """Why Redis cannot be used here, or None."""
    try:
        import redis
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2).ping()
    except Exception as exc:
        return f"Redis ({REDIS_URL}) must answer: {type(exc).__name__}: {exc}"
    return None


def setup_django(env: dict) -> None:
    os.environ.update({**env, "PGAPPNAME": "bench-driver"})
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)


def defaults_in_use() -> dict:
    """The settings the workers run with (they share this process's environment), as dag.conf reads them."""
    from django.conf import settings

    from dag.conf import conf
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool") or {}
    return {"worker concurrency": conf.WORKER_CONCURRENCY, "pool per process": pool.get("max_size", "none"),
            "active runs per user": conf.MAX_ACTIVE_RUNS_PER_USER or "no limit",
            "live sockets per user": conf.MAX_LIVE_SOCKETS_PER_USER or "no limit"}


class Bench:
    """The bench's users (with their login cookies), its workers, and the loads it launches."""

    def __init__(self, env: dict, database_url: str, log_dir: Path, server_url: str, server_pid: int):
        from django.contrib.auth import get_user_model

        from dag.conf import conf
        from tests.e2e.support import session_cookie
        self.env, self.database_url, self.log_dir, self.server_url = env, database_url, log_dir, server_url
        self.server_pid = server_pid
        limits = [limit for limit in (conf.MAX_ACTIVE_RUNS_PER_USER, conf.MAX_LIVE_SOCKETS_PER_USER) if limit]
        per_user = min(limits) if limits else IO_SESSIONS
        users = get_user_model().objects
        self.users = [users.create(username=f"bench-scaled-{i}")
                      for i in range(math.ceil(max(IO_SESSIONS + PROBES, CPU_SESSIONS) / per_user))]
        self.cookies = {user.pk: session_cookie(user)["value"] for user in self.users}
        self.workers: list[Worker] = []
        self.launchers = ThreadPoolExecutor(LAUNCHERS, thread_name_prefix="bench-launch")

    def add_worker(self) -> Worker:
        worker = Worker(f"{WORKER_LABEL}-{len(self.workers) + 1}", self.env, self.log_dir)
        self.workers.append(worker)
        worker.wait_ready()
        self.run_load(CPU_SESSIONS // 4 * len(self.workers), {"calls": 2, "wait_ms": 0, "steps": 2},
                      CPU_DEADLINE_S)  # warm-up
        return worker

    def close(self) -> None:
        """Stop the workers (by PID) and the launching threads."""
        for worker in self.workers:
            worker.stop()
        self.launchers.shutdown()

    def launch(self, count: int, args: dict, watch: LiveWatch | None = None, first: int = 0) -> list:
        """`count` waiting_agent sessions, their owners taken in turn from the `first`th user (within the
        per-user limits; `first`: the count of a launch still going, whose turn this one continues),
        launched from LAUNCHERS threads, as many clients of a web process would."""
        from dag.runs.launch import launch

        def launch_one(i: int):
            user = self.users[(first + i) % len(self.users)]
            session_id = launch(user, "waiting_agent", args).pk
            if watch is not None:
                watch.watch(session_id, self.cookies[user.pk])
            return session_id
        return list(self.launchers.map(launch_one, range(count)))

    def run_load(self, count: int, args: dict, deadline_s: float, watch: bool = False) -> dict:
        """Launch `count` sessions at once and wait for their end (at most `deadline_s`, then stop the rest);
        the figures of the load."""
        from dag.models import Node, Session

        sampler = ActivitySampler(self.database_url, groups={"workers": WORKER_LABEL}).start()
        live = LiveWatch(self.server_url) if watch else None
        cpu = LoadCpu([worker.pid for worker in self.workers])
        parts = CpuByPart({"workers": [worker.pid for worker in self.workers], "web": [self.server_pid]},
                          clients=[live.pid] if live else [])
        started = time.perf_counter()
        ids = self.launch(count, args, live)
        launched_s = time.perf_counter() - started
        ended = wait_until_ended(ids, started + deadline_s)
        elapsed = time.perf_counter() - started
        cpu_used = {**cpu.figures(), "by_part": parts.seconds()}
        stop_the_rest(ids)
        peaks = sampler.stop()
        poll_until(lambda: broker_backlog(self.env["OPENPROGRAM_CELERY_QUEUE"]) == 0, interval_s=0.1)
        rows = Session.objects.filter(pk__in=ids)
        pids = {str(worker.pid): worker.label for worker in self.workers}
        return {"count": count, "ended": ended, "elapsed": elapsed, "launched_s": launched_s, "peaks": peaks,
                "cpu": cpu_used,
                "calls": Node.objects.filter(session_id__in=ids).count(),
                "statuses": Counter(rows.values_list("status", flat=True)),
                "by_worker": Counter(pids.get(worker.rsplit(":", 1)[-1], worker or "none")
                                     for worker in rows.values_list("worker", flat=True)),
                "live": live.results(SETTLE_S) if live else None}

    def live_beside_waiting(self, waiting: int) -> dict:
        """The probes' commit-to-browser latencies while `waiting` runs, each watched by a client, wait on
        their model; and the workers' CPU over QUIET_S while those runs only wait."""
        from dag.models import Node

        waiters = LiveWatch(self.server_url)
        ids = self.launch(waiting, WAITING_FOREVER, waiters)
        running = Node.objects.filter(session_id__in=ids, status="running")
        settled = poll_until(lambda: running.count() >= 2 * waiting, interval_s=0.2)  # a run's node, its model's
        cpu = LoadCpu([worker.pid for worker in self.workers])
        time.sleep(QUIET_S)
        quiet = cpu.figures()
        probes = LiveWatch(self.server_url)
        probe_ids = self.launch(PROBES, PROBE_LOAD, probes, first=waiting)
        ended = wait_until_ended(probe_ids, time.perf_counter() + IO_DEADLINE_S)
        live = probes.results(SETTLE_S)
        still_waiting = running.filter(name="llm").count() if waiting else 0
        stop_the_rest(ids + probe_ids)
        waiters.results(SETTLE_S)
        return {"waiting": waiting, "settled": settled, "still_waiting": still_waiting,
                "probes_ended": ended, "quiet": quiet, "live": live}

    def memory_per_waiting_run(self, worker: Worker) -> dict:
        """`worker`'s resident memory with as many sessions waiting as it has threads, less its idle memory."""
        from dag.conf import conf
        from dag.models import Session

        idle = median_rss(worker)
        waiting = min(conf.WORKER_CONCURRENCY, IO_SESSIONS)
        ids = self.launch(waiting, WAITING_FOREVER)
        running = Session.objects.filter(pk__in=ids, status=Session.Status.RUNNING)
        poll_until(lambda: running.count() >= waiting, interval_s=0.1)
        time.sleep(1.0)  # the last claimed ones reach their model call
        held, count = median_rss(worker), running.count()
        stop_the_rest(ids)
        return {"idle": idle, "held": held, "waiting": count, "per_run": (held - idle) / count if count else None}

    def stop_latency(self) -> list[float]:
        """Seconds from a stop requested in this process to `cancelled` stored, for runs waiting on a worker
        (a trial whose run never reaches its model call, or never ends, within SETTLE_S is left out)."""
        from dag.models import Node, Session
        from dag.runs import lifecycle

        samples = []
        for _ in range(STOP_TRIALS):
            session_id = self.launch(1, {"calls": 1, "wait_ms": 60_000})[0]
            if not poll_until(lambda: Node.objects.filter(session_id=session_id, status="running").count() >= 2):
                stop_the_rest([session_id])
                continue
            time.sleep(random.uniform(0, 0.3))
            started = time.perf_counter()
            lifecycle.request_stop(session_id)
            if poll_until(Session.objects.filter(pk=session_id, status=Session.Status.CANCELLED).exists):
                samples.append(time.perf_counter() - started)
        return samples


def broker_backlog(queue: str) -> int:
    """Messages waiting in the broker's `queue` (the launches of stopped sessions the workers still take
    and drop): the next load starts when there are none."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    return sum(client.llen(key) for key in client.scan_iter(match=f"{queue}*", _type="list"))


def poll_until(condition, interval_s: float = 0.005) -> bool:
    """Whether `condition()` came true within SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


def wait_until_ended(ids: list, deadline: float) -> int:
    """How many of the sessions `ids` have ended, once all have or `deadline` (perf_counter) has passed."""
    from dag.models import Session

    rows = Session.objects.filter(pk__in=ids, status__in=Session.TERMINAL)
    while True:
        ended = rows.count()
        if ended == len(ids) or time.perf_counter() > deadline:
            return ended
        time.sleep(0.05)


def stop_the_rest(ids: list) -> None:
    """Stop the sessions of `ids` still going, and wait (bounded) until they have ended: the next load
    starts on idle workers and within its users' active-run limit."""
    from dag.models import Session
    from dag.runs import lifecycle

    going = list(Session.objects.filter(pk__in=ids).exclude(status__in=Session.TERMINAL).values_list("pk", flat=True))
    for session_id in going:
        lifecycle.request_stop(session_id)
    wait_until_ended(going, time.perf_counter() + SETTLE_S)


def median_rss(worker: Worker) -> int:
    samples = []
    for _ in range(5):
        samples.append(worker.rss_bytes())
        time.sleep(0.2)
    return int(statistics.median(samples))


def measure(bench: Bench) -> dict:
    """Every figure, one worker's first: its memory (before a load grows its heap), then the loads."""
    figures = {}
    worker = bench.add_worker()
    progress("one worker ready")
    figures["memory"] = bench.memory_per_waiting_run(worker)
    figures["cpu-1"] = bench.run_load(CPU_SESSIONS, CPU_LOAD, CPU_DEADLINE_S)
    progress("CPU-bound load on one worker done")
    figures["io-1"] = bench.run_load(IO_SESSIONS, IO_LOAD, IO_DEADLINE_S, watch=True)
    progress("I/O-bound load on one worker done")
    bench.add_worker()
    progress("two workers ready")
    figures["cpu-2"] = bench.run_load(CPU_SESSIONS, CPU_LOAD, CPU_DEADLINE_S)
    progress("CPU-bound load on two workers done")
    figures["io-2"] = bench.run_load(IO_SESSIONS, IO_LOAD, IO_DEADLINE_S, watch=True)
    progress("I/O-bound load on two workers done")
    figures["beside-0"] = bench.live_beside_waiting(0)
    figures["beside-waiting"] = bench.live_beside_waiting(IO_SESSIONS)
    progress(f"the live view beside {IO_SESSIONS} waiting runs done")
    random.seed(12)
    figures["stops"] = bench.stop_latency()
    figures["stop_trials"], figures["ideal_s"] = STOP_TRIALS, IDEAL_S
    return figures


STARTED = time.monotonic()


def progress(what: str) -> None:
    print(f"  [{time.monotonic() - STARTED:5.0f} s] {what}", flush=True)


def main() -> None:
    missing = redis_missing()
    if missing:
        print(f"bench_scaled: not run: {missing}")
        return
    with scratch_database(DATABASE_PREFIX) as database_url:
        if database_url is None:
            return
        log_dir = Path(tempfile.mkdtemp(prefix="bench-scaled-"))
        env = {**os.environ, **WORKLOAD, "DATABASE_URL": database_url, "REDIS_URL": REDIS_URL,
               "CELERY_BROKER_URL": REDIS_URL, "OPENPROGRAM_EXECUTOR": "celery", "OPENPROGRAM_VAR_DIR": str(log_dir),
               "OPENPROGRAM_CELERY_QUEUE": f"bench-scaled-{os.getpid()}"}
        setup_django(env)
        from django.db import connections

        from tests.e2e.support import DaphneServer
        server = DaphneServer({**env, "PGAPPNAME": "bench-web"}, log_dir / "bench-web.log")
        bench = None
        try:
            bench = Bench(env, database_url, log_dir, server.url, server.process.pid)
            progress(f"web server ready, {len(bench.users)} bench users; logs in {log_dir}")
            figures = measure(bench)
            print_table(figures, defaults_in_use())
        finally:
            if bench is not None:
                bench.close()
            server.stop()
            connections.close_all()
    progress("done")


if __name__ == "__main__":
    main()
