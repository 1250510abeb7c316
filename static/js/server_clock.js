// The server's clock, as the live stream tells it. A running call's time so far and a live run's
// timeline run to the server's now, not the browser's: the times they start from are the server's,
// and a browser's clock can be minutes or hours off.

const SAMPLES = 5; // the latest times heard; a frame held up on its way says a time already past
const offsets = []; // the server's now less the browser's, one per time heard, newest last

/** Take the server's time `iso`, just received. */
export function heardServerTime(iso) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return;
  offsets.push(at - Date.now());
  if (offsets.length > SAMPLES) offsets.shift();
}

/** Now on the server's clock, in milliseconds since the epoch (the browser's until the server says). */
export function serverNow() {
  // The largest offset: the frame that came quickest, least behind the server's clock when it arrived.
  return Date.now() + (offsets.length ? Math.max(...offsets) : 0);
}
