"""The table bench_scaled.py prints: one worker's figures beside two's, each goal of issue 36 beside its
figure with whether it was met, then a line a load (statuses, sessions by worker, connections by
process, what the websocket clients received)."""
from __future__ import annotations

import os
import statistics

# The issue's goals (issue 36): two workers' CPU-bound rate over one's; commit-to-browser p95 with the
# I/O-bound sessions waiting on two workers, ms; the workers' PostgreSQL connections at once.
GOAL_RATIO, GOAL_P95_MS, GOAL_CONNECTIONS = 1.8, 250.0, 30


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(round(fraction * (len(values) - 1))))]


def goal(met: bool) -> str:
    return "met" if met else "NOT met"


def print_table(figures: dict, settings_in_use: dict) -> None:
    """`figures` as bench_scaled.measure gathers them; `settings_in_use`, the defaults named above the table."""
    one_cpu, two_cpu, one_io, two_io = (figures[k] for k in ("cpu-1", "cpu-2", "io-1", "io-2"))
    ideal_s = figures["ideal_s"]
    print(f"\nbench_scaled: {os.cpu_count()} CPUs; defaults in use: "
          + ", ".join(f"{name} {value}" for name, value in settings_in_use.items()))
    print(f"{'':<46} {'1 worker':>12} {'2 workers':>12} {'2 / 1':>8}   goal")

    def line(name, one, two, ratio="", target=""):
        print(f"{name:<46} {one:>12} {two:>12} {ratio:>8}   {target}".rstrip())

    cpu = [load["calls"] / load["elapsed"] for load in (one_cpu, two_cpu)]
    line(f"CPU-bound: recorded calls/s ({one_cpu['count']} sessions)", f"{cpu[0]:,.0f}", f"{cpu[1]:,.0f}",
         f"{cpu[1] / cpu[0]:.2f}x", f">= {GOAL_RATIO}x: {goal(cpu[1] / cpu[0] >= GOAL_RATIO)}")
    line("  workers' CPU per recorded call, us", *(per_call_us(load) for load in (one_cpu, two_cpu)))
    line("  cores busy: the workers / the machine", *(cores_text(load) for load in (one_cpu, two_cpu)),
         ceiling_text(one_cpu), f"of {os.cpu_count()} (2 / 1: the most the cores left allow)")
    rates = [load["ended"] / load["elapsed"] for load in (one_io, two_io)]
    line(f"I/O-bound: {one_io['count']} sessions, wall s (ideal {ideal_s:g} s)",
         *(wall_text(load) for load in (one_io, two_io)), f"{rates[1] / rates[0]:.2f}x", "(sessions/s)")
    line("  wall / ideal", *(f"{load['elapsed'] / ideal_s:.1f}x" if load["ended"] == load["count"] else "-"
                             for load in (one_io, two_io)))
    line("  launching them took, s", *(f"{load['launched_s']:.1f}" for load in (one_io, two_io)))
    line("  CPU a session, ms: workers/web/bench/PG", *(per_session_ms(load) for load in (one_io, two_io)))
    line(f"  their CPU, s / the cores' in {ideal_s:g} s", *(cpu_against_ideal(load, ideal_s) for load in (one_io, two_io)),
         "", "(more: the load queues for CPU)")
    line("  sessions running at once, peak", *(str(load["peaks"]["running"]) for load in (one_io, two_io)),
         "", f"all {one_io['count']}")
    workers = two_io["peaks"]["groups"]["workers"]
    line("  PostgreSQL connections, workers' peak", *(str(load["peaks"]["groups"]["workers"])
                                                      for load in (one_io, two_io)),
         "", f"<= {GOAL_CONNECTIONS}: {goal(workers <= GOAL_CONNECTIONS)}")
    line("  PostgreSQL connections, all, peak", *(str(load["peaks"]["connections"]) for load in (one_io, two_io)))
    line("  commit -> browser p50, ms", *(f"{latency(load, 0.5):,.0f}" for load in (one_io, two_io)))
    line("  commit -> browser p95, ms", *(f"{latency(load, 0.95):,.0f}" for load in (one_io, two_io)), "",
         "(all launched at once: queued for CPU)")
    print_beside_waiting(figures["beside-0"], figures["beside-waiting"])
    memory = figures["memory"]
    per_run = f"{memory['per_run'] / 1024:,.0f} KiB" if memory["per_run"] is not None else "-"
    line(f"memory per waiting run ({memory['waiting']} waiting)", per_run, "", "",
         f"(idle {memory['idle'] / 2 ** 20:,.0f} MiB, waiting {memory['held'] / 2 ** 20:,.0f} MiB)")
    stops = sorted(s * 1000 for s in figures["stops"])
    if stops:
        line("stop, this process -> a worker's run, ms", f"{statistics.median(stops):.0f} p50",
             f"{percentile(stops, 0.95):.0f} p95", "", f"(n={len(stops)} of {figures['stop_trials']}, 2 workers)")
    else:
        line("stop, this process -> a worker's run, ms", "-", "-", "", f"(none of {figures['stop_trials']} trials ended)")
    print()
    for key, load in figures.items():
        if key.startswith(("cpu", "io")):
            print(f"{key}: {load['ended']}/{load['count']} ended in {load['elapsed']:.1f} s; "
                  f"{dict(load['statuses'])}; by worker {dict(load['by_worker'])}; "
                  f"connections by process {load['peaks']['by_label']}"
                  + (live_text(load["live"]) if load["live"] else ""))
        elif key.startswith("beside"):
            print(f"{key}: {load['waiting']} waiting, probes ended: {load['probes_ended']}"
                  + live_text(load["live"]))


def per_call_us(load: dict) -> str:
    seconds = load["cpu"]["seconds"]
    return "-" if seconds is None or not load["calls"] else f"{seconds / load['calls'] * 1e6:,.0f}"


def ceiling_text(one_worker: dict) -> str:
    """The most two workers could do over one, had the second the cores one worker's load left idle."""
    cpu = one_worker["cpu"]
    if not cpu["machine_busy"]:
        return ""
    return f"{1 / cpu['machine_busy']:.2f}x"


def print_beside_waiting(floor: dict, beside: dict) -> None:
    """The live view of runs recording their turns with no run waiting, and beside `beside['waiting']`."""
    print(f"{'live view beside waiting runs, 2 workers':<46} {'none waiting':>12} {beside['waiting']:>12} waiting")

    def row(name, values, target=""):
        print(f"{name:<46} {values[0]:>12} {values[1]:>12}   {target}".rstrip())

    p95 = [latency(load, 0.95) for load in (floor, beside)]
    row("  commit -> browser p50, ms", [f"{latency(load, 0.5):,.0f}" for load in (floor, beside)])
    row("  commit -> browser p95, ms", [f"{value:,.0f}" for value in p95],
        f"<= {GOAL_P95_MS:g}: {goal(p95[1] <= GOAL_P95_MS)}")
    row("  cores the workers keep busy while runs wait",
        ["-" if load["quiet"]["cores"] is None else f"{load['quiet']['cores']:.3f}" for load in (floor, beside)])
    row("  node changes measured", [f"{len(load['live']['latencies_ms']):,}" for load in (floor, beside)],
        "(the turns of runs recording while the others wait)")
    if not beside["settled"] or beside["still_waiting"] < beside["waiting"]:
        print(f"  (only {beside['still_waiting']} of {beside['waiting']} were still waiting at the end)")


def cores_text(load: dict) -> str:
    cpu = load["cpu"]
    if cpu["cores"] is None or cpu["machine_busy"] is None:
        return "-"
    return f"{cpu['cores']:.2f} / {cpu['machine_busy'] * cpu['machine_cores']:.2f}"


# The parts of a load's CPU (bench/_load_cpu.CpuByPart): "bench" is this process, launching, and the
# websocket clients' process; PostgreSQL is the machine's (a shared server's other databases count too).
PARTS = ("workers", "web", "bench", "PostgreSQL")


def per_session_ms(load: dict) -> str:
    spent = load["cpu"]["by_part"]
    return "/".join("-" if spent[part] is None else f"{spent[part] / load['count'] * 1000:.0f}" for part in PARTS)


def cpu_against_ideal(load: dict, ideal_s: float) -> str:
    spent = load["cpu"]["by_part"]
    if any(spent[part] is None for part in PARTS):
        return "-"
    return f"{sum(spent[part] for part in PARTS):.1f} / {ideal_s * os.cpu_count():.0f}"


def wall_text(load: dict) -> str:
    if load["ended"] == load["count"]:
        return f"{load['elapsed']:.1f}"
    return f">{load['elapsed']:.0f} ({load['ended']} ended)"


def latency(load: dict, fraction: float) -> float:
    values = load["live"]["latencies_ms"]
    return percentile(values, fraction) if values else float("nan")


def live_text(live: dict) -> str:
    failures = f", {len(live['failures'])} failed (first: {live['failures'][0]})" if live["failures"] else ""
    return (f"; {live['clients']} websocket clients, {len(live['latencies_ms'])} node changes received "
            f"(clients by how many: {live['by_count']}), {live['reconnections']} reconnections, "
            f"{live['still_open']} still open at the end{failures}")
