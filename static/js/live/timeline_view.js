// The timeline (waterfall): one bar per call from its start to its end (or to the server's now while it runs), rows
// depth first like the tree with labels indented by depth, coloured by status and kind, refused calls
// marked. Windowed like the tree: only the rows in view exist in the page. Zoom to a time range by
// dragging across the bars or the axis, or with the zoom buttons; reset shows the whole run again.

import {clear, el, formatDuration, refusedByBudget, STATUS_ICONS} from "../dom.js";
import {serverNow} from "../server_clock.js";
import {rowsInView, scrollRowIntoView} from "./windowing.js";

export const BAR_ROW_HEIGHT = 24;
const OVERSCAN = 10;
const TICK_SPACING_PX = 90; // about one labelled tick per this many pixels of track
const DRAG_PX = 4; // a press that moves less than this is a click on a bar, not a zoom
const NOW_STEP_MS = 250; // "now" moves in steps, so a live run redraws its rows a few times a second, not every frame
const MIN_SPAN_MS = 1;

/** The server's now, rounded up to the next step: the end of a running bar and of a live run's window agree. */
function steppedNow() {
  return Math.ceil(serverNow() / NOW_STEP_MS) * NOW_STEP_MS;
}

export class TimelineView {
  /**
   * @param {HTMLElement} container  the timeline pane (holds the axis, the scroller and the drag brush)
   * @param {TreeModel} model
   * @param {object} options  {onSelect(id), extent(): [start ms, end ms | null], onRangeChange(text)}
   */
  constructor(container, model, options) {
    this.container = container;
    this.scroller = container.querySelector("[data-role=timeline-scroll]");
    this.canvas = container.querySelector("[data-role=timeline-canvas]");
    this.axis = container.querySelector("[data-role=timeline-axis]");
    this.brush = container.querySelector("[data-role=timeline-brush]");
    this.model = model;
    this.options = options;
    this.selectedId = null;
    this.range = null; // [from, to] in ms since the epoch, or null: the whole run
    this.drawn = new Map(); // node id -> {element, signature}
    this.indexOf = new Map();
    this.indexedOrder = null;
    this.axisKey = "";
    this.scroller.addEventListener("scroll", () => this.render());
    this.container.addEventListener("pointerdown", (event) => this.onPointerDown(event));
    this.scroller.addEventListener("keydown", (event) => this.onKey(event));
    this.canvas.addEventListener("click", (event) => {
      const label = event.target.closest(".tl-label");
      if (label) this.options.onSelect(Number(label.parentElement.dataset.id));
    });
  }

  get visible() {
    return !this.container.hidden;
  }

  /** The time range shown: the zoomed one, or the whole run ([first start, last end or now]). */
  window() {
    if (this.range) return this.range;
    const [start, end] = this.options.extent();
    const now = steppedNow();
    const from = start ?? now;
    const to = end ?? now;
    return [from, Math.max(to, from + MIN_SPAN_MS)];
  }

  render() {
    if (!this.visible) return;
    const order = this.model.callOrder();
    if (order !== this.indexedOrder) {
      this.indexOf = new Map(order.map((id, index) => [id, index]));
      this.indexedOrder = order;
    }
    const [from, to] = this.window();
    const rangeKey = `${from}|${to}`;
    const now = steppedNow();
    this.renderAxis(from, to);
    const [first, last] = rowsInView(this.scroller, this.canvas, order.length, BAR_ROW_HEIGHT, OVERSCAN);
    const wanted = new Set();
    const fresh = [];
    for (let index = first; index < last; index++) {
      const id = order[index];
      wanted.add(id);
      const node = this.model.nodes.get(id);
      const running = node.status === "running" ? now : "";
      const signature = `${index}|${node.rev}|${id === this.selectedId}|${rangeKey}|${running}`;
      const drawn = this.drawn.get(id);
      if (drawn && drawn.signature === signature) continue;
      const element = this.drawRow(node, index, from, to, now);
      if (drawn) drawn.element.replaceWith(element);
      else fresh.push(element);
      this.drawn.set(id, {element, signature});
    }
    for (const [id, drawn] of this.drawn) {
      if (!wanted.has(id)) {
        drawn.element.remove();
        this.drawn.delete(id);
      }
    }
    if (fresh.length) this.canvas.append(...fresh); // one insertion for every new row of a scroll
  }

  drawRow(node, index, from, to, now) {
    const [start, end] = this.model.times.get(node.id) || [null, null];
    const classes = ["tl-row", `status-${node.status}`, `kind-${node.kind}`];
    if (node.id === this.selectedId) classes.push("is-selected");
    const refused = node.status === "refused";
    const label = node.kind === "llm" ? `LLM${node.model ? ` ${node.model}` : ""}` : node.name;
    const row = el("div", {class: classes.join(" "), style: `transform: translateY(${index * BAR_ROW_HEIGHT}px)`,
      dataset: {id: node.id}},
    el("span", {class: "tl-label", style: `padding-left: ${0.4 + (node.depth - 1) * 0.7}rem`, title: label},
      el("span", {class: "icon", text: STATUS_ICONS[node.status] || "?"}), el("span", {class: "name", text: label})));
    const track = el("div", {class: "tl-track"});
    row.append(track);
    if (start === null) return row;
    const stop = end ?? Math.max(now, start); // running: to now, where the whole run's window ends too
    const span = to - from;
    const left = ((start - from) / span) * 100;
    const right = ((stop - from) / span) * 100;
    const duration = formatDuration(Math.max(0, Math.round(stop - start)));
    const why = refused ? (refusedByBudget(node) ? "over budget" : "refused") : node.status;
    const barClasses = ["tl-bar", `status-${node.status}`, `kind-${node.kind}`];
    if (refused) barClasses.push("is-refused");
    if (right < 0 || left > 100) barClasses.push("is-outside");
    const clippedLeft = Math.min(100, Math.max(0, left));
    const width = Math.max(0, Math.min(100, right) - clippedLeft);
    track.append(el("div", {class: barClasses.join(" "), style: `left: ${clippedLeft}%; width: ${width}%`,
      role: "button", "aria-label": `${label}: ${why}, ${duration}`, title: `${label} · ${why} · ${duration}`,
      dataset: {id: node.id, status: node.status}}));
    if (refused) {
      track.append(el("span", {class: "tl-mark", style: `left: ${clippedLeft}%`, "aria-hidden": "true",
        text: refusedByBudget(node) ? "⊗ budget" : "⊗ refused"}));
    }
    return row;
  }

  renderAxis(from, to) {
    const track = this.axis.querySelector(".tl-axis-track");
    const ticks = Math.max(1, Math.min(8, Math.floor(track.clientWidth / TICK_SPACING_PX)));
    const key = `${from}|${to}|${this.options.extent()[0]}|${ticks}`;
    if (key === this.axisKey) return;
    this.axisKey = key;
    const origin = this.options.extent()[0] ?? from;
    clear(track);
    for (let i = 0; i <= ticks; i++) {
      const at = from + ((to - from) * i) / ticks;
      track.append(el("span", {class: `tl-tick${i === ticks ? " last" : ""}`, style: `left: ${(i * 100) / ticks}%`,
        text: formatDuration(Math.max(0, Math.round(at - origin)))}));
    }
    hideCrowdedLabels(track);
    this.options.onRangeChange?.(this.range ? `${formatDuration(Math.round(from - origin))} – ` +
      `${formatDuration(Math.round(to - origin))}` : "");
  }

  /** Zoom by `factor` (< 1 narrows) around the middle of what is shown. */
  zoom(factor) {
    const [from, to] = this.window();
    const middle = (from + to) / 2;
    const half = Math.max(MIN_SPAN_MS, ((to - from) * factor) / 2);
    this.setRange([middle - half, middle + half]);
  }

  /** Show `range` ([from, to] in ms), kept within the run; null shows the whole run. */
  setRange(range) {
    this.range = range && this.withinRun(range);
    this.render();
  }

  /** `range` moved inside the run's extent, its span kept where it fits: a zoom near an end shows no time
   * before the start (negative) or after the end. As wide as the run or wider, it is null: the whole
   * run, which then keeps growing while live. */
  withinRun([low, high]) {
    const [start, end] = this.options.extent();
    const first = start ?? low;
    const last = end ?? steppedNow();
    const span = high - low;
    if (span >= last - first) return null;
    const from = Math.min(Math.max(low, first), last - span);
    return [from, from + span];
  }

  /** The time at a client x position over the bars' track. Measured on a bar row's track (the axis
   * lines up with it through the scrollbar gutter both reserve, timeline.css). */
  timeAt(clientX) {
    const track = this.canvas.querySelector(".tl-track") || this.axis.querySelector(".tl-axis-track");
    const box = track.getBoundingClientRect();
    const [from, to] = this.window();
    const share = Math.min(1, Math.max(0, (clientX - box.left) / box.width));
    return {time: from + share * (to - from), x: Math.min(box.right, Math.max(box.left, clientX)), box};
  }

  onPointerDown(event) {
    if (event.button !== 0 || !event.target.closest(".tl-track, .tl-axis-track")) return;
    const startX = event.clientX;
    const anchor = this.timeAt(startX);
    const frame = this.container.getBoundingClientRect();
    let dragging = false;
    const move = (moveEvent) => {
      if (!dragging && Math.abs(moveEvent.clientX - startX) < DRAG_PX) return;
      dragging = true;
      const here = this.timeAt(moveEvent.clientX);
      this.brush.hidden = false;
      this.brush.style.left = `${Math.min(anchor.x, here.x) - frame.left}px`;
      this.brush.style.width = `${Math.abs(here.x - anchor.x)}px`;
    };
    const up = (upEvent) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      this.brush.hidden = true;
      if (!dragging) {
        const row = event.target.closest(".tl-row");
        if (row) this.options.onSelect(Number(row.dataset.id));
        return;
      }
      const end = this.timeAt(upEvent.clientX).time;
      const low = Math.min(anchor.time, end);
      const high = Math.max(anchor.time, end);
      if (high - low >= MIN_SPAN_MS) this.setRange([low, high]);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }

  onKey(event) {
    const move = {ArrowDown: 1, ArrowUp: -1}[event.key];
    if (!move) return;
    event.preventDefault();
    const order = this.model.callOrder();
    const index = this.selectedId === null ? -1 : this.indexOf.get(this.selectedId) ?? -1;
    const next = Math.min(order.length - 1, Math.max(0, index + move));
    if (order.length) this.options.onSelect(order[next]);
  }

  select(id) {
    this.selectedId = id;
    if (!this.visible) return;
    this.render();
    scrollRowIntoView(this.scroller, this.indexOf.get(id) ?? -1, BAR_ROW_HEIGHT);
    this.render();
  }
}

/** Long labels ("1 m 39 s") in a narrow track would run into the next one ("199 m232 ms"): from the last,
 * which is always shown, each label that would touch the one after it keeps its tick line but not its text. */
function hideCrowdedLabels(track) {
  const GAP_PX = 6;
  if (!track.clientWidth) return; // hidden (the tree is shown): measured when the timeline is drawn
  let nextLeft = Infinity;
  for (const tick of [...track.children].reverse()) {
    const box = tick.getBoundingClientRect();
    const crowded = box.right > nextLeft - GAP_PX;
    tick.classList.toggle("is-crowded", crowded);
    if (!crowded) nextLeft = box.left;
  }
}
