// Stop buttons on the session list: request the stop, show the phase the server answers (`cancelling`),
// then poll until the run ends.

import {getJson, stopSession} from "./api.js";
import {terminalStatuses} from "./dom.js";

const table = document.querySelector("table.sessions");
const terminal = terminalStatuses(table);
const POLL_MS = 500;

/** Show the session's phase in its row; true once the session has ended. */
function showStatus(row, session) {
  const badge = row.querySelector("[data-role=status]");
  badge.className = `badge status-${session.phase}`;
  badge.textContent = session.phase;
  row.dataset.status = session.status;
  const button = row.querySelector("[data-role=stop]");
  if (button) {
    button.disabled = session.phase === "cancelling";
    button.hidden = terminal.has(session.status);
  }
  return terminal.has(session.status);
}

async function followUntilEnded(row) {
  const url = `/api/sessions/${row.dataset.session}/`;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      if (showStatus(row, await getJson(url))) return;
    } catch {
      return; // logged out or gone; the next page load shows the truth
    }
  }
}

/** Say why a stop failed next to its button ("" removes the message). */
function showStopError(row, message) {
  let note = row.querySelector("[data-role=stop-error]");
  if (!note && message) {
    note = document.createElement("div");
    note.className = "form-errors small";
    note.dataset.role = "stop-error";
    note.setAttribute("role", "alert");
    row.querySelector(".actions").append(note);
  }
  if (note) note.textContent = message;
}

table?.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-role=stop]");
  if (!button) return;
  const row = button.closest("tr");
  button.disabled = true; // until the server answers
  showStopError(row, "");
  try {
    if (!showStatus(row, await stopSession(button.dataset.stopUrl))) await followUntilEnded(row);
  } catch (error) {
    button.disabled = false;
    showStopError(row, `Stop failed: ${error.message}`);
  }
});
