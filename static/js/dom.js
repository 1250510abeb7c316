// Small DOM helpers. Text from users and models only ever goes in through textContent.

import {serverNow} from "./server_clock.js";

/** Create an element: el("span", {class: "x", text: "hi", title: "t", dataset: {id: 1}}, child...) */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export const STATUS_ICONS = {
  queued: "○", running: "●", completed: "✓", error: "✕", cancelled: "⊘", refused: "⊗",
  interrupted: "⚠", cancelling: "◌", awaiting_approval: "✋", paused: "❚❚",
};

/** The session statuses that are final, as the server lists them in the page (`data-terminal`). */
export function terminalStatuses(element) {
  return new Set((element?.dataset.terminal || "").split(",").filter(Boolean));
}

/** "$0.0123" below a dollar (a model call often costs a fraction of a cent), "$12.34" above
 * (dag/recording/totals.py format_usd). */
export function formatUsd(amount) {
  return amount < 1 ? `$${amount.toFixed(4)}` : `$${amount.toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2})}`;
}

/** A call a delegation budget refused: the server says what refused it in `refusal` ("budget:llm_calls"). */
export function refusedByBudget(node) {
  return node.status === "refused" && (node.refusal || "").startsWith("budget:");
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const seconds = Math.round(ms / 1000); // rounded before splitting: 119.7 s is "2 m 0 s", not "1 m 60 s"
  return `${Math.floor(seconds / 60)} m ${seconds % 60} s`;
}

/** Milliseconds from an ISO start to an ISO end (or the server's now, for something still running). */
export function elapsedMs(startIso, endIso) {
  if (!startIso) return null;
  const end = endIso ? Date.parse(endIso) : serverNow();
  return Math.max(0, end - Date.parse(startIso));
}

export function formatTokens(usage) {
  if (!usage) return "";
  const input = usage.input_tokens ?? usage.prompt_tokens ?? 0;
  const output = usage.output_tokens ?? usage.completion_tokens ?? 0;
  if (!input && !output) return "";
  return `${input}→${output} tok`;
}

/** A one-line preview of any JSON value, at most `max` characters. */
export function preview(value, max = 90) {
  if (value === null || value === undefined) return "";
  let text;
  if (typeof value === "string") text = value;
  else if (typeof value === "object" && !Array.isArray(value)) {
    text = Object.entries(value).map(([k, v]) => `${k}=${compact(v)}`).join(", ");
  } else text = compact(value);
  text = text.replace(/\s+/g, " ");
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function compact(value) {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 59)}…` : value);
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** Pretty JSON (or the string itself), cut at `max` characters so a huge output cannot freeze a tab. */
export function pretty(value, max = 200000) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (text === undefined) return "";
  return text.length > max ? `${text.slice(0, max)}\n… (${text.length - max} more characters)` : text;
}

export function formatTime(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

/** The date and the time ("Dec 7, 2026, 05:28:15 AM"): a session's start, which may be any day. */
export function formatDateTime(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString([], {year: "numeric", month: "short", day: "numeric", hour: "2-digit",
    minute: "2-digit", second: "2-digit"});
}
