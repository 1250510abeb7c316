"""Recorded calls per second, per database, beside the floor measured in the same run.

For SQLite (WAL, synchronous=NORMAL) and PostgreSQL, each in a fresh child process on a throwaway
database (a temporary file; a temporary PostgreSQL database if one answers at BENCH_PG_URL, default
postgres://postgres@127.0.0.1:5432/postgres). Every figure records the same rows: those of
`slow_count(n, delay_s=0)`, a root call and n count_step calls under it (one finished node per call):

- through the write path: `DjangoRecorder` under a lease, as a run records, one session (and 8 sessions
  on 8 threads at once), from the first call until every node is durable (a flush);
- through the running app: a Daphne server (in-process executor, in-memory channel layer, its writer
  process) runs `slow_count` with `delay_s=0` launched through the API, from the launch request to the
  session's terminal status as a websocket client sees it; that client measures each node's delay
  from its write (its `finished_at`, stamped just before the write is queued, so the figure overstates
  commit-to-arrival by up to one batch window) to its arrival (median, p95);
- the floor: the same rows (under a root node of their session) written by the raw driver (`sqlite3`,
  `psycopg`: executemany, and COPY on PostgreSQL, one transaction per 500 rows), their values encoded
  as the driver takes them inside the timing, and by Django's `bulk_create` (batches of 500);
- the app and the floors alternate, round by round, so a shared machine whose speed drifts moves both
  alike; each is the best of its rounds;
- the ceiling: the runtime and `DjangoRecorder` with a writer that drops every write, i.e. the Python
  work of recording a call before any database work: no app can record faster than this;
- before each figure and each round, the rows of what ran before are deleted (two runs recorded first
  stay: a table is never empty) and the maintenance they call for is done (`settle`), so that every
  figure writes into tables of the same size;
- the CPU a call takes in the app (the server process, its writer process, PostgreSQL's processes, the
  client; from /proc) beside a row of the raw floor's, and how many of the machine's cores the app kept
  busy.

Every rate is shown as a ratio to each floor. Targets (issue 13): at least 5,000 calls/s through the
app on each database, at least 0.5 of the floor, websocket p95 under 100 ms; the targets line says which
hold, against either floor. Also printed: the cost of one more model call's context after 5,000 calls.
On a shared machine the figures move with the load; the load average is printed with them.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import _cpu  # noqa: E402 (after the path is set)
from bench._api import changed_at, launch  # noqa: E402
from bench._pg import scratch_database  # noqa: E402
from dag.live.frames import SESSION_CHANGE  # noqa: E402 (plain Python: no Django needed)

CALLS = 10_000  # slow_count's largest n, so the app and the write path record the same number
SESSIONS = 8
ROUNDS = 3
# Rounds of the app beside the floors: their paired ratios' median is the figure the targets read.
PAIRED_ROUNDS = 5
# The client times every this-many-th live change: a thousand of a 10,000-call run.
LATENCY_EVERY = 10
# The longest a run of the app may take before the bench gives up on it (a run that never ends).
RUN_TIMEOUT_S = 600
CHILD_TIMEOUT_S = 3600  # a whole database's figures
FLOOR_BATCH = 500
RENDER_NODES = 5000
TERMINAL = ("completed", "error", "cancelled", "interrupted")


def best_rate(calls: int, timings: list[float]) -> float:
    return calls / min(timings)


# --- the child: one database, Django set up for it ----------------------------------------------

def measure(database_url: str, var_dir: str) -> dict:
    os.environ.update({"DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING",
                       "DJANGO_SETTINGS_MODULE": "openprogram_web.settings"})
    os.environ.pop("REDIS_URL", None)
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from knox.models import AuthToken

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}", password="bench-password-1")
    from dag.recording.write_path import group_commit
    record_baseline(owner)
    figures = {"batch_rows": group_commit.GroupWriter().batch_rows,
               "no_database": no_database_rate(owner, CALLS)}
    settle()
    figures["write_path"] = write_path_rate(owner, CALLS, 1)
    settle()
    figures["write_path_sessions"] = write_path_rate(owner, CALLS, SESSIONS)
    settle()
    figures["render_ms"] = render_ms(owner)
    settle()
    figures.update(app_beside_the_floors(database_url, var_dir, owner, AuthToken.objects.create(user=owner)[1]))
    return figures


# Sessions recorded before every figure and kept through them all (`record_baseline`).
BASELINE_SESSIONS = 2
_baseline: list = []


def record_baseline(owner) -> None:
    """A table that is never empty, as a deployment's is not: BASELINE_SESSIONS runs of slow_count recorded
    first and kept. Emptied, PostgreSQL's statistics would say so, and a foreign key check planned then
    (its plan is kept by the connection) would read the whole table for each row as it grew."""
    from dag.recording import write_path
    for index in range(BASELINE_SESSIONS):
        session = write_path.claim_session(write_path.queue_session(owner, function="slow_count").pk,
                                           worker=f"bench:baseline-{index}")
        recorded_slow_count(session, CALLS)
        write_path.finish_session(session.pk, "completed", lease=session.worker)
        _baseline.append(session.pk)


def settle() -> None:
    """Before each figure (and each round of the app and the floors), the same start: the rows of what
    ran before deleted (the baseline's kept), so every figure writes into tables of the same size, and
    then the maintenance those rows called for, done here, outside every timing, so that it cannot land
    in a later figure's: on PostgreSQL the vacuum and analyze that autovacuum would run whenever its next
    round comes (its workers' CPU would count as the app's database's), on SQLite the checkpoint of the
    write-ahead log."""
    from django.db import connection

    from dag.models import Node, Session

    with connection.cursor() as cursor:
        keys = [Session._meta.pk.get_db_prep_value(pk, connection) for pk in _baseline]
        for model, column in ((Node, "session_id"), (Session, "id")):  # the throwaway database: only the bench's
            kept = f" WHERE {connection.ops.quote_name(column)} NOT IN ({', '.join(['%s'] * len(keys))})" if keys else ""
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(model._meta.db_table)}{kept}", keys)
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE")
        elif connection.vendor == "sqlite":
            for _ in range(50):  # a reader's snapshot (the server's, its writer process's) holds it back
                if cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                    break
                time.sleep(0.1)
            else:
                print("settle: the write-ahead log could not be checkpointed; figures after it may pay for it",
                      file=sys.stderr)


def recorded_slow_count(session, calls: int) -> None:
    """`slow_count(calls, delay_s=0)` recorded into `session` (claimed), as the app runs it: a root call
    and `calls` count_step calls under it."""
    from dag.recording.recorder import DjangoRecorder
    from examples.functions import slow_count
    from runtime import use_recorder

    recorder = DjangoRecorder(session, lease=session.worker)
    try:
        with use_recorder(recorder):
            slow_count(calls, 0)
    finally:
        recorder.close()  # waits until the run's writes are committed


def write_path_rate(owner, calls: int, sessions: int) -> float:
    """Recorded calls/s through DjangoRecorder (a lease, the group writer), until all are durable."""
    from django.db import connections

    from dag.models import Node
    from dag.recording import write_path

    def record(session, count: int) -> None:
        try:
            recorded_slow_count(session, count)
        finally:
            connections.close_all()

    def one_round() -> float:
        runs = [write_path.claim_session(write_path.queue_session(owner, function="slow_count").pk,
                                         worker=f"bench:{index}") for index in range(sessions)]
        threads = [threading.Thread(target=record, args=(session, calls // sessions)) for session in runs]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        assert Node.objects.filter(session__in=runs, status="completed").count() == calls + sessions
        for session in runs:
            write_path.finish_session(session.pk, "completed", lease=session.worker)
        return elapsed

    one_round()  # warm-up
    return best_rate(calls, [one_round() for _ in range(ROUNDS)])


def no_database_rate(owner, calls: int) -> float:
    """Recorded calls/s through DjangoRecorder with a writer that drops every write: what the runtime and
    the recorder cost per call before any database work, the most the app could reach with a free one."""
    from dag.recording import write_path
    from dag.recording.write_path import group_commit, process_writer

    class DroppingWriter(group_commit.GroupWriter):
        def submit(self, entry) -> None:
            pass

        def finish_queued(self, create, fields) -> bool:
            return True

        def flush(self, session_id=None):
            return None

    def one_round() -> float:
        session = write_path.claim_session(write_path.queue_session(owner, function="slow_count").pk,
                                           worker="bench:null")
        started = time.perf_counter()
        recorded_slow_count(session, calls)
        return time.perf_counter() - started

    with process_writer.use_writer(DroppingWriter()):
        one_round()
        return best_rate(calls, [one_round() for _ in range(ROUNDS)])


def _floor_rows(session_id, root_id: int, calls: int, now) -> list[dict]:
    """The rows the app writes for `slow_count(calls, delay_s=0)` under its root call: count_step's."""
    from examples.functions import count_step
    return [{"session_id": session_id, "seq": i, "parent_id": root_id, "kind": "code", "name": "count_step",
             "status": "completed", "input": {"i": i, "delay_s": 0}, "output": i, "depth": 2, "name_depth": 0,
             "expose": "io", "doc": count_step.doc, "model": "", "error": "", "refusal": "",
             "started_at": now, "finished_at": now, "rev": i + 1} for i in range(1, calls + 1)]


class Floors:
    """The same rows as the app's written without it: by the database driver alone (executemany; COPY
    on PostgreSQL), one transaction per FLOOR_BATCH, their values encoded as the driver takes them
    inside the timing; and by Django's `bulk_create`, batches of FLOOR_BATCH. Each round writes under a
    root node of a new session, as a run would."""

    def __init__(self, owner):
        from django.db import connection
        self.owner = owner
        self.vendor = connection.vendor
        settings = connection.settings_dict
        if self.vendor == "sqlite":
            import sqlite3
            self.db = sqlite3.connect(settings["NAME"], isolation_level=None)
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.begin, self.key = "BEGIN IMMEDIATE", lambda pk: pk.hex
        else:
            import psycopg
            self.db = psycopg.connect(dbname=settings["NAME"], user=settings["USER"],
                                      host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432,
                                      password=settings["PASSWORD"] or None, autocommit=True)
            self.begin, self.key = "BEGIN", lambda pk: pk
        # PostgreSQL's fastest driver path for rows is COPY; SQLite's executemany.
        self.ways = ["executemany", *(["COPY"] if self.vendor == "postgresql" else [])]

    def close(self) -> None:
        self.db.close()

    def _session_and_root(self, function: str):
        from django.utils import timezone

        from dag.recording import write_path
        session = write_path.queue_session(self.owner, function=function)
        root = write_path.create_node(session.pk, kind="code", name="slow_count", status="running", depth=1,
                                      name_depth=1, input={"n": CALLS, "delay_s": 0}, started_at=timezone.now())
        return session, root

    def raw_round(self, way: str, calls: int) -> float:
        from django.db import connection
        from django.utils import timezone

        from dag.recording.json_text import dumps
        from dag.recording.write_path.sql import _adapt_datetime as adapt

        session, root = self._session_and_root("bench-raw")
        template = _floor_rows(self.key(session.pk), root.pk, calls, timezone.now())
        columns = list(template[0])
        mark = "?" if self.vendor == "sqlite" else "%s"
        started = time.perf_counter()
        # Turning the values into what the driver takes (JSON text, timestamps) is part of writing the
        # rows, so it is timed: any writer of these rows has to do it. The fastest encoders of these
        # values there are here: the ones the write path uses.
        rows = [[dumps(value) if name in ("input", "output")
                 else adapt(value, connection) if name in ("started_at", "finished_at") else value
                 for name, value in row.items()] for row in template]
        cursor = self.db.cursor()
        for start in range(0, calls, FLOOR_BATCH):
            cursor.execute(self.begin)
            if way == "COPY":
                with cursor.copy(f"COPY dag_node ({', '.join(columns)}) FROM STDIN") as stream:
                    for row in rows[start:start + FLOOR_BATCH]:
                        stream.write_row(row)
            else:
                cursor.executemany(f"INSERT INTO dag_node ({', '.join(columns)}) "
                                   f"VALUES ({', '.join([mark] * len(columns))})", rows[start:start + FLOOR_BATCH])
            cursor.execute("COMMIT")
        return time.perf_counter() - started

    def bulk_create_round(self, calls: int) -> float:
        from django.db import transaction
        from django.utils import timezone

        from dag.models import Node

        session, root = self._session_and_root("bench-bulk")
        rows = _floor_rows(session.pk, root.pk, calls, timezone.now())
        started = time.perf_counter()
        for start in range(0, calls, FLOOR_BATCH):
            batch = [Node(**row) for row in rows[start:start + FLOOR_BATCH]]
            with transaction.atomic():
                Node.objects.bulk_create(batch)
        return time.perf_counter() - started


def render_ms(owner) -> dict:
    """What rendering one more model call's context costs after RENDER_NODES recorded calls, and its length."""
    from dag.recording.context_render import CONTEXT_LIMIT
    from dag.recording import write_path
    from dag.recording.recorder import DjangoRecorder
    from runtime import agentic_function, use_recorder
    from runtime.context import current_frame, current_recorder

    @agentic_function(register_globally=False)
    def leaf(i: int) -> int:
        return i

    @agentic_function(register_globally=False)
    def long_run(count: int) -> tuple[float, int]:
        for i in range(count):
            leaf(i)
        recorder, frame = current_recorder(), current_frame()
        recorder.flush()
        started = time.perf_counter()
        text = recorder.render_context(frame) or ""
        return time.perf_counter() - started, len(text)

    recorder = DjangoRecorder(write_path.queue_session(owner, function="bench-context"))
    with use_recorder(recorder):
        seconds, chars = long_run(RENDER_NODES)
    recorder.close()
    return {"ms": seconds * 1000, "chars": chars, "cap": CONTEXT_LIMIT}


# --- the running app, round by round beside the floors ----------------------------------------------

def app_beside_the_floors(database_url: str, var_dir: str, owner, token: str) -> dict:
    """The running app and the floors, alternately, round after round, each round from tables of the
    same size (`settle`): a machine whose speed drifts (a shared one) moves both alike, so the ratio of
    a round's app to that round's floors holds where the rates themselves move by a quarter. Each rate
    is the best of its PAIRED_ROUNDS rounds, each ratio the median of the rounds' ratios; the CPU
    figures, the mean over the rounds."""
    from tests.e2e.support import DaphneServer, session_cookie

    env = {**os.environ, "DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir,
           "OPENPROGRAM_FUNCTION_MODULES": "examples.functions", "LOG_LEVEL": "INFO",  # daphne says its port at INFO
           "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER": "0"}  # the figures' sessions above count as the owner's
    env.pop("REDIS_URL", None)
    server = DaphneServer(env, Path(var_dir) / f"daphne-{uuid.uuid4().hex[:6]}.log")
    cookie = session_cookie(owner)["value"]
    floors = Floors(owner)
    try:
        # Warm-up: imports, the pool, connections, the writer process; a round of each floor.
        asyncio.run(run_and_watch(server.url, token, cookie, 200))
        for way in floors.ways:
            floors.raw_round(way, CALLS)
        floors.bulk_create_round(CALLS)
        raw = {way: [] for way in floors.ways}
        raw_cpu = {way: [] for way in floors.ways}
        bulk, app, app_cpu = [], [], []

        def floors_round() -> None:
            for way in floors.ways:
                settle()
                watch = _cpu.CpuWatch(database=floors.vendor == "postgresql")
                raw[way].append(floors.raw_round(way, CALLS))
                raw_cpu[way].append(watch.per_call(CALLS))
            settle()
            bulk.append(floors.bulk_create_round(CALLS))

        def app_round() -> None:
            settle()
            watch = _cpu.CpuWatch(server=server.process.pid, database=floors.vendor == "postgresql")
            run = asyncio.run(asyncio.wait_for(run_and_watch(server.url, token, cookie, CALLS), RUN_TIMEOUT_S))
            app_cpu.append(watch.per_call(CALLS))
            recorded_whole(run, CALLS)
            app.append(run)

        for index in range(PAIRED_ROUNDS):
            # The order turns each round, so what a drift within a round does falls on both sides.
            for step in ((floors_round, app_round) if index % 2 == 0 else (app_round, floors_round)):
                step()
        rates = [run["calls_per_s"] for run in app]
        raw_ratios = [rate / (CALLS / min(times[i] for times in raw.values())) for i, rate in enumerate(rates)]
        bulk_ratios = [rate / (CALLS / bulk[i]) for i, rate in enumerate(rates)]
        latencies = sorted(latency for run in app for latency in run["latencies"])
        return {"raw": {way: best_rate(CALLS, times) for way, times in raw.items()},
                "raw_cpu": {way: _cpu.mean(figures) for way, figures in raw_cpu.items()},
                "bulk_create": best_rate(CALLS, bulk),
                # The best run, as every floor is the best of its rounds: a run that a noisy neighbour
                # slowed must not count against the app when none counts against a floor.
                "app": {"calls_per_s": max(rates), "median_calls_per_s": statistics.median(rates),
                        "status": app[0]["status"], "cpu": _cpu.mean(app_cpu), "live": len(latencies),
                        "median_ms": statistics.median(latencies), "p95_ms": nearest_rank(latencies, 0.95)},
                "paired": {"raw": statistics.median(raw_ratios), "raw_range": [min(raw_ratios), max(raw_ratios)],
                           "bulk_create": statistics.median(bulk_ratios)}}
    finally:
        floors.close()
        server.stop()


def recorded_whole(run: dict, calls: int) -> None:
    """Refuse a round whose run did not complete with every call recorded: its rate would count a run
    that stopped early as a fast one."""
    from dag.models import Node
    recorded = Node.objects.filter(session_id=run["session"], status="completed").count()
    if run["status"] != "completed" or recorded != calls + 1:
        raise RuntimeError(f"the app's run {run['session']} ended {run['status']} with {recorded} of "
                           f"{calls + 1} calls recorded completed")


def nearest_rank(ordered: list[float], fraction: float) -> float:
    """The `fraction` quantile of `ordered` (ascending), by nearest rank; NaN for no values."""
    if not ordered:
        return float("nan")
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


async def run_and_watch(server_url: str, token: str, cookie: str, n: int) -> dict:
    """Launch slow_count(n, delay_s=0); calls/s from the launch to its terminal status, and the
    write-to-websocket delay of the node changes that arrived live (every LATENCY_EVERY-th of the stream)."""
    from bench._ws_client import WebSocket

    launched = time.time()
    session_id = await asyncio.to_thread(launch, server_url, token, "slow_count", {"n": n, "delay_s": 0})
    socket_ = await WebSocket.connect(f"ws://{urlsplit(server_url).netloc}/ws/sessions/{session_id}/",
                                      cookie=f"sessionid={cookie}")
    latencies, status, ended, seen = [], None, None, 0
    try:
        while ended is None:
            # The client stands in for a browser on another machine, and the floors have none, so it takes
            # as little as it can of the cores the app runs on: orjson parses each frame, every
            # LATENCY_EVERY-th change is timed, and only a frame holding a session change is looked
            # through for the run's end.
            text = await socket_.recv()
            message = orjson.loads(text)
            arrived = time.time()
            if message["type"] in ("snapshot", "snapshot_more", "heartbeat"):
                session = message.get("session") or {}
                if session.get("status") in TERMINAL:
                    status, ended = session["status"], arrived
                continue
            items = message["items"] if message["type"] == "batch" else [message]
            # Every LATENCY_EVERY-th change of the stream, whatever frames it comes in.
            for item in items[(-seen) % LATENCY_EVERY::LATENCY_EVERY]:
                if item["type"] == "node" and item["node"]["name"] == "count_step":
                    latencies.append((arrived - changed_at(item["node"])) * 1000)
            seen += len(items)
            if SESSION_CHANGE in text:
                for item in items:
                    if item["type"] == "session" and item["session"]["status"] in TERMINAL:
                        status, ended = item["session"]["status"], arrived
    finally:
        await socket_.close()
    return {"calls_per_s": n / (ended - launched), "status": status, "session": session_id, "latencies": latencies}


# --- the parent: orchestrates children and prints -----------------------------------------------

def run_child(database_url: str, var_dir: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", database_url, var_dir], cwd=ROOT,
                         capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if out.returncode != 0:
        sys.exit(f"measuring {database_url} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(name: str, figures: dict) -> None:
    raw = max(figures["raw"].values())
    bulk = figures["bulk_create"]
    app = figures["app"]
    print(f"\n{name} (group commit batches of {figures['batch_rows']} writes)")
    print(f"  {'':66} {'':>9}          {'of raw':>6}  {'of bulk_create':>14}")
    rows = [*((f"floor: raw driver, the same rows, {way} per {FLOOR_BATCH}", rate)
              for way, rate in figures["raw"].items()),
            (f"floor: Django bulk_create, batches of {FLOOR_BATCH}", bulk),
            ("ceiling: runtime + recorder, a writer that drops every write", figures["no_database"]),
            ("write path: DjangoRecorder, one session", figures["write_path"]),
            (f"write path: DjangoRecorder, {SESSIONS} sessions on {SESSIONS} threads", figures["write_path_sessions"]),
            (f"running app: slow_count n={CALLS:,} delay_s=0, launch to {app['status']}", app["calls_per_s"])]
    for label, rate in rows:
        print(f"  {label:66} {rate:9,.0f} calls/s  {rate / raw:6.2f}  {rate / bulk:14.2f}")
    print(f"  write -> websocket ({app['live']:,} live node changes of the {PAIRED_ROUNDS} runs timed, every "
          f"{LATENCY_EVERY}th): median {app['median_ms']:.1f} ms, p95 {app['p95_ms']:.1f} ms")
    fastest = max(figures["raw"], key=figures["raw"].get)
    print("  " + cpu_line(app, fastest, figures["raw_cpu"][fastest]))
    if app["cpu"]["server_threads_us"]:
        print("  " + threads_line(app["cpu"]["server_threads_us"]))
    render = figures["render_ms"]
    print(f"  context for a model call after {RENDER_NODES:,} recorded calls (the default range, so as many as the "
          f"{render['cap']:,}-character cap holds): {render['ms']:.0f} ms for {render['chars']:,} characters")
    paired = figures["paired"]
    low, high = paired["raw_range"]
    print(f"  the running app / the floors, round by round ({PAIRED_ROUNDS} rounds, each beside its own floors; "
          f"the median): {paired['raw']:.2f} of the raw-driver floor ({low:.2f}-{high:.2f}), "
          f"{paired['bulk_create']:.2f} of bulk_create; the app's median run {app['median_calls_per_s']:,.0f} calls/s")
    targets = {"app >= 5,000 calls/s (its median run)": app["median_calls_per_s"] >= 5000,
               "app >= 0.5 of the raw-driver floor (round by round)": paired["raw"] >= 0.5,
               "app >= 0.5 of the bulk_create floor (round by round)": paired["bulk_create"] >= 0.5,
               "websocket p95 < 100 ms (every run's)": app["p95_ms"] < 100}
    print("  targets: " + "; ".join(f"{label}: {'met' if met else 'NOT met'}" for label, met in targets.items()))


def cpu_line(app: dict, way: str, floor: dict) -> str:
    """Where the CPU of a recorded call went in the app, and of a row in the raw floor written `way`;
    with how many of the machine's cores the app kept busy meanwhile (a rate bound by one process's
    GIL keeps about one, whatever the others do)."""
    def us(value) -> str:
        return "?" if value is None else f"{value:,.0f}"

    cpu = app["cpu"]
    writer = cpu["writer_us"]
    database = (f" + database {us(cpu['database_us'])}" if cpu["database_us"] is not None
                else " (SQLite's work in the one that writes)")
    writing = f" + its writer process {us(writer)}" if writer is None or writer >= 0.5 else ""
    floor_database = f" + database {us(floor['database_us'])}" if floor["database_us"] is not None else ""
    busy = "?" if cpu["cores"] is None else f"{cpu['cores']:.1f}"
    return (f"CPU per call, in us: the app: server process {us(cpu['server_us'])}{writing}{database} + client "
            f"{us(cpu['client_us'])} = {us(cpu['total_us'])}, {busy} of {os.cpu_count()} cores busy; the raw "
            f"floor ({way}), a row: driver {us(floor['client_us'])}{floor_database} = {us(floor['total_us'])}")


# What the server's threads are, by their OS names (`dag.thread_names`): Daphne's main thread keeps the
# process's name.
THREAD_ROLES = {"group-commit": "group-commit writer (with a writer process: what sends it batches)",
                "writer-answers": "the writer process's answers", "op-run": "run threads", "daphne": "event loop"}


def threads_line(by_thread: dict[str, float]) -> str:
    """The server process's CPU per call by thread: one GIL serializes them, so their sum, not the
    largest, is what bounds the server process's rate (its writer process has an interpreter of its own)."""
    shown = [(THREAD_ROLES.get(name, name), spent) for name, spent in by_thread.items() if spent >= 0.5]
    rest = sum(spent for spent in by_thread.values() if spent < 0.5)
    parts = [f"{role} {spent:,.0f}" for role, spent in shown] + ([f"others {rest:,.0f}"] if rest >= 0.5 else [])
    return "the server process by thread, in us a call (one GIL: they add up): " + ", ".join(parts)


def main() -> None:
    from dag.conf import DEFAULTS
    batch_ms = os.environ.get("OPENPROGRAM_WRITE_BATCH_MS") or DEFAULTS["WRITE_BATCH_MS"]
    print(f"bench_recorder: {CALLS:,} recorded calls per figure (best of {ROUNDS} each; the app and the floors "
          f"best of {PAIRED_ROUNDS}, round by round beside each other); group commit "
          f"every {batch_ms} ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-recorder-") as var_dir:
        report("SQLite (WAL, synchronous=NORMAL)", run_child(f"sqlite:///{var_dir}/bench.sqlite3", var_dir))
        with scratch_database("openprogram_bench") as database_url:
            if database_url is not None:
                report("PostgreSQL", run_child(database_url, var_dir))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], sys.argv[3])))
    else:
        main()
