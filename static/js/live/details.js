// The side panel for the selected call (inputs, output or error, model exchange, usage) and the
// breadcrumb of its call path. Everything is text: model output can contain markup and stays inert.

import {clear, el, elapsedMs, formatDuration, formatTime, pretty, STATUS_ICONS} from "../dom.js";
import {forkSection} from "../rerun.js";

export function renderDetails(panel, model, id, {ceiling, onSelect}) {
  clear(panel);
  const node = model.nodes.get(id);
  if (!node) {
    panel.append(el("p", {class: "muted empty-details", text: "Select a call to see its inputs, output and model exchange."}));
    return;
  }
  panel.append(
    breadcrumb(model.path(id), onSelect),
    el("h2", {class: `details-title status-${node.status}`},
      el("span", {class: "icon", text: STATUS_ICONS[node.status] || "?"}),
      el("span", {class: "name", text: node.kind === "llm" ? `Model call${node.model ? ` · ${node.model}` : ""}` : node.name}),
      el("span", {class: `badge status-${node.status}`, text: node.status})),
    facts(node, ceiling),
  );
  if (node.truncated && node.truncated.length) {
    panel.append(el("p", {class: "notice", text: `Too large to stream in full: ${node.truncated.join(", ")}. ` +
      "The database keeps the whole value; the session export has it."}));
  }
  if (node.error) panel.append(section("Error", el("pre", {class: "error-text", text: node.error})));
  if (node.traceback) panel.append(section("Traceback", el("pre", {class: "error-text traceback", text: node.traceback})));
  if (node.kind === "llm") appendExchange(panel, node);
  else appendCall(panel, node);
  const fork = node.status === "running" ? null : forkSection(node);
  if (fork) panel.append(fork);
}

function breadcrumb(path, onSelect) {
  const nav = el("nav", {class: "breadcrumb", "aria-label": "Call path"});
  path.forEach((node, index) => {
    if (index) nav.append(el("span", {class: "sep", "aria-hidden": "true", text: "›"}));
    const label = node.kind === "llm" ? "llm" : node.name;
    if (index === path.length - 1) nav.append(el("span", {class: "crumb current", "aria-current": "true", text: label}));
    else nav.append(el("button", {type: "button", class: "crumb", text: label, onclick: () => onSelect(node.id)}));
  });
  return nav;
}

function facts(node, ceiling) {
  const duration = node.duration_ms ?? (node.status === "running" ? elapsedMs(node.started_at) : null);
  const items = [
    ["Kind", node.kind === "llm" ? "model call" : "function call"],
    ["Seq", `#${node.seq}`],
    ["Depth", String(node.depth)],
    ["Nesting", node.kind === "code" && node.name_depth > 0 ? `${node.name_depth} of ${ceiling} (${node.name})` : null],
    ["Started", formatTime(node.started_at)],
    ["Duration", formatDuration(duration)],
    ["Model", node.model || null],
    ["Replayed", node.replayed ? "answered from the recorded run" : null],
    ["Tokens", node.usage ? usageText(node.usage) : null],
    ["Exposes", node.kind === "code" ? node.expose : null],
  ];
  const list = el("dl", {class: "facts"});
  for (const [term, value] of items) {
    if (value === null || value === "") continue;
    list.append(el("dt", {text: term}), el("dd", {text: value}));
  }
  return list;
}

function usageText(usage) {
  return Object.entries(usage).map(([key, value]) => `${key.replace(/_/g, " ")}: ${value}`).join(" · ");
}

function appendCall(panel, node) {
  panel.append(section("Inputs", el("pre", {class: "json", text: pretty(node.input ?? {})})));
  if (node.status === "running") panel.append(section("Output", el("p", {class: "muted", text: "Still running…"})));
  else if (node.output !== null && node.output !== undefined) {
    panel.append(section("Output", el("pre", {class: "json", text: pretty(node.output)})));
  }
  if (node.doc) panel.append(section("Docstring", el("pre", {class: "doc-text", text: node.doc})));
}

function appendExchange(panel, node) {
  const input = node.input || {};
  if (input.system) panel.append(section("System", el("pre", {class: "message-text", text: pretty(input.system)})));
  const messages = Array.isArray(input.messages) ? input.messages : [];
  if (messages.length) {
    const list = el("ol", {class: "exchange"});
    for (const message of messages) list.append(messageItem(message.role || "message", message.content ?? message));
    panel.append(section(`Messages (${messages.length})`, list));
  }
  const output = node.output;
  if (output !== null && output !== undefined) {
    const reply = el("ol", {class: "exchange"});
    const text = typeof output === "object" ? output.text : output;
    if (text) reply.append(messageItem("assistant", text));
    for (const call of (output.tool_calls || [])) reply.append(messageItem(`tool call · ${call.name || call.function?.name || "?"}`, call.arguments ?? call.input ?? call));
    panel.append(section("Reply", reply));
  } else if (node.status === "running") {
    panel.append(section("Reply", el("p", {class: "muted", text: "Waiting for the model…"})));
  }
  if (Array.isArray(input.tools) && input.tools.length) {
    const names = input.tools.map((tool) => tool.name || tool.function?.name).filter(Boolean).join(", ");
    panel.append(section("Tools offered", el("p", {class: "mono small", text: names})));
  }
}

function messageItem(role, content) {
  return el("li", {class: `message role-${String(role).split(" ")[0]}`},
    el("div", {class: "role", text: role}),
    el("pre", {class: "message-text", text: contentText(content)}));
}

/** Message content as a person reads it: text blocks as their text, anything else as JSON. */
function contentText(content) {
  if (typeof content === "string") return pretty(content);
  if (Array.isArray(content) && content.every((block) => block && typeof block === "object")) {
    return pretty(content.map((block) => (block.type === "text" && typeof block.text === "string" ? block.text : JSON.stringify(block, null, 2))).join("\n\n"));
  }
  return pretty(content);
}

function section(title, body) {
  return el("section", {class: "detail-section"}, el("h3", {text: title}), body);
}
