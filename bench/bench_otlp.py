"""What exporting spans (OPENPROGRAM_OTLP_ENDPOINT) costs a run, above all when the receiver is away.

One process, Django on a throwaway SQLite database, runs the same sessions over and over: `wiki_agent`
(model calls on the simulated model) and `slow_count` (n=2000, delay_s=0: 2,001 recorded calls, each a
span), each REPEATS times in a row under each of four exports, in rounds (off, unreachable, black hole,
receiving) whose order rotates, so a shared machine's drift hits them alike:

- off: no endpoint;
- unreachable: a port nothing listens on (each export is refused at once);
- black hole: a port that accepts connections and never answers (each export waits out its timeout);
- receiving: an HTTP server of its own process answering 200 to every POST (the spans are sent and taken).

A run is timed from its start to its session's end, its writes durable. Per run: its wall time; the CPU
this process spent meanwhile (all its threads: the run, the writer, the forwarder's); and that CPU plus
the span process's meanwhile, to the nanosecond. The span process is niced, but on a machine of two cores
what it runs is taken from the cores the runs use, so it is counted: its work for one run may go on
after the run (its last batch), so a round's last run of each export is counted until a flush has sent
or dropped everything (outside its wall time). Wall time moves with whatever else the machine runs; the
CPU figures much less.

Each figure is, for each export, the median over the rounds of the ratio of its median in the round to
the off run's in the same round (the load moves within a round less than across rounds), with the
middle half of those ratios (first to third quartile) as its spread, beside its median in ms. Every
export's runs are timed after the same SETTLE_RUNS untimed ones (the first run after a wait, such as a
span process's start, was slower whatever the export), each after a garbage collection, with the
collector tuned as a server's (`gc_tuning`). Then PAIRS pairs: one export to the unreachable port, its
listener unsubscribed for one run of a pair and subscribed for the other, the order alternating, each
pair's ratio (its runs a moment apart, where the rounds' blocks are seconds apart). Also the spans each
export sent and dropped, and the machine's load average through the bench. Target (issue 40): an
unreachable receiver slows a run by at most 5 %. Figures only: nothing asserted.

Run: .venv/bin/python bench/bench_otlp.py. BENCH_OTLP_ROUNDS sets the rounds (default 15),
BENCH_OTLP_REPEATS the runs of each session per export and round (default 3), BENCH_OTLP_PAIRS the pairs
(default 60), BENCH_OTLP_WRITER the
writer (OPENPROGRAM_WRITER: "thread", the default, as a script or test runs; "process", as the server does).
"""
from __future__ import annotations

import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._cpu import running_seconds  # noqa: E402 (after the path is set)

ROUNDS = int(os.environ.get("BENCH_OTLP_ROUNDS", "15"))
REPEATS = int(os.environ.get("BENCH_OTLP_REPEATS", "3"))
WRITER = os.environ.get("BENCH_OTLP_WRITER", "thread")
RUNS = (("wiki_agent", {"question": "How does the recursion guard work?"}), ("slow_count", {"n": 2000, "delay_s": 0}))
EXPORT_TIMEOUT_S = 2.0
SETTLE_RUNS = 2
PAIRS = int(os.environ.get("BENCH_OTLP_PAIRS", "60"))
# A receiver that takes every batch, in a process of its own: its work is no part of the runs' process.
ACCEPTING = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Accepting(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Accepting)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
WALL, CPU, BOTH = range(3)  # a timing's figures: wall, this process's CPU, and with the span process's


def receivers():
    """{export name: endpoint or None}, and what to close afterwards."""
    accepting = subprocess.Popen([sys.executable, "-c", ACCEPTING], stdout=subprocess.PIPE, text=True)
    accepting_port = int(accepting.stdout.readline())
    black_hole = socket.socket()
    black_hole.bind(("127.0.0.1", 0))
    black_hole.listen(1000)  # connections complete in the kernel; nothing ever reads or answers them
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused_port = probe.getsockname()[1]
    endpoints = {"off": None, "unreachable": f"http://127.0.0.1:{refused_port}",
                 "black hole": f"http://127.0.0.1:{black_hole.getsockname()[1]}",
                 "receiving": f"http://127.0.0.1:{accepting_port}"}
    return endpoints, (accepting.kill, black_hole.close)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    first, median, third = statistics.quantiles(values, n=4)
    return first, median, third


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="bench-otlp-")
    os.environ.update({"DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_WRITER": WRITER,
                       "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3", "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER": "0"})
    for name in ("OPENPROGRAM_OTLP_ENDPOINT", "OPENPROGRAM_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from dag.recording import write_path
    from dag.runs.lifecycle import run_session
    from dag.telemetry import export
    from openprogram_web.gc_tuning import tune_for_serving

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    endpoints, closers = receivers()
    # timings[function, export][round]: that round's runs, each (wall, CPU, CPU with the span process's)
    timings = {(function, name): [] for function, _ in RUNS for name in endpoints}
    sent = {name: [0, 0] for name in endpoints}
    loads = []

    def timed_run(function: str, args: dict, span_pid, last: bool, forwarder) -> tuple[float, float, float]:
        session = write_path.queue_session(user, function=function, args=args)
        gc.collect()  # a collection of earlier runs' garbage would land in whichever run came next
        span_cpu = running_seconds(span_pid) if span_pid else 0.0
        started, cpu = time.perf_counter(), time.process_time()
        run_session(session.pk)
        wall = time.perf_counter() - started
        if last and forwarder is not None:  # its spans sent or dropped before the next export starts
            forwarder.flush(EXPORT_TIMEOUT_S * 3)
        cpu = time.process_time() - cpu
        span_cpu = (running_seconds(span_pid) or 0.0) - span_cpu if span_pid else 0.0
        return wall, cpu, cpu + span_cpu

    for _ in range(3):  # warm: imports, caches, the first id blocks (a first run takes twice as long)
        for function, args in RUNS:
            run_session(write_path.queue_session(user, function=function, args=args).pk)
    tune_for_serving()  # the collector as a server's process has it
    names = list(endpoints)
    for round_number in range(ROUNDS):
        loads.append(os.getloadavg()[0])
        # Each round starts with another export, so none is always timed right after another's shutdown.
        for name in names[round_number % len(names):] + names[:round_number % len(names)]:
            endpoint = endpoints[name]
            forwarder = export.start(endpoint, EXPORT_TIMEOUT_S) if endpoint else None
            if forwarder is not None:  # its span process starts at the first change: before the timing
                run_session(write_path.queue_session(user, function=RUNS[0][0], args=RUNS[0][1]).pk)
                forwarder.flush()
            # The first run after a wait (the flush above) is slower, the cores having idled meanwhile: every
            # export's runs are timed after the same untimed runs.
            for _ in range(SETTLE_RUNS):
                run_session(write_path.queue_session(user, function=RUNS[0][0], args=RUNS[0][1]).pk)
            span_pid = forwarder.process.pid if forwarder is not None else None
            for function, args in RUNS:
                timings[function, name].append([
                    timed_run(function, args, span_pid, function == RUNS[-1][0] and repeat == REPEATS - 1, forwarder)
                    for repeat in range(REPEATS)])
            if forwarder is not None:
                export.stop()  # sends what is queued, or drops it after the timeout: outside the timing
                sent[name][0] += forwarder.exported
                sent[name][1] += forwarder.dropped
    paired = paired_ratios(endpoints["unreachable"], timed_run, user)
    loads.append(os.getloadavg()[0])
    for close in closers:
        close()
    print(f"bench_otlp: {ROUNDS} rounds of {REPEATS} runs each, writer {WRITER}; per run, median ms and the "
          f"median (first-third quartile) of each round's ratio to no export; load average "
          f"{min(loads):.1f}-{max(loads):.1f} (median {statistics.median(loads):.1f}), {os.cpu_count()} CPUs")
    print(f"{'run':<26} {'export':<11} {'wall ms':>7} {'ratio (spread)':<19} {'CPU ms':>7} {'ratio (spread)':<19} "
          f"{'+span ms':>8} {'ratio (spread)':<19}")
    medians = {}
    for function, args in RUNS:
        label = f"{function}({', '.join(f'{k}={v!r}' for k, v in args.items())})"[:26]
        for name in endpoints:
            figures = []
            for kind in (WALL, CPU, BOTH):
                rounds = [statistics.median(run[kind] for run in runs) for runs in timings[function, name]]
                offs = [statistics.median(run[CPU if kind == BOTH else kind] for run in runs)
                        for runs in timings[function, "off"]]
                first, median, third = quartiles([run / off for run, off in zip(rounds, offs)])
                medians[function, name, kind] = median
                figures.append(f"{statistics.median(rounds) * 1000:>{8 if kind == BOTH else 7}.1f} "
                               f"{median:.3f} ({first:.3f}-{third:.3f})")
            print(f"{label:<26} {name:<11} {' '.join(figures)}")
    print("spans sent / dropped: " + "; ".join(f"{name} {ok} / {lost}" for name, (ok, lost) in sent.items()
                                               if endpoints[name]))
    print(f"paired, unreachable: one span process, its listener off and on run by run ({PAIRS} pairs, the order "
          f"alternating); median (first-third quartile) of the pairs' ratios")
    for function, args in RUNS:
        print(f"{function:<26} " + " ".join(f"{what} {quartiles(paired[function, kind])[1]:.3f} "
                                             f"({quartiles(paired[function, kind])[0]:.3f}-"
                                             f"{quartiles(paired[function, kind])[2]:.3f})"
                                             for kind, what in ((WALL, "wall"), (CPU, "CPU"), (BOTH, "+span"))))
    for kind, what in ((WALL, "wall"), (BOTH, "CPU of both processes")):
        worst = max(medians[function, "unreachable", kind] for function, _ in RUNS)
        worst_paired = max(quartiles(paired[function, kind])[1] for function, _ in RUNS)
        print(f"target: an unreachable receiver slows a run by at most 5 % ({what}): rounds "
              f"{'hold' if worst <= 1.05 else 'MISS'} (worst median ratio {worst:.3f}); pairs "
              f"{'hold' if worst_paired <= 1.05 else 'MISS'} (worst median ratio {worst_paired:.3f})")


def paired_ratios(endpoint: str, timed_run, user) -> dict:
    """{(function, WALL|CPU|BOTH): ratios}: PAIRS pairs of runs of each function with an export to the
    unreachable `endpoint` started once, its listener unsubscribed for one run of the pair (no export, the
    span process idle) and subscribed for the other, the order alternating. A pair's runs are a moment
    apart, so the machine's drift hits both alike; the rounds' blocks are minutes apart."""
    from dag.live import broadcast
    from dag.recording import write_path
    from dag.runs.lifecycle import run_session
    from dag.telemetry import export

    forwarder = export.start(endpoint, EXPORT_TIMEOUT_S)
    for _ in range(1 + SETTLE_RUNS):
        run_session(write_path.queue_session(user, function=RUNS[0][0], args=RUNS[0][1]).pk)
    forwarder.flush()
    ratios = {(function, kind): [] for function, _ in RUNS for kind in (WALL, CPU, BOTH)}
    for number in range(PAIRS):
        for function, args in RUNS:
            pair = {}
            for exporting in ((False, True) if number % 2 else (True, False)):
                (broadcast.subscribe if exporting else broadcast.unsubscribe)(forwarder)
                pair[exporting] = timed_run(function, args, forwarder.process.pid, False, None)
            for kind in (WALL, CPU, BOTH):
                ratios[function, kind].append(pair[True][kind] / pair[False][kind])
    export.stop()
    return ratios


if __name__ == "__main__":
    main()
