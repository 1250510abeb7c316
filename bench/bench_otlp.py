"""What exporting spans (OPENPROGRAM_OTLP_ENDPOINT) costs a run, above all when the receiver is away.

One process, Django on a throwaway SQLite database, runs the same session over and over: `slow_count`
(n=2000, delay_s=0: 2,001 recorded calls, each a span) and `wiki_agent` (model calls on the simulated
model), each under four exports, in interleaved rounds (off, unreachable, black hole, receiving, off, ...)
in a rotating order, so the machine's drift hits them alike:

- off: no endpoint;
- unreachable: a port nothing listens on (each export is refused at once);
- black hole: a port that accepts connections and never answers (each export waits out its timeout);
- receiving: a local HTTP server answering 200 to every POST (the spans are sent and taken).

A run is timed from its start to its session's end, its writes durable: its wall time, and the CPU time
this process spent meanwhile (all its threads: the run, the writer, the forwarder's; the span process
is apart). Each export's figure is the median over the rounds of its ratio to the off run of the same
round (a shared machine's load moves within a round less than across rounds), beside its median in ms.
Also the spans each export sent and dropped. Target (issue 40): an unreachable receiver slows a run by
at most 5 %. Figures only: nothing asserted.

Run: .venv/bin/python bench/bench_otlp.py (BENCH_OTLP_ROUNDS sets the rounds, default 15).
"""
from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ROUNDS = int(os.environ.get("BENCH_OTLP_ROUNDS", "15"))
RUNS = (("slow_count", {"n": 2000, "delay_s": 0}), ("wiki_agent", {"question": "How does the recursion guard work?"}))
EXPORT_TIMEOUT_S = 2.0


class Accepting(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def receivers():
    """{export name: endpoint or None}, and what to close afterwards."""
    accepting = ThreadingHTTPServer(("127.0.0.1", 0), Accepting)
    threading.Thread(target=accepting.serve_forever, daemon=True).start()
    black_hole = socket.socket()
    black_hole.bind(("127.0.0.1", 0))
    black_hole.listen(1000)  # connections complete in the kernel; nothing ever reads or answers them
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused_port = probe.getsockname()[1]
    endpoints = {"off": None, "unreachable": f"http://127.0.0.1:{refused_port}",
                 "black hole": f"http://127.0.0.1:{black_hole.getsockname()[1]}",
                 "receiving": f"http://127.0.0.1:{accepting.server_address[1]}"}
    return endpoints, (accepting.shutdown, black_hole.close)


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="bench-otlp-")
    os.environ.update({"DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
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

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    endpoints, closers = receivers()
    timings = {(function, name): [] for function, _ in RUNS for name in endpoints}
    sent = {name: [0, 0] for name in endpoints}

    def timed_run(function: str, args: dict) -> tuple[float, float]:
        """(wall, CPU) seconds of one run."""
        session = write_path.queue_session(user, function=function, args=args)
        started, cpu = time.perf_counter(), time.process_time()
        run_session(session.pk)
        return time.perf_counter() - started, time.process_time() - cpu

    for function, args in RUNS:
        timed_run(function, args)  # warm: imports, caches, the first id block
    names = list(endpoints)
    for round_number in range(ROUNDS):
        # Each round starts with another export, so none is always timed right after another's shutdown.
        for name in names[round_number % len(names):] + names[:round_number % len(names)]:
            endpoint = endpoints[name]
            forwarder = export.start(endpoint, EXPORT_TIMEOUT_S) if endpoint else None
            if forwarder is not None:  # its span process starts at the first change: before the timing
                timed_run(*RUNS[1])
                forwarder.flush()
            for function, args in RUNS:
                timings[function, name].append(timed_run(function, args))
            if forwarder is not None:
                export.stop()  # sends what is queued, or drops it after the timeout: outside the timing
                sent[name][0] += forwarder.exported
                sent[name][1] += forwarder.dropped
    for close in closers:
        close()
    print(f"bench_otlp: {ROUNDS} rounds; per run, median ms and median ratio to no export in the same round "
          f"(load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    print(f"{'run':<34} {'export':<12} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    ratios = {}
    for function, args in RUNS:
        label = f"{function}({', '.join(f'{k}={v!r}' for k, v in args.items())})"[:34]
        for name in endpoints:
            figures = []
            for kind in (0, 1):  # wall, CPU
                runs = [timing[kind] for timing in timings[function, name]]
                offs = [timing[kind] for timing in timings[function, "off"]]
                ratio = statistics.median(run / off for run, off in zip(runs, offs))
                ratios[function, name, kind] = ratio
                figures.append(f"{statistics.median(runs) * 1000:>8.1f} {ratio:>6.3f}")
            print(f"{label:<34} {name:<12} {' '.join(figures)}")
    print("spans sent / dropped: " + "; ".join(f"{name} {ok} / {lost}" for name, (ok, lost) in sent.items()
                                               if endpoints[name]))
    worst = max(ratios[function, "unreachable", 0] for function, _ in RUNS)
    print(f"target: an unreachable receiver slows a run by at most 5 % (wall): "
          f"{'holds' if worst <= 1.05 else 'MISSED'} (worst median ratio {worst:.3f})")


if __name__ == "__main__":
    main()
