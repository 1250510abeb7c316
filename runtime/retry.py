"""Retrying a model call: exponential backoff on transient failures, bounded in count and in time.

Transient means HTTP 408, 409, 429, 5xx, a timeout or a dropped connection; any other 4xx is the
caller's mistake and is never retried, and neither is a 5xx whose body says the request itself is
invalid (llama-cpp-python's server answers a request its schema refuses with a 500 listing "N
validation errors"): the same request fails the same way every time. A server's Retry-After is
honoured: the wait before the retry is at least what it asked (and a wait past the policy's time left
ends the retries). The backoff sleep is interruptible, so a stop pressed while a call waits to be
retried ends it at once.
"""
from __future__ import annotations

import email.utils
import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Optional

from . import interrupt
from .settings_table import default_of, read_number


class ProviderError(RuntimeError):
    """A model call failed for good. Names the provider, the HTTP status (if any) and the message."""

    def __init__(self, provider: str, message: str, *, status: Optional[int] = None,
                 attempts: int = 1, retryable: bool = False, retry_after_s: Optional[float] = None):
        where = f"HTTP {status}" if status is not None else "no response"
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        super().__init__(f"{provider} model call failed{tries}: {where}: {message}")
        self.provider = provider
        self.status = status
        self.detail = message
        self.attempts = attempts
        self.retryable = retryable
        # How long the server asked to be left alone (a 429's or 503's Retry-After), if it said.
        self.retry_after_s = retry_after_s


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """A Retry-After header's wait in seconds (a number of seconds, or an HTTP date); None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


# 4xx statuses that say "not now" rather than "not this": a timed-out request, a conflict, a rate limit.
RETRYABLE_CLIENT_STATUSES = (408, 409, 429)
# How pydantic (behind FastAPI servers: llama-cpp-python, vLLM) starts a list of schema complaints.
_VALIDATION_ERRORS = re.compile(r"\b\d+ validation errors?\b")


def is_retryable_status(status: Optional[int]) -> bool:
    """408, 409, 429 and 5xx are worth another try; no status means the request never got an answer."""
    return status is None or status in RETRYABLE_CLIENT_STATUSES or status >= 500


def is_validation_complaint(message: str) -> bool:
    """Whether a server's error message says the request failed its schema (which no retry changes)."""
    return bool(_VALIDATION_ERRORS.search(message))


def is_retryable_failure(status: Optional[int], message: str) -> bool:
    """Whether a failed call may succeed if sent again: a retryable status, not a schema complaint."""
    return is_retryable_status(status) and not is_validation_complaint(message)


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` retries after the first attempt; delays grow from `base_delay_s` by `factor`,
    capped at `max_delay_s`; no retry starts after `max_total_s` seconds since the first attempt."""

    max_retries: int = default_of("OPENPROGRAM_MODEL_RETRIES")
    base_delay_s: float = 0.5
    factor: float = 2.0
    max_delay_s: float = 8.0
    max_total_s: float = default_of("OPENPROGRAM_MODEL_RETRY_TOTAL_S")  # a hung server holds a run for about this long at most, not minutes

    @classmethod
    def from_env(cls) -> "RetryPolicy":
        return cls(max_retries=read_number("OPENPROGRAM_MODEL_RETRIES"),
                   max_total_s=read_number("OPENPROGRAM_MODEL_RETRY_TOTAL_S"))

    def delay(self, retry_index: int) -> float:
        return min(self.max_delay_s, self.base_delay_s * self.factor ** retry_index)


def call_with_retries(attempt: Callable[[], object], policy: RetryPolicy,
                      check: Optional[Callable[[], None]] = None):
    """Run `attempt()` until it succeeds, raises a non-retryable ProviderError, or the policy runs out.

    `attempt` raises ProviderError (with `retryable` set) for failures it understands; the final error
    carries the number of attempts made.
    """
    started = time.monotonic()
    retries = 0
    while True:
        try:
            return attempt()
        except ProviderError as exc:
            # Sooner than the server asked would only be refused again.
            delay = max(policy.delay(retries), exc.retry_after_s or 0.0)
            out_of_time = time.monotonic() - started + delay > policy.max_total_s
            if not exc.retryable or retries >= policy.max_retries or out_of_time:
                if retries:
                    raise ProviderError(exc.provider, exc.detail, status=exc.status, attempts=retries + 1,
                                        retryable=exc.retryable) from exc
                raise
        retries += 1
        interrupt.sleep(delay, check)
