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

/** Scroll so that row `index` is in view (no movement if it already is): near the bottom edge, or
 * mid-view with `center`. */
export function scrollRowIntoView(scroller, index, rowHeight, {center = false} = {}) {
  if (index < 0) return;
  const top = index * rowHeight;
  const view = scroller.clientHeight;
  const current = scroller.scrollTop;
  if (top >= current && top + rowHeight <= current + view) return;
  scroller.scrollTop = center ? top - view / 2 : Math.max(0, top - view + rowHeight * 2);
}
