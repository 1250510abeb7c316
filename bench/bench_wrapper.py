"""The decorator's cost per standalone call (no recorder, no hooks), as a ratio to a plain Python call.

Target (issue 2): under 2 µs per standalone @agentic_function call on these machines.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _timing import per_call_seconds  # noqa: E402

from runtime import Recorder, Runtime, agentic_function, function, use_recorder  # noqa: E402


def plain(x):
    return x


@function(register_globally=False)
def leaf(x):
    return x


@agentic_function(register_globally=False)
def agentic(x):
    return x


@agentic_function(register_globally=False)
def agentic_with_runtime(x, runtime=None):
    return x


def main() -> None:
    shared = Runtime()
    base = per_call_seconds(lambda: plain(1))
    rows = [
        ("plain Python call", base),
        ("@function (leaf tool)", per_call_seconds(lambda: leaf(1))),
        ("@agentic_function", per_call_seconds(lambda: agentic(1))),
        ("@agentic_function, runtime passed", per_call_seconds(lambda: agentic_with_runtime(1, runtime=shared))),
    ]
    with use_recorder(Recorder()):
        rows.append(("@agentic_function, no-op recorder", per_call_seconds(lambda: agentic(1))))
    print(f"{'call':40} {'µs/call':>9} {'added µs':>9} {'ratio':>7}")
    for label, seconds in rows:
        print(f"{label:40} {seconds * 1e6:9.3f} {(seconds - base) * 1e6:9.3f} {seconds / base:7.1f}x")
    agentic_us = rows[2][1] * 1e6
    print(f"standalone @agentic_function: {agentic_us:.2f} µs per call "
          f"({'under' if agentic_us < 2 else 'OVER'} the 2 µs target; the best-known peer spends ~16 µs)")


if __name__ == "__main__":
    main()
