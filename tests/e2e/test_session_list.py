"""The session list in a real browser: rows change live, new runs appear, warnings show, filters and
the search narrow it, on a phone each run is a card whose Stop works, and a Stop pressed while its row
is redrawn still stops the run."""
import re

from playwright.sync_api import expect

from dag.live.durations import format_duration
from dag.models import Session
from dag.pages.session_list import SESSIONS_PER_PAGE

from .support import launch_from_form


def open_list(page, query=""):
    """The list page, marked so that a reload (which would drop the mark) is noticed."""
    page.goto(f"/sessions/{query}")
    page.evaluate("() => { window.notReloaded = true; }")


def not_reloaded(page):
    return page.evaluate("() => window.notReloaded === true")


def row(page, session_id):
    return page.locator(f"tr[data-session='{session_id}']")


def box_of(locator) -> dict:
    """The element's box, found and measured in the page in one step: a live row may be redrawn between
    the two steps of Playwright's bounding_box or evaluate, which then measure the detached element."""
    boxes = locator.evaluate_all("(elements) => elements.map((element) => {"
                                 " const {x, y, width, height} = element.getBoundingClientRect();"
                                 " return {x, y, width, height}; })")
    assert len(boxes) == 1, boxes
    return boxes[0]


def status_count(page, status):
    """A status filter's count ("" is All)."""
    return page.locator(f".filters [data-status='{status}'] .count")


def stop_in_another_tab(page, session_id):
    """Press Stop on the session's own page, in a second tab, and wait for the run to be cancelled."""
    other_tab = page.context.new_page()
    other_tab.goto(f"/sessions/{session_id}/")
    other_tab.get_by_role("button", name="Stop").click()
    expect(other_tab.locator("[data-role=session-status]")).to_have_text("cancelled", timeout=30000)
    other_tab.close()


def test_a_row_changes_from_running_to_completed_without_a_reload(page):
    # Long enough to be running still when the list shows it, however slow the machine; Stop on the
    # session page (another tab) ends it, and the list, not reloaded, follows.
    session_id = launch_from_form(page, "slow_count", {"n": 200, "delay_s": 0.5})
    open_list(page)
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("running")
    expect(row(page, session_id).locator("[data-role=duration]")).to_have_text("running")
    stop_in_another_tab(page, session_id)
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("cancelled", timeout=30000)
    api = page.request.get(f"/api/sessions/{session_id}/").json()
    expect(row(page, session_id).locator("[data-role=nodes]")).to_have_text(str(api["node_count"]))
    # The API's wall time, as the shared formatter writes it ("687 ms", "3.05 s").
    expect(row(page, session_id).locator("[data-role=duration]")).to_have_text(format_duration(api["wall_ms"]))
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
    expect(status_count(page, "")).to_have_text("1")
    expect(status_count(page, "completed")).to_have_text("1")
    assert not_reloaded(page)


def test_a_run_pushed_off_the_first_page_moves_the_counts_when_it_ends_and_stays_off(page, user):
    session_id = launch_from_form(page, "slow_count", {"n": 200, "delay_s": 0.5})
    open_list(page)
    expect(row(page, session_id).locator("[data-role=status]")).to_have_text("running")
    # A page's worth of newer runs: the list's resync brings them and pushes the running one off.
    Session.objects.bulk_create([Session(owner=user, function="slow_count", status="completed", args={"n": i})
                                 for i in range(SESSIONS_PER_PAGE)])
    rows = page.locator("table.sessions tbody tr")
    expect(row(page, session_id)).to_have_count(0, timeout=30000)
    expect(rows).to_have_count(SESSIONS_PER_PAGE)
    expect(status_count(page, "")).to_have_text(str(SESSIONS_PER_PAGE + 1))
    expect(status_count(page, "running")).to_have_text("1")
    # Its end reaches the list: its count moves from running to cancelled; it is no new run, and no row.
    stop_in_another_tab(page, session_id)
    expect(status_count(page, "cancelled")).to_have_text("1", timeout=30000)
    expect(status_count(page, "running")).to_have_text("0")
    expect(status_count(page, "")).to_have_text(str(SESSIONS_PER_PAGE + 1))
    expect(status_count(page, "completed")).to_have_text(str(SESSIONS_PER_PAGE))
    expect(row(page, session_id)).to_have_count(0)
    expect(rows).to_have_count(SESSIONS_PER_PAGE)
    assert not_reloaded(page)


def test_runaway_agents_row_says_how_many_calls_were_refused(page):
    session_id = launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})
    expect(page.locator("[data-role=session-status]")).to_have_text("error", timeout=30000)
    warning = page.request.get(f"/api/sessions/{session_id}/").json()["warning"]
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
        box = box_of(button)
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 36, (name, box)
    card.get_by_role("button", name="Stop").click()
    expect(card.locator("[data-role=status]")).to_have_text("cancelled", timeout=30000)
    expect(card.locator("[data-role=duration]")).not_to_have_text("running")
    expect(status_count(page, "running")).to_have_text("0")
    expect(status_count(page, "cancelled")).to_have_text("1")
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


def test_a_stop_pressed_while_its_row_is_redrawn_still_stops_the_run(page):
    session_id = launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.1})
    open_list(page)
    card = row(page, session_id)
    nodes = card.locator("[data-role=nodes]")
    # Two digits from here on for a while: the row's cells keep their widths, so Stop stays under the pointer.
    expect(nodes).to_have_text(re.compile(r"^[1-9][0-9]$"), timeout=30000)
    box = box_of(card.get_by_role("button", name="Stop"))
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    expect(nodes).not_to_have_text(nodes.text_content(), timeout=30000)  # redrawn while pressed
    page.mouse.up()
    expect(card.locator("[data-role=status]")).to_have_text("cancelled", timeout=30000)


def test_a_list_socket_refused_after_it_opened_is_retried_with_a_growing_backoff(page):
    # The server opens every socket before it closes one past the cap (4429), so an open alone must
    # not start the backoff again. A stand-in socket opens then closes so; the page's reconnect timers
    # are recorded (and run at once) instead of waited for.
    page.add_init_script("""
      window.reconnectDelays = [];
      const realSetTimeout = window.setTimeout.bind(window);
      window.setTimeout = (fn, ms, ...rest) => {
        if (typeof fn === "function" && String(fn).includes("this.connect()")) {
          window.reconnectDelays.push(ms);
          return window.reconnectDelays.length < 8 ? realSetTimeout(fn, 0, ...rest) : 0;
        }
        return realSetTimeout(fn, ms, ...rest);
      };
      class RefusingSocket {
        constructor(url) {
          this.url = url;
          this.readyState = 0;
          realSetTimeout(() => {
            this.readyState = 1;
            this.onopen?.();
            this.readyState = 3;
            this.onclose?.({code: 4429, reason: "too many live views open"});
          }, 0);
        }
        send() {}
        close() {}
      }
      RefusingSocket.OPEN = 1;
      window.WebSocket = RefusingSocket;
    """)
    page.goto("/sessions/")
    expect(page.locator("body")).to_be_visible()
    for _ in range(500):
        delays = page.evaluate("() => window.reconnectDelays")
        if len(delays) >= 6:
            break
        page.wait_for_timeout(20)
    assert delays[:6] == [500, 1000, 2000, 4000, 8000, 10000]
