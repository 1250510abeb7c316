// Replaying and forking a session from the page: the header's Replay button and the model call's
// "Fork from here" form in the details panel. Both start a new session through the API and open it:
// a replay its own page, a fork its comparison with the original.

import {getJson, postJson} from "./api.js";
import {el} from "./dom.js";

const page = () => document.getElementById("session-page");

/** The comparison page of sessions `a` and `b`. */
export function compareUrl(a, b) {
  return `/sessions/compare/?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
}

/** Wire the header's Replay button (data-role=replay) of the session page `root`. */
export function wireReplayButton(root) {
  const button = root.querySelector("[data-role=replay]");
  if (!button) return;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const replay = await postJson(root.dataset.replayUrl, {});
      window.location.assign(`/sessions/${replay.id}/`);
    } catch (error) {
      button.disabled = false;
      button.title = error.message;
      button.textContent = "Replay failed";
    }
  });
}

/** The "Fork from here" section of a model call's details: edit its reply, or pick a model to make it live with. */
export function forkSection(node) {
  const root = page();
  if (!root?.dataset.forkUrl || node.kind !== "llm") return null;
  const reply = el("textarea", {class: "fork-reply", rows: 4, "aria-label": "Edited reply",
    dataset: {role: "fork-reply"}});
  reply.value = typeof node.output?.text === "string" ? node.output.text : "";
  const models = el("select", {"aria-label": "Model", dataset: {role: "fork-model"}},
    el("option", {value: "", text: "the edited reply above"}));
  const status = el("p", {class: "small muted", "aria-live": "polite"});
  const start = el("button", {type: "submit", class: "btn btn-small", text: "Fork from here", dataset: {role: "fork"}});
  const form = el("form", {class: "fork-form"},
    el("p", {class: "small muted", text: "Run again with the calls before this one served from the record, this one " +
      "answered as set here, and every call after it live."}),
    reply, el("label", {class: "small"}, "Answer with ", models), start, status);
  getJson("/api/models/").then((choices) => {
    for (const choice of choices) models.append(el("option", {value: choice.model, text: `a live call to ${choice.model}`}));
  }).catch(() => {});
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    start.disabled = true;
    status.textContent = "Starting the fork…";
    const body = models.value ? {node: node.seq, model: models.value} : {node: node.seq, reply: reply.value};
    try {
      const fork = await postJson(root.dataset.forkUrl, body);
      window.location.assign(compareUrl(root.dataset.sessionId, fork.id));
    } catch (error) {
      start.disabled = false;
      status.textContent = error.message;
    }
  });
  return el("section", {class: "detail-section fork-section"}, el("h3", {text: "Fork from here"}), form);
}
