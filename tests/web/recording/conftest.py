"""Fixtures of the recording tests."""
import pytest

from dag.live import broadcast


@pytest.fixture
def published():
    """Every message published during the test, as (session id, message)."""
    received = []

    def listener(session_id, messages):
        received.extend((session_id, message) for message in messages)

    broadcast.subscribe(listener)
    yield received
    broadcast.unsubscribe(listener)
