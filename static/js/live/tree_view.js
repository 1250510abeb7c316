// Windowed rendering of the tree: only the rows in (or near) the viewport exist in the DOM, each
// redrawn only when what it shows changed. Ten thousand nodes cost the same to draw as fifty.

import {el, elapsedMs, formatDuration, formatTokens, preview, refusedByBudget, STATUS_ICONS} from "../dom.js";
import {rowsInView, scrollRowIntoView} from "./windowing.js";

export const ROW_HEIGHT = 28;
const OVERSCAN = 12;

export class TreeView {
  /**
   * @param {HTMLElement} scroller  the scrolling box
   * @param {HTMLElement} canvas  its child, sized to all rows
   * @param {TreeModel} model
   * @param {object} options  {ceiling, onSelect(id), onUserScroll(): the user scrolled, stepped or pressed a row}
   */
  constructor(scroller, canvas, model, options) {
    this.scroller = scroller;
    this.canvas = canvas;
    this.model = model;
    this.options = options;
    this.selectedId = null;
    this.drawn = new Map(); // row key -> {element, signature}
    scroller.addEventListener("scroll", () => this.render());
    canvas.addEventListener("click", (event) => this.onClick(event));
    scroller.addEventListener("keydown", (event) => this.onKey(event));
    // A wheel or a swipe over a tree that fits its box moves nothing: following goes on.
    for (const type of ["wheel", "touchmove"]) {
      scroller.addEventListener(type, () => { if (this.canScroll()) options.onUserScroll(); }, {passive: true});
    }
    // A press on the scroll bar itself (the target is the scroller, not a row) is a scroll too. A press
    // on a row stops following before its release: rows scrolling under the pointer in between (a fast
    // run, followed) would make the click land on the canvas, on no row, and be lost.
    scroller.addEventListener("pointerdown", (event) => {
      if ((event.target === scroller && this.canScroll()) || event.target.closest(".row")) options.onUserScroll();
    });
  }

  render() {
    const rows = this.model.visibleRows();
    const [first, last] = rowsInView(this.scroller, this.canvas, rows.length, ROW_HEIGHT, OVERSCAN);
    const wanted = new Set();
    const ordered = [];
    for (let index = first; index < last; index++) {
      const row = rows[index];
      wanted.add(row.key);
      const signature = this.signature(row, index);
      const drawn = this.drawn.get(row.key);
      if (drawn && drawn.signature === signature) {
        ordered.push(drawn.element);
        continue;
      }
      const fresh = this.draw(row, index);
      // An updated row keeps its element: a row replaced between a press and its release (a busy
      // fold redraws many times a second) would lose the click.
      const element = drawn ? updateInPlace(drawn.element, fresh) : fresh;
      if (!drawn) this.canvas.append(element);
      this.drawn.set(row.key, {element, signature});
      ordered.push(element);
    }
    for (const [key, drawn] of this.drawn) {
      if (!wanted.has(key)) {
        drawn.element.remove();
        this.drawn.delete(key);
      }
    }
    // Keep document order equal to visual order, for screen readers and keyboard users.
    const children = this.canvas.children;
    if (ordered.some((element, i) => children[i] !== element)) this.canvas.replaceChildren(...ordered);
    // Rows are not focusable themselves: the focused scroller points screen readers at the selection.
    const selected = this.selectedId === null ? null : this.drawn.get(`n${this.selectedId}`);
    if (selected) this.scroller.setAttribute("aria-activedescendant", selected.element.id);
    else this.scroller.removeAttribute("aria-activedescendant");
  }

  /** What a row shows, as a string: the row is redrawn only when this changes. */
  signature(row, index) {
    const selected = row.type === "node" && row.id === this.selectedId;
    if (row.type === "group") {
      const counts = JSON.stringify(this.model.statusCounts(row.ids));
      return `${index}|${row.ids.length}|${this.model.openGroups.has(row.key)}|${counts}`;
    }
    const node = this.model.nodes.get(row.id);
    const running = node.status === "running" ? Math.floor(elapsedMs(node.started_at) / 1000) : "";
    return `${index}|${node.rev}|${selected}|${this.model.collapsed.has(row.id)}|` +
      `${this.model.hasChildren(row.id)}|${running}`;
  }

  draw(row, index) {
    const style = `transform: translateY(${index * ROW_HEIGHT}px); padding-left: calc(.6rem + ${row.level} * var(--tree-indent))`;
    return row.type === "group" ? this.drawGroup(row, style) : this.drawNode(row, style);
  }

  drawNode(row, style) {
    const node = this.model.nodes.get(row.id);
    const hasChildren = this.model.hasChildren(node.id);
    const collapsed = this.model.collapsed.has(node.id);
    const ceiling = this.options.ceiling;
    const atCeiling = node.kind === "code" && node.name_depth >= ceiling;
    const duration = node.duration_ms ?? (node.status === "running" ? elapsedMs(node.started_at) : null);
    const classes = ["row", `status-${node.status}`, `kind-${node.kind}`];
    if (node.id === this.selectedId) classes.push("is-selected");
    if (atCeiling) classes.push("at-ceiling");
    if (refusedByBudget(node)) classes.push("budget-breach");
    return el("div", {
      class: classes.join(" "), style, id: `tree-row-${row.key}`, role: "treeitem", "aria-level": row.level + 1,
      "aria-selected": node.id === this.selectedId ? "true" : "false",
      "aria-expanded": hasChildren ? String(!collapsed) : null, dataset: {id: node.id, key: row.key},
    },
    el("span", {class: "twisty", dataset: {action: hasChildren ? "toggle" : ""}, text: hasChildren ? (collapsed ? "▸" : "▾") : ""}),
    el("span", {class: "icon", title: node.status, text: STATUS_ICONS[node.status] || "?"}),
    el("span", {class: `kind kind-${node.kind}`, text: node.kind === "llm" ? "LLM" : "fn"}),
    el("span", {class: "name", text: node.name}),
    el("span", {class: "args", text: node.kind === "llm" ? llmPreview(node) : preview(node.input)}),
    el("span", {class: "meta"},
      node.status === "refused" ? el("span", {class: "flag flag-refused", text: refusedByBudget(node) ? "budget" : "refused"}) : null,
      node.replayed ? el("span", {class: "flag flag-replayed", text: "replayed", title: "Answered from the recorded run"}) : null,
      node.kind === "code" ? depthBadge(node, ceiling, atCeiling) : null,
      el("span", {class: "tokens", text: formatTokens(node.usage)}),
      el("span", {class: "duration", text: formatDuration(duration)})));
  }

  drawGroup(row, style) {
    const open = this.model.openGroups.has(row.key);
    const counts = this.model.statusCounts(row.ids);
    return el("div", {class: "row group", style, id: `tree-row-${row.key}`, role: "treeitem",
      "aria-level": row.level + 1, "aria-expanded": String(open), dataset: {group: row.key, key: row.key}},
      el("span", {class: "twisty", dataset: {action: "toggle-group"}, text: open ? "▾" : "▸"}),
      el("span", {class: "icon", text: "≡"}),
      el("span", {class: "name", text: `${row.name} ×${row.ids.length}`}),
      el("span", {class: "counts"}, ...Object.entries(counts).map(([status, n]) =>
        el("span", {class: `count status-${status}`, title: status, text: `${STATUS_ICONS[status] || ""} ${n}`}))));
  }

  onClick(event) {
    const rowElement = event.target.closest(".row");
    if (!rowElement) return;
    const action = event.target.closest("[data-action]")?.dataset.action;
    if (rowElement.dataset.group) {
      this.model.toggleGroup(rowElement.dataset.group);
      this.render();
      return;
    }
    const id = Number(rowElement.dataset.id);
    if (action === "toggle") {
      this.model.toggle(id);
      this.render();
      return;
    }
    this.options.onSelect(id);
  }

  onKey(event) {
    const rows = this.model.visibleRows();
    const move = {ArrowDown: 1, ArrowUp: -1}[event.key];
    if (move) {
      event.preventDefault();
      this.options.onUserScroll();
      const index = this.selectedId === null ? -1 : this.model.rowOf(this.selectedId);
      for (let i = index + move; i >= 0 && i < rows.length; i += move) {
        const row = rows[i];
        if (row.type === "node") {
          this.options.onSelect(row.id);
          return;
        }
        // A folded group is entered at its near end (selecting unfolds it); an open one's header is
        // passed over, its members follow it.
        if (!this.model.openGroups.has(row.key)) {
          this.options.onSelect(row.ids[move > 0 ? 0 : row.ids.length - 1]);
          return;
        }
      }
    } else if ((event.key === "ArrowLeft" || event.key === "ArrowRight") && this.selectedId !== null &&
               this.model.hasChildren(this.selectedId)) {
      const collapsed = this.model.collapsed.has(this.selectedId);
      if (collapsed === (event.key === "ArrowRight")) {
        event.preventDefault();
        this.model.toggle(this.selectedId);
        this.render();
      }
    }
  }

  select(id) {
    this.selectedId = id;
    this.render();
  }

  /** Whether the tree is taller than its box, so that a wheel or a drag can move it. */
  canScroll() {
    return this.scroller.scrollHeight > this.scroller.clientHeight;
  }

  /** Scroll so that row `index` is in view (no movement if it already is). */
  scrollToRow(index) {
    scrollRowIntoView(this.scroller, index, ROW_HEIGHT);
  }
}

function updateInPlace(element, fresh) {
  for (const {name} of [...element.attributes]) if (!fresh.hasAttribute(name)) element.removeAttribute(name);
  for (const {name, value} of fresh.attributes) element.setAttribute(name, value);
  element.replaceChildren(...fresh.childNodes);
  return element;
}

function llmPreview(node) {
  const output = node.output;
  const text = output && typeof output === "object" ? output.text : output;
  const calls = output && Array.isArray(output.tool_calls) ? output.tool_calls.map((c) => c.name || c.function?.name).filter(Boolean) : [];
  const head = node.model ? `${node.model}: ` : "";
  if (calls.length) return `${head}→ ${calls.join(", ")}`;
  return head + preview(text ?? "");
}

/** `d<depth>` for every call; `· <name_depth>/<ceiling>` for agentic ones (plain tools have no counter). */
function depthBadge(node, ceiling, atCeiling) {
  const agentic = node.name_depth > 0;
  return el("span", {
    class: `depth${atCeiling ? " depth-max" : ""}`,
    title: agentic ? `depth ${node.depth}; ${node.name} nested ${node.name_depth} of ${ceiling}` : `depth ${node.depth}`,
    text: agentic ? `d${node.depth} · ${node.name_depth}/${ceiling}` : `d${node.depth}`,
  });
}
