"""Deleting sessions in a real browser: the session page's Delete (after a confirmation) goes back to the
list; a row's Delete and "Delete picked" remove the rows; a second tab on a deleted session says so."""
from playwright.sync_api import expect

from dag.models import Session


def ended(user, function="wiki_agent") -> Session:
    return Session.objects.create(owner=user, function=function, status=Session.Status.COMPLETED)


def test_the_session_pages_delete_asks_then_deletes_and_another_tab_is_told(page, user):
    session = ended(user)
    other_tab = page.context.new_page()
    other_tab.goto(f"/sessions/{session.pk}/")
    expect(other_tab.locator("[data-role=connection]")).to_have_text("ended")
    page.goto(f"/sessions/{session.pk}/")

    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("button", name="Delete")).to_be_enabled()
    assert Session.objects.filter(pk=session.pk).exists()  # "Cancel" deletes nothing

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/sessions/")
    assert not Session.objects.filter(pk=session.pk).exists()
    expect(other_tab.locator("[data-role=connection]")).to_have_text("deleted")
    expect(other_tab.locator("[data-role=outcome]")).to_contain_text("This session was deleted.")
    other_tab.close()


def test_a_running_session_shows_no_delete(page, user):
    session = Session.objects.create(owner=user, function="wiki_agent", status=Session.Status.RUNNING)
    page.goto(f"/sessions/{session.pk}/")
    expect(page.locator("[data-role=session-status]")).to_have_text("running")
    expect(page.locator("[data-role=delete]")).to_be_hidden()
    page.goto("/sessions/")
    expect(page.locator(f"tr[data-session='{session.pk}'] [data-role=delete]")).to_have_count(0)


def test_list_rows_are_deleted_one_by_one_or_as_picked(page, user):
    one, two, three, kept = (ended(user) for _ in range(4))
    page.goto("/sessions/")
    page.on("dialog", lambda dialog: dialog.accept())

    page.locator(f"tr[data-session='{one.pk}'] [data-role=delete]").click()
    expect(page.locator(f"tr[data-session='{one.pk}']")).to_have_count(0)

    for session in (two, three):
        page.locator(f"tr[data-session='{session.pk}'] [data-role=pick]").check()
    expect(page.locator("[data-role=picked-count]")).to_have_text("2 picked")
    page.get_by_role("button", name="Delete picked").click()
    expect(page.locator("table.sessions tbody tr")).to_have_count(1)
    expect(page.locator("[data-role=bulk]")).to_be_hidden()
    assert list(Session.objects.values_list("pk", flat=True)) == [kept.pk]
    expect(page.locator(".filters [data-status=''] .count")).to_have_text("1")
