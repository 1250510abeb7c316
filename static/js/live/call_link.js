// A call's own address: the session page's with `#call-<seq>` (seq numbers a session's calls from 0, and
// stays the same in every copy of the page). Opening such an address selects and scrolls to that call once
// it has arrived; selecting a call puts its address in the location bar, ready to copy.

const CALL_HASH = /^#call-(\d+)$/;

/** The seq the address points at, or null. */
export function linkedSeq() {
  const match = CALL_HASH.exec(location.hash);
  return match ? Number(match[1]) : null;
}

/** Show `seq`'s address without adding a history entry per click (Back leaves the page, as before). */
export function showCallAddress(seq) {
  const hash = `#call-${seq}`;
  if (location.hash !== hash) history.replaceState(history.state, "", hash);
}

/** The id of the node numbered `seq` among `nodes`, or null while it has not arrived. */
export function nodeIdOfSeq(nodes, seq) {
  for (const node of nodes.values()) if (node.seq === seq) return node.id;
  return null;
}
