"""Live view: how long the 10,000-node session page takes to show its first rows and to hold every node
in its model, in Chromium, and the worst frame gap while the timeline of those nodes is scrolled.
Prints figures only.

A real Daphne server runs against a scratch SQLite database holding one finished 10,000-node session
(an entry call, 99 children, 100 grandchildren each, every call timed). The page itself notes when it
drew its first rows and when its model held the whole snapshot (`data-first-row-ms`, `data-model-ms`
on the page root, in ms since navigation start); with `?debug=frames` it also notes the longest gap
between two animation frames once its timeline is scrolled (`data-frame-gap-ms`). This script only
reads those attributes, polling from Python: the app's Content-Security-Policy refuses the string
evaluation that Playwright's `wait_for_function` needs.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API holds a loop here

LOADS = 7
SCROLL_STEPS = 60  # wheel turns over the timeline, one every frame or so
WAIT_S = 60


def poll_attribute(locator, name: str) -> str:
    """The attribute's value once the page has set it (polled from Python)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = locator.get_attribute(name)
        if value is not None:
            return value
        time.sleep(0.01)
    raise TimeoutError(f"the page never set {name}")


def load_once(browser, url: str, cookie: dict) -> tuple[float, float, float, int]:
    """(first row ms, full model ms, worst timeline frame gap ms, timeline rows in the DOM) of one load."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies([cookie])
    page = context.new_page()
    page.goto(f"{url}?debug=frames")
    root = page.locator("#session-page")
    first = float(poll_attribute(root, "data-first-row-ms"))
    full = float(poll_attribute(root, "data-model-ms"))
    count = page.locator("[data-role=tree-count]").text_content()
    assert count == "10000 nodes", f"the page shows {count!r} after loading"
    page.get_by_role("button", name="Timeline").click()
    page.locator(".tl-bar").first.wait_for()
    box = page.locator("[data-role=timeline-scroll]").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for step in range(SCROLL_STEPS):
        page.mouse.wheel(0, 1200 if step < SCROLL_STEPS // 2 else -700)
        page.wait_for_timeout(16)
    # Enough frames after the last wheel turn that its drawing is measured too.
    frames_before = int(root.get_attribute("data-frames") or 0)
    deadline = time.monotonic() + WAIT_S
    while int(root.get_attribute("data-frames") or 0) < frames_before + 20 and time.monotonic() < deadline:
        time.sleep(0.02)
    gap = float(poll_attribute(root, "data-frame-gap-ms"))
    rows = page.locator(".tl-row").count()
    context.close()
    return first, full, gap, rows


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
        session = make_big_session(user, timed=True)
        cookie = session_cookie(user)
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
        env.pop("REDIS_URL", None)
        server = DaphneServer(env, directory / "daphne.log")
        firsts, fulls, gaps, rows = [], [], [], 0
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                load_once(browser, f"{server.url}/sessions/{session.id}/", cookie)  # warm: caches, imports
                for _ in range(LOADS):
                    first, full, gap, rows = load_once(browser, f"{server.url}/sessions/{session.id}/", cookie)
                    firsts.append(first)
                    fulls.append(full)
                    gaps.append(gap)
                browser.close()
        finally:
            server.stop()
    print(f"bench_render: 10,000-node session page in Chromium, median of {LOADS} loads (range)")
    print(f"  navigation start -> first rows drawn: {statistics.median(firsts):.0f} ms "
          f"({min(firsts):.0f}-{max(firsts):.0f})")
    print(f"  navigation start -> every node in the model, drawn: {statistics.median(fulls):.0f} ms "
          f"({min(fulls):.0f}-{max(fulls):.0f})")
    print(f"  timeline scrolled ({SCROLL_STEPS} wheel turns), worst gap between frames: "
          f"{statistics.median(gaps):.0f} ms ({min(gaps):.0f}-{max(gaps):.0f}; 16.7 ms is one frame at 60 Hz)")
    print(f"  timeline rows in the DOM: {rows} (of 10,000)")


if __name__ == "__main__":
    main()
