"""What the recursion guard and the delegation budget add to each call (figures only, no assertions).

- the per-name depth guard: @agentic_function against @function, the same wrapper without the guard;
- a frame entered under an active Budget, against the same call with no budget (the issue's bound: 2x);
- a function carrying its own `budget=` template (a fresh scope per call);
- the default budget (OPENPROGRAM_MAX_LLM_CALLS): an agentic call making one model call on a model
  that answers at once, with the default on and off (the bound: 1.2x), and inside an explicit Budget;
  the 2x bound is for a frame entered under an open budget; a `budget=` template opens a scope per call;
- runtime.budget's own share of a frame entry: admit_frame() called directly;
- admitting one model call: reserve_llm_call() + commit().
"""
import os
import sys
from contextlib import ExitStack, contextmanager, nullcontext

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _timing import per_call_seconds  # noqa: E402

from runtime import Budget, Runtime, agentic_function, function  # noqa: E402
from runtime.budget import admit_frame, reserve_llm_call  # noqa: E402
from runtime.messages import ModelReply  # noqa: E402
from runtime.providers import Provider  # noqa: E402


class Instant(Provider):
    """A model that answers at once: what is left of a model call is the runtime's own work."""

    name = "instant"

    def complete(self, request, check=None):
        return ModelReply(text="ok")


INSTANT = Runtime(provider=Instant("instant"))


@function(register_globally=False)
def unguarded(x):
    return x


@agentic_function(register_globally=False)
def guarded(x):
    return x


@agentic_function(register_globally=False, budget=Budget(max_depth=8, max_llm_calls=10))
def self_budgeted(x):
    return x


@agentic_function(register_globally=False)
def asks_once(runtime=None):
    return runtime.llm("hi")


def model_call():
    reserve_llm_call().commit(1)


def budget_hooks_alone():
    # The frame is only read on a breach, which a budget this deep never reaches.
    admit_frame(None)


@contextmanager
def default_budget(limit: str):
    """OPENPROGRAM_MAX_LLM_CALLS set for the block ("0": the default off), restored after."""
    before = os.environ.get("OPENPROGRAM_MAX_LLM_CALLS")
    os.environ["OPENPROGRAM_MAX_LLM_CALLS"] = limit
    try:
        yield
    finally:
        if before is None:
            del os.environ["OPENPROGRAM_MAX_LLM_CALLS"]
        else:
            os.environ["OPENPROGRAM_MAX_LLM_CALLS"] = before


def _interleaved(variants: dict, rounds: int = 15, number: int = 20_000) -> dict:
    """Best per-call time of each variant, timed round-robin so that machine noise hits all alike.

    A variant is (setup, call): `setup()` returns a context manager held while `call` is timed.
    """
    best = {label: float("inf") for label in variants}
    for _ in range(rounds):
        for label, (setup, call) in variants.items():
            with setup():
                best[label] = min(best[label], per_call_seconds(call, number=number, repeat=1))
    return best


def _row(label, seconds, against=None):
    if against is None:
        return f"{label:52} {seconds * 1e6:9.3f}"
    return (f"{label:52} {seconds * 1e6:9.3f} {(seconds - against) * 1e9:10.0f} "
            f"{seconds / against:7.2f}x")


def main() -> None:
    def nested_budgets():
        stack = ExitStack()
        for depth in (1000, 999, 998):
            stack.enter_context(Budget(max_depth=depth))
        return stack

    t = _interleaved({
        "wrapper": (nullcontext, lambda: unguarded(1)),
        "guard": (nullcontext, lambda: guarded(1)),
        "in_budget": (lambda: Budget(max_depth=1000), lambda: guarded(1)),
        "in_three_budgets": (nested_budgets, lambda: guarded(1)),
        "template": (nullcontext, lambda: self_budgeted(1)),
        # A huge allowance: the scope is shared, so every timed call spends from it.
        "admission": (lambda: Budget(max_llm_calls=10**9), model_call),
        "hooks_alone": (lambda: Budget(max_depth=10**9), budget_hooks_alone),
        "default_on": (lambda: default_budget(str(10**12)), lambda: asks_once(runtime=INSTANT)),
        "default_off": (lambda: default_budget("0"), lambda: asks_once(runtime=INSTANT)),
        "explicit_call": (lambda: Budget(max_llm_calls=10**12), lambda: asks_once(runtime=INSTANT)),
    })
    wrapper, guard, in_budget = t["wrapper"], t["guard"], t["in_budget"]
    in_three_budgets, template, admission = t["in_three_budgets"], t["template"], t["admission"]
    hooks_alone = t["hooks_alone"]
    default_on, default_off, explicit_call = t["default_on"], t["default_off"], t["explicit_call"]

    print(f"{'call':52} {'µs/call':>9} {'added ns':>10} {'ratio':>8}")
    print(_row("@function (core wrapper, no guard)", wrapper))
    print(_row("@agentic_function (+ per-name depth guard)", guard, wrapper))
    print(_row("@agentic_function inside `with Budget(...)`", in_budget, guard))
    print(_row("@agentic_function inside three nested Budgets", in_three_budgets, guard))
    print(_row("@agentic_function(budget=Budget(...)) (own scope)", template, guard))
    print(_row("budget.admit_frame() alone", hooks_alone))
    print(_row("reserve_llm_call() + commit() under a Budget", admission))
    print(_row("agentic call + 1 model call, default budget off", default_off))
    print(_row("agentic call + 1 model call, default budget on", default_on, default_off))
    print(_row("agentic call + 1 model call inside `with Budget(...)`", explicit_call, default_off))
    print(f"guard: {(guard - wrapper) * 1e9:.0f} ns per call, {guard / wrapper:.2f}x the core wrapper; "
          f"budget frame entry: {(in_budget - guard) * 1e9:.0f} ns more ({in_budget / guard:.2f}x the "
          f"guarded call, bound 2x); default budget: {default_on / default_off:.2f}x the call with it off "
          f"(bound 1.2x)")


if __name__ == "__main__":
    main()
