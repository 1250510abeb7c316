"""The live view in a real browser: launch from forms, watch the tree grow, stop a run, stay safe and
fast with hostile text and ten thousand nodes."""
import re

from playwright.sync_api import expect

from dag.models import Node, Session

from .support import SESSION_URL, launch_from_form, make_big_session


def session_status(page):
    return page.locator("[data-role=session-status]")


def rows(page, css=""):
    return page.locator(f"[data-role=canvas] .row{css}")


def record_texts(page, selector):
    """Start recording every text the element shows; returns a function reading the list so far."""
    key = f"texts{abs(hash(selector))}"
    page.evaluate("""([selector, key]) => {
      const element = document.querySelector(selector);
      window[key] = [element.textContent];
      new MutationObserver(() => window[key].push(element.textContent))
        .observe(element, {childList: true, characterData: true, subtree: true});
    }""", [selector, key])
    return lambda: page.evaluate("(key) => window[key]", key)


def test_wiki_agent_nodes_appear_and_complete(page):
    launch_from_form(page, "wiki_agent", {"question": "How does the recursion guard work?"})
    expect(session_status(page)).to_have_text("completed")
    # Connected, and the run is over: the badge no longer says "live".
    expect(page.locator("[data-role=connection]")).to_have_text("ended")
    expect(rows(page, ".kind-code .name").first).to_have_text("wiki_agent")
    expect(rows(page, ".kind-llm").first).to_be_visible()
    expect(rows(page, ".status-running")).to_have_count(0)
    assert rows(page, ".status-completed").count() >= 3  # the entry call, model calls, note tools
    rows(page, ".kind-llm").first.click()
    expect(page.locator("[data-role=details] .breadcrumb .crumb").first).to_have_text("wiki_agent")
    expect(page.locator("[data-role=details]")).to_contain_text("Messages")
    page.screenshot(path="/tmp/e2e-wiki-agent.png")


def test_runaway_agent_shows_five_frames_the_sixth_refused_twice_and_the_gauge_at_the_ceiling(page):
    # The first refusal goes back to the model; it insists, and the second refusal ends the run.
    launch_from_form(page, "runaway_agent", {"task": "Summarise the notes"})
    expect(session_status(page)).to_have_text("error")
    page.click("[data-role=expand-all]")
    frames = rows(page, ".kind-code:not(.status-refused)")
    expect(frames).to_have_count(5)
    for level in range(1, 6):
        expect(frames.nth(level - 1).locator(".depth")).to_have_text(f"d{level} · {level}/5")
    refused = rows(page, ".status-refused")
    expect(refused).to_have_count(2)
    expect(refused.locator(".name")).to_have_text(["runaway_agent"] * 2)
    gauge = page.locator("[data-role=gauge]")
    expect(gauge).to_have_class(re.compile("at-ceiling"))
    expect(gauge.locator("[data-role=name-depth]")).to_have_text("5 / 5")
    expect(gauge.locator("[data-role=refused]")).to_contain_text("2 refused")
    gauge.locator("[data-role=refused]").click()
    details = page.locator("[data-role=details]")
    expect(details).to_contain_text("RecursionError")
    # The call path: the five frames, then the refused call.
    expect(details.locator(".breadcrumb .crumb")).to_have_text(["runaway_agent"] * 6)
    page.screenshot(path="/tmp/e2e-runaway.png")


def test_slow_count_is_stopped_from_the_page(page):
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.1})
    expect(rows(page, ".kind-code").nth(2)).to_be_visible()  # a few counts are in
    seen = record_texts(page, "[data-role=session-status]")  # so a brief `cancelling` is not missed
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled")
    seen = seen()
    assert "cancelling" in seen and seen.index("cancelling") < seen.index("cancelled")
    expect(page.locator("[data-role=stop]")).to_be_hidden()
    expect(rows(page, ".status-running")).to_have_count(0)
    assert Session.objects.get(pk=SESSION_URL.match(page.url).group(1)).status == "cancelled"


def test_a_running_session_is_stopped_from_the_list(page):
    session_id = launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.1})
    page.goto("/sessions/?status=running")
    row = page.locator(f"tr[data-session='{session_id}']")
    row.locator("[data-role=stop]").click()
    expect(row.locator("[data-role=status]")).to_have_text("cancelled")


def make_session(user, **fields):
    return Session.objects.create(owner=user, function=fields.pop("function", "demo"), **fields)


def test_model_output_with_markup_is_shown_as_text(page, user):
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    session = make_session(user, function="wiki_agent", status="completed", rev=2, node_count=2, result=hostile)
    code = Node.objects.create(session=session, seq=0, kind="code", name="wiki_agent", status="completed",
                               input={"question": hostile}, output=hostile, rev=1)
    Node.objects.create(session=session, seq=1, parent=code, kind="llm", name="llm", status="completed",
                        input={"messages": [{"role": "user", "content": hostile}]},
                        output={"text": hostile, "tool_calls": []}, rev=2)
    page.goto(f"/sessions/{session.id}/")
    rows(page, ".kind-llm").click()
    details = page.locator("[data-role=details]")
    expect(details).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.locator("[data-role=outcome]")).to_contain_text("<script>")
    assert page.locator("main script, main img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_ten_thousand_nodes_open_and_render(page, user):
    session = make_big_session(user)
    page.goto(f"/sessions/{session.id}/")
    expect(page.locator("[data-role=tree-count]")).to_have_text("10000 nodes")
    # Runs of eleven `work` calls fold into groups with status counts; only rows near the viewport exist.
    group = rows(page, ".group").first
    expect(group.locator(".name")).to_have_text("work ×11")
    expect(group.locator(".count.status-error")).to_have_text("✕ 1")
    assert rows(page).count() < 150
    page.locator("[data-role=tree]").evaluate("tree => { tree.scrollTop = tree.scrollHeight; }")
    expect(rows(page, ".kind-code .name").last).to_have_text("work")
    page.click("[data-role=expand-all]")
    page.locator("[data-role=tree]").evaluate("tree => { tree.scrollTop = tree.scrollHeight / 2; }")
    expect(rows(page, ".kind-code").first).to_be_visible()
    assert rows(page).count() < 150
    # Every group is open now, all the way down: its members are drawn right after it.
    expect(rows(page, ".group[aria-expanded=true]").first).to_be_visible()
    assert rows(page, ".group[aria-expanded=false]").count() == 0
    # The canvas is as tall as all 10,000 rows plus the 792 open group headers (8 under each child).
    height = page.locator("[data-role=canvas]").evaluate("canvas => canvas.offsetHeight")
    assert height == (10000 + 99 * 8) * 28
    page.screenshot(path="/tmp/e2e-10k.png")


def test_following_stops_when_the_user_scrolls_and_a_chip_counts_new_nodes(page):
    page.set_viewport_size({"width": 1400, "height": 520})
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.05})
    expect(rows(page, ".group")).to_have_count(1)  # more than ten count_step calls folded
    # Unfolded, the calls make a tree taller than its box (a wheel over a tree that fits moves nothing, and
    # leaves following on: test_first_hour.py); the press on the group stopped following, so follow again.
    rows(page, ".group").click()
    page.locator("[data-role=follow]").check()
    page.locator("[data-role=tree]").hover()
    page.mouse.wheel(0, -200)
    expect(page.locator("[data-role=follow]")).not_to_be_checked()
    chip = page.locator("[data-role=new-chip]")
    expect(chip).to_have_text(re.compile(r"^\d+ new ↓$"))
    chip.click()
    expect(chip).to_be_hidden()
    expect(page.locator("[data-role=follow]")).to_be_checked()
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled")


def test_a_dropped_connection_reconnects_from_the_last_revision(page):
    urls, routes = [], []

    def relay(route):
        urls.append(route.url)
        routes.append(route)
        route.connect_to_server()

    page.route_web_socket(re.compile(r".*/ws/sessions/.*"), relay)
    # Long enough to be running still when the socket comes back, whatever the load (Stop ends it).
    session_id = launch_from_form(page, "slow_count", {"n": 200, "delay_s": 0.5})
    expect(rows(page, ".kind-code").nth(3)).to_be_visible()
    badges = record_texts(page, "[data-role=connection]")
    routes[0].close(code=1011, reason="test drops the socket")
    expect(page.locator("[data-role=connection]")).to_have_text("live")
    texts = badges()
    shown = [text for i, text in enumerate(texts) if i == 0 or texts[i - 1] != text]
    assert shown[:3] == ["live", "reconnecting…", "live"]
    assert len(urls) >= 2 and "since_rev=" in urls[1]
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled", timeout=30000)
    # Every call once, neither lost nor doubled by the reconnect.
    page.click("[data-role=expand-all]")
    expect(rows(page, ".status-running")).to_have_count(0)
    expect(rows(page, ".kind-code")).to_have_count(Node.objects.filter(session_id=session_id).count())


def test_after_a_full_snapshot_below_its_revision_the_stream_goes_on_from_the_snapshots(page):
    # The page knows revision 100 and reconnects; the server's database (restored from a backup) is at
    # 10, so it answers with a full snapshot at 10. The changes after it must apply, not be dropped as
    # old. Driven with a stand-in socket: the real server cannot be made to go back in time mid-test.
    page.goto("/sessions/")
    seen = page.evaluate("""async () => {
      const {SessionStream} = await import("/static/js/live/stream.js");
      const path = "/ws/sessions/00000000-0000-4000-8000-000000000000/";
      const sockets = [], RealWebSocket = window.WebSocket;
      window.WebSocket = class { constructor(url) { this.url = url; sockets.push(this); } close() {} };
      try {
        const applied = [];
        const stream = new SessionStream(path, {
          onSnapshot() {}, onSnapshotMore() {}, onState() {},
          onChanges(items) { applied.push(...items.map((item) => item.rev)); },
        }, 5);
        stream.rev = 100;
        stream.connect();
        const socket = sockets.find((one) => one.url.includes(path));
        const send = (message) => socket.onmessage({data: JSON.stringify(message)});
        const now = new Date().toISOString();
        send({type: "snapshot", since_rev: null, rev: 10, now, more: false, session: {rev: 10}, nodes: []});
        send({type: "node", rev: 11, node: {id: 1, rev: 11}});
        send({type: "batch", rev: 12, items: [{type: "node", rev: 12, node: {id: 2, rev: 12}}]});
        send({type: "heartbeat", rev: 12, now});
        clearTimeout(stream.watchdog);
        return {url: socket.url, rev: stream.rev, applied, streamSockets: sockets.filter((one) => one.url.includes(path)).length};
      } finally {
        window.WebSocket = RealWebSocket;
      }
    }""")
    assert seen["url"].endswith("?since_rev=100")
    assert {key: seen[key] for key in ("rev", "applied", "streamSockets")} == {"rev": 12, "applied": [11, 12], "streamSockets": 1}


def test_a_budget_breach_is_marked_on_the_node_and_in_the_gauge(page, user):
    session = make_session(user, function="research_agent", status="error", rev=3, node_count=2,
                           error="BudgetExceeded: max_llm_calls 3 reached",
                           budget={"max_depth": None, "max_llm_calls": 3, "max_tokens": 5000, "timeout_s": None},
                           budget_spend={"depth": 2, "llm_calls": 3, "tokens": 1200, "elapsed_s": 0.4})
    entry = Node.objects.create(session=session, seq=0, kind="code", name="research_agent", status="error",
                                depth=1, name_depth=1, input={"topic": "t"}, rev=3)
    # What refused it is read from `refusal`, never guessed from the error's words (here in French).
    Node.objects.create(session=session, seq=1, parent=entry, kind="code", name="wiki_agent", status="refused",
                        depth=2, name_depth=1, input={"question": "q"}, rev=2, refusal="budget:llm_calls",
                        error="Plafond atteint : 3 appels au modèle")
    page.goto(f"/sessions/{session.id}/")
    breach = rows(page, ".budget-breach")
    expect(breach.locator(".name")).to_have_text("wiki_agent")
    expect(breach.locator(".flag-refused")).to_have_text("budget")
    gauge = page.locator("[data-role=gauge]")
    expect(gauge.locator("[data-role=budget-breach]")).to_contain_text("1 over budget")
    expect(gauge.locator("[data-role=refused]")).to_have_count(0)  # not a depth refusal
    budget = page.locator("[data-role=budget]")
    expect(budget.locator(".budget-item.over")).to_have_text("model calls 3 / 3")
    expect(budget).to_contain_text("tokens 1200 / 5000")
    expect(page.locator("[data-role=outcome]")).to_contain_text("BudgetExceeded")


def test_the_keyboard_walks_the_tree_into_folded_groups(page, user):
    session = make_session(user, function="slow_count", status="completed", rev=13, node_count=13)
    entry = Node.objects.create(session=session, seq=0, kind="code", name="slow_count", status="completed",
                                depth=1, name_depth=1, input={"n": 12}, rev=1)
    for i in range(1, 13):
        Node.objects.create(session=session, seq=i, parent=entry, kind="code", name="count_step",
                            status="completed", depth=2, input={"i": i}, rev=1 + i)
    page.goto(f"/sessions/{session.id}/")
    expect(rows(page, ".group .name")).to_have_text("count_step ×12")
    page.locator("[data-role=tree]").focus()
    assert page.locator("[data-role=tree]").evaluate("(tree) => getComputedStyle(tree).outlineStyle") != "none"
    page.keyboard.press("ArrowDown")  # nothing selected yet: the first row
    expect(rows(page, ".is-selected .name")).to_have_text("slow_count")
    page.keyboard.press("ArrowDown")  # into the folded group, which unfolds
    expect(rows(page, ".group")).to_have_attribute("aria-expanded", "true")
    expect(page.locator("[data-role=details] .facts")).to_contain_text("#1")
    # Screen readers follow the selection through the focused tree, and hear each row's level.
    active = page.locator("[data-role=tree]").get_attribute("aria-activedescendant")
    expect(page.locator(f"#{active}")).to_have_class(re.compile("is-selected"))
    expect(page.locator(f"#{active}")).to_have_attribute("aria-level", "3")
    expect(rows(page, ".group")).to_have_attribute("aria-level", "2")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")  # the open group's header is passed over
    expect(rows(page, ".is-selected .name")).to_have_text("slow_count")


def test_the_gauge_keeps_focus_while_a_run_ticks(page, user):
    from django.utils import timezone

    session = make_session(user, function="slow_count", status="running", rev=1, node_count=1,
                           started_at=timezone.now())
    Node.objects.create(session=session, seq=0, kind="code", name="slow_count", status="running", depth=1,
                        name_depth=1, input={"n": 3}, started_at=timezone.now(), rev=1)
    page.goto(f"/sessions/{session.id}/")
    leader = page.locator("[data-role=gauge] button.link")
    expect(leader).to_have_text("slow_count")
    leader.focus()
    meta = page.locator("[data-role=session-meta]")
    before = meta.text_content()
    expect(meta).not_to_have_text(before)  # the page's once-a-second redraw has happened
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
    assert page.evaluate("() => document.activeElement.textContent") == "slow_count"


def test_a_selected_call_stays_in_view_while_new_nodes_arrive(page):
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.05})
    expect(rows(page, ".group")).to_have_count(1)
    page.click("[data-role=expand-all]")  # the group row itself is redrawn with every new count
    rows(page, ".kind-code").nth(2).click()
    shown = int(page.locator("[data-role=tree-count]").text_content().split()[0])
    page.wait_for_function("(n) => parseInt(document.querySelector('[data-role=tree-count]').textContent) > n",
                           arg=shown + 40)  # more rows than the pane shows
    expect(rows(page, ".is-selected")).to_be_in_viewport()
    expect(page.locator("[data-role=follow]")).not_to_be_checked()
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled")


def test_the_gauge_figures_stay_on_one_line_on_a_narrow_screen(page, user):
    session = make_session(user, function="runaway_agent", status="completed", rev=6, node_count=6)
    parent = None
    for level in range(1, 6):
        parent = Node.objects.create(session=session, seq=level - 1, parent=parent, kind="code", name="runaway_agent",
                                     status="completed", depth=level, name_depth=level, input={}, rev=level)
    Node.objects.create(session=session, seq=5, parent=parent, kind="code", name="runaway_agent", status="refused",
                        depth=6, name_depth=6, input={}, rev=6, error="RecursionError: runaway_agent nested 6 times")
    page.set_viewport_size({"width": 700, "height": 900})
    page.goto(f"/sessions/{session.id}/")
    gauge = page.locator("[data-role=gauge]")
    expect(gauge.locator("[data-role=name-depth]")).to_have_text("5 / 5")
    for element in [gauge.locator("[data-role=name-depth]"), gauge.locator(".flag-ceiling")]:
        lines = element.evaluate("""(element) => {
          const range = document.createRange();
          range.selectNodeContents(element);
          return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
        }""")
        assert lines == 1


def test_a_failed_stop_on_the_list_says_why(page, user):
    session = make_session(user, function="slow_count", status="running", rev=1)
    page.route("**/api/sessions/*/stop/", lambda route: route.fulfill(
        status=503, content_type="application/json", body='{"detail": "the server is restarting"}'))
    page.goto("/sessions/")
    row = page.locator(f"tr[data-session='{session.id}']")
    row.locator("[data-role=stop]").click()
    expect(row.locator("[role=alert]")).to_have_text(re.compile(r"Stop failed: .*\(503\): the server is restarting"))
    expect(row.locator("[data-role=status]")).to_have_text("running")
    expect(row.locator("[data-role=stop]")).to_be_enabled()
    page.js_errors.clear()  # the browser logs the 503 itself


def test_durations_read_as_minutes_and_seconds(page):
    page.goto("/sessions/")
    formatted = page.evaluate("""async () => {
      const {formatDuration} = await import("/static/js/dom.js");
      return [320, 4250, 125000, 119700].map(formatDuration);
    }""")
    assert formatted == ["320 ms", "4.25 s", "2 m 5 s", "2 m 0 s"]


def test_a_stop_that_failed_can_be_retried_from_the_page(page, user):
    session = make_session(user, function="slow_count", status="running", rev=1)
    page.route("**/api/sessions/*/stop/", lambda route: route.fulfill(
        status=503, content_type="application/json", body='{"detail": "try again"}'), times=1)
    page.goto(f"/sessions/{session.id}/")
    outcome = page.locator("[data-role=outcome]")
    page.click("[data-role=stop]")
    expect(outcome).to_contain_text("Stop failed")
    expect(session_status(page)).to_have_text("running")
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelling")
    expect(outcome).to_be_hidden()
    page.js_errors.clear()  # the browser logs the 503 itself


def test_a_busy_fold_opens_on_click(page):
    launch_from_form(page, "slow_count", {"n": 400, "delay_s": 0.05})
    group = rows(page, ".group")
    group.click()  # its counts change with every new call while the press is under way
    expect(group).to_have_attribute("aria-expanded", "true")
    page.click("[data-role=stop]")
    expect(session_status(page)).to_have_text("cancelled")
