// The live session list: rows change in place as runs progress and end, and new runs appear at the top
// of the first page of everything, over the socket `ws/sessions/` (dag/live/session_list_consumer.py).
//
// The server sends each row as HTML from the page's own row template, so a row changed live reads like
// a row loaded. On every connect the page sends a "watch" naming the rows it shows; then, every five
// seconds, one naming those of its rows that have not ended (if any, or always on the first page of
// everything, whose watch also carries its newest row's creation time). The server answers with the
// named rows as they are now and with every run created since that time: what a reconnect or a lost
// message missed.
// Stop buttons request a stop and show the phase the server answers; the socket brings the rest.

import {stopSession} from "./api.js";
import {confirmAndDelete} from "./delete_sessions.js";
import {terminalStatuses} from "./dom.js";
import {compareUrl} from "./rerun.js";

const table = document.querySelector("table.sessions");
const body = table?.tBodies[0];
const terminal = terminalStatuses(table);
const takesNewRuns = table?.hasAttribute("data-takes-new-runs");
const pageSize = Number(table?.dataset.pageSize || 50);
const RESYNC_MS = 5000;
const MAX_BACKOFF_MS = 10000;
const LOGGED_OUT = 4401;
// The status of each run this page once showed and pushed past its end for newer ones: a later change of
// such a run still moves the status counts it is part of.
const pushedOffStatus = new Map();

function rows() {
  return [...body.rows];
}

/** The page's row element of a row message's HTML. */
function rowElement(html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  return template.content.firstElementChild;
}

/** The creation time of the newest row shown (undefined while none is). */
function newestShown() {
  return body.rows[0]?.dataset.created;
}

/** Put a row from the server in place: replace the shown one, or add a run the page has no row for.
 * `newest`: the newest row's creation time before this message, the line after which runs are new. */
function applyRow(row, newest) {
  const shown = body.querySelector(`tr[data-session="${CSS.escape(row.id)}"]`);
  if (shown) {
    countStatus(shown.dataset.status, -1);
    countStatus(row.status, +1);
    patchRow(shown, rowElement(row.html));
    return;
  }
  if (!takesNewRuns) return; // not on this page (another page, or filtered out)
  const pushedOff = pushedOffStatus.get(row.id);
  if (pushedOff !== undefined) { // once shown here, now past the page's end: only its status count moves
    countStatus(pushedOff, -1);
    countStatus(row.status, +1);
    pushedOffStatus.set(row.id, row.status);
    return;
  }
  const shownRows = rows();
  const oldest = shownRows[shownRows.length - 1]?.dataset.created;
  const isNew = newest === undefined || row.created_at > newest;
  // A run older than every row of a full page belongs to a later page (and is already counted).
  if (!isNew && shownRows.length >= pageSize && row.created_at < oldest) return;
  if (isNew) { // only a run created since the page was loaded is missing from the counts
    countStatus(row.status, +1);
    countStatus("", +1); // "All"
  }
  const older = shownRows.find((other) => other.dataset.created < row.created_at);
  body.insertBefore(rowElement(row.html), older || null);
  while (body.rows.length > pageSize) {
    const last = body.rows[body.rows.length - 1];
    pushedOffStatus.set(last.dataset.session, last.dataset.status);
    last.remove();
  }
  table.hidden = false;
  document.querySelector("[data-role=empty]")?.remove();
}

/** Move a status's count in the status filters by `change` (the rows shown are all counted there). */
function countStatus(status, change) {
  const count = document.querySelector(`.filters [data-status="${CSS.escape(status)}"] .count`);
  if (count) count.textContent = String(Math.max(0, Number(count.textContent) + change));
}

// A cell -> the markup the server sent for it: what the page added since (a stop's state) is no change.
const serverMarkup = new WeakMap();

/** Redraw the shown row as the server's `fresh` one in place: its attributes, and each cell whose markup
 * changed. A cell the server left as it was stays the same element, so a press on Stop that a redraw
 * falls inside (a row redraws every few hundred ms while its run goes) still ends in a click. */
function patchRow(shown, fresh) {
  const stopping = shown.dataset.stopping;
  for (const {name} of [...shown.attributes]) if (!fresh.hasAttribute(name)) shown.removeAttribute(name);
  for (const {name, value} of [...fresh.attributes]) shown.setAttribute(name, value);
  if (stopping) shown.dataset.stopping = stopping;
  const cells = [...shown.cells];
  const freshCells = [...fresh.cells];
  freshCells.forEach((cell, index) => {
    const old = cells[index];
    const markup = cell.outerHTML;
    if (old && (serverMarkup.get(old) ?? old.outerHTML) === markup) return;
    serverMarkup.set(cell, markup);
    if (old) {
      keepStopState(shown, old, cell);
      old.replaceWith(cell);
    } else {
      shown.append(cell);
    }
  });
  cells.slice(freshCells.length).forEach((cell) => cell.remove());
}

/** A stop in flight or its error, and the row's pick, survive a cell of `row` being redrawn from `from`
 * to `to`. */
function keepStopState(row, from, to) {
  const button = to.querySelector("[data-role=stop]");
  if (button && row.dataset.stopping) button.disabled = true;
  const note = from.querySelector("[data-role=stop-error]");
  if (note) to.append(note);
  const pick = to.querySelector("[data-role=pick]");
  if (pick && from.querySelector("[data-role=pick]")?.checked) pick.checked = true;
}

class ListStream {
  constructor(path) {
    this.path = path;
    this.socket = null;
    this.backoffMs = 500;
    this.timer = null;
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}${this.path}`);
    this.socket = socket;
    // The backoff starts again only once the server has answered: it opens every socket before it
    // says no (4429: too many live views open), so an open alone proves nothing.
    socket.onopen = () => this.watch(rows());
    socket.onmessage = (event) => {
      this.backoffMs = 500;
      this.receive(JSON.parse(event.data));
    };
    socket.onclose = (event) => {
      clearTimeout(this.timer);
      if (event.code === LOGGED_OUT) return; // the next page load asks for a login
      setTimeout(() => this.connect(), this.backoffMs);
      this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    };
  }

  /** Ask for the current state of `shown` rows (and, on the first page, of newer runs). */
  watch(shown) {
    if (this.socket?.readyState !== WebSocket.OPEN) return;
    const newest = newestShown() || null;
    this.socket.send(JSON.stringify({
      type: "watch",
      ids: shown.map((row) => row.dataset.session),
      newer_than: takesNewRuns ? newest ?? "1970-01-01T00:00:00+00:00" : null,
    }));
  }

  receive(message) {
    if (message.type === "rows") {
      const newest = newestShown(); // before the answer: its own new runs must not count each other out
      message.rows.forEach((row) => applyRow(row, newest));
      this.scheduleResync();
    } else if (message.type === "row") {
      applyRow(message.row, newestShown());
    }
  }

  /** While a row has not ended, ask again now and then: a lost message, or a run another process serves
   * on the in-memory layer, shows up at the latest then. */
  scheduleResync() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const open = rows().filter((row) => !terminal.has(row.dataset.status));
      if (open.length || takesNewRuns) this.watch(open);
      else this.scheduleResync();
    }, RESYNC_MS);
  }
}

/** Show the phase the server answered in the row's badge, before the socket brings the whole row
 * (which also moves the status counts). */
function showPhase(row, session) {
  if (terminal.has(row.dataset.status)) return; // the socket already brought its end
  const badge = row.querySelector("[data-role=status]");
  badge.className = `badge status-${session.phase}`;
  badge.textContent = session.phase.replaceAll("_", " ");
  const button = row.querySelector("[data-role=stop]");
  if (button) {
    button.disabled = session.phase === "cancelling";
    button.hidden = terminal.has(session.status);
  }
}

/** Say why a stop or a delete failed next to its button ("" removes the message). */
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

/** The row of a session now (the socket may have redrawn it since the click). */
function currentRow(sessionId) {
  return body.querySelector(`tr[data-session="${CSS.escape(sessionId)}"]`);
}

/** Delete the sessions of `rows` after a confirmation; the deleted rows leave the page and its counts. */
async function deleteRows(rows, what) {
  const byUrl = new Map(rows.map((row) => [row.querySelector("[data-role=delete]").dataset.deleteUrl, row]));
  const outcome = await confirmAndDelete([...byUrl.keys()], what);
  if (!outcome) return;
  for (const url of outcome.deleted) {
    const row = byUrl.get(url);
    countStatus(row.dataset.status, -1);
    countStatus("", -1); // "All"
    row.remove();
  }
  for (const [url, message] of outcome.failed) showStopError(byUrl.get(url), `Delete failed: ${message}`);
  showPicked();
}

/** The rows picked for "Delete picked", and the bar that offers it while there are any. */
function pickedRows() {
  return rows().filter((row) => row.querySelector("[data-role=pick]")?.checked);
}

function showPicked() {
  const count = pickedRows().length;
  const bar = document.querySelector("[data-role=bulk]");
  bar.hidden = count === 0;
  bar.querySelector("[data-role=picked-count]").textContent = `${count} picked`;
  showComparePicked(bar.querySelector("[data-role=compare-picked]"), pickedRows());
}

/** "Compare picked" links the comparison of exactly two picked runs (the older one as A: the list is
 * newest first), and hides for any other count. */
function showComparePicked(link, picked) {
  link.hidden = picked.length !== 2;
  if (picked.length === 2) link.href = compareUrl(picked[1].dataset.session, picked[0].dataset.session);
}

table?.addEventListener("change", (event) => {
  if (event.target.closest("[data-role=pick]")) showPicked();
});
document.querySelector("[data-role=delete-picked]")?.addEventListener("click", () => {
  const picked = pickedRows();
  deleteRows(picked, `${picked.length} session${picked.length === 1 ? "" : "s"}`);
});

table?.addEventListener("click", async (event) => {
  const remove = event.target.closest("[data-role=delete]");
  if (remove) {
    deleteRows([remove.closest("tr")], "this session");
    return;
  }
  const button = event.target.closest("[data-role=stop]");
  if (!button) return;
  const sessionId = button.closest("tr").dataset.session;
  button.disabled = true; // until the server answers
  button.closest("tr").dataset.stopping = "1";
  showStopError(button.closest("tr"), "");
  try {
    const session = await stopSession(button.dataset.stopUrl);
    const row = currentRow(sessionId);
    if (!row) return; // pushed off the page by newer runs meanwhile
    delete row.dataset.stopping;
    showPhase(row, session);
  } catch (error) {
    const row = currentRow(sessionId);
    if (!row) return;
    delete row.dataset.stopping;
    const again = row.querySelector("[data-role=stop]");
    if (again) again.disabled = false;
    showStopError(row, `Stop failed: ${error.message}`);
  }
});

if (table) new ListStream(table.dataset.wsPath).connect();
