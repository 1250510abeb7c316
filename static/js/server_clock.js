// The server's clock, as the live stream tells it. A running call's time so far and a live run's
// timeline run to the server's now, not the browser's: the times they start from are the server's,
// and a browser's clock can be minutes or hours off.

let offsetMs = 0; // the server's now less the browser's, as last heard; 0 until the stream says

/** Take the server's time `iso`, just received (its trip here, milliseconds, is not counted). */
export function heardServerTime(iso) {
  const at = Date.parse(iso);
  if (!Number.isNaN(at)) offsetMs = at - Date.now();
}

/** Now on the server's clock, in milliseconds since the epoch. */
export function serverNow() {
  return Date.now() + offsetMs;
}
