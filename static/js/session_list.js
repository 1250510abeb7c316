// Stop buttons on the session list: request the stop, show `cancelling`, then poll until the run ends.

import {getJson, stopSession} from "./api.js";

const table = document.querySelector("table.sessions");
const terminal = new Set((table?.dataset.terminal || "").split(","));
const POLL_MS = 500;

function showStatus(row, session, stopped) {
  const badge = row.querySelector("[data-role=status]");
  const status = terminal.has(session.status) ? session.status : (stopped || session.cancel_requested ? "cancelling" : session.status);
  badge.className = `badge status-${status}`;
  badge.textContent = status;
  row.dataset.status = session.status;
  const button = row.querySelector("[data-role=stop]");
  if (button) {
    button.disabled = status === "cancelling";
    button.hidden = terminal.has(session.status);
  }
  return terminal.has(session.status);
}

async function followUntilEnded(row) {
  const url = `/api/sessions/${row.dataset.session}/`;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      if (showStatus(row, await getJson(url), true)) return;
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
  button.disabled = true;
  showStopError(row, "");
  showStatus(row, {status: row.dataset.status, cancel_requested: true}, true);
  try {
    if (!showStatus(row, await stopSession(button.dataset.stopUrl), true)) await followUntilEnded(row);
  } catch (error) {
    button.disabled = false;
    showStatus(row, {status: row.dataset.status, cancel_requested: false}, false);
    showStopError(row, `Stop failed: ${error.message}`);
  }
});
