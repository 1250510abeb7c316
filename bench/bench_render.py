"""Live view: how long the 10,000-node session page takes to load and render in Chromium, and what
the longest the tab went without painting. Prints figures only.

A real Daphne server runs against a scratch SQLite database holding one finished 10,000-node session
(an entry call, 99 children, 100 grandchildren each). Each load is timed from navigation start to the
frame after the tree shows all nodes; the longest gap between two frames during the load tells
whether the tab froze. Expand-all (every group unfolded) and a jump to the middle of the tree are timed too.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API holds a loop here

LOADS = 5
# The longest gap between two animation frames: how long the tab could not paint (or react).
WATCH_FRAME_GAPS = """
window.__longest = 0;
let previous = performance.now();
const tick = (now) => { window.__longest = Math.max(window.__longest, now - previous); previous = now; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""
NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now()))))"
TIMED_ACTION = """(action) => new Promise((done) => {
  const start = performance.now();
  action === "expand" ? document.querySelector("[data-role=expand-all]").click()
    : (document.querySelector("[data-role=tree]").scrollTop = document.querySelector("[data-role=tree]").scrollHeight / 2);
  requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - start)));
})"""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-render-") as scratch:
        directory = Path(scratch)
        os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'bench.sqlite3'}"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
        import django
        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from playwright.sync_api import sync_playwright

        from tests.e2e.support import DaphneServer, launch_chromium, make_big_session, session_cookie

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="bench-password-1")
        session = make_big_session(user)
        cookie = session_cookie(user)
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
        env.pop("REDIS_URL", None)
        server = DaphneServer(env, directory / "daphne.log")
        loads, firsts, longest, expands, jumps, rows = [], [], [], [], [], 0
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                for _ in range(LOADS):
                    context = browser.new_context(viewport={"width": 1400, "height": 900})
                    context.add_cookies([{**cookie, "domain": "127.0.0.1"}])
                    page = context.new_page()
                    page.add_init_script(WATCH_FRAME_GAPS)
                    page.goto(f"{server.url}/sessions/{session.id}/")
                    page.wait_for_selector("[data-role=canvas] .row", timeout=60000)
                    firsts.append(page.evaluate("performance.now()"))
                    page.wait_for_function(
                        "document.querySelector('[data-role=tree-count]').textContent === '10000 nodes'",
                        polling="raf", timeout=60000)
                    loads.append(page.evaluate(NEXT_FRAME))
                    longest.append(page.evaluate("window.__longest"))
                    expands.append(page.evaluate(TIMED_ACTION, "expand"))
                    jumps.append(page.evaluate(TIMED_ACTION, "scroll"))
                    rows = page.locator("[data-role=canvas] .row").count()
                    context.close()
                browser.close()
        finally:
            server.stop()
    print(f"bench_render: 10,000-node session page in Chromium, median of {LOADS} loads")
    print(f"  navigation start -> first rows drawn: {statistics.median(firsts):.0f} ms")
    print(f"  navigation start -> full tree drawn: {statistics.median(loads):.0f} ms "
          f"(min {min(loads):.0f}, max {max(loads):.0f})")
    print(f"  longest frame gap during load (the tab could not paint): {statistics.median(longest):.0f} ms")
    print(f"  expand all (10,000 rows visible) -> next frame: {statistics.median(expands):.1f} ms")
    print(f"  jump to the middle of the tree -> next frame: {statistics.median(jumps):.1f} ms")
    print(f"  rows in the DOM after expanding all: {rows} (of 10,000)")


if __name__ == "__main__":
    main()
