"""A run started by `manage.py run_function` (another process, its own in-process executor) is live in a
browser page of the server on the embedded default: the in-memory layer cannot carry it, so the page's
consumer reads the database while another process holds the session."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection
from playwright.sync_api import expect

from dag.models import Session

from ..database_url import database_url
from .test_live_view import rows, session_status

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_function_run_grows_live_in_the_browser(page, user, tmp_path):
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_VAR_DIR": str(tmp_path)}
    env.pop("REDIS_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    child = subprocess.Popen([sys.executable, "manage.py", "run_function", "slow_count", "n=400", "delay_s=0.1",
                              "--user", user.get_username()], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not Session.objects.filter(owner=user).exists():  # a bound, not a timing assertion
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read() if child.poll() else ""
            time.sleep(0.1)
        session = Session.objects.get(owner=user)
        page.goto(f"/sessions/{session.pk}/")
        expect(session_status(page)).to_have_text("running")
        expect(rows(page, ".kind-code .name").first).to_have_text("slow_count")
        # New calls keep arriving while the CLI's run goes on, without a reload (the count covers every
        # node the page holds, not only the rows drawn).
        count = page.locator("[data-role=tree-count]")
        shown = count.text_content()
        expect(count).not_to_have_text(shown)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGINT)  # the CLI turns Ctrl-C into a stop of its run
            child.wait(60)
    expect(session_status(page)).to_have_text("cancelled")
