"""The garbage collector's settings for a serving process (Daphne's, a Celery worker's), set once it has
imported what it serves.

Recording allocates a few dozen containers per call (the node, its message, the rows, the frames), so
at thousands of calls a second CPython's default young-generation threshold (700 more container
allocations than deallocations) runs a collection every 20-odd calls, and each one walks and promotes
what the writer's queue holds at that moment. With the settings below, alternating runs of the app
against the same code without them (SQLite, `bench_recorder.run_and_watch` in a Daphne server, three
alternations of three rounds) made a median 6,853 against 6,479 recorded calls a second, at 143 against
151 us of server CPU per call. Cycles are still collected, only in larger rounds.

`gc.freeze()` moves everything alive at start-up (Django, the app, its libraries: over a hundred
thousand objects that live as long as the process) out of the collector's sight, so that the rare full
collection does not walk them again each time; a collection just before it keeps start-up's garbage
from being frozen with them.

The ASGI module tunes the process that imports it, so a test process that imports it to talk to the
application in-process is tuned too; `tests/conftest.py` tunes every test process once its tests are
collected, so that all tests run under the same settings whichever modules a run collects.
"""
from __future__ import annotations

import gc

# Container allocations (net of deallocations) before a young collection: 10,000 is about 300 recorded
# calls. Young collections before a middle one, and middle ones before a full one: 20 each (CPython's
# 10), so a full collection comes at most once per 4,000,000 net allocations (by default, 70,000).
# Measured with the freeze, (7,000, 20, 20) and (50,000, 50, 50) did alike, both better than the default.
THRESHOLDS = (10_000, 20, 20)


def tune_for_serving() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
