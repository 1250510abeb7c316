"""Item 14: a hung model server. The defaults bound it to about a minute, and a run's own budget time
(`timeout_s`) bounds a call in flight: the run ends with the budget's time error, not minutes later."""
import pytest

from runtime import Budget, BudgetExceeded, agentic_function
from runtime.providers.openai_provider import OpenAIProvider
from runtime.providers.sdk import DEFAULT_TIMEOUT_S
from runtime.retry import RetryPolicy
from runtime.runtime import Runtime, use_runtime
from tests.unit.fakes.protocols import OpenAIWire
from tests.reliability.bounds import REPLY_S
from tests.unit.fakes.server import FakeServer, hang

# The runs' time budget: far below the provider's 30 s timeout, yet long enough that the request reaches
# the hung server before it is spent however busy the machine (a budget spent first sends nothing).
BUDGET_S = 3.0


def test_the_defaults_give_up_on_a_hung_server_within_about_a_minute(monkeypatch):
    for name in ("OPENPROGRAM_MODEL_RETRIES", "OPENPROGRAM_MODEL_RETRY_TOTAL_S", "OPENPROGRAM_MODEL_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    policy = RetryPolicy.from_env()
    assert policy.max_total_s <= 60 and DEFAULT_TIMEOUT_S <= 30
    provider = OpenAIProvider("fake-model", api_key="k")
    assert provider.timeout_s <= 30
    # Retries stop starting once the total is spent: about max_total_s plus one request timeout.
    assert policy.max_total_s + provider.timeout_s <= 90


def hung_provider(server):
    # The provider's own timeout (30 s) and retries would hold the run for minutes.
    return OpenAIProvider("fake-model", api_key="k", base_url=OpenAIWire.base_url(server.url), timeout_s=30,
                          retry=RetryPolicy(max_retries=3, base_delay_s=0.01))


def test_a_budget_block_cuts_a_hung_call_short_with_the_budget_error():
    with FakeServer([hang] * 4) as server:
        runtime = Runtime(provider=hung_provider(server))
        with pytest.raises(BudgetExceeded) as caught:
            with Budget(timeout_s=BUDGET_S):
                runtime.llm("hello")
    assert caught.value.dimension == "time" and "timeout_s" in str(caught.value)
    assert server.arrived.wait(REPLY_S)  # the server thread has recorded the request
    assert len(server.requests) == 1  # no retry was started past the deadline


def test_an_agentic_functions_budget_bounds_its_model_call():
    @agentic_function(register_globally=False, budget=Budget(timeout_s=BUDGET_S))
    def ask(runtime=None) -> str:
        """Ask the model once."""
        return runtime.llm("hello")

    with FakeServer([hang] * 4) as server:
        with use_runtime(Runtime(provider=hung_provider(server))):
            with pytest.raises(BudgetExceeded) as caught:
                ask()
    assert caught.value.dimension == "time"
    assert server.arrived.wait(REPLY_S)
    assert len(server.requests) == 1
