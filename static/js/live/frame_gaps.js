// Debug aid for bench/bench_render.py: with `?debug=frames` in the page's address, the longest gap
// between two animation frames after the first scroll of `scroller` is written to the page root as
// `data-frame-gap-ms` (and the frames counted as `data-frames`), where a test or bench reads it like
// any attribute. The page's own code measures, so nothing has to be evaluated under the CSP.

export function debugFlag(name) {
  return new URLSearchParams(location.search).getAll("debug").includes(name);
}

export function watchFrameGaps(root, scroller) {
  let watching = false;
  let previous = null;
  let longest = 0;
  let frames = 0;
  scroller.addEventListener("scroll", () => { watching = true; }, {passive: true});
  const tick = (now) => {
    if (watching) {
      if (previous !== null && now - previous > longest) {
        longest = now - previous;
        root.dataset.frameGapMs = longest.toFixed(1);
      }
      previous = now;
      frames += 1;
      if (frames % 10 === 0) root.dataset.frames = String(frames);
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}
