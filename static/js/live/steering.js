// Steering a live run from its page: a card for each tool call waiting for approval (tool, arguments, the
// call path to it, Approve / Deny with an optional reason), and Pause / Resume beside Stop. The cards are
// read from GET /api/sessions/<id>/approvals/ whenever the session or a waiting node changes; answers and
// pauses go through the API, and the stream brings what they changed.

import {getJson, postJson} from "../api.js";
import {clear, el} from "../dom.js";

const WAITING = "awaiting_approval";

export class RunSteering {
  constructor(root, terminal) {
    this.terminal = terminal;
    this.approvalsUrl = root.dataset.approvalsUrl;
    this.cards = root.querySelector("[data-role=approvals]");
    this.pauseButton = root.querySelector("[data-role=pause]");
    this.resumeButton = root.querySelector("[data-role=resume]");
    this.session = null;
    this.shown = new Set(); // the seqs of the calls whose cards are shown
    this.loading = null;
    this.reloadAfter = false;
    this.pauseButton?.addEventListener("click", () => this.setPause(root.dataset.pauseUrl));
    this.resumeButton?.addEventListener("click", () => this.setPause(root.dataset.resumeUrl));
  }

  /** The session changed: the buttons, and the cards if a call may have started or stopped waiting. */
  update(session) {
    if (this.session && session.rev < this.session.rev) return; // an older picture of the session
    const before = this.session;
    this.session = session;
    this.renderButtons();
    if (!this.approvalsUrl) return; // a read-only page answers nothing
    if (session.phase === WAITING || this.shown.size || (before && before.phase === WAITING)) this.reload();
  }

  /** A node changed: a call that starts or stops waiting changes the cards. */
  noteNode(node) {
    if (this.approvalsUrl && node.kind === "code" && (node.status === WAITING || this.shown.has(node.seq))) this.reload();
  }

  renderButtons() {
    if (!this.pauseButton) return;
    const open = !this.terminal.has(this.session.status) && this.session.phase !== "cancelling";
    this.pauseButton.hidden = !open || this.session.pause_requested;
    this.resumeButton.hidden = !open || !this.session.pause_requested;
    this.resumeButton.textContent = this.session.phase === "paused" ? "Resume" : "Resume (pausing…)";
  }

  async setPause(url) {
    this.pauseButton.disabled = this.resumeButton.disabled = true;
    try {
      this.update(await postJson(url, {}));
    } catch (error) {
      this.cards.hidden = false;
      this.cards.append(el("p", {class: "approval-error", text: error.message}));
    } finally {
      this.pauseButton.disabled = this.resumeButton.disabled = false;
    }
  }

  /** Read the pending requests again (one read at a time; a change meanwhile reads once more after). */
  async reload() {
    if (this.loading) {
      this.reloadAfter = true;
      return;
    }
    this.loading = getJson(this.approvalsUrl).catch(() => null);
    const requests = await this.loading;
    this.loading = null;
    if (requests) this.render(requests);
    if (this.reloadAfter) {
      this.reloadAfter = false;
      this.reload();
    }
  }

  render(requests) {
    const focused = document.activeElement?.closest?.("[data-role=approval]")?.dataset.node;
    const reasons = new Map([...this.cards.querySelectorAll("[data-role=approval]")].map((card) =>
      [card.dataset.node, card.querySelector("[data-role=approval-reason]").value]));
    clear(this.cards);
    this.shown = new Set(requests.map((request) => request.node));
    this.cards.hidden = requests.length === 0;
    for (const request of requests) {
      const card = this.card(request);
      card.querySelector("[data-role=approval-reason]").value = reasons.get(String(request.node)) || "";
      this.cards.append(card);
      if (String(request.node) === focused) card.querySelector("[data-role=approval-reason]").focus();
    }
  }

  card(request) {
    const reason = el("input", {type: "text", class: "approval-reason", maxlength: 2000, dataset: {role: "approval-reason"},
      placeholder: "Reason (optional, for Deny)", "aria-label": `Reason for denying ${request.tool}`});
    const card = el("article", {class: "approval-card", dataset: {role: "approval", node: request.node},
      "aria-label": `${request.tool} waits for your approval`},
      el("div", {class: "approval-head"},
        el("span", {class: "badge status-awaiting_approval", text: "awaiting approval"}),
        el("span", {class: "fn-name", dataset: {role: "approval-tool"}, text: request.tool}),
        el("span", {class: "muted small", text: `depth ${request.depth} · call #${request.node}`})),
      el("div", {class: "approval-path muted small", dataset: {role: "approval-path"}, text: request.path.join(" › ")}),
      el("pre", {class: "approval-arguments", dataset: {role: "approval-arguments"},
        text: JSON.stringify(request.arguments, null, 2)}),
      el("div", {class: "approval-actions"}, reason,
        el("button", {type: "button", class: "btn btn-small", dataset: {role: "approve"}, text: "Approve",
          onclick: () => this.answer(card, request.node, {approve: true})}),
        el("button", {type: "button", class: "btn btn-danger btn-small", dataset: {role: "deny"}, text: "Deny",
          onclick: () => this.answer(card, request.node, {approve: false, reason: reason.value.trim()})})));
    return card;
  }

  async answer(card, seq, body) {
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    try {
      await postJson(`${this.approvalsUrl}${seq}/`, body);
    } catch (error) {
      card.append(el("p", {class: "approval-error", text: error.message}));
    }
    this.reload();
  }
}
