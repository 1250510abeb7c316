"""What the OpenAI and Anthropic providers share: retries, timeouts, and abandoning a call on stop.

Each attempt gets its own SDK client, sent from a daemon thread while the caller waits in short
slices, running `check` (the pre-invocation hooks: the stop button) between them. A stop closes that
attempt's client, which drops its connection, and the caller is released at once; sibling calls made in
parallel through the same provider keep their own connections. The SDK's own retries are off
(`max_retries=0`): `runtime.retry` does them, with bounds the runtime controls.
"""
from __future__ import annotations

import dataclasses
import json
import os
import ssl
import threading
import time
from typing import Any, Callable, Optional

from .. import interrupt
from ..messages import ModelReply, ModelRequest
from ..retry import ProviderError, RetryPolicy, call_with_retries, env_number, is_retryable_status
from .base import Provider

DEFAULT_TIMEOUT_S = 30.0  # per attempt; the retries together stop at RetryPolicy.max_total_s

_ssl_lock = threading.Lock()
_ssl_context: Optional[ssl.SSLContext] = None


def http_client(timeout_s: float):
    """A fresh HTTP client for one attempt, sharing one TLS context.

    Building a TLS context (loading the CA bundle) is what makes a new SDK client cost ~50 ms; with it
    shared, a client per attempt costs well under a millisecond, and closing it on a stop drops only
    that attempt's connection.
    """
    global _ssl_context
    import httpx2
    if _ssl_context is None:
        with _ssl_lock:
            if _ssl_context is None:
                _ssl_context = httpx2.create_ssl_context()
    return httpx2.Client(verify=_ssl_context, timeout=timeout_s, follow_redirects=True)


class SDKProvider(Provider):
    """Base for providers built on an official SDK. Subclasses fill in the four hooks below."""

    api_key_env = ""
    base_url_env = ""

    def __init__(self, model: Optional[str] = None, *, api_key: Optional[str] = None,
                 base_url: Optional[str] = None, timeout_s: Optional[float] = None,
                 retry: Optional[RetryPolicy] = None):
        super().__init__(model)
        self.api_key = api_key or os.environ.get(self.api_key_env) or None
        self.base_url = base_url or os.environ.get(self.base_url_env) or None
        self.timeout_s = timeout_s or env_number("OPENPROGRAM_MODEL_TIMEOUT_S", DEFAULT_TIMEOUT_S) or DEFAULT_TIMEOUT_S
        self.retry = retry or RetryPolicy.from_env()

    # -- what a subclass provides -------------------------------------------------------------

    def make_client(self, timeout_s: float) -> Any:
        """A new SDK client with max_retries=0 and the given request timeout."""
        raise NotImplementedError

    def send(self, client: Any, request: ModelRequest, model: str) -> Any:
        """Make the SDK call; return the SDK's response object."""
        raise NotImplementedError

    def parse(self, response: Any) -> ModelReply:
        raise NotImplementedError

    def sdk_errors(self) -> tuple[type, type, type]:
        """The SDK's (APIStatusError, APITimeoutError, APIConnectionError) classes."""
        raise NotImplementedError

    # -- the shared machinery -----------------------------------------------------------------

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        model = request.model or self.model
        if not model:
            raise ValueError(f"no model name for the {self.name} provider; set OPENPROGRAM_MODEL="
                             f"'{self.name}:<model>' or pass model='{self.name}:<model>'")
        policy, deadline = self.retry, None
        if request.timeout_s is not None:  # the caller's deadline bounds every attempt and the retries
            deadline = time.monotonic() + request.timeout_s
            policy = dataclasses.replace(policy, max_total_s=min(policy.max_total_s, request.timeout_s))

        def attempt() -> ModelReply:
            timeout_s = self.timeout_s
            if deadline is not None:  # a retry gets what is left of the caller's time, not all of it again
                timeout_s = max(0.001, min(timeout_s, deadline - time.monotonic()))
            return self._attempt(request, model, timeout_s, check)
        return call_with_retries(attempt, policy, check)

    def _attempt(self, request: ModelRequest, model: str, timeout_s: float,
                 check: Optional[Callable[[], None]]) -> ModelReply:
        client = self.make_client(timeout_s)
        try:
            if check is None:
                response = self._send_classified(client, request, model, timeout_s)
            else:
                future = interrupt.spawn(self._send_classified, client, request, model, timeout_s)
                response = interrupt.wait(future, check=check, on_abandon=client.close)
            return self._parse_checked(response)
        finally:
            client.close()

    def _parse_checked(self, response: Any) -> ModelReply:
        """`parse`, with a reply that does not follow the protocol (an HTML page, a message or a tool call
        left out) turned into an error naming the provider and the status, not an AttributeError."""
        if isinstance(response, (str, bytes)):  # the SDK hands over the text of a body that is not JSON
            raise ProviderError(self.name, f"the reply is not JSON but {_excerpt(response)}", status=200)
        try:
            return self.parse(response)
        except ProviderError:
            raise
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise ProviderError(self.name, f"the reply does not follow the protocol: {exc}", status=200) from exc

    def _send_classified(self, client: Any, request: ModelRequest, model: str, timeout_s: float) -> Any:
        """The SDK call, its failures turned into ProviderError marked retryable or not."""
        status_error, timeout_error, connection_error = self.sdk_errors()
        try:
            return self.send(client, request, model)
        except status_error as exc:
            status = getattr(exc, "status_code", None)
            raise ProviderError(self.name, _error_message(exc), status=status,
                                retryable=is_retryable_status(status)) from exc
        except timeout_error as exc:
            raise ProviderError(self.name, f"request timed out after {timeout_s:.3g}s", retryable=True) from exc
        except connection_error as exc:
            raise ProviderError(self.name, f"connection failed: {exc}", retryable=True) from exc
        except json.JSONDecodeError as exc:  # only a success status has its body parsed: a cut-off reply
            raise ProviderError(self.name, f"the reply's JSON body is malformed or cut off ({exc})",
                                status=200) from exc


def _excerpt(body: Any, limit: int = 60) -> str:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return repr(text[:limit] + ("..." if len(text) > limit else "")) if text else "an empty body"


def _error_message(exc: Exception) -> str:
    """The server's own error message when the body has one, else the SDK's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return getattr(exc, "message", None) or str(exc)
