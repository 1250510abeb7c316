"""The pages at a phone's viewport (390×844): one column, nothing wider than the screen (a new API token's
key wraps), the header's "Log out" in view, and Stop in reach on the session page however far it is
scrolled."""
import re

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD
from .support import launch_from_form, make_big_session

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(page):
    page.set_viewport_size(PHONE)
    return page


def assert_no_horizontal_overflow(page):
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= page.evaluate("() => window.innerWidth"), f"{page.url} is {width} px wide"


def assert_header_fits(page):
    """The header's links and "Log out" are on the screen, whole (visible alone would pass a link
    pushed past the screen's edge)."""
    expect(page.get_by_role("button", name="Log out")).to_be_in_viewport(ratio=1)
    for name in ("Functions", "Sessions", "API docs"):
        expect(page.locator(".topnav").get_by_role("link", name=name)).to_be_in_viewport(ratio=1)


@pytest.mark.parametrize("path", ["/", "/functions/slow_count/", "/functions/research_agent/", "/accounts/token/"])
def test_pages_fit_a_phone(phone, path):
    phone.goto(path)
    assert_header_fits(phone)
    assert_no_horizontal_overflow(phone)


@pytest.mark.parametrize("width", [320, PHONE["width"]])
def test_the_tokens_page_with_a_new_key_and_its_table_fits_a_phone(page, width):
    page.set_viewport_size({**PHONE, "width": width})
    page.goto("/accounts/token/")
    page.get_by_role("button", name="New token").click()
    key = page.locator("#new-token")
    expect(key).to_have_text(re.compile(r"^[0-9a-f]{64}$"))  # 64 characters with nowhere to break
    expect(page.locator("table.tokens tbody tr")).to_have_count(1)
    assert_header_fits(page)
    assert_no_horizontal_overflow(page)
    expect(key).to_be_in_viewport(ratio=1)


def test_the_login_page_fits_a_phone(browser, server_url, user):
    context = browser.new_context(base_url=server_url, viewport=PHONE)
    page = context.new_page()
    page.goto("/accounts/login/")
    assert_no_horizontal_overflow(page)
    expect(page.locator("form.login button[type=submit]")).to_be_in_viewport()
    page.fill("input[name=username]", user.get_username())
    page.fill("input[name=password]", PASSWORD)
    page.click("form.login button[type=submit]")
    expect(page.get_by_role("button", name="Log out")).to_be_in_viewport(ratio=1)
    context.close()


def test_a_large_session_page_fits_a_phone_in_both_views(phone, user):
    session = make_big_session(user, timed=True)
    phone.goto(f"/sessions/{session.id}/")
    expect(phone.locator("[data-role=tree-count]")).to_have_text("10000 nodes")
    assert_header_fits(phone)
    assert_no_horizontal_overflow(phone)
    phone.get_by_role("link", name="Download").scroll_into_view_if_needed()
    phone.get_by_role("button", name="Jump to error").click()
    expect(phone.locator("[data-role=details] .badge")).to_have_text("error")
    assert_no_horizontal_overflow(phone)
    phone.get_by_role("button", name="Timeline").click()
    expect(phone.locator(".tl-bar").first).to_be_visible()
    assert_no_horizontal_overflow(phone)


def test_stop_stays_in_reach_on_a_phone_and_cancels_the_run(phone):
    launch_from_form(phone, "slow_count", {"n": 200, "delay_s": 0.5})
    stop = phone.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    assert_no_horizontal_overflow(phone)
    # Scrolled down to the details panel, below the tree: the header with Stop stays on screen.
    phone.locator("[data-role=canvas] .row").first.click()
    phone.evaluate("() => window.scrollTo(0, document.scrollingElement.scrollHeight)")
    assert phone.evaluate("() => window.scrollY") > 0
    expect(stop).to_be_in_viewport(ratio=1)
    box = stop.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    # Pressed where it is on the screen (Playwright's click would scroll it into view first): nothing
    # covers it.
    phone.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(phone.locator("[data-role=session-status]")).to_have_text("cancelled")
    expect(stop).to_be_hidden()
