"""Budgets in money (issue 38): prices, `Budget(max_cost_usd=...)`, the default money cap, unpriced models."""
import json
import logging
import os
import threading

import pytest

from runtime import Budget, BudgetExceeded, Recorder, Runtime, agentic_function, function, set_price, use_recorder
from runtime import prices
from runtime.budget import reserve_llm_call
from runtime.default_budget import admit_default_call, close_frameless_tree, open_frameless_tree
from runtime.messages import ModelReply, ToolCall
from runtime.providers import Provider, ScriptedProvider
from runtime.providers.replay import RecordedCall, ReplayProvider, ReplayRuntime

from .fakes.protocols import OpenAIWire
from .fakes.server import FakeServer
from .test_providers_http import make

USAGE = {"input_tokens": 1000, "output_tokens": 100}
# At $1 per million input tokens and $10 per million output tokens, USAGE costs $0.002.
CALL_COST = 0.002


@pytest.fixture(autouse=True)
def no_prices_set_in_code(monkeypatch):
    monkeypatch.setattr(prices, "_set_in_code", {})
    monkeypatch.delenv("OPENPROGRAM_PRICES", raising=False)
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "0")  # each test turns on what it tests


class Steps(Provider):
    """A runaway that makes progress: every reply calls `tool` with new arguments, `fan_out` calls at
    once; each reply's usage is USAGE, with the provider's own `cost_usd` when `cost` is given."""

    name = "metered"

    def __init__(self, tool: str = "step", fan_out: int = 1, cost=None, model: str = "m1", cap: int = 5000):
        super().__init__(model)
        self.tool, self.fan_out, self.cost, self.cap = tool, fan_out, cost, cap
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            index = self.calls
        if index > self.cap:
            raise AssertionError(f"not stopped within {self.cap} model calls")
        usage = dict(USAGE) if self.cost is None else {**USAGE, "cost_usd": self.cost}
        return ModelReply(tool_calls=[ToolCall(f"c{index}_{i}", self.tool, {"task": f"{index}.{i}"})
                                      for i in range(self.fan_out)], usage=usage)


class Costs(Recorder):
    def __init__(self):
        self.usages = []

    def llm_finished(self, handle, status, reply=None, usage=None, error=None):
        self.usages.append(usage)


@function(name="step", register_globally=False)
def step(task: str) -> str:
    """One step."""
    return "ok"


@agentic_function(name="walker", register_globally=False)
def walker(task: str = "", runtime=None) -> str:
    """Walk through steps."""
    return runtime.exec("walk", tools=[step], max_iterations=5000)


@agentic_function(name="fanner", register_globally=False)
def fanner(runtime=None) -> str:
    """Hand the walk to walkers, several at once."""
    return runtime.exec("fan out", tools=[walker], max_iterations=1000)


# --- prices ------------------------------------------------------------------------------------------------

def test_a_model_is_looked_up_as_provider_and_model_then_alone():
    assert prices.price_of("openai", "gpt-4o-mini") == prices.Price(0.15, 0.60)
    set_price("m1", 1, 10)
    assert prices.price_of("metered", "m1") == prices.Price(1.0, 10.0)
    set_price("metered:m1", 2, 20)
    assert prices.price_of("metered", "m1") == prices.Price(2.0, 20.0)
    assert prices.price_of("other", "m1") == prices.Price(1.0, 10.0)
    assert prices.price_of("metered", "unknown") is None
    assert prices.PRICES_READ_ON  # the table says when its prices were read


def test_prices_from_the_file_extend_and_override_the_table_and_set_price_wins(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m1": {"input": 3, "output": 30}, "openai:gpt-4o-mini": {"input": 9, "output": 9}}))
    monkeypatch.setenv("OPENPROGRAM_PRICES", str(path))
    assert prices.price_of("metered", "m1") == prices.Price(3.0, 30.0)
    assert prices.price_of("openai", "gpt-4o-mini") == prices.Price(9.0, 9.0)
    set_price("m1", 1, 10)
    assert prices.price_of("metered", "m1") == prices.Price(1.0, 10.0)
    path.write_text(json.dumps({"m2": {"input": 4, "output": 40}}))
    os.utime(path, (1, 1))  # a changed file is read again, even within the clock's resolution
    assert prices.price_of("metered", "m2") == prices.Price(4.0, 40.0)


@pytest.mark.parametrize("content, says", [
    ("not json", "cannot read it as JSON"), ("[]", "expected an object"),
    ('{"m1": {"input": 1}}', "needs exactly \"input\" and \"output\""),
    ('{"m1": {"input": -1, "output": 1}}', "m1.input must be a number of US dollars"),
])
def test_a_bad_price_file_is_named_before_any_model_call(tmp_path, monkeypatch, content, says):
    path = tmp_path / "prices.json"
    path.write_text(content)
    monkeypatch.setenv("OPENPROGRAM_PRICES", str(path))
    model = Steps()
    with pytest.raises(ValueError, match=f"OPENPROGRAM_PRICES.*{says}"):
        walker(runtime=Runtime(provider=model))
    assert model.calls == 0


@pytest.mark.parametrize("arguments", [("", 1, 1), ("m", -1, 1), ("m", 1, float("nan")), ("m", True, 1)])
def test_set_price_refuses_what_is_no_price(arguments):
    with pytest.raises(ValueError, match="set_price"):
        set_price(*arguments)


def test_each_call_records_its_cost_from_the_price_or_the_providers_own_figure():
    set_price("metered:m1", 1, 10)
    costs = Costs()
    with use_recorder(costs), Budget(max_llm_calls=2), pytest.raises(BudgetExceeded):
        walker(runtime=Runtime(provider=Steps()))
    assert [usage["cost_usd"] for usage in costs.usages] == [pytest.approx(CALL_COST)] * 2
    costs = Costs()
    with use_recorder(costs), Budget(max_llm_calls=1), pytest.raises(BudgetExceeded):
        walker(runtime=Runtime(provider=Steps(cost=0.5)))  # the provider's figure wins over the price
    assert [usage["cost_usd"] for usage in costs.usages] == [0.5]


# --- Budget(max_cost_usd=...) ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), True, "1"])
def test_max_cost_usd_must_be_a_positive_number_of_dollars(value):
    with pytest.raises(ValueError, match=r"Budget\(max_cost_usd=.*must be a positive number of US dollars"):
        Budget(max_cost_usd=value)


def test_a_money_budget_stops_a_tree_within_one_call_of_the_cap():
    set_price("metered:m1", 1, 10)
    model = Steps()
    with pytest.raises(BudgetExceeded) as caught, Budget(max_cost_usd=0.0101) as scope:
        walker(runtime=Runtime(provider=model))
    error = caught.value
    assert (error.dimension, error.refusal, error.limit) == ("cost_usd", "budget:cost_usd", 0.0101)
    assert "max_cost_usd=0.0101" in str(error) and "$0.0120 is already spent" in str(error)
    spend = scope.snapshot()["spend"]
    assert model.calls == 6 and spend["cost_usd"] == pytest.approx(6 * CALL_COST)
    assert 0.0101 <= spend["cost_usd"] < 0.0101 + CALL_COST


def test_calls_in_flight_count_as_the_dearest_call_so_far():
    # Parallel branches admit calls before any of them has a cost: each one in flight is counted as the
    # dearest call the tree has made, so together they stop within one call of the cap.
    with Budget(max_cost_usd=0.01) as scope:
        reserve_llm_call().commit(0, CALL_COST)
        in_flight = [reserve_llm_call() for _ in range(4)]
        with pytest.raises(BudgetExceeded) as caught:
            reserve_llm_call()
        for reservation in in_flight:
            reservation.commit(0, CALL_COST)
    assert "$0.0020 is already spent and 4 model calls are in flight" in str(caught.value)
    assert scope.snapshot()["spend"]["cost_usd"] == pytest.approx(5 * CALL_COST)


def test_the_default_cap_counts_calls_in_flight_too(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "0.01")
    token = open_frameless_tree()
    try:
        admit_default_call(None).commit(0, CALL_COST)
        in_flight = [admit_default_call(None) for _ in range(4)]
        with pytest.raises(BudgetExceeded, match="4 model calls are in flight"):
            admit_default_call(None)
        in_flight[0].release()
        admit_default_call(None)  # a released call gives its place back
    finally:
        close_frameless_tree(token)


@pytest.mark.parametrize("fan_out", [4, 16])
def test_parallel_branches_stop_within_one_call_of_the_cap(fan_out):
    # The entry's model hands the work to `fan_out` walkers at once, each a runaway of its own: calls in
    # flight count as the dearest call so far, so the branches together stop within one call of the cap.
    set_price("metered:m1", 1, 10)
    model = Steps(tool="walker", fan_out=fan_out)
    inner = Steps()  # the walkers' model

    class Router(Provider):
        name = "metered"

        def complete(self, request, check=None):
            offered = {spec["name"] for spec in request.tools}
            return (model if "walker" in offered else inner).complete(request, check)

    cap = 0.05
    with pytest.raises(BudgetExceeded), Budget(max_cost_usd=cap) as scope:
        fanner(runtime=Runtime(provider=Router("m1")))
    spent = scope.snapshot()["spend"]["cost_usd"]
    assert cap <= spent < cap + CALL_COST
    assert spent == pytest.approx((model.calls + inner.calls) * CALL_COST)


def test_nested_money_budgets_tighten_and_both_count_the_spend():
    set_price("metered:m1", 1, 10)

    @agentic_function(name="generous", register_globally=False, budget=Budget(max_cost_usd=100))
    def generous(runtime=None) -> str:
        """Spend freely."""
        return walker(runtime=runtime)

    with pytest.raises(BudgetExceeded) as caught, Budget(max_cost_usd=0.007) as outer:
        generous(runtime=Runtime(provider=Steps()))
    assert caught.value.limit == pytest.approx(0.007)  # the child got what remained of the parent's
    assert generous.budget.snapshot()["limits"]["max_cost_usd"] == pytest.approx(0.007)
    assert outer.snapshot()["spend"]["cost_usd"] == pytest.approx(4 * CALL_COST)
    assert generous.budget.snapshot()["spend"]["cost_usd"] == pytest.approx(4 * CALL_COST)


def test_a_money_budget_reports_unpriced_calls_once_and_lets_them_through(caplog):
    provider = ScriptedProvider([{"tool_calls": [{"name": "step", "arguments": {"task": str(n)}}]} for n in range(3)]
                                + ["done"])
    costs = Costs()
    with caplog.at_level(logging.WARNING, logger="runtime"), use_recorder(costs), Budget(max_cost_usd=0.01) as scope:
        assert walker(runtime=Runtime(provider=provider)) == "done"
    warnings = [r.getMessage() for r in caplog.records if "unknown" in r.getMessage()]
    assert len(warnings) == 1
    assert "'scripted'" in warnings[0] and "max_cost_usd=0.01 cannot count it" in warnings[0]
    assert all("cost_usd" not in usage for usage in costs.usages)  # unknown is no cost, not a cost of 0
    spend = scope.snapshot()["spend"]
    assert (spend["cost_usd"], spend["unpriced_calls"]) == (0.0, 4)


# --- the default money cap ----------------------------------------------------------------------------------

def test_the_default_money_cap_holds(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "0.01")
    model = Steps(cost=0.002)
    with pytest.raises(BudgetExceeded) as caught:
        walker(runtime=Runtime(provider=model))
    assert caught.value.dimension == "cost_usd" and model.calls == 5
    assert "OPENPROGRAM_MAX_COST_USD=0.01" in str(caught.value)


def test_the_default_money_cap_is_ten_dollars_and_zero_turns_it_off(monkeypatch):
    from runtime.default_budget import default_max_cost_usd
    monkeypatch.delenv("OPENPROGRAM_MAX_COST_USD")
    assert default_max_cost_usd() == 10
    model = Steps(cost=1.0, cap=12)
    with pytest.raises(BudgetExceeded):
        walker(runtime=Runtime(provider=model))
    assert model.calls == 10
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "0")
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "30")
    model = Steps(cost=1.0)
    with pytest.raises(BudgetExceeded) as caught:
        walker(runtime=Runtime(provider=model))
    assert caught.value.dimension == "llm_calls" and model.calls == 30


def test_the_default_money_cap_reports_an_unpriced_model_once(monkeypatch, caplog):
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "10")
    provider = ScriptedProvider([{"tool_calls": [{"name": "step", "arguments": {"task": "a"}}]}, "done"])
    with caplog.at_level(logging.WARNING, logger="runtime"):
        assert walker(runtime=Runtime(provider=provider)) == "done"
    [warning] = [r.getMessage() for r in caplog.records if "unknown" in r.getMessage()]
    assert "OPENPROGRAM_MAX_COST_USD=10 cannot count it" in warning


def test_a_default_money_breach_under_an_explicit_budget_stays_on_its_gauge(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "0.004")
    reports = []

    class Gauge(Recorder):
        def budget_updated(self, limits, spend):
            reports.append((limits, spend))

    with use_recorder(Gauge()), pytest.raises(BudgetExceeded), Budget(max_cost_usd=50):
        walker(runtime=Runtime(provider=Steps(cost=0.002)))
    limits, spend = reports[-1]
    assert limits["max_cost_usd"] == 0.004 and spend["cost_usd"] == 0.004


def test_a_gateways_own_cost_figure_is_the_calls_cost():
    status, body = OpenAIWire.answer("hi", 13, 5)
    body["usage"]["cost"] = 0.0123  # as OpenRouter answers
    costs = Costs()
    with FakeServer([(status, body)]) as server, use_recorder(costs):
        provider, _ = make("openai", server)
        assert walker(runtime=Runtime(provider=provider)) == "hi"
    assert costs.usages == [{"input_tokens": 13, "output_tokens": 5, "cost_usd": 0.0123}]


def test_a_sum_of_float_costs_that_reaches_the_cap_reads_as_reached(monkeypatch):
    # A thousand calls of $0.01 add up to 9.99999999999983 as floats: the cap of $10 holds at call 1000.
    monkeypatch.setenv("OPENPROGRAM_MAX_COST_USD", "10")
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "0")
    model = Steps(cost=0.01)
    with pytest.raises(BudgetExceeded) as caught:
        walker(runtime=Runtime(provider=model))
    assert caught.value.dimension == "cost_usd" and model.calls == 1000


def test_a_replayed_reply_costs_nothing_whatever_the_models_price():
    class Replays(Provider):
        name = "metered"

        def complete(self, request, check=None):
            return ModelReply(text="as recorded", usage=dict(USAGE), replayed=True)

    set_price("metered:m1", 1, 10)
    costs = Costs()
    with use_recorder(costs), Budget(max_cost_usd=0.001) as scope:
        assert walker(runtime=Runtime(provider=Replays("m1"))) == "as recorded"
    assert costs.usages[0]["cost_usd"] == 0.0 and scope.snapshot()["spend"]["unpriced_calls"] == 0


def test_a_forks_edited_reply_costs_nothing_known_even_for_an_unpriced_model(caplog):
    replay = ReplayProvider([RecordedCall("walker", 1, {"text": "as recorded"})], fork_at=1, fork_reply="edited")
    costs = Costs()
    with use_recorder(costs), Budget(max_cost_usd=1) as scope, caplog.at_level(logging.WARNING, "runtime"):
        assert walker(runtime=ReplayRuntime(replay, provider=Steps(model="unpriced"))) == "edited"
    assert costs.usages[0]["cost_usd"] == 0.0 and scope.snapshot()["spend"]["unpriced_calls"] == 0
    assert "is unknown" not in caplog.text
