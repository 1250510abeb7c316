"""A newcomer's first hour in a real browser: the walk from a fresh start to a run, and each rough edge
they hit (follow and its chip, a phone's refused rows, the timeline's axis, error pages, the budget panel's
wording, text areas' line breaks, Jump to error, the start's date, the API docs' way back, catalog cards,
a call's own address, dark mode and text contrast in both themes)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from dag.models import Node, Session

from .conftest import PASSWORD
from .support import ROOT, DaphneServer, launch_from_form, make_big_session

CONTRAST_CHECK = (Path(__file__).parent / "contrast.js").read_text()
PHONE = {"width": 390, "height": 844}


def tree_rows(page, css=""):
    return page.locator(f"[data-role=canvas] .row{css}")


def session_status(page):
    return page.locator("[data-role=session-status]")


def log_in(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form.login button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def themed_page(browser, server_url, scheme: str, viewport=None):
    """A page logged in as the e2e user in a browser whose system setting is `scheme` (light or dark)."""
    context = browser.new_context(base_url=server_url, viewport=viewport or {"width": 1280, "height": 900},
                                  color_scheme=scheme)
    page = context.new_page()
    log_in(page, "e2e", PASSWORD)
    return context, page


def forget_missing_page_errors(page) -> None:
    """A 404 answer is what these tests ask for; the console's note of it is not an error of the app."""
    page.js_errors[:] = [error for error in page.js_errors if "404" not in error]


# --- the walk --------------------------------------------------------------------------------------

@pytest.fixture
def fresh_install(tmp_path):
    """The app as `make run` starts it for a newcomer: an empty var dir, the first start's message, a server."""
    env = {**os.environ, "OPENPROGRAM_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "openprogram_web.settings",
           "OPENPROGRAM_LOGIN_RATE": "off", "PYTHONUNBUFFERED": "1"}
    for inherited in ("DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "OPENPROGRAM_FUNCTION_MODULES"):
        env.pop(inherited, None)
    printed = subprocess.run([sys.executable, "bin/prepare-run", "127.0.0.1", "8000"], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True).stdout
    server = DaphneServer(env, tmp_path / "daphne.log")
    yield server.url, printed
    server.stop()


def test_a_new_users_walk_from_the_first_start_to_a_run(browser, fresh_install):
    url, printed = fresh_install
    # The first start says where to go and how to log in, together.
    block = re.search(r"open: +(\S+)\n +username: (\S+)\n +password: (\S+)", printed)
    assert block and block.group(1) == "http://127.0.0.1:8000/" and block.group(2) == "local", printed
    context = browser.new_context(base_url=url, viewport={"width": 1440, "height": 900}, color_scheme="light")
    page = context.new_page()
    try:
        log_in(page, "local", block.group(3))
        # Launch from a card.
        card = page.locator(".catalog-entry[data-function=wiki_agent]")
        card.get_by_role("link", name="Run wiki_agent").click()
        page.fill("[name=question]", "How does the recursion guard work?")
        page.click("form.launch button[type=submit]")
        page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/$"))
        # Watch it end.
        expect(session_status(page)).to_have_text("completed")
        # A call's own address, opened in a new page, selects that call.
        tree_rows(page, ".kind-llm").first.click()
        call_url = page.url
        assert re.search(r"#call-\d+$", call_url)
        other = context.new_page()
        other.goto(call_url)
        expect(other.locator("[data-role=canvas] .row.is-selected")).to_have_count(1)
        seq = int(call_url.rsplit("-", 1)[1])
        expect(other.locator("[data-role=details] .facts")).to_contain_text(f"#{seq}")
        # Dark mode, from the top bar.
        other.click("[data-role=theme-toggle]")
        expect(other.locator("html")).to_have_attribute("data-theme", "dark")
        # The 404 page keeps the site around it.
        other.goto("/no-such-page/")
        expect(other.get_by_role("heading", name="Not found")).to_be_visible()
        expect(other.locator(".topnav").get_by_role("link", name="Sessions")).to_be_visible()
    finally:
        context.close()


# --- following new calls -------------------------------------------------------------------------

def test_a_wheel_over_a_tree_that_fits_does_not_stop_following(page):
    launch_from_form(page, "slow_count", {"n": 3, "delay_s": 0.3})
    expect(tree_rows(page).first).to_be_visible()
    page.locator("[data-role=tree]").dispatch_event("wheel")  # nothing to scroll: nothing moved
    expect(page.locator("[data-role=follow]")).to_be_checked()
    expect(session_status(page)).to_have_text("completed")
    expect(page.locator("[data-role=follow]")).to_be_checked()


def test_the_new_calls_chip_goes_once_the_run_has_ended(page):
    page.set_viewport_size({"width": 1400, "height": 520})  # a tree taller than its box
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.05})
    tree_rows(page, ".group").click()  # the calls, unfolded: a tree taller than its box; reading, not following
    expect(page.locator("[data-role=follow]")).not_to_be_checked()
    chip = page.locator("[data-role=new-chip]")
    expect(chip).to_be_visible()
    expect(chip).to_contain_text("new")
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled")
    expect(chip).to_be_hidden()


# --- a phone's refused rows, the timeline's axis -------------------------------------------------

def test_at_a_phones_width_refused_rows_keep_their_name_and_whole_duration(page):
    page.set_viewport_size(PHONE)
    launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})
    expect(session_status(page)).to_have_text("error")
    refused = tree_rows(page, ".status-refused")
    expect(refused).to_have_count(2)
    for index in range(2):
        row = refused.nth(index)
        row.scroll_into_view_if_needed()
        row_box, name_box = row.bounding_box(), row.locator(".name").bounding_box()
        # The row's last cell (the call's time) ends inside the row: at 390 px it was cut to "0 m".
        last_cell_box = row.locator(".duration").bounding_box()
        assert name_box["width"] >= 50, name_box  # "runaway_a…" at least, never nothing
        assert last_cell_box["x"] + last_cell_box["width"] <= row_box["x"] + row_box["width"], (last_cell_box, row_box)
        expect(row.locator(".duration")).to_have_text(re.compile(r"^\d+ ms$"))


@pytest.mark.parametrize("width", [1400, 900])
def test_the_timelines_axis_labels_never_overlap(page, user, width):
    page.set_viewport_size({"width": width, "height": 800})
    session = make_big_session(user, children=20, grandchildren=500, timed=True)  # 100 s: long labels
    page.goto(f"/sessions/{session.id}/")
    page.click("[data-role=show-timeline]")
    labels = page.locator("[data-role=timeline-axis] .tl-tick:not(.is-crowded)")
    expect(labels.last).to_have_text(re.compile(r"1 m 40 s"))
    boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
    assert len(boxes) >= 2
    for left, right in zip(boxes, boxes[1:]):
        assert left["x"] + left["width"] <= right["x"], (left, right)


# --- error pages, the API docs' way back, catalog cards --------------------------------------------

def test_the_404_page_is_in_the_sites_layout(page):
    page.goto("/sessions/00000000-0000-0000-0000-000000000000/")
    forget_missing_page_errors(page)
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    page.get_by_role("link", name="Your sessions").click()
    page.wait_for_url(re.compile(r".*/sessions/$"))


def test_the_api_docs_page_leads_back_into_the_app(page):
    page.goto("/api/docs/")
    expect(page.locator("#swagger-ui")).to_be_attached()
    page.click("[data-role=back-to-app]")
    page.wait_for_url(re.compile(r".*/$"))
    expect(page.get_by_role("heading", name="Agentic functions")).to_be_visible()


def test_catalog_cards_show_parameters_and_run(page):
    card = page.locator(".catalog-entry[data-function=slow_count]")
    expect(card.locator("[data-param=n]")).to_have_text("n integer = 10")
    expect(card.locator("[data-param=delay_s]")).to_have_text("delay_s number = 0.5")
    card.get_by_role("link", name="Run slow_count").click()
    page.wait_for_url(re.compile(r".*/functions/slow_count/$"))


# --- the session page: budget wording, line breaks, Jump to error, the start's date -----------------

def test_the_budget_panel_shows_time_as_a_duration_and_says_why_the_depths_differ(page):
    launch_from_form(page, "research_agent", {"topic": "the recursion guard"})
    expect(session_status(page)).to_have_text("completed")
    budget = page.locator("[data-role=budget]")
    expect(budget.locator("[data-dimension=elapsed_s]")).to_have_text(re.compile(r"^time [\d.]+ m?s / 2 m 0 s$"))
    expect(budget.locator("[data-dimension=depth]")).to_have_text(re.compile(r"^agentic depth \d / 3$"))
    expect(budget.locator("[data-role=budget-depth-note]")).to_contain_text("plain tools included")
    expect(page.locator("[data-role=gauge] .gauge-label").first).to_have_text("Call depth")


def test_a_text_areas_lines_reach_the_function_with_newlines_only(page, user):
    launch_from_form(page, "research_agent", {"topic": "guards", "notes": "focus on the ceiling\nskip budgets"})
    expect(session_status(page)).to_have_text("completed")
    notes = Session.objects.get(owner=user).args["notes"]
    assert notes == "focus on the ceiling\nskip budgets", repr(notes)


def test_jump_to_error_selects_the_call_that_caused_the_failure_not_the_root(page, user):
    launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})
    expect(session_status(page)).to_have_text("error")
    page.click("[data-role=jump-to-error]")
    cause = Node.objects.filter(session__owner=user, status="refused").order_by("seq").first()
    expect(tree_rows(page, ".is-selected")).to_have_class(re.compile(r"status-refused"))
    assert page.url.endswith(f"#call-{cause.seq}")


def test_the_session_page_shows_the_date_it_started(page):
    launch_from_form(page, "slow_count", {"n": 1, "delay_s": 0})
    expect(session_status(page)).to_have_text("completed")
    year = str(Session.objects.get().created_at.year)
    expect(page.locator("[data-role=session-meta]")).to_contain_text(re.compile(rf"started \w.*{year}.*\d:\d\d:\d\d"))


# --- a call's own address -------------------------------------------------------------------------

def test_a_calls_address_selects_and_scrolls_to_it_and_selecting_updates_it(page, user):
    session = make_big_session(user)  # 10,000 calls: the linked one is far below the first screen
    seq = 5_050
    page.goto(f"/sessions/{session.id}/#call-{seq}")
    selected = tree_rows(page, ".is-selected")
    expect(selected).to_be_in_viewport()
    expect(page.locator("[data-role=details] .facts")).to_contain_text(f"#{seq}")
    tree_rows(page, ":not(.is-selected):not(.group)").first.click()
    # The page changes its address once it has handled the click: waited for, not read at once.
    expect(page).to_have_url(re.compile(rf"#call-(?!{seq}$)\d+$"))


# --- dark mode and contrast -----------------------------------------------------------------------

def test_dark_mode_follows_the_system_until_the_toggle_is_remembered(browser, server_url, user):
    context, page = themed_page(browser, server_url, "dark")
    try:
        html = page.locator("html")
        expect(html).to_have_attribute("data-theme", "dark")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert sum(map(int, re.findall(r"\d+", background)[:3])) < 150, background  # dark, not only labelled so
        page.click("[data-role=theme-toggle]")
        expect(html).to_have_attribute("data-theme", "light")
        page.reload()
        expect(html).to_have_attribute("data-theme", "light")  # the choice outlives the page
        expect(page.locator("[data-role=theme-toggle]")).to_have_attribute("aria-pressed", "false")
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_meets_wcag_aa_contrast_in_both_themes(browser, server_url, user, scheme):
    context, page = themed_page(browser, server_url, scheme)
    try:
        launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})  # refused calls, errors
        expect(session_status(page)).to_have_text("error")
        run = page.url
        launch_from_form(page, "research_agent", {"topic": "guards"})  # a budget panel and a result
        expect(session_status(page)).to_have_text("completed")
        failures = {}
        for path in ["/", "/functions/research_agent/", "/sessions/", run, f"{run}#call-1", "/accounts/token/",
                     "/no-such-page/"]:
            page.goto(path)
            page.wait_for_load_state("networkidle")
            failures[path] = page.evaluate(CONTRAST_CHECK)
        page.goto(run)
        expect(session_status(page)).to_have_text("error")
        page.click("[data-role=show-timeline]")
        failures["timeline"] = page.evaluate(CONTRAST_CHECK)
        assert page.evaluate("document.documentElement.dataset.theme") == scheme
        assert not {path: found for path, found in failures.items() if found}
    finally:
        context.close()
