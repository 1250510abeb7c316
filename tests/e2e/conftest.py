"""Browser tests: a real Daphne server on an ephemeral port against the test database, driven by
Playwright with Debian's Chromium (never a downloaded browser)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ..database_url import database_url
from .support import CHROMIUM, DaphneServer, launch_chromium

# Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make between page
# actions are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "e2e-password-123"


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    from django.db import connection

    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_WS_HEARTBEAT_S": "2",
           "OPENPROGRAM_LOGIN_RATE": "off",  # every test logs in from the same address
           "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)  # one server process: the in-memory layer is the embedded default
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    server = DaphneServer(env, tmp_path_factory.mktemp("daphne") / "daphne.log")
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def playwright():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (make browser)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(playwright):
    browser = launch_chromium(playwright)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def browser_with_scrollbars(playwright):
    """A second Chromium whose scrollbars take width (the default one's are hidden)."""
    browser = launch_chromium(playwright, scrollbars=True)
    yield browser
    browser.close()


@pytest.fixture
def user(transactional_db):
    from django.contrib.auth import get_user_model
    return get_user_model().objects.create_user("e2e", password=PASSWORD)


@pytest.fixture
def page(browser, server_url, user):
    yield from logged_in_page(browser, server_url, user)


@pytest.fixture
def page_with_scrollbars(browser_with_scrollbars, server_url, user):
    yield from logged_in_page(browser_with_scrollbars, server_url, user)


def logged_in_page(browser, server_url, user):
    """A page of `browser` logged in as `user`; console errors of the app fail the test."""
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
