// Search over every call the page holds (the model, not the DOM: the tree draws only the rows in view,
// so the browser's own find cannot see the rest). A call matches when its name, arguments, output or
// error contain the query, case-insensitively. Matches are in call order (depth first, as the tree
// and the timeline list them); "Jump to error" finds the call where the first failure started.

export class CallSearch {
  constructor(model) {
    this.model = model;
    this.texts = new Map(); // id -> {rev, text}: each node state is turned into text once
    this.query = "";
    this.matches = [];
    this.current = -1;
    this.stale = false; // the model changed since the matches were found
  }

  textOf(node) {
    const cached = this.texts.get(node.id);
    if (cached && cached.rev === node.rev) return cached.text;
    const text = [node.name, searchable(node.input), searchable(node.output), node.error || ""].join("\n").toLowerCase();
    this.texts.set(node.id, {rev: node.rev, text});
    return text;
  }

  /** Set the query; the first match becomes current. Returns the current match's id or null. */
  setQuery(query) {
    this.query = query.trim().toLowerCase();
    this.refresh();
    this.current = this.matches.length ? 0 : -1;
    return this.currentId();
  }

  /** Find the matches again (new calls arrived), keeping the current one where it still matches. */
  refresh() {
    this.stale = false;
    const keep = this.currentId();
    this.matches = [];
    if (!this.query) return;
    for (const id of this.model.callOrder()) {
      if (this.textOf(this.model.nodes.get(id)).includes(this.query)) this.matches.push(id);
    }
    this.current = keep === null ? (this.matches.length ? 0 : -1) : Math.max(0, this.matches.indexOf(keep));
  }

  /** Move to the next (+1) or previous (-1) match, wrapping around. Returns its id or null. */
  step(direction) {
    if (this.stale) this.refresh();
    if (!this.matches.length) return null;
    this.current = (this.current + direction + this.matches.length) % this.matches.length;
    return this.currentId();
  }

  currentId() {
    return this.current >= 0 && this.current < this.matches.length ? this.matches[this.current] : null;
  }

  /** "3 of 12", "no matches", or "" with no query. */
  label() {
    if (!this.query) return "";
    if (!this.matches.length) return "no matches";
    return `${(this.current + 1).toLocaleString("en-US")} of ${this.matches.length.toLocaleString("en-US")}`;
  }

  /** Where the first failure started: the first call in call order that ended in an error or was
   * refused with no such call under it (a caller that failed because a nested call did is a symptom),
   * or null. */
  firstProblem() {
    let cause = null;
    for (const id of this.model.callOrder()) {
      const node = this.model.nodes.get(id);
      if (cause !== null && !this.isUnder(node, cause)) break; // past the first failure's subtree
      if (node.status === "error" || node.status === "refused") cause = id;
    }
    return cause;
  }

  isUnder(node, ancestorId) {
    for (let parent = node.parent; parent !== null && parent !== undefined; parent = this.model.nodes.get(parent)?.parent) {
      if (parent === ancestorId) return true;
    }
    return false;
  }
}

function searchable(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}
