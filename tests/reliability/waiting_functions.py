"""Functions the scaled load and fault tests run on Celery workers: runs that go on until the test
releases them (by creating a file), so how many run at once, and what an outage meets, is the test's."""
from __future__ import annotations

import os
import time

from examples.functions import count_step
from runtime import agentic_function

# A bound on a run the test never releases (a broken test), never a timing the tests rely on.
UNRELEASED_S = 300.0
POLL_S = 0.2


def released(release_file: str, deadline: float) -> bool:
    return os.path.exists(release_file) or time.monotonic() > deadline


@agentic_function
def wait_for_release(release_file: str) -> str:
    """A step, a wait (no call, no connection) until `release_file` exists, then another step."""
    count_step(1, 0)
    deadline = time.monotonic() + UNRELEASED_S
    while not released(release_file, deadline):
        time.sleep(POLL_S)
    count_step(2, 0)
    return "released"


@agentic_function
def count_until_released(release_file: str, delay_s: float = 0.05) -> int:
    """Count through child calls, `delay_s` apart, until `release_file` exists; how many it made."""
    count, deadline = 0, time.monotonic() + UNRELEASED_S
    while not released(release_file, deadline):
        count = count_step(count + 1, delay_s)
    return count
