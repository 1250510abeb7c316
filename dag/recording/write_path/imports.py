"""Writing an imported session: a new session with every node of an export, in one transaction."""
from __future__ import annotations

from typing import Optional

from ...models import Node, Session
from ...stored_size import session_bytes
from .write_transaction import WriteTransaction


def insert_imported_session(owner, session_fields: dict, node_fields: list[dict],
                            parent_seqs: list[Optional[int]]) -> Session:
    """A new session for `owner` from checked export fields: nodes get `seq` 0, 1, ... in order, and the
    parent of node i is the node at `parent_seqs[i]` (None: a root). Revisions carry over unchanged
    (they are per session), and the session's revision is the highest of them."""
    with WriteTransaction(lean=False):
        session = Session.objects.create(owner=owner, **session_fields)
        if "created_at" in session_fields:  # auto_now_add ignores the given value on create
            Session.objects.filter(pk=session.pk).update(created_at=session_fields["created_at"])
        nodes = [Node(session=session, seq=seq, **fields) for seq, fields in enumerate(node_fields)]
        Node.objects.bulk_create(nodes)
        # bulk_create does not return ids everywhere, so read them back by seq.
        ids = dict(Node.objects.filter(session=session).values_list("seq", "id"))
        linked = []
        for node, parent_seq in zip(nodes, parent_seqs):
            if parent_seq is not None:
                node.pk, node.parent_id = ids[node.seq], ids[parent_seq]
                linked.append(node)
        Node.objects.bulk_update(linked, ["parent"])
        rev = max([session_fields.get("rev", 0)] + [node.rev for node in nodes])
        ended = session.status in Session.TERMINAL
        Session.objects.filter(pk=session.pk).update(rev=rev, node_count=len(nodes),
                                                     stored_bytes=session_bytes(session.pk) if ended else None)
        session.refresh_from_db()
    return session  # nothing to publish: no one can be watching a session that did not exist
