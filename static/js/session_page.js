// The live session page: wires the stream to the tree model, the windowed tree, the gauge, the header
// and the details panel. Changes are applied to the model as they arrive and drawn once per frame.

import {terminalStatuses} from "./dom.js";
import {renderDetails} from "./live/details.js";
import {depthStats, renderGauge} from "./live/gauge.js";
import {SessionHeader} from "./live/header.js";
import {SessionStream} from "./live/stream.js";
import {TreeModel} from "./live/tree_model.js";
import {TreeView} from "./live/tree_view.js";

const root = document.getElementById("session-page");
const ceiling = Number(root.dataset.ceiling);
const terminal = terminalStatuses(root);
const find = (role) => root.querySelector(`[data-role=${role}]`);

const model = new TreeModel();
const header = new SessionHeader(root, root.dataset.stopUrl, terminal);
const followBox = find("follow");
const chip = find("new-chip");
const detailsPanel = find("details");
// revealPending: new nodes arrived that following should bring into view (a finished run opened later
// starts at the top instead).
const state = {selectedId: null, follow: true, unseen: 0, frame: 0, detailsDirty: false, revealPending: false,
  snapshotFollows: true};

const view = new TreeView(find("tree"), find("canvas"), model, {
  ceiling,
  onSelect: select,
  onUserScroll: () => setFollow(false),
});

function select(id) {
  setFollow(false); // following would scroll the chosen call out of view with the next new node
  state.selectedId = id;
  model.reveal(id);
  view.select(id);
  view.scrollToRow(model.rowOf(id));
  state.detailsDirty = true;
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
  renderGauge(find("gauge"), depthStats(model.nodes), {ceiling, onSelect: select});
  find("tree-count").textContent = `${model.size} node${model.size === 1 ? "" : "s"}`;
  if (state.detailsDirty) {
    state.detailsDirty = false;
    renderDetails(detailsPanel, model, state.selectedId, {ceiling, onSelect: select});
  }
  renderChip();
}

function applyNode(node, follow = true) {
  const change = model.upsert(node);
  if (change === "added" && follow) {
    state.revealPending = true;
    if (!state.follow) state.unseen += 1;
  }
  if (change && node.id === state.selectedId) state.detailsDirty = true;
}

const stream = new SessionStream(root.dataset.wsPath, {
  onSnapshot(message) {
    if (message.since_rev === null) {
      const keep = {collapsed: model.collapsed, openGroups: model.openGroups};
      model.reset();
      Object.assign(model, keep); // a full resync keeps what the user opened and closed
    }
    // Opening a finished run starts at the top; a running one (or a catch-up) follows its newest node.
    state.snapshotFollows = !(terminal.has(message.session.status) && message.since_rev === null);
    for (const node of message.nodes) applyNode(node, state.snapshotFollows);
    header.update(message.session);
    if (state.selectedId !== null) state.detailsDirty = true;
    schedule();
  },
  onSnapshotMore(message) {
    for (const node of message.nodes) applyNode(node, state.snapshotFollows);
    schedule();
  },
  onChanges(items) {
    for (const item of items) {
      if (item.type === "node") applyNode(item.node);
      else if (item.type === "session") header.update(item.session);
    }
    schedule();
  },
  onState(connection, detail) {
    header.setConnection(connection, detail);
  },
}, Number(root.dataset.heartbeatS) || 5);

followBox.addEventListener("change", () => setFollow(followBox.checked));
chip.addEventListener("click", () => setFollow(true));
find("expand-all").addEventListener("click", () => { model.expandAll(); schedule(); });
find("collapse-all").addEventListener("click", () => { model.collapseAll(); setFollow(false); schedule(); });
window.addEventListener("resize", schedule);
// Running durations tick; the rows' signatures change once a second, so only those rows redraw.
setInterval(() => {
  if (header.session && !terminal.has(header.session.status)) {
    header.render();
    schedule();
  }
}, 1000);

stream.start();
