"""CPU time spent by the processes of a measurement, read from Linux's /proc (None elsewhere).

A rate says how fast; the CPU beside it says where the time went and how far the machine's cores are
from full: a recorded call's work is split between the server process, the database and the client,
and only their sum over the cores bounds the rate.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Optional

PROC = Path("/proc")


def _ticks(stat: str) -> tuple[int, int]:
    """(own, reaped children's) CPU ticks from a /proc/<pid>/stat line."""
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _tick_seconds() -> float:
    return 1 / os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int) -> Optional[float]:
    """The CPU seconds process `pid` has used (all its threads), None if it cannot be read."""
    try:
        own, _ = _ticks((PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return own * _tick_seconds()


def _threads(pid: int) -> Optional[list[Path]]:
    """The /proc entries of process `pid`'s live threads, None if they cannot be read."""
    try:
        return list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return None


def thread_seconds(pid: int) -> Optional[dict[str, float]]:
    """The CPU seconds of process `pid`'s live threads by their OS names (`dag.thread_names`), threads of
    one kind summed under one name ("op-run-0", "op-run-1": "op-run"); None if they cannot be read."""
    tasks = _threads(pid)
    if tasks is None:
        return None
    seconds: dict[str, float] = {}
    for task in tasks:
        try:
            name = re.sub(r"[-_]\d+$", "", (task / "comm").read_text().strip())
            own, _ = _ticks((task / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended while read
        seconds[name] = seconds.get(name, 0.0) + own * _tick_seconds()
    return seconds


def running_seconds(pid: int) -> Optional[float]:
    """The CPU seconds process `pid`'s live threads have run, to the nanosecond (each thread's
    /proc/<pid>/task/<tid>/schedstat): for work too short for the ticks of `process_seconds`. A thread
    that ended is no longer counted. None if they cannot be read."""
    tasks = _threads(pid)
    if tasks is None:
        return None
    nanoseconds = 0
    for task in tasks:
        try:
            nanoseconds += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # ended while read
    return nanoseconds / 1e9


def children_seconds(pid: int) -> Optional[dict[int, float]]:
    """The CPU seconds of each live child process of `pid` (a server's writer process), by pid; None
    without /proc."""
    if not PROC.is_dir():
        return None
    seconds = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[1]) != pid:  # the parent's pid follows the state
                continue
            own, _ = _ticks(stat)
        except (OSError, ValueError, IndexError):
            continue  # ended while read
        seconds[int(entry.name)] = own * _tick_seconds()
    return seconds


def postgres_seconds() -> Optional[float]:
    """The CPU seconds the machine's PostgreSQL has used: its live processes, plus what its ended
    backends used (counted in the postmaster as reaped children). None without /proc."""
    if not PROC.is_dir():
        return None
    total, seen = 0, False
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            own, reaped = _ticks((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended while read
        total, seen = total + own + reaped, True
    return total * _tick_seconds() if seen else None  # none visible (another namespace): unknown, not 0


def per_call_us(seconds: Optional[float], calls: int) -> Optional[float]:
    return None if seconds is None else seconds / calls * 1e6


class CpuWatch:
    """CPU per call from its start to `per_call`: this process (the client, or the driver), the
    `server` process if given, and PostgreSQL's processes if `database` (SQLite's work is the
    driver's own, in its process); their `total_us`, and `cores`, how many cores that kept busy
    meanwhile. /proc counts
    in ticks (10 ms): watch a second or more of work."""

    def __init__(self, *, server: Optional[int] = None, database: bool = False):
        self.server, self.database = server, database
        self._wall = time.perf_counter()
        self._client = time.process_time()
        self._server = process_seconds(server) if server else None
        self._server_threads = thread_seconds(server) if server else None
        self._children = children_seconds(server) if server else None
        self._database = postgres_seconds() if database else None

    def per_call(self, calls: int) -> dict:
        wall = time.perf_counter() - self._wall

        def spent(before, now):
            return None if before is None or now is None else per_call_us(now - before, calls)
        figures = {"client_us": per_call_us(time.process_time() - self._client, calls),
                   "server_us": spent(self._server, process_seconds(self.server)) if self.server else None,
                   "writer_us": self._children_per_call(calls),
                   "database_us": spent(self._database, postgres_seconds()) if self.database else None,
                   "server_threads_us": self._threads_per_call(calls)}
        watched = [figures["client_us"], *([figures["server_us"], figures["writer_us"]] if self.server else []),
                   *([figures["database_us"]] if self.database else [])]
        total = None if None in watched else sum(watched)  # a figure watched but unread: unknown
        cores = None if total is None or wall <= 0 else total * calls / 1e6 / wall
        return {**figures, "total_us": total, "cores": cores}

    def _children_per_call(self, calls: int) -> Optional[float]:
        """The CPU per call of the server's child processes (its writer process; 0 with none), a child
        started meanwhile counted from 0."""
        now = children_seconds(self.server) if self.server else None
        if self._children is None or now is None:
            return None
        return per_call_us(sum(seconds - self._children.get(pid, 0.0) for pid, seconds in now.items()), calls)

    def _threads_per_call(self, calls: int) -> Optional[dict[str, float]]:
        """The server's CPU per call by thread, largest first (a thread started meanwhile from 0)."""
        now = thread_seconds(self.server) if self.server else None
        if self._server_threads is None or now is None:
            return None
        spent = {name: per_call_us(seconds - self._server_threads.get(name, 0.0), calls)
                 for name, seconds in now.items()}
        return dict(sorted(spent.items(), key=lambda item: -item[1]))


def mean(figures: list[dict]) -> dict:
    """The mean of several `CpuWatch.per_call` results (one per round of equal calls): each figure's mean,
    None where a round could not read it; the threads' by name."""
    merged = {}
    for name in figures[0]:
        values = [figure[name] for figure in figures]
        if any(value is None for value in values):
            merged[name] = None
        elif isinstance(values[0], dict):
            names = {key for value in values for key in value}
            merged[name] = dict(sorted(((key, sum(value.get(key, 0.0) for value in values) / len(values))
                                        for key in names), key=lambda item: -item[1]))
        else:
            merged[name] = sum(values) / len(values)
    return merged
