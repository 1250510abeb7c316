"""Side by side with the peers: this project against openprogram 0.5.0 and the OpenAI Agents SDK 0.24.0.

Each side runs in its own process and environment: this project in the project's venv, each peer in a
benchmark venv under var/ (created here with the pins below, reused while they match; never in
requirements.txt). Every model is scripted (no network, no keys). Rows 1-3 are timed in interleaved
rounds (A B A B ...), so the machine's load hits every side alike; the table gives each side's median and
range over the rounds, and the ratio to this project per round (median and range). Rows 4-5 count model
calls. A peer that cannot be installed or run offline is reported in its rows with the reason; the
script still exits 0. Figures only: nothing here is asserted.

Run: make bench-peers (or .venv/bin/python bench/bench_peers.py). BENCH_PEERS_ROUNDS sets the rounds
(default 7), BENCH_PEERS_CAP the runaway scripts' cap (default 2000).
"""
from __future__ import annotations

import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_DIR = os.path.join(ROOT, "bench", "peers")
VENV = os.environ.get("BENCH_PEERS_VENV", os.path.join(ROOT, "var", "bench-peers-venv"))
PINS = ["openprogram==0.5.0", "openai-agents==0.24.0"]
ROUNDS = int(os.environ.get("BENCH_PEERS_ROUNDS", "7"))
CAP = int(os.environ.get("BENCH_PEERS_CAP", "2000"))
PIP_TIMEOUT_S = 420
LOG_DIR = os.path.join(ROOT, "var", "bench-peers-logs")  # each side's stderr, kept for a failed row
PROJECT, OPENPROGRAM, AGENTS = "this project", "openprogram 0.5.0", "openai-agents 0.24.0"


# --- the peers' environment ------------------------------------------------------------------------

def peers_python() -> tuple[str | None, str]:
    """The peers' venv interpreter (created or reused) and how it came to be; None and why on failure."""
    python = os.path.join(VENV, "bin", "python")
    stamp = os.path.join(VENV, ".bench-pins")
    wanted = "\n".join(PINS) + "\n"
    if os.path.exists(python) and os.path.exists(stamp) and open(stamp).read() == wanted:
        return python, f"reused {os.path.relpath(VENV, ROOT)}"
    started = time.monotonic()
    if os.path.exists(os.path.join(VENV, "pyvenv.cfg")):  # a venv with other pins; never any other directory
        shutil.rmtree(VENV, ignore_errors=True)
    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        subprocess.run([base, "-m", "venv", VENV], check=True, capture_output=True, text=True, timeout=120)
        pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS],
                             capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = " ".join((getattr(exc, "stderr", "") or "").split())[-200:]
        return None, f"could not create the peers' venv at {VENV}: {exc} {detail}".strip()
    if pip.returncode != 0:
        lines = [line for line in pip.stderr.splitlines() if "is ignored: it is neither" not in line]
        return None, f"pip install {' '.join(PINS)} failed: {' '.join(lines[-3:])[:300]}"
    with open(stamp, "w") as f:
        f.write(wanted)
    return python, f"installed {', '.join(PINS)} into {os.path.relpath(VENV, ROOT)} in {time.monotonic() - started:.0f} s"


# --- the sides ---------------------------------------------------------------------------------------

class Side:
    """One side's worker process (see bench/peers/_worker.py); `failed` says why it cannot answer."""

    def __init__(self, name: str, python: str | None, script: str, failed: str = ""):
        self.name, self.failed, self.process = name, failed, None
        if python is None:
            self.failed = failed or "no interpreter"
            return
        os.makedirs(LOG_DIR, exist_ok=True)
        self.log = open(os.path.join(LOG_DIR, script.replace(".py", ".log")), "w")
        self.process = subprocess.Popen([python, os.path.join(PEERS_DIR, script)], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        ready = self._answer(120)
        if not ready.get("ok"):
            self.failed = f"did not start: {ready.get('error')}"

    def _answer(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            code = self.process.poll()
            self.stop()
            return {"ok": False, "error": f"no answer within {timeout_s:.0f} s" if code is None
                    else f"exited with {code} (its log: {self.log.name})"}
        return json.loads(line)

    def ask(self, measure: str, timeout_s: float = 300, **args) -> dict:
        if self.failed:
            return {"ok": False, "error": self.failed}
        self.process.stdin.write(json.dumps({"measure": measure, "args": args}) + "\n")
        self.process.stdin.flush()
        answer = self._answer(timeout_s)
        if not answer.get("ok") and self.process is None:
            self.failed = answer["error"]
        return answer

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


# --- the table ---------------------------------------------------------------------------------------

def _spread(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def timed_row(label: str, unit: str, key: str, sides: list[Side], measure: str, digits: int, **args) -> list[str]:
    """Interleaved rounds of `measure` on every side; lines of the table for this row."""
    rounds: dict[str, list] = {side.name: [] for side in sides}
    errors: dict[str, str] = {}
    for _ in range(ROUNDS):
        for side in sides:
            if side.name in errors:
                continue
            answer = side.ask(measure, **args)
            if answer.get("ok"):
                rounds[side.name].append(answer)
            else:
                errors[side.name] = answer["error"]
    lines = [f"{label} [{unit}]"]
    base = [a[key] for a in rounds[PROJECT]] if PROJECT not in errors else []
    for side in sides:
        if side.name in errors:
            lines.append(f"  {side.name:24} FAILED: {errors[side.name]}")
            continue
        values = [a[key] for a in rounds[side.name]]
        ratio = ""
        if side.name != PROJECT and len(base) == len(values):
            ratio = f"   x{_spread([v / b for v, b in zip(values, base)], 1)} this project's"
        lines.append(f"  {side.name:24} {_spread(values, digits):>26}{ratio}")
    if measure == "wrapper" and base:
        plain = [a["plain_us"] for a in rounds[PROJECT]]
        agentic = [a["agentic_us"] for a in rounds[PROJECT]]
        lines.append(f"  {'plain Python call':24} {_spread(plain, 3):>26}   "
                     f"(this project's wrapper: x{_spread([a / p for a, p in zip(agentic, plain)], 0)} a plain call)")
    return lines


def counted(label: str, answer: dict, cap: int | None = None) -> str:
    if not answer.get("ok"):
        return f"  {label:52} FAILED: {answer['error']}"
    calls = answer["calls"]
    shown = f"{calls:,}" + (f" (capped at {cap:,}: unbounded)" if cap is not None and calls >= cap else "")
    wall = answer["wall_s"]
    wall = f"{wall:.2f} s" if wall >= 1 else f"{wall * 1e3:.2f} ms"
    return f"  {label:52} {shown:>34} {wall:>10}   {answer['receives']}"


def fan_out_line(label: str, answer: dict) -> str:
    if not answer.get("ok"):
        return f"  {label:52} FAILED: {answer['error']}"
    return (f"  {label:52} {answer['max']:>6} (min {answer['min']}) of {answer['demand']} asked, "
            f"{answer['trials']} trials; ends: {', '.join(answer['receives'])}")


def main() -> None:
    started = time.monotonic()
    python, how = peers_python()
    print(f"peers: {how}")
    project = Side(PROJECT, sys.executable, "project_side.py")
    peer_failure = "" if python else f"not installed: {how}"
    openprogram = Side(OPENPROGRAM, python, "openprogram_side.py", peer_failure)
    agents = Side(AGENTS, python, "agents_side.py", peer_failure)
    try:
        lines = [f"{ROUNDS} interleaved rounds; median (min–max) over the rounds; ratio to this project per round"]
        lines += timed_row("1. standalone wrapper, per call (best of 3 x 10,000 calls a round)", "µs",
                           "agentic_us", [project, openprogram], "wrapper", 3)
        lines += timed_row("2. recorded call, entry + exit (300 calls a round, a fresh session each): this "
                           "project's DjangoRecorder on SQLite vs openprogram's git-backed session store", "ms",
                           "ms_per_call", [project, openprogram], "recorded", 3)
        lines += timed_row("3. delegation chain A->B->C->D, scripted models, 7 model calls a run (20 runs a "
                           "round), wall time per run", "ms", "ms_per_run", [project, agents, openprogram],
                           "chain", 2)
        lines.append(f"4. runaway self-delegation (a model that always calls the agent it runs in; scripts capped "
                     f"at {CAP:,} calls)")
        lines.append(f"  {'setting':52} {'model calls':>34} {'wall':>10}   what the caller receives")
        lines.append(counted(f"{AGENTS}, defaults (max_turns=10 per run)",
                             agents.ask("runaway", setting="defaults", cap=CAP), CAP))
        lines.append(counted(f"{AGENTS}, run + as_tool max_turns=1, 4 delegations",
                             agents.ask("runaway", setting="max_turns=1", cap=CAP), CAP))
        lines.append(counted(f"{PROJECT}, defaults (ceiling 5, default budget)",
                             project.ask("runaway", setting="defaults", cap=CAP), CAP))
        lines.append(counted(f"{PROJECT}, Budget(max_depth=1)",
                             project.ask("runaway", setting="max_depth=1", cap=CAP), CAP))
        lines.append(counted(f"{OPENPROGRAM}, defaults",
                             openprogram.ask("runaway", setting="defaults", cap=CAP), CAP))
        lines.append("5. one budget over 16 parallel branches (1 fan-out call + 16 x 3 + 1 answer = 50 asked), "
                     "50 trials: most model calls admitted in a trial")
        lines.append(fan_out_line(f"{PROJECT}, Budget(max_llm_calls=10)", project.ask("fan_out")))
        lines.append(fan_out_line(f"{AGENTS}, Runner.run(max_turns=10)", agents.ask("fan_out")))
        lines.append(fan_out_line(f"{OPENPROGRAM}, defaults (no budget)", openprogram.ask("fan_out")))
    finally:
        for side in (project, openprogram, agents):
            side.stop()
    print("\n".join(lines))
    print(f"{AGENTS}: max_turns bounds each Runner.run, and every as_tool call starts a run of its own "
          f"with a fresh max_turns, so nothing bounds a delegation tree; openprogram 0.5.0 has no depth "
          f"ceiling or budget; the stop at the cap (raised as its own CancelledError) came back to the "
          f"caller as an empty answer, not an error.")
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"Python {sys.version.split()[0]}, {time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
