"""Durations read the same in the terminal, the session list and the session page: `format_duration`
rounds as static/js/dom.js `formatDuration` does (ties up, on the same binary double), not as Python's
round-half-even does."""
import json
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dag.live.durations import format_duration, node_duration_ms

DOM_JS = Path(__file__).resolve().parents[3] / "static" / "js" / "dom.js"


@pytest.mark.parametrize("ms, text", [
    (None, ""), (0, "0 ms"), (999, "999 ms"), (1000, "1.00 s"),
    (1125, "1.13 s"),    # a tie: Python's "%.2f" says 1.12
    (1135, "1.14 s"),
    (1005, "1.00 s"),    # 1.005 is 1.00499... as a double: below the tie, on the page too
    (2345, "2.35 s"),
    (9995, "9.99 s"),    # 9.995 is 9.99499... as a double
    (9999, "10.00 s"), (10000, "10.0 s"),
    (10250, "10.3 s"),   # a tie: Python says 10.2
    (59949, "59.9 s"),
    (59950, "60.0 s"),   # under a minute, so seconds, rounded up to 60.0 as the page writes it
    (59999, "60.0 s"), (60000, "1 m 0 s"),
    (60500, "1 m 1 s"),  # a tie: Python's round says 60
    (119500, "2 m 0 s"), (119700, "2 m 0 s"), (3_600_000, "60 m 0 s"),
])
def test_durations_are_written_as_the_page_writes_them(ms, text):
    assert format_duration(ms) == text


EDGES = sorted({*range(990, 1300), *range(9990, 10300), *range(59900, 60600), *range(119400, 119600, 5),
                *(ms for ms in range(1000, 60000, 5))})


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js to run the page's own function")
def test_format_duration_agrees_with_the_pages_function_on_every_edge():
    script = (f"import {{formatDuration}} from {json.dumps(str(DOM_JS))};"
              f"console.log(JSON.stringify({json.dumps(EDGES)}.map(formatDuration)));")
    page = json.loads(subprocess.run(["node", "--input-type=module", "-e", script], check=True,
                                     capture_output=True, text=True).stdout)
    disagreements = [(ms, format_duration(ms), text) for ms, text in zip(EDGES, page)
                     if format_duration(ms) != text]
    assert disagreements == []


def test_a_running_node_lasts_until_now_and_a_finished_one_its_recorded_duration():
    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    running = {"status": "running", "started_at": started.isoformat(), "duration_ms": None}
    assert node_duration_ms(running, started + timedelta(seconds=1.5)) == 1500
    assert node_duration_ms(running, started - timedelta(seconds=1)) == 0  # a clock stepped back
    assert node_duration_ms({"status": "completed", "duration_ms": 42}, started) == 42
    assert node_duration_ms({"status": "queued", "started_at": None, "duration_ms": None}, started) is None
