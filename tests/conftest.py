import pytest

from runtime import registry


@pytest.fixture(autouse=True)
def isolated_registry():
    """Each test sees the registry as it was, and tools it registers vanish after it."""
    with registry.isolated():
        yield registry
