"""The debugging tests' fixtures: their functions module as the catalog, and the live model calls counted."""
import pytest

from .replays import provider_calls  # noqa: F401 (a fixture for every test here)

MODULE = "tests.web.debugging.debug_functions"


@pytest.fixture
def debug_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [MODULE]