// The session header: its phase (the status, or `cancelling` between a stop request and the run's end,
// as the server reports it), timing, the stop button, the budget and its spend, and the run's outcome.

import {stopSession} from "../api.js";
import {clear, el, elapsedMs, formatDateTime, formatDuration, formatUsd, pretty} from "../dom.js";

// The limit each spend figure is measured against (runtime.budget's snapshot shape), and how to write both.
const BUDGET_DIMENSIONS = [
  ["depth", "max_depth", "agentic depth"], ["llm_calls", "max_llm_calls", "model calls"],
  ["tokens", "max_tokens", "tokens"], ["elapsed_s", "timeout_s", "time", (seconds) => formatDuration(Math.round(seconds * 1000))],
  ["cost_usd", "max_cost_usd", "cost", formatUsd],
];
// Why the budget's depth and the gauge's call depth differ (runtime/budget.py counts only agentic frames).
const BUDGET_DEPTH_NOTE = "Agentic depth counts agentic calls from the function that set the budget (level 1); " +
  "the gauge's call depth counts every call from the run's entry, plain tools included.";

// The phases in which a run waits for a person (dag.runs.steering).
const WAITING_PHASES = new Set(["awaiting_approval", "paused"]);

export class SessionHeader {
  constructor(root, stopUrl, terminal) {
    this.terminal = terminal;
    this.status = root.querySelector("[data-role=session-status]");
    this.meta = root.querySelector("[data-role=session-meta]");
    this.stopButton = root.querySelector("[data-role=stop]");
    this.budget = root.querySelector("[data-role=budget]");
    this.outcome = root.querySelector("[data-role=outcome]");
    this.connection = root.querySelector("[data-role=connection]");
    this.warning = root.querySelector("[data-role=session-warning]");
    this.connectionState = "connecting";
    this.title = document.title;
    this.session = null;
    this.stopPending = false; // the stop request is on its way: the button waits for the answer
    this.stopButton?.addEventListener("click", () => this.stop(stopUrl)); // none on a read-only page
  }

  async stop(stopUrl) {
    this.stopPending = true;
    if (this.outcome.dataset.stopFailed) this.outcome.hidden = true; // a retry replaces the old failure
    this.render();
    try {
      const session = await stopSession(stopUrl);
      this.stopPending = false;
      this.update(session);
    } catch (error) {
      this.stopPending = false;
      this.render();
      this.showOutcome(`Stop failed: ${error.message}`, "error");
      this.outcome.dataset.stopFailed = "true";
    }
  }

  update(session) {
    if (this.session && session.rev < this.session.rev) return; // an older picture of the session
    this.session = session;
    this.render();
  }

  setConnection(state, detail) {
    if (this.connectionState === state && !detail) return;
    this.connectionState = state;
    this.connection.title = detail || "";
    this.renderConnection();
    if (detail) this.showOutcome(detail, "error");
  }

  /** The stream's state; "ended" instead of a green "live" once the run is over (nothing more comes). */
  renderConnection() {
    const labels = {connecting: "connecting…", live: "live", reconnecting: "reconnecting…", closed: "disconnected",
      deleted: "deleted"};
    const ended = this.connectionState === "live" && this.session && this.terminal.has(this.session.status);
    const state = ended ? "ended" : this.connectionState;
    this.connection.className = `conn conn-${state}`;
    this.connection.textContent = ended ? "ended" : labels[state] || state;
    if (ended) this.connection.title = "The run has ended: nothing more will arrive";
  }

  /** What the status alone hides, beside it: "· 1 refused", "· 2 refused · 1 over budget". */
  setWarning(text) {
    this.warning.hidden = !text;
    this.warning.textContent = text ? `· ${text}` : "";
  }

  render() {
    const session = this.session;
    if (!session) return;
    const phase = session.phase;
    this.status.className = `badge status-${phase}`;
    this.status.textContent = phase.replaceAll("_", " ");
    // A person in another tab sees from the tab's title that the run waits for them.
    document.title = WAITING_PHASES.has(phase) ? `(${this.status.textContent}) ${this.title}` : this.title;
    this.renderConnection();
    const terminal = this.terminal.has(session.status);
    if (this.stopButton) {
      this.stopButton.hidden = terminal;
      this.stopButton.disabled = this.stopPending || phase === "cancelling";
      this.stopButton.textContent = phase === "cancelling" ? "Cancelling…" : this.stopPending ? "Stopping…" : "Stop";
    }
    const parts = [`started ${formatDateTime(session.started_at || session.created_at)}`];
    const duration = elapsedMs(session.started_at, session.finished_at);
    if (duration !== null) parts.push(terminal ? `took ${formatDuration(duration)}` : `running for ${formatDuration(duration)}`);
    if (session.model) parts.push(session.model);
    this.meta.textContent = parts.join(" · ");
    this.renderBudget(session.budget, session.budget_spend);
    if (session.status === "error" && session.error) this.showOutcome(session.error, "error");
    else if (session.status === "completed") {
      this.showOutcome(session.result === null ? "Completed." : `Result: ${pretty(session.result, 400)}`, "ok");
    }
    else if (session.status === "cancelled") this.showOutcome("Stopped on request.", "muted");
    else if (session.status === "interrupted") this.showOutcome(session.error || "The process running this session ended.", "error");
  }

  renderBudget(limits, spend) {
    if (!limits) {
      this.budget.hidden = true;
      return;
    }
    clear(this.budget);
    this.budget.hidden = false;
    this.budget.append(el("span", {class: "gauge-label", text: "Budget"}));
    for (const [spent, limit, label, format = String] of BUDGET_DIMENSIONS) {
      if (limits[limit] === null || limits[limit] === undefined) continue;
      const used = spend ? spend[spent] ?? 0 : 0;
      const over = used >= limits[limit];
      this.budget.append(el("span", {class: `budget-item${over ? " over" : ""}`, dataset: {dimension: spent},
        text: `${label} ${format(used)} / ${format(limits[limit])}`}));
    }
    if (limits.max_depth !== null && limits.max_depth !== undefined) {
      this.budget.append(el("span", {class: "budget-note muted small", dataset: {role: "budget-depth-note"}, text: BUDGET_DEPTH_NOTE}));
    }
    // A money limit cannot count calls of unknown cost: say so rather than show a spend that looks whole.
    const unpriced = spend?.unpriced_calls;
    if (unpriced && limits.max_cost_usd !== null && limits.max_cost_usd !== undefined) {
      this.budget.append(el("span", {class: "budget-item budget-unpriced", dataset: {dimension: "unpriced_calls"},
        text: `cost unknown for ${unpriced} call${unpriced === 1 ? "" : "s"}, not counted`}));
    }
  }

  showOutcome(text, tone) {
    delete this.outcome.dataset.stopFailed;
    this.outcome.hidden = false;
    this.outcome.className = `session-outcome tone-${tone}`;
    this.outcome.textContent = text;
  }
}
