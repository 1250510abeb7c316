"""A shared session page in a real browser: the owner's Share makes a link; a visitor who is not logged in
opens it and watches the run grow live, read-only (no Stop, Run again, Replay, Delete, Share); the owner's
"Revoke all links" closes the visitor's page, and the link no longer opens it."""
from playwright.sync_api import expect

from .support import launch_from_form
from .test_live_view import rows, session_status


def test_a_visitor_watches_a_shared_run_live_read_only_until_the_owner_revokes_it(page, browser, server_url):
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.1})
    expect(session_status(page)).to_have_text("running")
    page.get_by_role("button", name="Share").click()
    link = page.locator("[data-role=share-link]")
    expect(page.locator("[data-role=share-panel]")).to_be_visible()
    url = link.input_value()
    assert url.startswith(f"{server_url}/shared/"), url

    visitor_context = browser.new_context(base_url=server_url)  # no login
    visitor = visitor_context.new_page()
    errors = []
    visitor.on("pageerror", lambda error: errors.append(str(error)))
    try:
        visitor.goto(url)
        expect(session_status(visitor)).to_have_text("running")
        expect(rows(visitor, ".kind-code .name").first).to_have_text("slow_count")
        count = visitor.locator("[data-role=tree-count]")
        shown = count.text_content()
        expect(count).not_to_have_text(shown)  # new calls arrive without a reload: live
        expect(visitor.locator("[data-role=shared-note]")).to_have_text("Shared with you, read-only")
        for name in ("Stop", "Run again", "Replay", "Delete", "Share", "Download"):
            expect(visitor.get_by_role("button", name=name, exact=True)).to_have_count(0)
            expect(visitor.get_by_role("link", name=name, exact=True)).to_have_count(0)

        page.get_by_role("button", name="Revoke all links").click()
        expect(page.locator("[data-role=share-expiry]")).to_have_text("Every link to this session was revoked.")
        expect(visitor.locator("[data-role=outcome]")).to_contain_text("This share link was revoked or has expired.")
        assert visitor.goto(url).status == 404
    finally:
        visitor_context.close()
        page.get_by_role("button", name="Stop").click()
        expect(session_status(page)).to_have_text("cancelled")
    assert not errors, errors
