"""The protocol every side of `bench/bench_peers.py` speaks, and the helpers they share (stdlib only).

A side is a long-lived subprocess, run by the interpreter of its own environment (this project's venv,
or the peers' venv under var/). It reads one JSON request a line on stdin, {"measure": name, "args":
{...}}, runs that measurement once and answers one JSON line on stdout: {"ok": true, ...figures} or
{"ok": false, "error": "..."}. The driver asks the sides in turn, so rounds interleave (A B A B ...).
Anything a library prints goes to stderr: stdout carries only the answers.
"""
from __future__ import annotations

import json
import os
import sys
import time
import timeit
import traceback
from typing import Callable


class ScriptCapReached(BaseException):
    """Raised by a scripted model past its cap, to end a run that would not end by itself.

    A BaseException, like a stop button's cancellation: the frameworks turn an Exception raised in a
    nested run into a tool result for the model (which would then call again), not into the end.
    """


def per_call_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    """µs per call: the fastest of `repeat` runs of `number` calls (noise on a shared machine only adds)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def mean_ms(fn: Callable[[], object], runs: int) -> float:
    """ms per run over `runs` runs after one untimed run."""
    fn()
    started = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - started) / runs * 1e3


def describe(value=None, error: BaseException | None = None, limit: int = 110) -> str:
    """What a caller received, in one short line."""
    if error is not None:
        text = f"{type(error).__name__}: {error}"
    else:
        text = f"returned {value!r}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def outcome(run: Callable[[], object], calls: Callable[[], int]) -> dict:
    """Run `run` once: model calls made (per `calls()`), wall time, and what the caller received."""
    started = time.perf_counter()
    try:
        value, error = run(), None
    except BaseException as exc:  # noqa: B902  (ScriptCapReached and the runtime's own errors alike)
        value, error = None, exc
    return {"calls": calls(), "wall_s": time.perf_counter() - started,
            "receives": describe(value, error), "capped": isinstance(error, ScriptCapReached)}


def serve(measures: dict[str, Callable[..., dict]]) -> None:
    """Answer requests until stdin closes."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the libraries print lands on stderr
    sys.stdout = sys.stderr
    answers.write(json.dumps({"ok": True, "ready": sorted(measures)}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = {"ok": True, **measures[request["measure"]](**request.get("args", {}))}
        except BaseException as exc:  # noqa: B902  (reported in the row, never a dead worker)
            traceback.print_exc()
            answer = {"ok": False, "error": describe(error=exc, limit=200)}
        answers.write(json.dumps(answer) + "\n")
