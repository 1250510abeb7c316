"""Fixtures shared by the runtime tests. Import them into a test module to use them."""
import pytest

from runtime import registry


@pytest.fixture
def empty_registry():
    """An empty tool registry for the test: tools imported elsewhere (the examples, which Django loads
    when the whole suite runs) must not show up in what an exec offers."""
    with registry.isolated({}):
        yield registry
