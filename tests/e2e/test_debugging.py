"""Debugging a run in a real browser: a failed call's traceback in the details panel, Replay, "Fork from
here" on a model call (which opens the fork compared with its original), and comparing two picked rows."""
import re

from playwright.sync_api import expect

from dag.models import Node, Session

from .support import launch_from_form

SESSION_URL = re.compile(r"/sessions/([0-9a-f-]{36})/$")


def role(page, name):
    return page.locator(f"[data-role={name}]")


def finished_run(page, function, fields, status="completed"):
    session_id = launch_from_form(page, function, fields)
    expect(role(page, "session-status")).to_have_text(status, timeout=30000)
    return session_id


def select_node(page, node: Node):
    page.locator(f".tree-canvas .row[data-id='{node.pk}']").click()


def test_the_details_panel_shows_a_failed_calls_traceback_as_text(page):
    session_id = finished_run(page, "runaway_agent", {"task": "Summarise the notes"}, status="error")
    failed = Node.objects.filter(session_id=session_id, kind="code", status="error").order_by("seq").first()
    select_node(page, failed)
    traceback = page.locator(".details-pane pre.traceback")
    expect(traceback).to_contain_text(re.compile(r'examples/functions\.py", line \d+, in runaway_agent'))
    expect(traceback).to_contain_text("frames of the openprogram runtime")


def test_replay_opens_the_replayed_run_with_the_same_result(page):
    original = finished_run(page, "wiki_agent", {"question": "How does the recursion guard work?"})
    role(page, "replay").click()
    page.wait_for_url(lambda url: SESSION_URL.search(url) and original not in url)
    expect(role(page, "session-status")).to_have_text("completed", timeout=30000)
    expect(role(page, "lineage")).to_contain_text("Replay of")
    expect(page.locator(".tree-canvas .row .flag-replayed").first).to_have_text("replayed")
    replay = Session.objects.get(pk=SESSION_URL.search(page.url).group(1))
    assert replay.replay_of_id is not None and str(replay.replay_of_id) == original
    assert replay.result == Session.objects.get(pk=original).result


def test_fork_from_here_opens_the_fork_compared_with_its_original(page):
    original = finished_run(page, "wiki_agent", {"question": "How does the recursion guard work?"})
    last_call = Node.objects.filter(session_id=original, kind="llm").order_by("seq").last()
    select_node(page, last_call)
    role(page, "fork-reply").fill("An edited final answer.")
    role(page, "fork").click()
    page.wait_for_url(re.compile(r"/sessions/compare/\?a="))
    fork = Session.objects.get(forked_from_id=original)
    assert fork.forked_from_node == last_call.seq
    # The page reloads itself until the fork has ended; then the changed answer is marked.
    expect(page.locator("[data-role=compare-summary]")).not_to_contain_text("still going", timeout=30000)
    changed = page.locator(f"tr[data-path='wiki_agent/llm'] dd.differs").filter(has_text="An edited final answer.")
    expect(changed).to_have_count(1)


def test_two_picked_rows_open_their_comparison(page):
    first = finished_run(page, "slow_count", {"n": 2, "delay_s": 0})
    second = finished_run(page, "slow_count", {"n": 3, "delay_s": 0})
    page.goto("/sessions/")
    page.locator(f"tr[data-session='{first}'] [data-role=pick]").check()
    expect(role(page, "compare-picked")).to_be_hidden()
    page.locator(f"tr[data-session='{second}'] [data-role=pick]").check()
    role(page, "compare-picked").click()
    page.wait_for_url(f"**/sessions/compare/?a={first}&b={second}")
    expect(page.locator("tr[data-path='slow_count/count_step'][data-differences='missing']")).to_have_count(1)
