"""Retry policy: exponential backoff, bounded by count and by total time, never on a 4xx but 408/409/429 nor on
a request the server called invalid, stoppable."""
import json

import pytest

import runtime.retry as retry
from runtime import CancelledError
from runtime.retry import ProviderError, RetryPolicy, call_with_retries, is_retryable_status


def failing(status, log):
    def attempt():
        log.append(status)
        raise ProviderError("fake", "nope", status=status, retryable=is_retryable_status(status))
    return attempt


@pytest.fixture
def clock(monkeypatch):
    """A fake clock: backoff sleeps advance it instead of waiting."""
    now = [0.0]
    sleeps = []
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])

    def sleep(seconds, check=None):
        sleeps.append(seconds)
        now[0] += seconds
    monkeypatch.setattr(retry.interrupt, "sleep", sleep)
    return sleeps


def test_delays_grow_exponentially_up_to_the_cap():
    policy = RetryPolicy(base_delay_s=1, factor=2, max_delay_s=5)
    assert [policy.delay(i) for i in range(5)] == [1, 2, 4, 5, 5]


def test_retries_are_bounded_in_count(clock):
    log = []
    with pytest.raises(ProviderError, match=r"fake model call failed \(after 4 attempts\): HTTP 503: nope"):
        call_with_retries(failing(503, log), RetryPolicy(max_retries=3, base_delay_s=1))
    assert log == [503] * 4 and clock == [1, 2, 4]


def test_retries_are_bounded_in_total_time(clock):
    log = []
    with pytest.raises(ProviderError):
        call_with_retries(failing(429, log), RetryPolicy(max_retries=50, base_delay_s=1, max_delay_s=100,
                                                         max_total_s=10))
    assert clock == [1, 2, 4] and len(log) == 4  # the next wait (8s) would pass 10s in total


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_never_retried(clock, status):
    log = []
    with pytest.raises(ProviderError, match=f"HTTP {status}"):
        call_with_retries(failing(status, log), RetryPolicy())
    assert log == [status] and clock == []


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
def test_a_timeout_a_conflict_a_rate_limit_and_server_errors_are_retried(clock, status):
    log = []
    with pytest.raises(ProviderError, match="after 2 attempts"):
        call_with_retries(failing(status, log), RetryPolicy(max_retries=1))
    assert log == [status] * 2


@pytest.mark.parametrize("message, retryable", [
    ("7 validation errors:\n  {'type': 'string_type', ...}", False),
    ("1 validation error for CreateChatCompletionRequest", False),
    ("CUDA out of memory", True),
    ("", True),
])
def test_a_server_error_saying_the_request_is_invalid_is_not_retried(message, retryable):
    assert retry.is_retryable_failure(500, message) is retryable
    assert retry.is_retryable_failure(400, "overloaded") is False


def test_success_after_failures_returns_the_result(clock):
    outcomes = [ProviderError("fake", "x", status=500, retryable=True), "ok"]

    def attempt():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    assert call_with_retries(attempt, RetryPolicy()) == "ok"


def test_a_stop_during_the_backoff_ends_the_wait():
    log = []

    def stop():
        raise CancelledError("stop")
    with pytest.raises(CancelledError):
        call_with_retries(failing(500, log), RetryPolicy(base_delay_s=0.01), check=stop)
    assert log == [500]


def test_a_retry_gets_only_what_is_left_of_the_callers_timeout(monkeypatch):
    from runtime.messages import ModelReply, ModelRequest
    from runtime.providers.openai_provider import OpenAIProvider

    now = [1000.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(retry.interrupt, "sleep", lambda seconds, check=None: None)
    provider = OpenAIProvider("m", api_key="k", timeout_s=60, retry=RetryPolicy(max_retries=2))
    timeouts = []

    def attempt(request, model, timeout_s, check):
        timeouts.append(timeout_s)
        if len(timeouts) == 1:
            now[0] += 8  # the first attempt used 8 of the caller's 10 seconds, then failed
            raise ProviderError("openai", "busy", status=503, retryable=True)
        return ModelReply(text="ok")

    monkeypatch.setattr(provider, "_attempt", attempt)
    request = ModelRequest(system="", messages=[{"role": "user", "content": "hi"}], timeout_s=10)
    assert provider.complete(request).text == "ok"
    assert timeouts == [10, 2]


@pytest.mark.parametrize("name", ["OPENPROGRAM_MODEL_RETRIES", "OPENPROGRAM_MODEL_RETRY_TOTAL_S",
                                  "OPENPROGRAM_MODEL_TIMEOUT_S"])
def test_a_bad_number_in_the_environment_is_named(monkeypatch, name):
    from runtime.providers.openai_provider import OpenAIProvider

    monkeypatch.setenv(name, "three")
    with pytest.raises(ValueError, match=rf"{name}='three' is not a valid"):
        OpenAIProvider("m", api_key="k")


def test_a_blank_number_in_the_environment_means_the_default(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MODEL_RETRIES", " ")
    assert RetryPolicy.from_env().max_retries == 3


@pytest.mark.parametrize("header, seconds", [("7", 7.0), ("2.5", 2.5), ("-3", 0.0), ("soon", None), ("", None),
                                             ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])  # a date long gone
def test_a_retry_after_header_reads_as_seconds(header, seconds):
    assert retry.retry_after_seconds(header) == seconds


def test_a_wait_the_server_asks_for_is_honoured_and_one_past_the_time_left_ends_the_retries(clock):
    answers = iter([ProviderError("fake", "slow down", status=429, retryable=True, retry_after_s=6),
                    ProviderError("fake", "slow down", status=429, retryable=True, retry_after_s=0.1),
                    "ok"])

    def attempt():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    assert call_with_retries(attempt, RetryPolicy(base_delay_s=1, max_total_s=60)) == "ok"
    assert clock == [6, 2]  # the server's 6 s over the backoff's 1 s; then the backoff's 2 s over its 0.1
    def too_long():
        raise ProviderError("fake", "slow down", status=429, retryable=True, retry_after_s=120)
    with pytest.raises(ProviderError, match="slow down"):
        call_with_retries(too_long, RetryPolicy(max_total_s=60))
    assert clock == [6, 2]  # no wait begun that would end past the 60 s


def test_an_sdk_provider_reads_retry_after_from_the_429(monkeypatch):
    from .fakes.protocols import OpenAIWire
    from .fakes.server import FakeServer, Raw
    from .test_providers_http import ask, make
    slept = []
    monkeypatch.setattr(retry.interrupt, "sleep", lambda seconds, check=None: slept.append(seconds))
    status, body = OpenAIWire.error(429, "rate limited")
    limited = (status, Raw(json.dumps(body).encode(), headers=(("retry-after", "3"),)))
    with FakeServer([limited, OpenAIWire.answer("ok")]) as server:
        provider, _ = make("openai", server, retry=RetryPolicy(max_retries=2, base_delay_s=0.001))
        assert ask(provider).text == "ok"
    assert slept == [3.0]
