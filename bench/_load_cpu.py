"""The CPU a load used, from Linux's /proc: the worker processes' own (their writer processes included),
and the whole machine's busy share (what else runs there counts too: on a shared machine, the figure says
how much was left for the load).

Whether a second worker can add throughput depends on both: if one worker with its writer process and
the database already keeps the machine's cores busy, a second has nothing to run on.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterable, Optional

from bench._cpu import children_seconds, postgres_seconds, process_seconds


def _machine_ticks() -> Optional[tuple[int, int]]:
    """(busy, total) CPU ticks of every core since boot, None without /proc."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def _processes_seconds(pids: Iterable[int]) -> Optional[float]:
    total = 0.0
    for pid in pids:
        own, children = process_seconds(pid), children_seconds(pid)
        if own is None or children is None:
            return None
        total += own + sum(children.values())
    return total


class LoadCpu:
    """From its creation to `figures()`: the CPU seconds of `pids` and their children, the cores they kept
    busy on average, and the machine's busy share (0-1)."""

    def __init__(self, pids: list[int]):
        self.pids = pids
        self._wall = time.perf_counter()
        self._processes = _processes_seconds(pids)
        self._machine = _machine_ticks()

    def figures(self) -> dict:
        wall = time.perf_counter() - self._wall
        now, machine = _processes_seconds(self.pids), _machine_ticks()
        seconds = None if now is None or self._processes is None else now - self._processes
        busy = None
        if machine and self._machine and machine[1] > self._machine[1]:
            busy = (machine[0] - self._machine[0]) / (machine[1] - self._machine[1])
        return {"seconds": seconds, "cores": seconds / wall if seconds is not None and wall > 0 else None,
                "machine_busy": busy, "machine_cores": os.cpu_count()}


class CpuByPart:
    """From its creation to `seconds()`: the CPU seconds each part of a load spent: named groups of
    processes with their child processes (`parts`), this process alone (the bench's own: it launches
    the sessions) plus the processes of `clients`, and the machine's PostgreSQL.

    Their sum beside the cores times the wall says whether the load had the machine to itself: a load
    that needs more CPU than the cores give in its ideal wall time queues for them, and every latency
    measured meanwhile includes that queue."""

    def __init__(self, parts: dict[str, list[int]], clients: list[int]):
        self.parts, self.clients = parts, clients
        self._before = self._read()

    def _read(self) -> dict[str, Optional[float]]:
        figures = {name: _processes_seconds(pids) for name, pids in self.parts.items()}
        clients = [process_seconds(pid) for pid in self.clients]
        figures["bench"] = None if None in clients else time.process_time() + sum(clients)
        figures["PostgreSQL"] = postgres_seconds()
        return figures

    def seconds(self) -> dict[str, Optional[float]]:
        now = self._read()
        return {name: None if now[name] is None or self._before[name] is None else now[name] - self._before[name]
                for name in now}
