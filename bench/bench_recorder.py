"""Recorded calls per second through DjangoRecorder (entry + exit + broadcast hand-off), per database.

Target (issue 5): at least 2,000 recorded calls/s on SQLite (the best-known peer: ~22 ms per call).
Also printed: the same rows written with raw `sqlite3` (one transaction for the insert, one for the
backfill, as the recorder does), without and with the session's revision counter, and the ratios;
the same calls from 8 threads into one session (writers queue on its row lock); and what rendering
the context for one more model call costs after 5,000 recorded calls. Rates per CPU-second and the
load average are printed too: on a shared machine the wall-clock figures move with the load.

Each database is measured in a fresh child process (Django settings are read once per process) against
a throwaway database: a temporary SQLite file, and a temporary PostgreSQL database if one is reachable
at BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS = {"sqlite": 3000, "postgresql": 1000}
WARMUP = 100
ROUNDS = 3
THREADS = 8
RENDER_NODES = 5000
PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def _figures(calls: int, timings: list[tuple[float, float]]) -> dict:
    """Best of the rounds' (wall, process CPU) seconds as rates; CPU time leaves out the time this
    process waited for a CPU, so on a busy shared machine it shows what an idle one would do."""
    wall = min(t[0] for t in timings)
    cpu = min(t[1] for t in timings)
    return {"calls_per_s": calls / wall, "ms_per_call": wall * 1000 / calls, "calls_per_cpu_s": calls / cpu}


class _Clock:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.elapsed = (time.perf_counter() - self.wall, time.process_time() - self.cpu)


# --- the child: one database, Django set up for it ---------------------------------------------

def measure(database_url: str, calls: int) -> dict:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    sys.path.insert(0, ROOT)
    import django
    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from dag.live import broadcast
    from dag.models import Node
    from dag.recording import write_path
    from dag.recording.recorder import DjangoRecorder
    from django.contrib.auth import get_user_model
    from runtime import agentic_function, use_recorder
    from runtime.context import current_frame, current_recorder

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create(username=f"bench-{uuid.uuid4().hex[:8]}")
    handed_off = []
    # The recorded calls' hand-offs (a claim's session message is not one of them).
    broadcast.subscribe(lambda session_id, messages: messages[0]["type"] == "node"
                        and handed_off.append(len(messages)))

    @agentic_function(register_globally=False)
    def leaf(i: int, note: str = "a short argument") -> dict:
        """A leaf call: what a tool call inside a run looks like."""
        return {"i": i, "ok": True}

    def record(recorder, count: int) -> None:
        try:
            with use_recorder(recorder):
                for i in range(count):
                    leaf(i)
        finally:
            connections.close_all()  # this thread's connection (a no-op for the main thread's reuse)

    def run(count: int, threads: int = 1) -> tuple[float, float]:
        # Claimed under a lease, as a run is: every write goes through the lease fence.
        session = write_path.queue_session(owner, function="bench")
        write_path.claim_session(session.pk, worker="bench:1")
        recorder = DjangoRecorder(session, lease="bench:1")
        with _Clock() as clock:
            if threads == 1:
                with use_recorder(recorder):
                    for i in range(count):
                        leaf(i)
            else:
                workers = [threading.Thread(target=record, args=(recorder, count // threads))
                           for _ in range(threads)]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
        assert Node.objects.filter(session=session, status="completed").count() == count
        return clock.elapsed

    @agentic_function(register_globally=False)
    def long_run(count: int) -> float:
        """Many calls, then the context one more model call would be shown."""
        for i in range(count):
            leaf(i)
        recorder, frame = current_recorder(), current_frame()
        with _Clock() as clock:
            recorder.render_context(frame)
        return clock.elapsed[0]

    run(WARMUP)
    figures = _figures(calls, [run(calls) for _ in range(ROUNDS)])
    assert len(handed_off) == (WARMUP + ROUNDS * calls) * 2, "every entry and exit is handed off"
    # The same calls from 8 threads into one session: writers queue on the session's row lock.
    figures["threads"] = _figures(calls, [run(calls, THREADS) for _ in range(ROUNDS)])
    with use_recorder(DjangoRecorder(write_path.queue_session(owner, function="bench-context"))):
        figures["render_ms"] = long_run(RENDER_NODES) * 1000
    return figures


# --- raw sqlite3: the same rows without Django -------------------------------------------------

_INSERT = ("INSERT INTO dag_node (session_id, seq, parent_id, kind, name, input, output, status, depth, "
           "name_depth, expose, render_range, doc, model, usage, error, refusal, started_at, finished_at, rev) "
           "VALUES (?, ?, NULL, 'code', 'leaf', ?, NULL, 'running', 1, 1, 'io', NULL, ?, '', NULL, '', '', ?, "
           "NULL, ?) RETURNING id")
_BACKFILL = ("UPDATE dag_node SET status = 'completed', output = ?, error = '', finished_at = ?, rev = ? "
             "WHERE id = ? AND status = 'running'")
_ADVANCE = ("UPDATE dag_session SET rev = rev + 1, node_count = node_count + ? WHERE id = ? "
            "RETURNING rev, node_count")


def raw_sqlite(path: str, calls: int, *, with_counter: bool) -> dict:
    """Insert and backfill `calls` node rows into the migrated table with plain sqlite3.

    One transaction for the insert and one for the backfill, like the recorder. `with_counter` adds
    the session's revision counter to each (the recorder's protocol); without it, just the rows.
    """
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")  # as Django's connections have it
    session_id = uuid.uuid4().hex
    owner = db.execute("SELECT id FROM auth_user LIMIT 1").fetchone()[0]
    db.execute("INSERT INTO dag_session (id, owner_id, function, args, status, error, cancel_requested, "
               "model, rev, node_count, created_at, worker) VALUES (?, ?, 'raw', '{}', 'running', '', 0, '', 0, 0, "
               "datetime('now'), '')", (session_id, owner))
    timings, position = [], (-1, 0)
    for _ in range(ROUNDS):
        with _Clock() as clock:
            position = _raw_calls(db, calls, session_id, with_counter, *position)
        timings.append(clock.elapsed)
    db.close()
    return _figures(calls, timings)


def _raw_calls(db, calls: int, session_id: str, with_counter: bool, seq: int, rev: int) -> tuple[int, int]:
    """`calls` entries and exits; returns the last (seq, rev) so the next round continues from it."""
    doc = "A leaf call: what a tool call inside a run looks like."
    for i in range(calls):
        now = time.strftime("%Y-%m-%d %H:%M:%S")
        db.execute("BEGIN IMMEDIATE")
        if with_counter:
            rev, count = db.execute(_ADVANCE, (1, session_id)).fetchone()
            seq = count - 1
        else:
            seq, rev = seq + 1, rev + 1
        node_id = db.execute(_INSERT, (session_id, seq, json.dumps({"i": i, "note": "a short argument"}),
                                       doc, now, rev)).fetchone()[0]
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        if with_counter:
            rev, _ = db.execute(_ADVANCE, (0, session_id)).fetchone()
        else:
            rev += 1
        db.execute(_BACKFILL, (json.dumps({"i": i, "ok": True}), now, rev, node_id))
        db.execute("COMMIT")
    return seq, rev


# --- the parent: orchestrates children and prints ----------------------------------------------

def run_child(database_url: str, calls: int, var_dir: str) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    out = subprocess.run([sys.executable, __file__, "--measure", database_url, str(calls)], env=env,
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"measuring {database_url} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _pg_admin():
    try:
        import psycopg
        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:
        print(f"PostgreSQL not reachable at {PG_ADMIN_URL} ({exc.__class__.__name__}); skipped")
        return None


def main() -> None:
    rows, render_ms = [], {}
    with tempfile.TemporaryDirectory() as var_dir:
        path = os.path.join(var_dir, "bench.sqlite3")
        django_sqlite = run_child(f"sqlite:///{path}", CALLS["sqlite"], var_dir)
        rows.append(("DjangoRecorder, SQLite (WAL, synchronous=NORMAL)", django_sqlite))
        rows.append((f"  the same calls from {THREADS} threads, one session", django_sqlite["threads"]))
        render_ms["SQLite"] = django_sqlite["render_ms"]
        raw = raw_sqlite(path, CALLS["sqlite"], with_counter=False)
        rows.append(("raw sqlite3: the same rows (insert + backfill)", raw))
        raw_counter = raw_sqlite(path, CALLS["sqlite"], with_counter=True)
        rows.append(("raw sqlite3: the same rows + revision counter", raw_counter))
        admin = _pg_admin()
        if admin is not None:
            name = f"openprogram_bench_{os.getpid()}"
            admin.execute(f'CREATE DATABASE "{name}"')
            try:
                url = f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
                django_pg = run_child(url, CALLS["postgresql"], var_dir)
                rows.append(("DjangoRecorder, PostgreSQL", django_pg))
                render_ms["PostgreSQL"] = django_pg["render_ms"]
                rows.append((f"  the same calls from {THREADS} threads, one session (PostgreSQL)",
                             django_pg["threads"]))
                # A deployment choice, not the default: commits stop waiting for the WAL flush.
                rows.append(("DjangoRecorder, PostgreSQL, synchronous_commit=off",
                             run_child(f"{url}?options=-c%20synchronous_commit%3Doff", CALLS["postgresql"],
                                       var_dir)))
            finally:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.close()
    print(f"{'recorded calls (entry + exit + hand-off)':64} {'calls/s':>10} {'ms/call':>9} {'calls/CPU-s':>12}")
    for label, figures in rows:
        # PostgreSQL does its work in the server's processes, so this process's CPU time says little.
        per_cpu = "-" if "PostgreSQL" in label else f"{figures['calls_per_cpu_s']:,.0f}"
        print(f"{label:64} {figures['calls_per_s']:10,.0f} {figures['ms_per_call']:9.3f} {per_cpu:>12}")
    print(f"context for a model call after {RENDER_NODES:,} recorded calls: "
          + ", ".join(f"{name} {ms:.0f} ms" for name, ms in render_ms.items()))
    rate = django_sqlite["calls_per_s"]
    print(f"ratio DjangoRecorder / raw sqlite3 (same rows): {rate / raw['calls_per_s']:.2f}; "
          f"/ raw with the counter: {rate / raw_counter['calls_per_s']:.2f}")
    print(f"target >= 2,000 calls/s on SQLite: {'met' if django_sqlite['calls_per_s'] >= 2000 else 'NOT met'}"
          f" ({django_sqlite['calls_per_cpu_s']:,.0f} per CPU-second)"
          f"; vs the peer's ~22 ms/call: {22 / django_sqlite['ms_per_call']:.0f}x faster"
          f"; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
