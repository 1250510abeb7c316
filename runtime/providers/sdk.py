"""What the OpenAI and Anthropic providers share: retries, timeouts, and abandoning a call on stop.

Each attempt gets its own SDK client and is sent from a daemon thread; the caller waits at most the
attempt's timeout for the whole response (the SDK's own timeout bounds each read, so a server sending a
byte now and then would otherwise hold the call for ever), running `check` (the pre-invocation hooks:
the stop button) in short slices meanwhile. Giving up closes that attempt's client, which drops its
connection, and the caller is released at once; sibling calls made in parallel through the same
provider keep their own connections. The SDK's own retries are off (`max_retries=0`): `runtime.retry`
does them, with bounds the runtime controls.
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
from ..retry import ProviderError, RetryPolicy, call_with_retries, is_retryable_failure, retry_after_seconds
from ..settings_table import default_of, read_number
from .base import Provider
from .server_errors import complaint, context_overflow, error_code, is_context_overflow

DEFAULT_TIMEOUT_S = default_of("OPENPROGRAM_MODEL_TIMEOUT_S")  # per attempt, the whole response; the retries together stop at RetryPolicy.max_total_s
# The cap on a reply's length in tokens (`max_tokens=` or this variable): Anthropic's max_tokens, which
# its API requires (DEFAULT_MAX_TOKENS when neither is set); for OpenAI and the servers speaking its
# protocol, sent only when set (a reasoning model's thinking counts against it), under the field the
# server reads (see OpenAIProvider.reply_cap_field).
MAX_TOKENS_ENV = "OPENPROGRAM_MAX_TOKENS"
DEFAULT_MAX_TOKENS = 4096

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
                 retry: Optional[RetryPolicy] = None, max_tokens: Optional[int] = None):
        super().__init__(model)
        self.api_key = api_key or os.environ.get(self.api_key_env) or None
        self.base_url = base_url or os.environ.get(self.base_url_env) or None
        self.timeout_s = timeout_s or read_number("OPENPROGRAM_MODEL_TIMEOUT_S") or DEFAULT_TIMEOUT_S
        self.retry = retry or RetryPolicy.from_env()
        # None: not set (0 counts as not set, as for the other settings).
        self.max_tokens: Optional[int] = max_tokens or read_number(MAX_TOKENS_ENV) or None

    # -- what a subclass provides -------------------------------------------------------------

    @classmethod
    def missing_credentials(cls, api_key: Optional[str], base_url: Optional[str]) -> Optional[str]:
        """What this provider lacks to reach its server with this key and base URL (None: nothing)."""
        return None

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

    @classmethod
    def configuration_problem(cls) -> Optional[str]:
        """What the environment lacks for this provider (its key, say), checked at start-up."""
        return cls.missing_credentials(os.environ.get(cls.api_key_env) or None,
                                       os.environ.get(cls.base_url_env) or None)

    def client(self, timeout_s: float) -> Any:
        """A new SDK client; a missing key is named here, before any request, and never retried."""
        missing = self.missing_credentials(self.api_key, self.base_url)
        if missing:
            raise ProviderError(self.name, missing)
        return self.make_client(timeout_s)

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
        client = self.client(timeout_s)
        try:
            future = interrupt.spawn(self._send_classified, client, request, model, timeout_s)
            try:
                response = interrupt.wait(future, check=check, timeout=timeout_s, on_abandon=client.close)
            except interrupt.WaitTimedOut:
                raise ProviderError(self.name, _timed_out(timeout_s), retryable=True) from None
            return self._parse_checked(response)
        finally:
            client.close()

    # -- what the subclasses' parse() shares --------------------------------------------------

    def call_identity(self, index: int, call_id: Any, name: Any) -> tuple[str, str]:
        """A tool call's (id, name), checked: a name that is not a non-empty string cannot be looked up
        or sent back, so the reply is refused; a missing id gets one (some local servers send none)."""
        if not isinstance(name, str) or not name:
            raise ProviderError(self.name, f"tool call {index} of the reply names no function: its name must "
                                           f"be a non-empty string, got {_shape(name)}", status=200)
        if call_id is None or call_id == "":
            return f"call_{index}", name
        if isinstance(call_id, int) and not isinstance(call_id, bool):  # some local servers number them
            return str(call_id), name
        if not isinstance(call_id, str):
            raise ProviderError(self.name, f"tool call {index} ({name!r}) of the reply has an id that is not "
                                           f"a string but {_shape(call_id)}", status=200)
        return call_id, name

    def refused(self, text: Any, why: str) -> ProviderError:
        """The model (or the provider's filter) declined to answer; retrying the same request will not help."""
        said = f": {_excerpt(text, 500)}" if isinstance(text, str) and text.strip() else ""
        return ProviderError(self.name, f"the model refused to answer ({why}){said}; change the request", status=200)

    def cut_off(self, why: str) -> ProviderError:
        """The reply hit the output-token limit: its text is partial and its tool calls may lack arguments,
        so neither is used."""
        cap = self.reply_token_cap()
        limit = f"max_tokens={cap}" if cap is not None else "the server's own limit, as none was sent"
        return ProviderError(self.name, f"the reply was cut off at the output-token limit ({why}; {limit}), "
                                        f"so it was not used and no tool call in it was run; "
                                        f"{'raise' if cap is not None else 'set'} {MAX_TOKENS_ENV} (or pass "
                                        f"max_tokens=) or ask for a shorter answer", status=200)

    def reply_token_cap(self) -> Optional[int]:
        """The cap on a reply's tokens this provider sends (None: it sends none)."""
        return self.max_tokens

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
        except RecursionError as exc:  # must not escape: a RecursionError is also how the depth ceiling ends a run
            raise ProviderError(self.name, "the reply is nested too deeply to read", status=200) from exc

    def _send_classified(self, client: Any, request: ModelRequest, model: str, timeout_s: float) -> Any:
        """The SDK call, its failures turned into ProviderError marked retryable or not."""
        status_error, timeout_error, connection_error = self.sdk_errors()
        try:
            return self.send(client, request, model)
        except status_error as exc:
            status = getattr(exc, "status_code", None)
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            message = complaint(exc)
            if is_context_overflow(message, error_code(exc)):  # the same prompt never fits: not retried
                raise ProviderError(self.name, context_overflow(message, self.reply_token_cap(), MAX_TOKENS_ENV),
                                    status=status) from exc
            raise ProviderError(self.name, message, status=status, retryable=is_retryable_failure(status, message),
                                retry_after_s=retry_after_seconds(headers.get("retry-after"))) from exc
        except timeout_error as exc:
            raise ProviderError(self.name, _timed_out(timeout_s), retryable=True) from exc
        except connection_error as exc:
            cause = _innermost(exc)
            if isinstance(cause, ssl.SSLError) and not isinstance(cause, ssl.SSLEOFError):
                # A wrong scheme or a bad certificate fails the same way every time; a connection dropped
                # mid-handshake (SSLEOFError) is the network's and worth another try.
                raise ProviderError(self.name, f"TLS failed: {_describe(cause)}; check that the base URL's "
                                               f"scheme matches the server (https:// to a plain-HTTP port "
                                               f"fails so) and that its certificate is valid for that host"
                                    ) from exc
            detail = str(exc) if cause is exc else f"{exc} ({_describe(cause)})"
            raise ProviderError(self.name, f"connection failed: {detail}", retryable=True) from exc
        except json.JSONDecodeError as exc:  # only a success status has its body parsed: a cut-off reply
            raise ProviderError(self.name, f"the reply's JSON body is malformed or cut off ({exc})",
                                status=200) from exc
        except RecursionError as exc:  # the SDK parsed a body nested deeper than Python's recursion limit
            raise ProviderError(self.name, "the reply's JSON body is nested too deeply to parse",
                                status=200) from exc


def _timed_out(timeout_s: float) -> str:
    return f"request timed out after {timeout_s:.3g}s"


def _innermost(exc: BaseException) -> BaseException:
    """The exception at the bottom of `exc`'s chain of causes (what actually went wrong)."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _shape(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _excerpt(body: Any, limit: int = 60) -> str:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return repr(text[:limit] + ("..." if len(text) > limit else "")) if text else "an empty body"
