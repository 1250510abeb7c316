// The live session page: wires the stream to the tree model, the windowed tree and timeline, the gauge,
// the header (its totals and warnings), search and the details panel. Changes are applied to the model
// as they arrive and drawn once per frame; every figure is computed from the model, which holds every node.

import {confirmAndDelete} from "./delete_sessions.js";
import {terminalStatuses} from "./dom.js";
import {linkedSeq, nodeIdOfSeq, showCallAddress} from "./live/call_link.js";
import {renderDetails} from "./live/details.js";
import {debugFlag, watchFrameGaps} from "./live/frame_gaps.js";
import {depthStats, renderGauge} from "./live/gauge.js";
import {SessionHeader} from "./live/header.js";
import {CallSearch} from "./live/search.js";
import {RunSteering} from "./live/steering.js";
import {SessionStream} from "./live/stream.js";
import {TimelineView} from "./live/timeline_view.js";
import {renderTotals, runTotals, warningText} from "./live/totals.js";
import {wireReplayButton} from "./rerun.js";
import {wireShareButton} from "./share_links.js";
import {TreeModel} from "./live/tree_model.js";
import {TreeView} from "./live/tree_view.js";

const root = document.getElementById("session-page");
const ceiling = Number(root.dataset.ceiling);
const terminal = terminalStatuses(root);
const find = (role) => root.querySelector(`[data-role=${role}]`);

const model = new TreeModel();
const header = new SessionHeader(root, root.dataset.stopUrl, terminal);
const steering = new RunSteering(root, terminal);
wireReplayButton(root);
wireShareButton(root);
const followBox = find("follow");
const deleteButton = find("delete");
const chip = find("new-chip");
const detailsPanel = find("details");
// revealPending: new nodes arrived that following should bring into view (a finished run opened later
// starts at the top instead).
// loading: the first full snapshot is still arriving ({total} nodes coming); totalsDirty: the model
// changed since the totals, the warning and the search's matches were worked out.
const state = {selectedId: null, follow: true, unseen: 0, frame: 0, detailsDirty: false, revealPending: false,
  snapshotFollows: true, loading: null, totalsDirty: true};
const pane = root.querySelector("[data-view]");
const search = new CallSearch(model);

const view = new TreeView(find("tree"), find("canvas"), model, {
  ceiling,
  onSelect: select,
  onUserScroll: () => setFollow(false),
});

const timeline = new TimelineView(find("timeline"), model, {
  onSelect: select,
  // The whole run: from its start to its end, or to now while it runs.
  extent() {
    const session = header.session;
    const start = session?.started_at ? Date.parse(session.started_at) : model.firstStart;
    if (session && !terminal.has(session.status)) return [start, null];
    const end = session?.finished_at ? Date.parse(session.finished_at) : model.lastEnd;
    return [start, Math.max(end ?? 0, model.lastEnd ?? 0) || null];
  },
  onRangeChange(text) { find("timeline-range").textContent = text; },
});

function select(id) {
  if (id === null || !model.nodes.has(id)) return;
  setFollow(false); // following would scroll the chosen call out of view with the next new node
  state.selectedId = id;
  showCallAddress(model.nodes.get(id).seq);
  model.reveal(id);
  view.select(id);
  view.scrollToRow(model.rowOf(id));
  timeline.select(id);
  state.detailsDirty = true;
  schedule();
}

// The call the address points at (#call-<seq>): selected once it has arrived.
let pendingSeq = linkedSeq();
function selectLinkedCall() {
  if (pendingSeq === null) return;
  const id = nodeIdOfSeq(model.nodes, pendingSeq);
  if (id === null) return;
  pendingSeq = null;
  select(id);
}

function showView(name) {
  pane.dataset.view = name;
  find("tree").hidden = name !== "tree";
  find("timeline").hidden = name !== "timeline";
  find("show-tree").setAttribute("aria-pressed", String(name === "tree"));
  find("show-timeline").setAttribute("aria-pressed", String(name === "timeline"));
  if (name === "timeline" && state.selectedId !== null) timeline.select(state.selectedId);
  schedule();
}

function setFollow(on) {
  if (state.follow === on) return;
  state.follow = on;
  followBox.checked = on;
  if (on) {
    state.unseen = 0;
    revealNewest();
  }
  renderChip();
}

function revealNewest() {
  if (model.newestId === null) return;
  view.render();
  view.scrollToRow(model.rowOf(model.newestId));
  view.render();
}

function renderChip() {
  // Nothing is out of sight in a tree that fits its box, and nothing more comes once the run has ended.
  if (!view.canScroll() || (header.session && terminal.has(header.session.status))) state.unseen = 0;
  chip.hidden = state.follow || state.unseen === 0;
  chip.textContent = `${state.unseen} new ↓`;
}

function schedule() {
  if (!state.frame) state.frame = requestAnimationFrame(draw);
}

function draw() {
  state.frame = 0;
  view.render();
  if (state.follow && state.revealPending) revealNewest();
  state.revealPending = false;
  timeline.render();
  renderGauge(find("gauge"), depthStats(model.nodes), {ceiling, onSelect: select});
  renderCount();
  renderSummary();
  if (state.detailsDirty) {
    state.detailsDirty = false;
    renderDetails(detailsPanel, model, state.selectedId, {ceiling, onSelect: select});
  }
  renderChip();
  noteTimings();
}

/** "loading 4,000 of 10,000" while the first snapshot arrives, then "10000 nodes". */
function renderCount() {
  find("tree-count").textContent = state.loading
    ? `loading ${model.size.toLocaleString("en-US")} of ${state.loading.total.toLocaleString("en-US")}`
    : `${model.size} node${model.size === 1 ? "" : "s"}`;
}

/** The header's totals and warning, and the search's matches, after the model changed. */
function renderSummary() {
  if (!state.totalsDirty || state.loading) return; // half a snapshot would show wrong totals
  state.totalsDirty = false;
  const totals = runTotals(model.nodes);
  renderTotals(find("totals"), totals, header.session);
  header.setWarning(warningText(totals.refusals));
  if (search.query) {
    search.refresh();
    find("search-count").textContent = search.label();
  }
}

// When the first rows and the whole model were drawn (ms since navigation), for bench/bench_render.py.
function noteTimings() {
  if (!root.dataset.firstRowMs && model.size) root.dataset.firstRowMs = performance.now().toFixed(0);
  if (!root.dataset.modelMs && state.loading === false) root.dataset.modelMs = performance.now().toFixed(0);
}

function applyNode(node, follow = true) {
  const change = model.upsert(node);
  if (change === "added" && follow) {
    state.revealPending = true;
    if (!state.follow) state.unseen += 1;
  }
  if (change && node.id === state.selectedId) state.detailsDirty = true;
  if (change) steering.noteNode(node);
  if (change) {
    state.totalsDirty = true;
    search.stale = true;
  }
}

function showSession(session) {
  header.update(session);
  steering.update(header.session);
  if (deleteButton) deleteButton.hidden = !terminal.has(header.session.status); // stopped before it is deleted
  state.totalsDirty = true; // the wall time moves with the session
}

/** Follow a full snapshot's arrival: "loading 4,000 of 10,000" until its last frame is in. */
function trackLoading(message, first) {
  if (first && message.since_rev === null) state.loading = message.more ? {total: message.session.node_count} : false;
  else if (state.loading && !message.more) state.loading = false;
  if (state.loading === false) state.totalsDirty = true;
  renderCount(); // at once, not at the next frame: each part of the snapshot shows its progress
}

const stream = new SessionStream(root.dataset.wsPath, {
  onSnapshot(message) {
    if (message.since_rev === null) {
      const keep = {collapsed: model.collapsed, openGroups: model.openGroups};
      model.reset();
      Object.assign(model, keep); // a full resync keeps what the user opened and closed
      header.session = null; // the server's picture replaces the page's, even at a lower revision
    }
    // Opening a finished run starts at the top; a running one (or a catch-up) follows its newest node.
    state.snapshotFollows = !(terminal.has(message.session.status) && message.since_rev === null);
    for (const node of message.nodes) applyNode(node, state.snapshotFollows);
    showSession(message.session);
    trackLoading(message, true);
    if (state.selectedId !== null) state.detailsDirty = true;
    selectLinkedCall();
    schedule();
  },
  onSnapshotMore(message) {
    for (const node of message.nodes) applyNode(node, state.snapshotFollows);
    trackLoading(message, false);
    selectLinkedCall();
    schedule();
  },
  onChanges(items) {
    for (const item of items) {
      if (item.type === "node") applyNode(item.node);
      else if (item.type === "session") showSession(item.session);
    }
    selectLinkedCall();
    schedule();
  },
  onState(connection, detail) {
    header.setConnection(connection, detail);
    if (connection === "deleted" && deleteButton) deleteButton.hidden = true;
  },
}, Number(root.dataset.heartbeatS) || 5);

followBox.addEventListener("change", () => setFollow(followBox.checked));
deleteButton?.addEventListener("click", async () => {
  deleteButton.disabled = true;
  const outcome = await confirmAndDelete([deleteButton.dataset.deleteUrl], "this session");
  deleteButton.disabled = false;
  if (outcome?.deleted.length) location.assign(deleteButton.dataset.listUrl);
  else if (outcome) header.showOutcome(`Delete failed: ${outcome.failed[0][1]}`, "error");
});
chip.addEventListener("click", () => setFollow(true));
find("expand-all").addEventListener("click", () => { model.expandAll(); schedule(); });
find("collapse-all").addEventListener("click", () => { model.collapseAll(); setFollow(false); schedule(); });
window.addEventListener("resize", schedule);
window.addEventListener("hashchange", () => {
  pendingSeq = linkedSeq();
  selectLinkedCall();
});
find("show-tree").addEventListener("click", () => showView("tree"));
find("show-timeline").addEventListener("click", () => showView("timeline"));
find("zoom-in").addEventListener("click", () => timeline.zoom(0.5));
find("zoom-out").addEventListener("click", () => timeline.zoom(2));
find("zoom-reset").addEventListener("click", () => timeline.setRange(null));

const searchInput = find("search-input");
function stepSearch(direction) {
  const id = direction === 0 ? search.setQuery(searchInput.value) : search.step(direction);
  find("search-count").textContent = search.label();
  if (id !== null) select(id);
}
searchInput.addEventListener("input", () => stepSearch(0));
searchInput.addEventListener("keydown", (event) => {
  if (event.key !== "Enter") return;
  event.preventDefault();
  stepSearch(event.shiftKey ? -1 : 1);
});
find("search").addEventListener("submit", (event) => event.preventDefault());
find("search-next").addEventListener("click", () => stepSearch(1));
find("search-previous").addEventListener("click", () => stepSearch(-1));
find("jump-to-error").addEventListener("click", () => {
  const id = search.firstProblem();
  if (id === null) find("search-count").textContent = "no errors";
  else select(id);
});
if (debugFlag("frames")) watchFrameGaps(root, find("timeline-scroll"));

// Running durations tick; the rows' signatures change once a second, so only those rows redraw.
setInterval(() => {
  if (header.session && !terminal.has(header.session.status)) {
    header.render();
    state.totalsDirty = true;
    schedule();
  }
}, 1000);

stream.start();
