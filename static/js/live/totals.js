// A run's totals, computed in the browser from the nodes the page holds: nodes by status, model calls,
// input and output tokens, cost, and the refusals that its status alone hides. The same figures as the
// server's (dag/recording/totals.py): a refused node a delegation budget refused (dom.js
// refusedByBudget) is over budget, one refused as a repeated call (refusal "loop") is a loop, any other
// refused node was refused by the depth guard. A completed model call without `usage.cost_usd` has no
// known cost (an unpriced model): counted apart, never as 0.

import {clear, el, elapsedMs, formatDuration, formatUsd, refusedByBudget} from "../dom.js";

// The order the header lists statuses in: what is still going first, then the outcomes.
const STATUS_ORDER = ["running", "completed", "error", "refused", "cancelled", "interrupted"];

export function runTotals(nodes) {
  const counts = {};
  const usage = {llm_calls: 0, input_tokens: 0, output_tokens: 0};
  const refusals = {depth: 0, budget: 0, loop: 0};
  const cost = {known: 0, priced: 0, unknown: 0};
  for (const node of nodes.values()) {
    counts[node.status] = (counts[node.status] || 0) + 1;
    if (node.status === "refused") refusals[refusalKind(node)] += 1;
    if (node.kind === "llm") {
      usage.llm_calls += 1;
      usage.input_tokens += Number(node.usage?.input_tokens) || 0;
      usage.output_tokens += Number(node.usage?.output_tokens) || 0;
      const spent = node.usage?.cost_usd;
      if (typeof spent === "number") {
        cost.known += spent;
        cost.priced += 1;
      } else if (node.status === "completed") cost.unknown += 1;
    }
  }
  return {counts, usage, refusals, cost};
}

function refusalKind(node) {
  if (refusedByBudget(node)) return "budget";
  return node.refusal === "loop" ? "loop" : "depth";
}

/** "1 refused", "1 over budget", "2 refused · 1 over budget · 1 loop", or "" when nothing was refused. */
export function warningText(refusals) {
  const parts = [];
  if (refusals.depth) parts.push(`${refusals.depth} refused`);
  if (refusals.budget) parts.push(`${refusals.budget} over budget`);
  if (refusals.loop) parts.push(`${refusals.loop} loop${refusals.loop > 1 ? "s" : ""}`);
  return parts.join(" · ");
}

/** "$0.0120", "$0.0120 · unknown for 2 calls", "unknown for 3 calls" (dag/recording/totals.py cost_text). */
export function costText(cost) {
  const unknown = cost.unknown ? `unknown for ${cost.unknown} call${cost.unknown === 1 ? "" : "s"}` : "";
  if (!cost.priced && cost.unknown) return unknown;
  return unknown ? `${formatUsd(cost.known)} · ${unknown}` : formatUsd(cost.known);
}

const number = (n) => n.toLocaleString("en-US");

/** Fill the header's totals: one figure per `data-total` element, then the nodes by status. */
export function renderTotals(container, totals, session) {
  clear(container);
  const wall = session ? elapsedMs(session.started_at, session.finished_at) : null;
  const figures = [
    ["llm_calls", "model calls", number(totals.usage.llm_calls)],
    ["input_tokens", "tokens in", number(totals.usage.input_tokens)],
    ["output_tokens", "tokens out", number(totals.usage.output_tokens)],
    ["cost", "cost", totals.usage.llm_calls ? costText(totals.cost) : "–"],
    ["wall", "wall time", wall === null ? "–" : formatDuration(wall)],
  ];
  for (const [key, label, value] of figures) {
    container.append(el("span", {class: "total"},
      el("span", {class: "total-value", dataset: {total: key}, text: value}),
      el("span", {class: "total-label", text: ` ${label}`})));
  }
  const statuses = Object.keys(totals.counts).sort((a, b) => rank(a) - rank(b));
  const byStatus = el("span", {class: "total total-counts", "aria-label": "calls by status"});
  for (const status of statuses) {
    byStatus.append(el("span", {class: `count status-${status}`, title: `${status} calls`},
      el("span", {class: "total-value", dataset: {count: status}, text: number(totals.counts[status])}),
      ` ${status}`));
  }
  container.append(byStatus);
}

function rank(status) {
  const index = STATUS_ORDER.indexOf(status);
  return index === -1 ? STATUS_ORDER.length : index;
}
