import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from openprogram_web.settings import throttle_cache
from runtime import registry

UNIT_TESTS = Path(__file__).parent / "unit"

# The password throttle's keys (openprogram_web.settings.throttle_cache) for this run only: the tests'
# `forget_attempts()` then clears this run's counts, never a dev server's (the default prefix) or another
# test run's in this checkout or on the same Redis database. The environment carries it to every server
# process a test starts; this process read its settings before any conftest (pytest-django loads them
# first), so its cache is set here too, before its first use.
THROTTLE_PREFIX = f"test-{os.getpid()}"
os.environ["OPENPROGRAM_THROTTLE_PREFIX"] = THROTTLE_PREFIX
settings.CACHES["throttles"] = throttle_cache(THROTTLE_PREFIX)


def pytest_collection_finish(session):
    """Tune this process's garbage collector as a server's is (`openprogram_web.gc_tuning`), once every
    test module is imported: some import the ASGI module, which tunes the process that imports it, and
    every test then runs under the same settings whichever modules a run collects."""
    from openprogram_web.gc_tuning import tune_for_serving

    tune_for_serving()


def pytest_sessionfinish(session):
    """Remove this run's throttle directory (on the file cache; Redis keys go with `forget_attempts`)."""
    if settings.CACHES["throttles"]["BACKEND"].endswith("FileBasedCache"):
        shutil.rmtree(settings.CACHES["throttles"]["LOCATION"], ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def no_background_reaper():
    """The test process runs no reaper thread (servers and workers that tests start run their own): the
    tests call `reaper.reap(now=...)` when they mean it. A background pass would reap on the real clock
    between tests, and outside a database test it fails and logs a traceback, whose formatting parses
    source lines with `ast`; on CPython 3.11 that can break an `ast.parse` another thread makes at the
    same moment ("AST constructor recursion depth mismatch", python/cpython#106905)."""
    from dag.runs import reaper

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reaper, "start", lambda: None)
        yield


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
