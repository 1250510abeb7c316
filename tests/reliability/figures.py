"""What the reliability suite exercised, for the one-line summary `make test` prints at its end.

A test calls `record(...)` with what it did: sessions it ran, nodes the database holds for them, faults
it injected, inputs it tried, and records lost (a client or the database missing something the run
wrote). Each call appends one JSON line to the figures file; `bin/reliability-summary` adds the lines of
every pass up. `make test` empties the file before its first pass, so a summary covers one `make test`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

FIELDS = ("sessions", "nodes", "faults", "inputs", "lost")
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "var" / "reliability-figures.jsonl"


def figures_path() -> Path:
    return Path(os.environ.get("OPENPROGRAM_RELIABILITY_FIGURES") or DEFAULT_PATH)


def record(test: str, **counts: int) -> None:
    """Add what `test` (a short name) exercised; each count is one of FIELDS."""
    unknown = set(counts) - set(FIELDS)
    if unknown:
        raise TypeError(f"record(): unknown figure(s) {sorted(unknown)}; allowed: {', '.join(FIELDS)}")
    path = figures_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"test": test, "pass": os.environ.get("DATABASE_URL") and "scaled" or "embedded",
                       **{name: int(value) for name, value in counts.items()}})
    with path.open("a", encoding="utf-8") as out:
        out.write(line + "\n")
