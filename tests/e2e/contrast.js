// WCAG 2 contrast of every visible text on the page, from the browser's computed colours: each element
// with text of its own, its colour over the background it is drawn on (the nearest backgrounds up the
// tree, semi-transparent ones composited). Returns the texts below AA: 4.5:1, or 3:1 for large text
// (24 px, or 18.66 px bold). Disabled controls are exempt, as WCAG says.
() => {
  const parse = (css) => {
    const m = css.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return {r, g, b, a};
  };
  const over = (top, bottom) => ({
    r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
    b: top.b * top.a + bottom.b * (1 - top.a), a: 1,
  });
  const luminance = ({r, g, b}) => {
    const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  };
  const backgroundOf = (element) => {
    const layers = [];
    for (let node = element; node; node = node.parentElement) {
      const colour = parse(getComputedStyle(node).backgroundColor);
      if (colour && colour.a > 0) {
        layers.push(colour);
        if (colour.a >= 1) break;
      }
    }
    let result = {r: 255, g: 255, b: 255, a: 1}; // the canvas under everything
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const failures = [];
  for (const element of document.body.querySelectorAll("*")) {
    const own = [...element.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own || element.closest("[hidden], script, style, noscript")) continue;
    if (element.closest(":disabled, [aria-disabled=true]")) continue;
    const style = getComputedStyle(element);
    const box = element.getBoundingClientRect();
    if (style.visibility !== "visible" || box.width === 0 || box.height === 0) continue;
    const colour = parse(style.color);
    if (!colour || colour.a === 0) continue; // transparent text is not shown (e.g. a crowded axis label)
    const background = backgroundOf(element);
    const foreground = over(colour, background);
    const [light, dark] = [luminance(foreground), luminance(background)].sort((x, y) => y - x);
    const ratio = (light + 0.05) / (dark + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) {
      failures.push({text: element.textContent.trim().slice(0, 40), ratio: Math.round(ratio * 100) / 100,
        color: style.color, background: `rgb(${Math.round(background.r)}, ${Math.round(background.g)}, ${Math.round(background.b)})`,
        where: element.className || element.tagName.toLowerCase()});
    }
  }
  return failures;
}
