// The recursion gauge: the deepest call so far (its depth) and, for the function nearest the per-name ceiling,
// its nesting against that ceiling; refused calls and budget breaches are counted and linked.

import {clear, el, refusedByBudget} from "../dom.js";

/** Depth figures of the nodes so far (one pass; cheap next to a frame's layout). */
export function depthStats(nodes) {
  const stats = {deepest: 0, leader: null, refused: [], budget: []};
  for (const node of nodes.values()) {
    if (node.kind !== "code") continue;
    if (node.status === "refused") {
      (refusedByBudget(node) ? stats.budget : stats.refused).push(node);
      continue; // a refused call never ran: its would-be nesting is not a reached depth
    }
    if (node.depth > stats.deepest) stats.deepest = node.depth;
    if (!stats.leader || node.name_depth > stats.leader.name_depth ||
        (node.name_depth === stats.leader.name_depth && node.seq > stats.leader.seq)) {
      stats.leader = node;
    }
  }
  return stats;
}

export function renderGauge(box, stats, {ceiling, onSelect}) {
  const leader = stats.leader;
  // Redrawn only when a figure changed: the box is a live region (a rebuild is announced) and holds
  // buttons (a rebuild drops keyboard focus), and the page draws every second while a run is going.
  const signature = [ceiling, stats.deepest, leader?.id, leader?.name_depth, ...[stats.refused, stats.budget]
    .map((marked) => `${marked.length}:${marked[0]?.id}`)].join("|");
  if (box.dataset.signature === signature) return;
  box.dataset.signature = signature;
  clear(box);
  const level = leader ? leader.name_depth : 0;
  const atCeiling = level >= ceiling;
  box.classList.toggle("at-ceiling", atCeiling);
  box.dataset.level = String(level);
  box.dataset.refused = String(stats.refused.length);

  const cells = el("div", {class: "gauge-cells", role: "meter", "aria-valuemin": "0", "aria-valuemax": String(ceiling),
    "aria-valuenow": String(level), "aria-label": "Nesting of the deepest function against the ceiling"});
  for (let i = 1; i <= ceiling; i++) {
    cells.append(el("span", {class: `cell${i <= level ? " filled" : ""}${i === ceiling ? " ceiling" : ""}`}));
  }
  box.append(
    el("div", {class: "gauge-figure"},
      el("span", {class: "gauge-label", text: "Call depth",
        title: "How deep the deepest call is nested from the run's entry call (level 1), plain tool calls included"}),
      el("strong", {class: "gauge-value", dataset: {role: "deepest"}, text: String(stats.deepest)})),
    el("div", {class: "gauge-main"},
      el("span", {class: "gauge-label"}, "Nearest the ceiling: ",
        leader ? el("button", {type: "button", class: "link mono", text: leader.name, onclick: () => onSelect(leader.id)}) : "—"),
      el("div", {class: "gauge-row"}, cells,
        el("strong", {class: "gauge-value", dataset: {role: "name-depth"}, text: `${level} / ${ceiling}`}),
        atCeiling ? el("span", {class: "flag flag-ceiling", text: "at ceiling"}) : null)),
  );
  const marks = el("div", {class: "gauge-marks"});
  if (stats.refused.length) {
    marks.append(el("button", {type: "button", class: "flag flag-refused", dataset: {role: "refused"},
      text: `⊗ ${stats.refused.length} refused by the depth guard`, onclick: () => onSelect(stats.refused[0].id)}));
  }
  if (stats.budget.length) {
    marks.append(el("button", {type: "button", class: "flag flag-budget", dataset: {role: "budget-breach"},
      text: `⊗ ${stats.budget.length} over budget`, onclick: () => onSelect(stats.budget[0].id)}));
  }
  if (!stats.refused.length && !stats.budget.length) marks.append(el("span", {class: "muted small", text: "no refused calls"}));
  box.append(marks);
}
