"""What the browser tests and the live-view benches share: a Daphne server on an ephemeral port
against a given database, Debian's Chromium, a logged-in cookie, and a large session to open."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
SERVER_START_TIMEOUT_S = 30


class DaphneServer:
    """`daphne` serving the app on 127.0.0.1 at a port the OS picks; `url` once it listens."""

    def __init__(self, env: dict, log_path: Path):
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "daphne"), "-e", "tcp:port=0:interface=127.0.0.1",
             "openprogram_web.serve:application"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.url = self._wait_for_port()

    def _wait_for_port(self) -> str:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            match = re.search(r"Listening on TCP address 127\.0\.0\.1:(\d+)", self.log_path.read_text())
            if match:
                return f"http://127.0.0.1:{match.group(1)}"
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"daphne did not start; its log:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()  # reaped, not left a zombie
        self._log.close()


def launch_chromium(playwright, scrollbars: bool = False):
    """Debian's Chromium, headless. `scrollbars`: drawing classic scrollbars that take width, as a desktop
    browser does (Playwright starts headless Chromium with --hide-scrollbars, which hides them)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                      ignore_default_args=["--hide-scrollbars"] if scrollbars else None)


def session_cookie(user) -> dict:
    """A Playwright cookie logging `user` in (the same thing a login form would set)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "domain": "127.0.0.1", "path": "/"}


def make_big_session(user, children: int = 99, grandchildren: int = 100, timed: bool = False):
    """A finished session: an entry call, `children` calls under it and `grandchildren` under each
    (10,000 nodes by default). Under each child, runs of eleven `work` calls are separated by one
    `check`, so they fold into groups; the sixth call under each child failed. `timed`: every call has
    a start and an end (the grandchildren 10 ms each, one after another), for the timeline."""
    from datetime import datetime, timedelta, timezone

    from dag.models import Node, Session

    total = 1 + children + children * grandchildren
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    step = timedelta(milliseconds=10)

    def times(first_leaf: int, leaves: int) -> dict:
        if not timed:
            return {}
        return {"started_at": start + first_leaf * step, "finished_at": start + (first_leaf + leaves) * step}

    session = Session.objects.create(owner=user, function="big_run", status="completed", rev=total,
                                     node_count=total, **times(0, children * grandchildren))
    entry = Node.objects.create(session=session, seq=0, kind="code", name="big_run", status="completed",
                                depth=1, name_depth=1, input={"size": total}, rev=1,
                                **times(0, children * grandchildren))
    middle = Node.objects.bulk_create([
        Node(session=session, seq=1 + i, parent=entry, kind="code", name="batch" if i % 2 else "plan",
             status="completed", depth=2, name_depth=1, input={"i": i}, rev=2 + i,
             **times(i * grandchildren, grandchildren)) for i in range(children)])
    first = 1 + children
    Node.objects.bulk_create([
        Node(session=session, seq=first + p * grandchildren + c, parent=parent, kind="code",
             name="check" if c % 12 == 0 else "work", status="error" if c == 5 else "completed", depth=3,
             name_depth=1, input={"p": p, "c": c}, output=c, rev=1 + first + p * grandchildren + c,
             **times(p * grandchildren + c, 1))
        for p, parent in enumerate(middle) for c in range(grandchildren)], batch_size=2000)
    return session


SESSION_URL = re.compile(r".*/sessions/([0-9a-f-]{36})/$")


def launch_from_form(page, function, fields):
    """Fill `function`'s launch form with `fields`, run it, and return the new session's id."""
    page.goto(f"/functions/{function}/")
    for name, value in fields.items():
        page.fill(f"[name={name}]", str(value))
    page.click("form.launch button[type=submit]")
    page.wait_for_url(SESSION_URL)
    return SESSION_URL.match(page.url).group(1)
