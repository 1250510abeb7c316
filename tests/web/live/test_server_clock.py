"""The session page times running calls by the server's clock (static/js/server_clock.js): the times it
measures from were stamped by the server, and a browser's own clock may be off by hours."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[3] / "static" / "js"

SCRIPT = """
import {heardServerTime, serverNow} from %(clock)s;
import {elapsedMs} from %(dom)s;
let browser = 1_000_000;
Date.now = () => browser;
const seen = [serverNow()];
heardServerTime(new Date(browser + 3_600_000).toISOString());  // the server's clock an hour ahead
seen.push(serverNow());
browser += 500;
seen.push(serverNow());  // the browser's clock still measures how time passes
heardServerTime(new Date(browser + 3_600_000 - 300).toISOString());  // a frame held up 300 ms on its way
seen.push(serverNow());  // does not set the clock back
seen.push(elapsedMs(new Date(serverNow() - 2_000).toISOString()));  // a call the server started 2 s ago
seen.push(elapsedMs(new Date(0).toISOString(), new Date(1_500).toISOString()));  // a finished one
heardServerTime(undefined);  // a frame that says no time changes nothing
seen.push(serverNow());
console.log(JSON.stringify(seen));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js to run the page's own module")
def test_running_time_is_measured_against_the_servers_clock_once_heard():
    script = SCRIPT % {"clock": json.dumps(str(JS / "server_clock.js")), "dom": json.dumps(str(JS / "dom.js"))}
    out = subprocess.run(["node", "--input-type=module", "-e", script], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == [1_000_000, 4_600_000, 4_600_500, 4_600_500, 2_000, 1_500, 4_600_500]
