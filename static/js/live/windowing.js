// What the windowed views (the tree and the timeline) share: which rows of a tall list are near the
// scroller's viewport, and scrolling one row into view. Rows are `rowHeight` pixels each.

/** [first, last) indices of the rows in view, `overscan` rows either side; sizes the canvas to all rows. */
export function rowsInView(scroller, canvas, count, rowHeight, overscan) {
  canvas.style.height = `${count * rowHeight}px`;
  const top = scroller.scrollTop;
  const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((top + scroller.clientHeight) / rowHeight) + overscan);
  return [first, last];
}

/** Scroll so that row `index` is in view, just above the bottom edge; no movement if it already is (a
 * click on a row in view must not move it away from the pointer). */
export function scrollRowIntoView(scroller, index, rowHeight) {
  if (index < 0) return;
  const top = index * rowHeight;
  const view = scroller.clientHeight;
  const current = scroller.scrollTop;
  if (top >= current && top + rowHeight <= current + view) return;
  scroller.scrollTop = Math.max(0, top - view + rowHeight * 2);
}
