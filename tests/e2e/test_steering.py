"""Steering a run from its page in a real browser: approval cards (desktop and phone), Pause and Resume."""
import re

from playwright.sync_api import expect

from .support import launch_from_form
from .test_phone_layout import PHONE, assert_no_horizontal_overflow


def role(page, name):
    return page.locator(f"[data-role={name}]")


def waiting_card(page, task):
    launch_from_form(page, "careful_agent", {"task": task})
    card = role(page, "approval")
    expect(card).to_have_count(1, timeout=30000)
    return card


def test_a_waiting_call_shows_a_card_the_tree_marks_it_and_approve_runs_it(page):
    card = waiting_card(page, "<b>green</b> build")
    expect(card.locator("[data-role=approval-tool]")).to_have_text("publish_note")
    expect(card.locator("[data-role=approval-path]")).to_have_text("careful_agent › publish_note")
    # Model and user text stay text: the argument's markup is shown, never made into elements.
    expect(card.locator("[data-role=approval-arguments]")).to_contain_text('"text": "Publish a note: <b>green</b> build"')
    expect(card.locator("b")).to_have_count(0)
    expect(role(page, "session-status")).to_have_text("awaiting approval")
    expect(page).to_have_title(re.compile(r"^\(awaiting approval\) careful_agent run"))
    expect(page.locator(".row.status-awaiting_approval")).to_have_count(1)
    card.get_by_role("button", name="Approve").click()
    expect(role(page, "session-status")).to_have_text("completed", timeout=30000)
    expect(role(page, "approvals")).to_be_hidden()
    expect(role(page, "outcome")).to_contain_text("published: Publish a note: <b>green</b> build")
    expect(page).to_have_title(re.compile(r"^careful_agent run"))


def test_deny_with_a_reason_reaches_the_model(page):
    card = waiting_card(page, "red build")
    card.locator("[data-role=approval-reason]").fill("not before the release")
    card.get_by_role("button", name="Deny").click()
    expect(role(page, "session-status")).to_have_text("completed", timeout=30000)
    expect(role(page, "outcome")).to_contain_text("was denied: not before the release")
    expect(page.locator(".row.status-refused")).to_have_count(1)


def test_the_card_fits_a_phone_and_its_buttons_are_in_reach(page):
    page.set_viewport_size(PHONE)
    card = waiting_card(page, "from a phone")
    for name in ("Approve", "Deny"):
        expect(card.get_by_role("button", name=name)).to_be_in_viewport(ratio=1)
    assert_no_horizontal_overflow(page)
    card.get_by_role("button", name="Approve").click()
    expect(role(page, "session-status")).to_have_text("completed", timeout=30000)


def test_a_session_list_open_in_another_tab_says_a_run_awaits_approval(page):
    other_tab = page.context.new_page()
    other_tab.goto("/sessions/")
    waiting_card(page, "list me")
    # Live: the list was open before the run began to wait.
    expect(other_tab.locator("tr [data-role=status]").first).to_have_text("awaiting approval", timeout=30000)
    other_tab.locator("tr [data-role=stop]").first.click()
    expect(role(page, "session-status")).to_have_text("cancelled", timeout=30000)


def test_pause_and_resume_beside_stop(page):
    launch_from_form(page, "slow_count", {"n": 200, "delay_s": 0.5})
    expect(role(page, "session-status")).to_have_text("running", timeout=30000)
    page.get_by_role("button", name="Pause").click()
    expect(role(page, "session-status")).to_have_text("paused", timeout=30000)
    expect(page).to_have_title(re.compile(r"^\(paused\) slow_count run"))
    expect(page.get_by_role("button", name="Pause")).to_be_hidden()
    page.get_by_role("button", name="Resume").click()
    expect(role(page, "session-status")).to_have_text("running", timeout=30000)
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    page.get_by_role("button", name="Stop").click()
    expect(role(page, "session-status")).to_have_text("cancelled", timeout=30000)
    expect(page.get_by_role("button", name="Pause")).to_be_hidden()
    expect(page.get_by_role("button", name="Resume")).to_be_hidden()
