"""Shared by the launch tests: functions that exercise every form rule, users, and waiting for a run."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal, Optional

import pytest
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections

from runtime import agentic_function, interrupt
from runtime.messages import ModelReply
from runtime.providers.base import Provider

MODULE = __name__


# Kept out of the global tool registry: this module is imported while tests are collected, outside any
# test's isolated registry, and other tests define tools with these common names.
@agentic_function(register_globally=False, input={
    "question": {"description": "What to ask.", "placeholder": "Ask me anything", "multiline": True},
    "mode": {"options": ["brief", "detailed"], "description": "How much to say."},
    "secret": {"hidden": True},
})
def widgets(question: str, mode: str = "brief", count: int = 3, ratio: float = 0.5, verbose: bool = False,
            tags: list[str] = ["alpha", "beta"], sizes: list[int] = [], limit: Optional[int] = None,
            title: str = "untitled", level: Literal[1, 2, 3] = 2, extra: dict = {},
            secret: str = "from-the-default") -> dict:
    """Return what it was called with (every widget rule in one signature)."""
    return {"question": question, "mode": mode, "count": count, "ratio": ratio, "verbose": verbose,
            "tags": tags, "sizes": sizes, "limit": limit, "title": title, "level": level, "extra": extra,
            "secret": secret}


@agentic_function(register_globally=False)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@agentic_function(register_globally=False)
async def async_echo(text: str) -> str:
    """Return the text unchanged, asynchronously."""
    await asyncio.sleep(0)
    return echo(text)


@agentic_function(register_globally=False)
def power_of_ten(digits: int = 5_000) -> int:
    """10 to the power `digits`: past 4,300 digits, an int Python turns into text only on request."""
    return 10 ** digits


@agentic_function(register_globally=False)
def powers_between_echoes(digits: int = 5_000) -> str:
    """Echo, ask for a power of ten, echo again: one batch holds all three calls."""
    echo("before")
    power_of_ten(digits)
    echo("after")
    return "done"


# Released by the test that started `deaf_until_released`; a bound keeps a broken test from hanging.
RELEASE_DEAF_RUNS = threading.Event()


@agentic_function(register_globally=False)
def deaf_until_released() -> str:
    """Wait, without a model call or any call a stop could end, until the test releases it."""
    RELEASE_DEAF_RUNS.wait(60)
    return "released"


@agentic_function(register_globally=False)
def exit_early() -> None:
    """Call sys.exit from inside a run."""
    raise SystemExit(3)


@agentic_function(register_globally=False)
def explode(message: str = "boom") -> str:
    """Raise an error with the message."""
    raise RuntimeError(message)


@agentic_function(register_globally=False)
def chatty(calls: int = 5, runtime=None) -> int:
    """Make `calls` model calls, one after another."""
    for _ in range(calls):
        runtime.llm("say something")
    return calls


class HangingProvider(Provider):
    """A model whose answer never comes, but whose request a stop can abandon (as the SDK providers do)."""

    name = "hanging"

    def complete(self, request, check=None):
        deadline = time.monotonic() + 30  # a bound so a broken stop fails the test instead of hanging it
        while time.monotonic() < deadline:
            if check is not None:
                check()
            time.sleep(0.01)
        raise TimeoutError("the hanging model was never abandoned")


@agentic_function(register_globally=False)
def ask_hanging_model(question: str = "anything?", runtime=None) -> str:
    """Ask a model that never answers."""
    return runtime.llm(question, model=f"{__name__}.HangingProvider")


# The check each request to SleepingModel was given: how a run's model call waited.
SLEEPING_CHECKS: list = []


class SleepingModel(Provider):
    """A model that answers after 90 s, waiting as the SDK providers do (`runtime.interrupt`): only its
    check (a stop, a pause) can end the wait sooner."""

    name = "sleeping"

    def complete(self, request, check=None):
        SLEEPING_CHECKS.append(check)
        interrupt.sleep(90, check)
        return ModelReply(text="too late")


@agentic_function(register_globally=False)
def ask_sleeping_model(question: str = "anything?", runtime=None) -> str:
    """Ask a model that answers after 90 seconds."""
    return runtime.llm(question, model=f"{__name__}.SleepingModel")


# Whether the run's thread held a database connection at each point `wait_on_model_and_tool` looked.
HELD_WHILE_WAITING: list[bool] = []


def connection_held() -> bool:
    return connections[DEFAULT_DB_ALIAS].connection is not None


class ConnectionWitness(Provider):
    """A model that notes, while it is asked, whether the run's thread holds a database connection."""

    name = "witness"

    def complete(self, request, check=None):
        HELD_WHILE_WAITING.append(connection_held())
        return ModelReply(text="waited")


@agentic_function(register_globally=False)
def wait_on_model_and_tool(runtime=None) -> str:
    """Wait in its body, on a model, and again after a nested call, noting each time whether a database
    connection is held meanwhile."""
    HELD_WHILE_WAITING.append(connection_held())
    answer = runtime.llm("wait", model=f"{__name__}.ConnectionWitness")
    echo(answer)
    HELD_WHILE_WAITING.append(connection_held())
    return answer


# The context block of every request `ContextWitness` was asked, in order (None: the request had none).
CONTEXTS_SEEN: list = []


class ContextWitness(Provider):
    """A model that notes the context each request shows it of the run so far."""

    name = "context-witness"

    def complete(self, request, check=None):
        blocks = [block["text"] for message in request.messages for block in message.get("content") or []
                  if isinstance(block, dict) and block.get("source") == "context"]
        CONTEXTS_SEEN.append(blocks[-1] if blocks else None)
        return ModelReply(text="noted", usage={"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0})


@agentic_function(register_globally=False)
def echo_and_ask(texts: list[str], runtime=None) -> int:
    """Echo each text, then ask a model what it sees."""
    for text in texts:
        echo(text)
        runtime.llm(f"after {text}?", model=f"{__name__}.ContextWitness")
    return len(texts)


@pytest.fixture
def test_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [MODULE]


@pytest.fixture
def fast_hashing(settings):
    # The production hasher is slow by design; tests only need passwords to round-trip.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_throttles():
    """Each test starts with no password attempts counted (the throttle keeps them in its shared cache)."""
    from dag.accounts.throttles import forget_attempts

    forget_attempts()
    yield
    forget_attempts()


@pytest.fixture
def offline_models(monkeypatch):
    """Only the simulated models on offer, whatever the environment running the tests sets."""
    for name in ("OPENPROGRAM_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def user(db, fast_hashing):
    return get_user_model().objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def other_user(db, fast_hashing):
    return get_user_model().objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def api(user):
    """A DRF test client authenticated as `user`."""
    from rest_framework.test import APIClient
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def local_user(db, django_user_model, fast_hashing):
    """The user `make run` creates, which run_function acts as by default."""
    from dag.runs.local_user import LOCAL_USERNAME
    return django_user_model.objects.create_user(LOCAL_USERNAME, password="local-password")


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll `predicate()` until truthy (returned) or fail naming `what`; a bound, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_end(session, timeout: float = 60.0):
    """The session once it reached a terminal status and, outside a test's own transaction, was measured.

    A session's size is measured in a transaction of its own just after its end is committed (by a run's
    thread, or a worker process). A test that ended on the end alone could tear down (TRUNCATE every
    table) while that measurement still ran: PostgreSQL then found the two deadlocked and failed the
    teardown, and the next test's setup with it. Inside a test's transaction the measurement waits for a
    commit that never comes, so there the end is enough."""
    measured = not connections[DEFAULT_DB_ALIAS].in_atomic_block

    def ended():
        session.refresh_from_db()
        return session if session.is_terminal and (session.stored_bytes is not None or not measured) else None
    return wait_for(ended, timeout, f"session {session.pk} to end" + (" and be measured" if measured else ""))
