"""The launch form in Chromium: an out-of-range number never starts a run, and a chosen model is the
model the run uses."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from dag.models import Node, Session

from .support import SESSION_URL

FORM_URL = re.compile(r"/functions/slow_count/$")


def test_an_out_of_range_count_is_refused_by_the_browser_and_by_the_server_and_no_session_is_created(page):
    page.goto("/functions/slow_count/")
    count = page.locator("[name=n]")
    expect(count).to_have_attribute("min", "1")
    expect(count).to_have_attribute("max", "10000")

    page.fill("[name=n]", "20000")
    page.click("form.launch button[type=submit]")
    # Chromium refuses to submit (the input's max) and says why beside the field.
    assert count.evaluate("input => input.validity.rangeOverflow")
    expect(page).to_have_url(FORM_URL)

    # A client that skips the browser's check meets the server's: the form comes back with the range named.
    page.locator("form.launch").evaluate("form => { form.noValidate = true; }")
    page.click("form.launch button[type=submit]")
    error = page.locator(".field-n .field-errors")
    expect(error).to_contain_text("10000")
    expect(page.locator("[name=n]")).to_have_value("20000")
    assert not Session.objects.exists()
    # The refused form answers 400, which Chromium's console reports as a failed load: expected here.
    page.js_errors[:] = [error for error in page.js_errors if "status of 400" not in error]


def test_choosing_sim_naive_for_wiki_agent_shows_it_recursing_into_the_depth_ceiling(page):
    page.goto("/functions/wiki_agent/")
    page.fill("[name=question]", "How does the recursion guard work?")
    page.locator("[data-role=advanced] summary").click()
    page.select_option("[name=budget-model]", "sim:naive")
    page.click("form.launch button[type=submit]")
    page.wait_for_url(SESSION_URL)
    session_id = SESSION_URL.match(page.url).group(1)

    # The naive model hands the question back to wiki_agent until the ceiling refuses it, twice.
    expect(page.locator("[data-role=session-status]")).to_have_text("error", timeout=60_000)
    expect(page.locator("[data-role=session-warning]")).to_have_text(re.compile(r"2 refused"))
    expect(page.locator(".flag-refused").first).to_be_visible()
    session = Session.objects.get(pk=session_id)
    assert session.model == "sim:naive"
    assert "exceeded max nesting depth 5" in session.error
    assert Node.objects.filter(session=session, name="wiki_agent", status="refused").count() == 2
