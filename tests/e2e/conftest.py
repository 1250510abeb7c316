"""Browser tests: a real Daphne server on an ephemeral port against the test database, driven by
Playwright with Debian's Chromium (never a downloaded browser)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make between page
# actions are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "e2e-password-123"
SERVER_START_TIMEOUT_S = 30


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.e2e)


def database_url(settings_dict) -> str:
    """The URL of the test database, for a server process that must share it."""
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    if engine.endswith("postgresql"):
        auth = settings_dict.get("USER") or ""
        if settings_dict.get("PASSWORD"):
            auth += f":{settings_dict['PASSWORD']}"
        host = f"{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}"
        return f"postgres://{auth + '@' if auth else ''}{host}/{settings_dict['NAME']}"
    raise RuntimeError(f"browser tests support SQLite and PostgreSQL, not {engine}")


def start_daphne(env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    log = log_path.open("w")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "daphne"), "-e", "tcp:port=0:interface=127.0.0.1",
         "openprogram_web.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = re.search(r"Listening on TCP address 127\.0\.0\.1:(\d+)", log_path.read_text())
        if match:
            return process, f"http://127.0.0.1:{match.group(1)}"
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"daphne did not start; its log:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    from django.db import connection

    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_WS_HEARTBEAT_S": "2",
           "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)  # one server process: the in-memory layer is the embedded default
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    process, url = start_daphne(env, tmp_path_factory.mktemp("daphne") / "daphne.log")
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (make browser)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def user(transactional_db):
    from django.contrib.auth import get_user_model
    return get_user_model().objects.create_user("e2e", password=PASSWORD)


@pytest.fixture
def page(browser, server_url, user):
    """A logged-in page; console errors of the app fail the test."""
    context = browser.new_context(base_url=server_url, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user.get_username())
    page.fill("input[name=password]", PASSWORD)
    page.click("form.login button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))
    page.set_default_timeout(15000)
    page.js_errors = errors
    yield page
    context.close()
    assert not errors, f"errors in the browser console: {errors}"
