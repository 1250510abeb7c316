from pathlib import Path

import pytest

from runtime import registry

UNIT_TESTS = Path(__file__).parent / "unit"


@pytest.fixture(autouse=True)
def isolated_registry(request):
    """Each test gets its own registry, restored afterwards.

    Runtime unit tests start from an empty one: in a whole-suite run Django has already registered the
    example functions, whose names (wiki_agent, ...) unit tests reuse for their own tools. Web tests keep
    the registry Django built, so the catalog and runs see the examples.
    """
    empty = UNIT_TESTS in Path(str(request.node.path)).parents
    with registry.isolated({} if empty else None):
        yield registry
