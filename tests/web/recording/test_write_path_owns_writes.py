"""Only `dag/recording/write_path/` writes Session and Node rows: every other module is scanned for writes.

A write elsewhere would skip the revision bump and the publish, and so never reach a live viewer or a
resync. The scan reads the source with `ast`: a call of a write method (`save`, `update`, `create`,
`bulk_create`, `delete`, ...) on something that names a session or a node, and raw SQL that writes
their tables. Tests are not scanned (their fixtures build rows directly).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("dag", "bin", "bench", "examples", "openprogram_web")
WRITE_PATH = ROOT / "dag" / "recording" / "write_path"
WRITE_METHODS = frozenset({"save", "update", "create", "bulk_create", "bulk_update", "delete", "get_or_create",
                           "update_or_create", "raw"})
# The receiver of the call names a session or a node: `Session.objects...`, `node`, `session.nodes.all()`.
ROWS = re.compile(r"(?i)session|node")
TABLES = re.compile(r"\bdag_(session|node)\b")
# SQL that changes rows (a read of the tables, such as a benchmark's count, writes nothing).
WRITING_SQL = re.compile(r"(?i)\b(insert|update|delete|truncate|copy|merge)\b")
# Raw SQL allowed here: the benchmark's plain-sqlite3 baseline writes the same tables without Django,
# in a throwaway database, as the figure the recorder is measured against.
SQL_BASELINES = frozenset({"bench/bench_recorder.py"})
# Writes allowed here, each for a reason: the peers benchmark also measures older checkouts of this
# project, which have no write path, and falls back to the ORM for them; the recorder benchmark's
# `bulk_create` floor writes the same rows as the recorder, in a throwaway database, to measure against.
OLD_CHECKOUT_FALLBACKS = {"bench/peers/project_side.py": ["Session.objects.create(owner=owner, **fields)"],
                          "bench/bench_recorder.py": ["Node.objects.bulk_create(batch)"]}


def python_files(root: Path):
    for top in SCANNED:
        base = root / top
        candidates = base.rglob("*") if base.is_dir() else []
        for path in candidates:
            if "__pycache__" in path.parts or "migrations" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or (path.parent.name == "bin" and path.read_bytes().startswith(b"#!/usr/bin/env python")):
                yield path


def writes_in(source: str, *, sql: bool = True) -> list[str]:
    """"line: code" for each write of a session or node row in `source` (and raw SQL that writes their
    tables, unless `sql` is False)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            receiver = ast.unparse(node.func.value)
            if ROWS.search(receiver):
                found.append(f"{node.lineno}: {ast.unparse(node)[:100]}")
        elif (sql and isinstance(node, ast.Constant) and isinstance(node.value, str) and TABLES.search(node.value)
              and WRITING_SQL.search(node.value)):
            found.append(f"{node.lineno}: SQL naming {TABLES.search(node.value).group()}")
    return found


def test_the_scan_finds_the_writes_it_looks_for():
    source = """
Session.objects.create(owner=u)
Session.objects.filter(pk=1).update(status="x")
node.save()
session.nodes.all().delete()
Node.objects.bulk_create([])
cursor.execute('UPDATE "dag_session" SET rev = 1')
cursor.execute("SELECT count(*) FROM dag_session")
Session.objects.filter(pk=1).exists()
prefill.update(values)
"""
    assert [line.split(":")[0] for line in writes_in(source)] == ["2", "3", "4", "5", "6", "7"]


def test_no_module_outside_the_write_path_writes_sessions_or_nodes():
    offenders = {}
    for path in python_files(ROOT):
        if WRITE_PATH in path.parents:
            continue
        name = path.relative_to(ROOT).as_posix()
        found = [write for write in writes_in(path.read_text(), sql=name not in SQL_BASELINES)
                 if write.split(": ", 1)[1] not in OLD_CHECKOUT_FALLBACKS.get(name, [])]
        if found:
            offenders[name] = found
    assert offenders == {}, ("Session and Node rows are written only by dag.recording.write_path "
                             "(which bumps the revision and publishes); route these through it: "
                             f"{offenders}")
