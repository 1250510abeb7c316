"""The debugging tests' functions module, offered as the catalog."""
import pytest

MODULE = "tests.web.debugging.debug_functions"


@pytest.fixture
def debug_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [MODULE]
