"""The session page's views and tools in a real browser: the timeline, the run totals and warnings in
the header, search over every call (also those not in the page), jump to error, the download, the
loading progress of a large session and the live badge."""
import json
import re
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from playwright.sync_api import expect

from dag.models import Node, Session

from .support import launch_from_form, make_big_session


def role(page, name):
    return page.locator(f"[data-role={name}]")


def nodes_of(page, session_id):
    response = page.request.get(f"/api/sessions/{session_id}/nodes/")
    assert response.ok
    return response.json()


def expected_totals(nodes):
    """The totals as the API defines them, worked out here from the nodes the API lists."""
    llm = [node for node in nodes if node["kind"] == "llm"]
    return {
        "counts": dict(Counter(node["status"] for node in nodes)),
        "usage": {"llm_calls": len(llm),
                  "input_tokens": sum((node["usage"] or {}).get("input_tokens", 0) for node in llm),
                  "output_tokens": sum((node["usage"] or {}).get("output_tokens", 0) for node in llm)},
    }


def shown_number(locator) -> int:
    return int(locator.text_content().replace(",", ""))


def finished_run(page, function, fields, status="completed"):
    session_id = launch_from_form(page, function, fields)
    expect(role(page, "session-status")).to_have_text(status, timeout=30000)
    return session_id


def long_run(page):
    """A run that goes on far longer than any test waits for a state of it (200 counts, 0.5 s each):
    whatever the machine's load, it is still running until the test presses Stop."""
    return launch_from_form(page, "slow_count", {"n": 200, "delay_s": 0.5})


def stop(page):
    page.get_by_role("button", name="Stop").click()
    expect(role(page, "session-status")).to_have_text("cancelled", timeout=30000)


def shown_counts(page) -> dict:
    return {element.get_attribute("data-count"): shown_number(element)
            for element in role(page, "totals").locator("[data-count]").all()}


def test_the_timeline_shows_a_bar_per_call_and_selecting_one_shows_the_call(page):
    session_id = finished_run(page, "wiki_agent", {"question": "How does the recursion guard work?"})
    nodes = nodes_of(page, session_id)
    expect(role(page, "tree-count")).to_have_text(f"{len(nodes)} nodes")
    page.get_by_role("button", name="Timeline").click()
    expect(role(page, "tree")).to_be_hidden()
    bars = page.locator("[data-role=timeline-canvas] .tl-bar")
    expect(bars).to_have_count(len(nodes))
    for node in nodes:  # one bar per call, coloured by its status and kind
        bar = page.locator(f".tl-bar[data-id='{node['id']}']")
        expect(bar).to_have_class(re.compile(f"status-{node['status']}.*kind-{node['kind']}"))
    # Bars lie within the track and nested calls start no earlier than the entry call.
    track = page.locator(".tl-track").first.bounding_box()
    entry = page.locator(f".tl-bar[data-id='{nodes[0]['id']}']").bounding_box()
    for index in range(len(nodes)):
        box = bars.nth(index).bounding_box()
        assert track["x"] - 1 <= box["x"] and box["x"] + box["width"] <= track["x"] + track["width"] + 1
        assert box["x"] >= entry["x"] - 1
    llm = next(node for node in nodes if node["kind"] == "llm")
    page.locator(f".tl-bar[data-id='{llm['id']}']").click()
    expect(role(page, "details").locator(".details-title")).to_contain_text("Model call")
    expect(page.locator(".tl-row.is-selected")).to_have_attribute("data-id", str(llm["id"]))
    # Back in the tree the same call is selected.
    page.get_by_role("button", name="Tree").click()
    expect(page.locator("[data-role=canvas] .row.is-selected")).to_have_attribute("data-id", str(llm["id"]))


def test_the_timeline_zooms_to_a_dragged_range_and_back(page):
    session_id = finished_run(page, "slow_count", {"n": 6, "delay_s": 0.05})
    nodes = nodes_of(page, session_id)
    page.get_by_role("button", name="Timeline").click()
    bars = page.locator("[data-role=timeline-canvas] .tl-bar")
    expect(bars).to_have_count(7)
    range_label = role(page, "timeline-range")
    expect(range_label).to_have_text("")
    last = page.locator(".tl-bar").last
    wide = last.bounding_box()["x"]
    track = page.locator(".tl-track").first.bounding_box()
    # Drag across the last third of the run: the last call's bar moves left and grows.
    drag_across(page, track, 0.66, 0.99)
    expect(range_label).not_to_have_text("")
    assert last.bounding_box()["x"] < wide
    # The first count_step's bar (nodes[1]; the entry call spans the whole run) now lies before the
    # range: not drawn, its row still there.
    expect(page.locator(f".tl-bar[data-id='{nodes[1]['id']}']")).to_have_class(re.compile("is-outside"))
    expect(page.locator(f".tl-bar[data-id='{nodes[0]['id']}']")).not_to_have_class(re.compile("is-outside"))
    page.get_by_role("button", name="Whole run").click()
    expect(range_label).to_have_text("")
    expect(page.locator(".tl-bar.is-outside")).to_have_count(0)
    page.get_by_role("button", name="Zoom in").click()
    expect(range_label).not_to_have_text("")
    page.get_by_role("button", name="Zoom out").click()
    expect(range_label).to_have_text("")  # zoomed back out to the whole run
    # Zoomed out from a range at the start, the wider range still begins at the run's start (no
    # negative times before it).
    drag_across(page, track, 0.02, 0.2)
    expect(range_label).not_to_have_text("")
    page.get_by_role("button", name="Zoom out").click()
    expect(range_label).to_have_text(re.compile(r"^0 ms – \d"))


def drag_across(page, track, low, high):
    """Drag over the bars from `low` to `high`, shares of the track's width."""
    y = track["y"] + track["height"] / 2
    page.mouse.move(track["x"] + track["width"] * low, y)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] * (low + high) / 2, y, steps=5)
    page.mouse.move(track["x"] + track["width"] * high, y, steps=5)
    page.mouse.up()


def test_runaway_agent_has_refused_bars_and_its_header_warns(page):
    session_id = finished_run(page, "runaway_agent", {"task": "Summarise the notes"}, status="error")
    nodes = nodes_of(page, session_id)
    refused = [node for node in nodes if node["status"] == "refused"]
    assert refused
    warning = f"· {len(refused)} refused"
    expect(role(page, "session-warning")).to_have_text(warning)
    expect(page.locator(".session-head h1")).to_contain_text(f"error {warning}")
    page.get_by_role("button", name="Timeline").click()
    marked = page.locator(".tl-bar.is-refused")
    expect(marked).to_have_count(len(refused))
    for node in refused:
        bar = page.locator(f".tl-bar[data-id='{node['id']}']")
        expect(bar).to_have_attribute("aria-label", re.compile(r"runaway_agent: refused"))
    expect(page.locator(".tl-mark").first).to_have_text("⊗ refused")


def test_a_budget_refusal_reads_over_budget_in_the_header(page, user):
    session = Session.objects.create(owner=user, function="demo", status="completed", rev=3, node_count=3)
    entry = Node.objects.create(session=session, seq=0, kind="code", name="demo", status="completed", depth=1,
                                name_depth=1, input={}, rev=1)
    Node.objects.create(session=session, seq=1, parent=entry, kind="code", name="helper", status="refused",
                        depth=2, name_depth=1, input={}, rev=2, refusal="budget:llm_calls")
    Node.objects.create(session=session, seq=2, parent=entry, kind="code", name="demo", status="refused",
                        depth=2, name_depth=2, input={}, rev=3, refusal="depth")
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "session-warning")).to_have_text("· 1 refused · 1 over budget")
    expect(role(page, "session-status")).to_have_text("completed")


def test_the_header_totals_equal_the_api(page):
    session_id = finished_run(page, "research_agent", {"topic": "recursion guards"})
    nodes = nodes_of(page, session_id)
    expected = expected_totals(nodes)
    api = page.request.get(f"/api/sessions/{session_id}/").json()
    assert api["counts"] == expected["counts"] and api["usage"] == expected["usage"]
    totals = role(page, "totals")
    for key, value in expected["usage"].items():
        expect(totals.locator(f"[data-total={key}]")).to_have_text(f"{value:,}")
    assert shown_counts(page) == expected["counts"]
    assert expected["usage"]["llm_calls"] > 0 and expected["usage"]["input_tokens"] > 0
    session = Session.objects.get(pk=session_id)
    wall_ms = (session.finished_at - session.started_at).total_seconds() * 1000
    wall = totals.locator("[data-total=wall]").text_content()
    assert re.fullmatch(r"\d+ ms|[\d.]+ s", wall)
    assert abs(float(wall.split()[0]) * (1 if wall.endswith("ms") else 1000) - wall_ms) <= max(1, wall_ms * 0.01)


def test_totals_follow_a_running_run(page):
    session_id = long_run(page)
    # While it runs: the entry call and the count_step waiting its delay_s are running, and the
    # finished count_steps add up.
    expect(role(page, "totals").locator("[data-count=running]")).to_have_text("2")
    expect(role(page, "totals").locator("[data-count=completed]")).to_be_attached()
    stop(page)
    expect(role(page, "totals").locator("[data-count=running]")).to_have_count(0)
    # Once it ended, the totals are those of every call it made, as the API lists them.
    expected = expected_totals(nodes_of(page, session_id))["counts"]
    assert "running" not in expected
    expect(role(page, "totals").locator("[data-count=cancelled]")).to_have_text(f"{expected['cancelled']:,}")
    assert shown_counts(page) == expected


def test_search_finds_a_call_that_is_not_in_the_page_and_steps_through_matches(page):
    finished_run(page, "slow_count", {"n": 2100, "delay_s": 0})
    expect(role(page, "tree-count")).to_have_text("2101 nodes")
    rows = page.locator("[data-role=canvas] .row")
    assert rows.count() < 150  # windowed: most calls have no row
    expect(page.locator("[data-role=canvas] .row .args", has_text="i=1234,")).to_have_count(0)
    search = page.get_by_role("searchbox", name="Find calls")
    search.fill("1234")
    expect(role(page, "search-count")).to_have_text("1 of 1")
    selected = page.locator("[data-role=canvas] .row.is-selected")
    expect(selected.locator(".args")).to_contain_text("i=1234,")
    expect(selected).to_be_in_viewport()
    expect(role(page, "details").locator(".details-title")).to_contain_text("count_step")
    search.fill("count_step")
    expect(role(page, "search-count")).to_have_text("1 of 2,100")
    expect(selected.locator(".args")).to_contain_text("i=1,")
    page.get_by_role("button", name="Next match").click()
    expect(role(page, "search-count")).to_have_text("2 of 2,100")
    expect(selected.locator(".args")).to_contain_text("i=2,")
    page.get_by_role("button", name="Previous match").click()
    page.get_by_role("button", name="Previous match").click()  # wraps around to the last
    expect(role(page, "search-count")).to_have_text("2,100 of 2,100")
    expect(selected.locator(".args")).to_contain_text("i=2100,")
    expect(selected).to_be_in_viewport()
    search.press("Enter")  # wraps forward to the first
    expect(role(page, "search-count")).to_have_text("1 of 2,100")
    search.fill("no call says this")
    expect(role(page, "search-count")).to_have_text("no matches")


def test_jump_to_error_selects_the_first_failed_call(page, user):
    session = make_big_session(user, timed=True)
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "tree-count")).to_have_text("10000 nodes")
    first_error = Node.objects.filter(session=session, status="error").order_by("seq").first()
    page.get_by_role("button", name="Jump to error").click()
    selected = page.locator("[data-role=canvas] .row.is-selected")
    expect(selected).to_have_attribute("data-id", str(first_error.id))
    expect(selected).to_have_class(re.compile("status-error"))
    expect(selected).to_be_in_viewport()
    expect(role(page, "details").locator(".badge")).to_have_text("error")
    # The timeline shows the same call selected, among only the rows in its view.
    page.get_by_role("button", name="Timeline").click()
    selected_bar = page.locator(".tl-row.is-selected .tl-bar")
    expect(selected_bar).to_have_attribute("data-id", str(first_error.id))
    expect(selected_bar).to_be_in_viewport()
    assert page.locator(".tl-row").count() < 150
    # Scrolled to the end, the last call's bar (10 ms of a 99 s run: the bars' least width) is at the end.
    page.locator("[data-role=timeline-scroll]").evaluate("(box) => { box.scrollTop = box.scrollHeight; }")
    last = Node.objects.filter(session=session).order_by("-seq").first()
    last_bar = page.locator(f".tl-bar[data-id='{last.id}']")
    expect(last_bar).to_be_visible()
    track = page.locator(".tl-track").first.bounding_box()
    bar = last_bar.bounding_box()
    assert abs(bar["x"] - (track["x"] + track["width"])) <= 4


def test_the_timeline_axis_lines_up_with_the_bars_beside_a_scrollbar(page_with_scrollbars, user):
    page = page_with_scrollbars
    session = make_big_session(user, timed=True)
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "tree-count")).to_have_text("10000 nodes")
    page.get_by_role("button", name="Timeline").click()
    expect(page.locator(".tl-bar").first).to_be_visible()
    scroller = role(page, "timeline-scroll")
    assert scroller.evaluate("(box) => box.offsetWidth - box.clientWidth") > 0  # a scrollbar takes width
    # The axis's track spans what the bars' tracks span, so a tick stands over the time it names.
    axis = page.locator(".tl-axis-track").bounding_box()
    track = page.locator(".tl-track").first.bounding_box()
    assert abs(axis["x"] - track["x"]) <= 1 and abs(axis["width"] - track["width"]) <= 1, (axis, track)


def test_the_download_saves_the_session_as_json(page):
    session_id = finished_run(page, "wiki_agent", {"question": "Who wrote the guard?"})
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download").click()
    download = download_info.value
    assert download.suggested_filename == f"wiki_agent-{session_id}.json"
    document = json.loads(open(download.path()).read())
    assert document["session"]["id"] == session_id
    assert [node["id"] for node in document["nodes"]] == [node["id"] for node in nodes_of(page, session_id)]
    # The header names what "Run again" repeats, and links the API docs.
    run_again = role(page, "run-again")
    expect(run_again).to_contain_text(f"Run again · {session_id[:8]}")
    expect(run_again).to_have_attribute("href", re.compile(f"from={session_id}"))
    expect(page.get_by_role("link", name="API docs")).to_have_attribute("href", "/api/docs/")


def test_the_live_badge_turns_off_when_the_run_ends(page):
    long_run(page)
    badge = role(page, "connection")
    expect(badge).to_have_text("live")
    expect(badge).to_have_class(re.compile("conn-live"))
    stop(page)
    expect(badge).to_have_text("ended")
    expect(badge).not_to_have_class(re.compile("conn-live"))


def test_a_large_session_says_how_much_is_loaded_until_all_is(page, user):
    session = make_big_session(user)
    # Record every text the count shows from its first change on (set up before the page's script runs).
    page.add_init_script("""
      window.__counts = [];
      document.addEventListener("DOMContentLoaded", () => {
        const count = document.querySelector("[data-role=tree-count]");
        new MutationObserver(() => window.__counts.push(count.textContent))
          .observe(count, {childList: true, characterData: true, subtree: true});
      });
    """)
    page.goto(f"/sessions/{session.id}/")
    expect(role(page, "tree-count")).to_have_text("10000 nodes")
    texts = page.evaluate("() => window.__counts")
    loading = [text for text in texts if text.startswith("loading")]
    assert loading and all(re.fullmatch(r"loading [\d,]+ of 10,000", text) for text in loading)
    assert texts[-1] == "10000 nodes"
    shown = [int(text.split()[1].replace(",", "")) for text in loading]
    assert shown == sorted(shown) and shown[0] < 10000


def running_bar_and_track_ends(page, timeout_s: float = 30) -> tuple[float, float]:
    """The right ends of a running bar and of its track, read in one go: a live run's rows are drawn again
    as "now" steps on (every 250 ms), so two separate reads could measure two different drawings, or an
    element already replaced (Playwright then finds no box)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ends = page.evaluate("""() => {
          const bar = document.querySelector("[data-role=timeline-canvas] .tl-bar.status-running");
          return bar && [bar.getBoundingClientRect().right, bar.closest(".tl-track").getBoundingClientRect().right];
        }""")
        if ends is not None:
            return ends
        assert time.monotonic() < deadline, "no running bar in the timeline"
        time.sleep(0.05)


def test_the_timeline_of_a_running_run_grows_and_running_bars_reach_now(page):
    long_run(page)
    page.get_by_role("button", name="Timeline").click()
    bars = page.locator("[data-role=timeline-canvas] .tl-bar")
    # The entry call and at least two count_steps: new bars arrive without a reload.
    expect(bars.nth(2)).to_be_attached()
    expect(page.locator(".tl-bar.status-running").first).to_be_visible()
    # A running call's bar ends at now, the right end of a live run's window.
    bar_end, track_end = running_bar_and_track_ends(page)
    assert abs(bar_end - track_end) <= 2
    stop(page)
    expect(page.locator(".tl-bar.status-running")).to_have_count(0)


def test_a_running_run_is_timed_by_the_servers_clock_not_the_browsers(page):
    # The browser's clock an hour behind the server's, which stamped the run's start: by the browser's
    # own clock the run would not have begun yet, and its time so far would stay at 0 ms.
    page.clock.install(time=datetime.now(timezone.utc) - timedelta(hours=1))
    long_run(page)
    meta = role(page, "session-meta")
    expect(meta).to_contain_text("running for")
    expect(meta).not_to_contain_text("running for 0 ms")
    # The live run's timeline runs to the server's now too, not to a moment before the run began.
    page.get_by_role("button", name="Timeline").click()
    end_of_axis = page.locator(".tl-axis-track .tl-tick.last")
    expect(end_of_axis).to_be_visible()
    expect(end_of_axis).not_to_have_text(re.compile(r"^[01] ms$"))
    stop(page)
