"""Recorded calls per second through DjangoRecorder (entry + exit + broadcast hand-off), per database.

Target (issue 5): at least 2,000 recorded calls/s on SQLite (the best-known peer: ~22 ms per call).
Also printed: the same rows written with raw `sqlite3` (one transaction for the insert, one for the
backfill, as the recorder does), and the ratio between the two.

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
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS = {"sqlite": 3000, "postgresql": 1000}
WARMUP = 100
ROUNDS = 3
PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")


# --- the child: one database, Django set up for it ---------------------------------------------

def measure(database_url: str, calls: int) -> dict:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    sys.path.insert(0, ROOT)
    import django
    django.setup()
    from django.core.management import call_command

    from dag import broadcast
    from dag.models import Node, Session
    from dag.recorder import DjangoRecorder
    from django.contrib.auth import get_user_model
    from runtime import agentic_function, use_recorder

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create(username=f"bench-{uuid.uuid4().hex[:8]}")
    handed_off = []
    broadcast.subscribe(lambda session_id, messages: handed_off.append(len(messages)))

    @agentic_function(register_globally=False)
    def leaf(i: int, note: str = "a short argument") -> dict:
        """A leaf call: what a tool call inside a run looks like."""
        return {"i": i, "ok": True}

    def run(count: int) -> float:
        session = Session.objects.create(owner=owner, function="bench")
        with use_recorder(DjangoRecorder(session)):
            started = time.perf_counter()
            for i in range(count):
                leaf(i)
            elapsed = time.perf_counter() - started
        assert Node.objects.filter(session=session, status="completed").count() == count
        return elapsed

    run(WARMUP)
    best = min(run(calls) for _ in range(ROUNDS))
    assert len(handed_off) == (WARMUP + ROUNDS * calls) * 2, "every entry and exit is handed off"
    return {"calls_per_s": calls / best, "ms_per_call": best * 1000 / calls}


# --- raw sqlite3: the same rows, the same transactions, no ORM --------------------------------

def raw_sqlite(path: str, calls: int) -> dict:
    """Insert and backfill `calls` node rows into the migrated table with plain sqlite3."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    session_id = uuid.uuid4().hex
    owner = db.execute("SELECT id FROM auth_user LIMIT 1").fetchone()[0]
    db.execute("INSERT INTO dag_session (id, owner_id, function, args, status, error, cancel_requested, "
               "model, rev, node_count, created_at) VALUES (?, ?, 'raw', '{}', 'running', '', 0, '', 0, 0, "
               "datetime('now'))", (session_id, owner))
    now = "2026-01-01 00:00:00"
    best = None
    for round_ in range(ROUNDS):
        started = time.perf_counter()
        for i in range(calls):
            seq = round_ * calls + i
            db.execute("BEGIN IMMEDIATE")
            cursor = db.execute(
                "INSERT INTO dag_node (session_id, seq, parent_id, kind, name, input, output, status, depth, "
                "name_depth, expose, render_range, doc, model, usage, error, started_at, finished_at, rev) "
                "VALUES (?, ?, NULL, 'code', 'leaf', ?, 'null', 'running', 1, 1, 'io', 'null', ?, '', "
                "'null', '', ?, NULL, ?)",
                (session_id, seq, json.dumps({"i": i, "note": "a short argument"}),
                 "A leaf call: what a tool call inside a run looks like.", now, 2 * seq + 1))
            db.execute("COMMIT")
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE dag_node SET status='completed', output=?, error='', finished_at=?, rev=? "
                       "WHERE id=?", (json.dumps({"i": i, "ok": True}), now, 2 * seq + 2, cursor.lastrowid))
            db.execute("COMMIT")
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    db.close()
    return {"calls_per_s": calls / best, "ms_per_call": best * 1000 / calls}


# --- the parent: orchestrates children and prints ----------------------------------------------

def run_child(database_url: str, calls: int, var_dir: str) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    out = subprocess.run([sys.executable, __file__, "--measure", database_url, str(calls)], env=env,
                         cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _pg_admin():
    try:
        import psycopg
        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:
        print(f"PostgreSQL not reachable at {PG_ADMIN_URL} ({exc.__class__.__name__}); skipped")
        return None


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as var_dir:
        path = os.path.join(var_dir, "bench.sqlite3")
        django_sqlite = run_child(f"sqlite:///{path}", CALLS["sqlite"], var_dir)
        rows.append(("DjangoRecorder, SQLite (WAL, synchronous=NORMAL)", django_sqlite))
        raw = raw_sqlite(path, CALLS["sqlite"])
        rows.append(("raw sqlite3, same rows and transactions", raw))
        admin = _pg_admin()
        if admin is not None:
            name = f"openprogram_bench_{os.getpid()}"
            admin.execute(f'CREATE DATABASE "{name}"')
            try:
                base = PG_ADMIN_URL.rsplit("/", 1)[0]
                rows.append(("DjangoRecorder, PostgreSQL",
                             run_child(f"{base}/{name}", CALLS["postgresql"], var_dir)))
            finally:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.close()
    print(f"{'recorded calls (entry + exit + hand-off)':52} {'calls/s':>10} {'ms/call':>9}")
    for label, figures in rows:
        print(f"{label:52} {figures['calls_per_s']:10,.0f} {figures['ms_per_call']:9.3f}")
    print(f"ratio SQLite DjangoRecorder / raw sqlite3: {django_sqlite['calls_per_s'] / raw['calls_per_s']:.2f}"
          f"  (raw is {raw['calls_per_s'] / django_sqlite['calls_per_s']:.1f}x faster)")
    print(f"target >= 2,000 calls/s on SQLite: {'met' if django_sqlite['calls_per_s'] >= 2000 else 'NOT met'}"
          f"; vs the peer's ~22 ms/call: {22 / django_sqlite['ms_per_call']:.0f}x")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
