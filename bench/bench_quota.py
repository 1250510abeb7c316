"""The launch's storage check as a user's history grows: stored sizes against reading every node.

Every launch checks its owner against OPENPROGRAM_MAX_STORED_BYTES_PER_USER. The check adds up the
sizes the write path stored when each session ended (`dag.stored_size.owner_bytes`); before, it summed
the text length of every node the owner ever recorded, which is measured beside it here, in the same
run, on the same rows. The history is ended sessions of NODES_PER_SESSION nodes each, written as
imports through the write path (`write_path.insert_imported_session`, what `dag.recording.export.import_session`
ends in), plus one running session.

Run: .venv/bin/python bench/bench_quota.py. SQLite in a temporary directory, then PostgreSQL
(BENCH_PG_URL, default the local server) in a scratch database it creates and drops (`bench/_pg.py`).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._pg import scratch_database  # noqa: E402 (after the path is set)

HISTORY_NODES = (10_000, 100_000, 300_000)
NODES_PER_SESSION = 10_000
REPEATS = 5


def median_ms(check) -> float:
    check()  # warm: the rows in the cache, as the next launch finds them
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        check()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def every_node_scan(owner) -> int:
    """The check as it was: every node of every session of `owner`, read and measured."""
    from django.db.models import Sum

    from dag.models import Node, Session
    from dag.stored_size import text_length

    own = Session.objects.filter(owner=owner).aggregate(size=Sum(text_length("args", "result")))["size"]
    nodes = Node.objects.filter(session__owner=owner).aggregate(size=Sum(text_length("input", "output")))["size"]
    return (own or 0) + (nodes or 0)


def grow_history(owner, count: int) -> None:
    from dag.recording import write_path

    nodes = [{"kind": "code", "name": "step", "status": "completed", "input": {"i": i, "note": "a short argument"},
              "output": {"i": i, "ok": True}, "rev": i + 1} for i in range(NODES_PER_SESSION)]
    for _ in range(count // NODES_PER_SESSION):
        write_path.insert_imported_session(owner, {"function": "history", "args": {"n": NODES_PER_SESSION},
                                                   "status": "completed", "result": "done"},
                                           nodes, [None] * len(nodes))


def measure(database_url: str, var_dir: str) -> list[dict]:
    os.environ.update({"DATABASE_URL": database_url, "OPENPROGRAM_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING",
                       "DJANGO_SETTINGS_MODULE": "openprogram_web.settings"})
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from dag.recording import write_path
    from dag.runs import quotas

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    running = write_path.queue_session(owner, function="running", args={"n": 1})
    write_path.set_session_status(running.pk, "running")
    for i in range(100):  # the unfinished session's nodes are still read, as they must be
        write_path.create_node(running.pk, kind="code", name="step", input={"i": i})
    rows, grown = [], 0
    for size in HISTORY_NODES:
        grow_history(owner, size - grown)
        grown = size
        assert quotas.stored_bytes(owner) == every_node_scan(owner), "the two measures disagree"
        rows.append({"nodes": size, "stored": median_ms(lambda: quotas.stored_bytes(owner)),
                     "scan": median_ms(lambda: every_node_scan(owner))})
    return rows


def run_child(database_url: str, var_dir: str) -> list[dict]:
    out = subprocess.run([sys.executable, __file__, "--measure", database_url, var_dir], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"measuring {database_url} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(name: str, rows: list[dict]) -> None:
    print(f"\n{name}: the storage check of one launch, median of {REPEATS}")
    print(f"  {'nodes recorded':>15}  {'stored sizes':>13}  {'every node read':>16}  {'ratio':>7}")
    for row in rows:
        print(f"  {row['nodes']:>15,}  {row['stored']:>10.2f} ms  {row['scan']:>13.2f} ms"
              f"  {row['scan'] / row['stored']:>6.0f}x")


def main() -> None:
    print(f"bench_quota: histories of {', '.join(f'{n:,}' for n in HISTORY_NODES)} recorded nodes "
          f"in sessions of {NODES_PER_SESSION:,}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-quota-") as var_dir:
        report("SQLite", run_child(f"sqlite:///{var_dir}/bench.sqlite3", var_dir))
        with scratch_database("openprogram_bench_quota") as database_url:
            if database_url is not None:
                report("PostgreSQL", run_child(database_url, var_dir))

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], sys.argv[3])))
    else:
        main()
