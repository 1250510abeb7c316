"""What choosing one model call's context costs at 100, 1,000 and 10,000 nodes, on SQLite and PostgreSQL.

Per session size: a bounded `render_range` (callers 5, subcalls 2: it must stay flat), the default range
(callers unlimited, up to the CONTEXT_LIMIT cap) for a frame late in the session and for the entry call,
the same two ranges chosen from the nodes held in a run's memory (`dag/recording/run_nodes.py`: how a run
chooses its contexts, reading nothing, up to its MOST_NODES), and beside them the algorithm it replaced
(every node of the session read, kept as the tests' reference). Each figure is the best of a few
renders (noise only ever adds time), with the queries and rows it read (every query run again and its
rows counted). Prints figures only.

The sessions (`tests/web/recording/context_helpers.flat_session`): an entry call, calls under it of every
expose (a third hidden), the viewer, three calls inside the viewer. Each database is measured in a
child process against a scratch database: a temporary SQLite file, and the PostgreSQL database at
BENCH_CONTEXT_PG_URL (default postgres://postgres@127.0.0.1:5432/openprogram_bench_context; created if
missing, its tables migrated, the sessions made here deleted after).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (100, 1_000, 10_000)
BOUNDED = {"callers": 5, "subcalls": 2}
RENDERS = 7
PG_URL = os.environ.get("BENCH_CONTEXT_PG_URL", "postgres://postgres@127.0.0.1:5432/openprogram_bench_context")


def measure(database_url: str) -> dict:
    """{case: {size: {"ms", "queries", "rows"}}} for one database; runs in a child process."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    sys.path.insert(0, ROOT)
    import django
    django.setup()
    from django.core.management import call_command

    from dag.models import Node
    from dag.recording import write_path
    from dag.recording.context_render import render_context_of, render_frame_context
    from dag.recording.run_nodes import RunNodes, stored_nodes
    from tests.web.recording.context_helpers import counting_reads, flat_session, reference_render

    call_command("migrate", verbosity=0)

    def held_by_a_run(session):
        """How the session's run would render: from its nodes in memory (None past what a run holds)."""
        nodes = RunNodes(complete=False)
        nodes.read_stored(partial(stored_nodes, session.id))
        held = nodes.held()
        return None if held is None else lambda session_id, frame, seq, render_range: render_context_of(
            held, frame, seq, render_range)

    # Each case: (the session's run's renderer, the viewer, the entry call) -> (render, frame, range).
    cases = {
        "bounded (callers 5, subcalls 2)": lambda held, viewer, entry: (render_frame_context, viewer, BOUNDED),
        "held by its run, bounded": lambda held, viewer, entry: (held, viewer, BOUNDED),
        "held by its run, default, late frame": lambda held, viewer, entry: (held, viewer, None),
        "default, a late frame": lambda held, viewer, entry: (render_frame_context, viewer, None),
        "default, the entry call": lambda held, viewer, entry: (render_frame_context, entry, None),
        "old: whole session, bounded": lambda held, viewer, entry: (reference_render, viewer, BOUNDED),
        "old: whole session, default": lambda held, viewer, entry: (reference_render, viewer, None),
    }
    figures = {case: {} for case in cases}
    made = []
    try:
        for size in SIZES:
            session, viewer = flat_session(size, text=" " + "x" * 100)
            made.append(session.id)
            entry = Node.objects.get(session=session, seq=0).pk
            held = held_by_a_run(session)
            for case, pick in cases.items():
                render, frame, render_range = pick(held, viewer, entry)
                if render is None:
                    figures[case][size] = None
                    continue
                best = float("inf")
                for _ in range(RENDERS):
                    start = time.perf_counter()
                    render(session.id, frame, None, render_range)
                    best = min(best, time.perf_counter() - start)
                with counting_reads() as reads:
                    render(session.id, frame, None, render_range)
                figures[case][size] = {"ms": best * 1000, "queries": reads.queries, "rows": reads.rows}
    finally:
        write_path.delete_sessions(made)
    return figures


def run_child(database_url: str, var_dir: str) -> dict | None:
    env = {**os.environ, "DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    out = subprocess.run([sys.executable, __file__, "--measure", database_url], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"measuring {database_url} failed:\n{out.stderr[-2000:]}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ensure_pg_database(url: str) -> bool:
    try:
        import psycopg
        admin_url, name = url.rsplit("/", 1)
        with psycopg.connect(f"{admin_url}/postgres", autocommit=True, connect_timeout=3) as admin:
            if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                admin.execute(f'CREATE DATABASE "{name}"')
        return True
    except Exception as exc:
        print(f"PostgreSQL not reachable at {url} ({exc.__class__.__name__}: {exc}); skipped")
        return False


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-context-") as var_dir:
        results["SQLite"] = run_child(f"sqlite:///{os.path.join(var_dir, 'bench.sqlite3')}", var_dir)
        if _ensure_pg_database(PG_URL):
            results["PostgreSQL"] = run_child(PG_URL, var_dir)
    print(f"context choice for one model call: best of {RENDERS} renders, ms (queries / rows read)")
    print(f"{'':38}" + "".join(f"{size:>26,} nodes" for size in SIZES))
    for database, figures in results.items():
        if figures is None:
            continue
        print(database)
        for case, by_size in figures.items():
            cells = "".join(f"{f['ms']:>12.2f} ms ({f['queries']:>3} / {f['rows']:>6,})" if f else
                            f"{'(not held: a long run)':>31}" for f in (by_size[str(size)] for size in SIZES))
            print(f"  {case:36}{cells}")
    print(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2])))
    else:
        main()
