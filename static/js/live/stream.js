// The websocket stream of one session, kept gap-free by revision.
//
// The server sends a snapshot, then changes in rev order. If a change arrives whose rev is not the next
// one, or the socket drops, or nothing (not even a heartbeat) arrives for a while, the stream reconnects
// with ?since_rev=<last rev applied> and the server replays what was missed from the database.
// A full snapshot (since_rev null) is the server's whole state: its revision is the one to go on from,
// even below the page's own (the database was restored from a backup).

import {heardServerTime} from "../server_clock.js";

// Every other close is retried with a growing backoff: 4429 (too many live views open) included, so a
// page comes back once another tab closes.
const FATAL_CODES = new Set([4400, 4403, 4404, 4410]);
const DELETED = 4410; // the session was deleted while the page was open
const DELETED_TEXT = "This session was deleted.";
const CLOSED_BECAUSE = {
  4403: "This share link was revoked or has expired.", // a shared page's stream
  4404: "This session does not exist or is not yours (are you still logged in?)",
};
const MAX_BACKOFF_MS = 8000;

export class SessionStream {
  /**
   * @param {string} path  e.g. /ws/sessions/<id>/
   * @param {object} handlers  onSnapshot(msg), onSnapshotMore(msg), onChanges(items), onState("live"|"reconnecting"|"closed"|"deleted", detail)
   * @param {number} heartbeatS  the server's heartbeat interval; silence for 3x that means a dead socket
   */
  constructor(path, handlers, heartbeatS = 5) {
    this.path = path;
    this.handlers = handlers;
    this.rev = null;
    this.fullSnapshot = false; // the snapshot arriving replaces everything (since_rev null)
    this.socket = null;
    this.backoffMs = 250;
    this.silenceMs = Math.max(3000, heartbeatS * 3000);
    this.watchdog = null;
  }

  start() {
    this.connect();
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.rev === null ? "" : `?since_rev=${this.rev}`;
    const socket = new WebSocket(`${scheme}//${location.host}${this.path}${query}`);
    this.socket = socket;
    socket.onmessage = (event) => {
      if (socket !== this.socket) return;
      this.armWatchdog();
      this.receive(JSON.parse(event.data));
    };
    socket.onclose = (event) => {
      if (socket !== this.socket) return;
      clearTimeout(this.watchdog);
      if (event.code === DELETED) {
        this.handlers.onState("deleted", DELETED_TEXT);
        return;
      }
      if (FATAL_CODES.has(event.code)) {
        this.handlers.onState("closed", CLOSED_BECAUSE[event.code] || `The stream refused the request: ${event.reason || event.code}`);
        return;
      }
      this.handlers.onState("reconnecting");
      setTimeout(() => this.connect(), this.backoffMs);
      this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    };
    this.armWatchdog();
  }

  /** Drop the socket and reconnect at once from the last applied revision. */
  resync() {
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(1000);
    this.handlers.onState("reconnecting");
    this.connect();
  }

  armWatchdog() {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.resync(), this.silenceMs);
  }

  receive(message) {
    switch (message.type) {
      case "snapshot":
        heardServerTime(message.now);
        this.backoffMs = 250;
        this.fullSnapshot = message.since_rev === null;
        this.handlers.onSnapshot(message);
        this.finishSnapshot(message);
        break;
      case "snapshot_more": // a large snapshot continues over several frames
        this.handlers.onSnapshotMore(message);
        this.finishSnapshot(message);
        break;
      case "batch":
        this.apply(message.items);
        break;
      case "node":
      case "session":
        this.apply([message]);
        break;
      case "deleted": // the close (4410) follows
        this.handlers.onState("deleted", DELETED_TEXT);
        break;
      case "heartbeat":
        heardServerTime(message.now);
        if (this.rev !== null && message.rev > this.rev) this.resync();
        break;
      default:
        break; // a newer server may send more kinds; ignoring them keeps old pages working
    }
  }

  finishSnapshot(message) {
    if (message.more) return; // the revision counts only once every part is in
    this.rev = this.rev === null || this.fullSnapshot ? message.rev : Math.max(this.rev, message.rev);
    this.handlers.onState("live");
  }

  apply(items) {
    if (this.rev === null) return; // before the snapshot nothing can be placed
    const fresh = [];
    for (const item of items) {
      if (item.rev <= this.rev) continue;
      if (item.rev !== this.rev + 1) {
        if (fresh.length) this.handlers.onChanges(fresh);
        this.resync();
        return;
      }
      fresh.push(item);
      this.rev = item.rev;
    }
    if (fresh.length) this.handlers.onChanges(fresh);
  }
}
