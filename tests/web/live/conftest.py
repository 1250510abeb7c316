"""Fixtures of the live-stream tests."""
import pytest


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """A channel layer per test: each async test has its own event loop, and the Redis layer keeps
    loop-bound state (its receive lock) that a consumer still waiting when a loop closed leaves behind."""
    from channels.layers import channel_layers

    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


@pytest.fixture
def session(user):
    """A session of `user`'s, not yet run."""
    from dag.models import Session

    return Session.objects.create(owner=user, function="wiki_agent", args={"question": "q"})
