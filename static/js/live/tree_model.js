// The session DAG as the page keeps it: nodes by id, children in seq order, what is collapsed, and the
// flattened list of visible rows the windowed view draws from.

export const FOLD_THRESHOLD = 10; // more than this many consecutive same-name siblings fold into a group

const ROOT = "root";

export class TreeModel {
  constructor() {
    this.reset();
  }

  reset() {
    this.nodes = new Map(); // id -> node
    this.children = new Map(); // parent id (or ROOT) -> [child ids in seq order]
    this.orphans = new Map(); // parent id not seen yet -> [child ids] (only a partial replay can do this)
    this.collapsed = new Set(); // node ids whose subtree is hidden
    this.openGroups = new Set(); // group keys the user unfolded
    this.newestId = null;
    this.rows = [];
    this.rowIndex = new Map(); // node id or group key -> row index
    this.structureChanged = true;
    this.order = []; // every node id, depth first in seq order: the timeline's rows and search's order
    this.orderStale = false;
    this.times = new Map(); // id -> [start ms, end ms or null while running], parsed once per node state
    this.firstStart = null; // the earliest start and latest end of any call (ms since the epoch)
    this.lastEnd = null;
  }

  get size() {
    return this.nodes.size;
  }

  /** Keep `node` unless we already hold a newer state of it. Returns "added", "updated" or null. */
  upsert(node) {
    const known = this.nodes.get(node.id);
    if (known) {
      if (node.rev < known.rev) return null;
      this.nodes.set(node.id, node);
      this.noteTimes(node);
      return "updated";
    }
    this.nodes.set(node.id, node);
    this.noteTimes(node);
    this.orderStale = true;
    const parentKey = node.parent === null ? ROOT : node.parent;
    if (node.parent !== null && !this.nodes.has(node.parent)) {
      pushSorted(this.orphans, node.parent, node.id, this.nodes);
    } else {
      pushSorted(this.children, parentKey, node.id, this.nodes);
    }
    const waiting = this.orphans.get(node.id);
    if (waiting) {
      this.orphans.delete(node.id);
      for (const childId of waiting) pushSorted(this.children, node.id, childId, this.nodes);
    }
    if (this.newestId === null || node.seq > this.nodes.get(this.newestId).seq) this.newestId = node.id;
    this.structureChanged = true;
    return "added";
  }

  noteTimes(node) {
    const start = node.started_at ? Date.parse(node.started_at) : null;
    let end = node.finished_at ? Date.parse(node.finished_at) : null;
    if (end === null && start !== null && node.status !== "running") end = start + (node.duration_ms || 0);
    this.times.set(node.id, [start, end]);
    if (start !== null && (this.firstStart === null || start < this.firstStart)) this.firstStart = start;
    if (end !== null && (this.lastEnd === null || end > this.lastEnd)) this.lastEnd = end;
  }

  /** Every node id, depth first with siblings in seq order (folds and collapsed subtrees included). */
  callOrder() {
    if (!this.orderStale) return this.order;
    const order = [];
    const pending = [];
    pushReversed(pending, this.childIds(null));
    while (pending.length) {
      const id = pending.pop();
      order.push(id);
      pushReversed(pending, this.childIds(id));
    }
    this.order = order;
    this.orderStale = false;
    return order;
  }

  childIds(id) {
    return this.children.get(id === null ? ROOT : id) || [];
  }

  hasChildren(id) {
    return this.childIds(id).length > 0;
  }

  toggle(id) {
    if (this.collapsed.has(id)) this.collapsed.delete(id);
    else this.collapsed.add(id);
    this.structureChanged = true;
  }

  toggleGroup(key) {
    if (this.openGroups.has(key)) this.openGroups.delete(key);
    else this.openGroups.add(key);
    this.structureChanged = true;
  }

  expandAll() {
    this.collapsed.clear();
    for (const ids of this.children.values()) {
      for (const run of foldRuns(ids, this.nodes)) this.openGroups.add(run.key);
    }
    this.structureChanged = true;
  }

  collapseAll() {
    for (const [parent, ids] of this.children) if (parent !== ROOT && ids.length) this.collapsed.add(parent);
    this.openGroups.clear();
    this.structureChanged = true;
  }

  /** Unfold and expand whatever hides `id`, so its row exists. */
  reveal(id) {
    let node = this.nodes.get(id);
    while (node && node.parent !== null) {
      this.collapsed.delete(node.parent);
      const group = this.groupOf(node);
      if (group) this.openGroups.add(group);
      node = this.nodes.get(node.parent);
    }
    if (node) {
      const group = this.groupOf(node);
      if (group) this.openGroups.add(group);
    }
    this.structureChanged = true;
  }

  groupOf(node) {
    const siblings = this.childIds(node.parent);
    for (const run of foldRuns(siblings, this.nodes)) {
      if (run.ids.includes(node.id)) return run.key;
    }
    return null;
  }

  /** The flattened visible rows, recomputed only after a structural change. */
  visibleRows() {
    if (!this.structureChanged) return this.rows;
    const rows = [];
    const index = new Map();
    // An explicit stack instead of recursion: a runaway tree may be deeper than the JS call stack.
    const pending = [];
    pushReversed(pending, this.entriesFor(ROOT, 0));
    while (pending.length) {
      const entry = pending.pop();
      const rowIdx = rows.length;
      rows.push(entry);
      if (entry.type === "group") {
        index.set(entry.key, rowIdx);
        for (const id of entry.ids) index.set(id, rowIdx);
        if (this.openGroups.has(entry.key)) {
          pushReversed(pending, entry.ids.map((id) => this.nodeEntry(id, entry.level + 1)));
        }
        continue;
      }
      index.set(entry.id, rowIdx);
      if (!this.collapsed.has(entry.id)) pushReversed(pending, this.entriesFor(entry.id, entry.level + 1));
    }
    this.rows = rows;
    this.rowIndex = index;
    this.structureChanged = false;
    return rows;
  }

  nodeEntry(id, level) {
    return {type: "node", id, level, key: `n${id}`};
  }

  /** Rows for the children of `parentKey`: single nodes, and folded runs of one name as groups. */
  entriesFor(parentKey, level) {
    const ids = this.children.get(parentKey) || [];
    if (ids.length <= FOLD_THRESHOLD) return ids.map((id) => this.nodeEntry(id, level));
    const entries = [];
    let cursor = 0;
    for (const run of foldRuns(ids, this.nodes)) {
      while (ids[cursor] !== run.ids[0]) entries.push(this.nodeEntry(ids[cursor++], level));
      entries.push({type: "group", key: run.key, ids: run.ids, name: run.name, level});
      cursor += run.ids.length;
    }
    while (cursor < ids.length) entries.push(this.nodeEntry(ids[cursor++], level));
    return entries;
  }

  /** Row index of `id`, or of the nearest visible thing that contains it. */
  rowOf(id) {
    this.visibleRows();
    let node = this.nodes.get(id);
    while (node) {
      const idx = this.rowIndex.get(node.id);
      if (idx !== undefined) return idx;
      node = node.parent === null ? null : this.nodes.get(node.parent);
    }
    return -1;
  }

  /** The call path from the entry call down to `id`. */
  path(id) {
    const path = [];
    let node = this.nodes.get(id);
    while (node) {
      path.push(node);
      node = node.parent === null ? null : this.nodes.get(node.parent);
    }
    return path.reverse();
  }

  statusCounts(ids) {
    const counts = {};
    for (const id of ids) {
      const status = this.nodes.get(id).status;
      counts[status] = (counts[status] || 0) + 1;
    }
    return counts;
  }
}

/** Runs of more than FOLD_THRESHOLD consecutive siblings with one kind and name. */
export function foldRuns(ids, nodes) {
  const runs = [];
  let start = 0;
  for (let i = 1; i <= ids.length; i++) {
    const a = nodes.get(ids[start]);
    const b = i < ids.length ? nodes.get(ids[i]) : null;
    if (b && b.name === a.name && b.kind === a.kind) continue;
    if (i - start > FOLD_THRESHOLD) {
      runs.push({key: `g${a.id}`, name: a.name, ids: ids.slice(start, i)});
    }
    start = i;
  }
  return runs;
}

function pushReversed(stack, items) {
  for (let i = items.length - 1; i >= 0; i--) stack.push(items[i]);
}

function pushSorted(map, key, id, nodes) {
  let list = map.get(key);
  if (!list) {
    list = [];
    map.set(key, list);
  }
  const seq = nodes.get(id).seq;
  // Nodes nearly always arrive in seq order, so appending is the common case.
  if (!list.length || nodes.get(list[list.length - 1]).seq < seq) {
    list.push(id);
    return;
  }
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (nodes.get(list[mid]).seq < seq) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, id);
}
