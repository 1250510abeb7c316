"""The session list in a real browser: rows change live, new runs appear, warnings show, filters and
the search narrow it, and on a phone each run is a card whose Stop works."""
import re

from playwright.sync_api import expect

from dag.models import Session
from dag.recording.totals import totals_for, warning_text

from .test_live_view import launch_from_form


def open_list(page, query=""):
    """The list page, marked so that a reload (which would drop the mark) is noticed."""
    page.goto(f"/sessions/{query}")
    page.evaluate("() => { window.notReloaded = true; }")


def not_reloaded(page):
    return page.evaluate("() => window.notReloaded === true")


def row(page, session_id):
    return page.locator(f"tr[data-session='{session_id}']")


def test_a_row_changes_from_running_to_completed_without_a_reload(page):
    session_id = launch_from_form(page, "slow_count", {"n": 12, "delay_s": 0.25})
    open_list(page)
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("running")
    expect(row(page, session_id).locator("[data-role=duration]")).to_have_text("running")
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("completed", timeout=30000)
    expect(row(page, session_id).locator("[data-role=nodes]")).to_have_text("13")  # the entry call and 12 counts
    expect(row(page, session_id).locator("[data-role=duration]")).to_have_text(re.compile(r"^\d+(\.\d)? s$"))
    expect(row(page, session_id).locator("[data-role=stop]")).to_have_count(0)
    assert not_reloaded(page)


def test_a_new_run_appears_at_the_top_without_a_reload(page):
    open_list(page)
    expect(page.locator("[data-role=empty]")).to_be_visible()
    other_tab = page.context.new_page()
    session_id = launch_from_form(other_tab, "slow_count", {"n": 3, "delay_s": 0.2})
    other_tab.close()
    expect(page.locator("table.sessions tbody tr").first).to_have_attribute("data-session", session_id)
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("completed", timeout=30000)
    expect(page.locator("[data-role=empty]")).to_have_count(0)
    expect(page.locator(".filters [data-status=''] .count")).to_have_text("1")
    expect(page.locator(".filters [data-status=completed] .count")).to_have_text("1")
    assert not_reloaded(page)


def test_runaway_agents_row_says_how_many_calls_were_refused(page):
    session_id = launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})
    expect(page.locator("[data-role=session-status]")).to_have_text("error", timeout=30000)
    warning = warning_text(totals_for([session_id])[Session.objects.get(pk=session_id).pk]["refusals"])
    assert warning  # the depth guard refused the insisting call
    page.goto("/sessions/")
    status_cell = row(page, session_id).locator("[data-role=status-cell]")
    expect(status_cell).to_have_text(f"error · {warning}")
    expect(status_cell.locator("[data-role=warning]")).to_be_visible()


def test_on_a_phone_each_run_is_a_card_and_stop_cancels_it(page):
    page.set_viewport_size({"width": 390, "height": 844})
    session_id = launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.1})
    open_list(page)
    card = row(page, session_id)
    expect(card.locator("[data-role=status]")).to_have_text("running")
    # Nothing of the list reaches past the screen's edge (the site's header is base.html's to fit).
    assert page.evaluate("""() => [...document.querySelectorAll("main *")]
        .filter((element) => element.getBoundingClientRect().right > 390).map((element) => element.outerHTML)""") == []
    for name in ("Stop", "Open"):
        button = card.get_by_role("button" if name == "Stop" else "link", name=name)
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 36, (name, box)
    card.get_by_role("button", name="Stop").click()
    expect(card.locator("[data-role=status]")).to_have_text("cancelled", timeout=30000)
    expect(card.locator("[data-role=duration]")).not_to_have_text("running")
    expect(page.locator(".filters [data-status=running] .count")).to_have_text("0")
    expect(page.locator(".filters [data-status=cancelled] .count")).to_have_text("1")
    page.screenshot(path="/tmp/e2e-session-list-phone.png", full_page=True)
    assert not_reloaded(page)


def test_search_and_filters_narrow_the_rows_and_stay_in_the_url(page, user):
    tides = Session.objects.create(owner=user, function="wiki_agent", status="completed",
                                   args={"question": "What drives the Tides?"})
    tides_count = Session.objects.create(owner=user, function="slow_count", status="completed",
                                         args={"n": 3, "label": "tides"})
    Session.objects.create(owner=user, function="wiki_agent", status="error", args={"question": "volcanoes"})
    page.goto("/sessions/")
    expect(page.locator("table.sessions tbody tr")).to_have_count(3)
    page.get_by_label("Search arguments").fill("TIDES")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("table.sessions tbody tr")).to_have_count(2)
    assert "q=TIDES" in page.url
    page.get_by_label("Function").select_option("wiki_agent")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("table.sessions tbody tr")).to_have_count(1)
    expect(row(page, tides.id)).to_be_visible()
    assert "function=wiki_agent" in page.url and "q=TIDES" in page.url
    # The status counts are those of the narrowed list, and a status keeps the search.
    page.locator(".filters [data-status=error]").click()
    expect(page.locator("table.sessions tbody tr")).to_have_count(0)
    expect(page.get_by_text("No sessions match these filters")).to_be_visible()
    assert "q=TIDES" in page.url and "status=error" in page.url
    page.get_by_role("link", name="Clear").click()
    expect(page.locator("table.sessions tbody tr")).to_have_count(3)
    expect(row(page, tides_count.id)).to_be_visible()
