"""The one path every change to a session or its nodes goes through: write, bump `rev`, publish on commit.

Nothing else in the project writes `Session` or `Node` rows (tests/web/recording/
test_write_path_owns_writes.py scans for writes elsewhere). Each function below is one transaction in
one style, a `WriteTransaction`. A change to an existing session begins with `revision.advance` (bump
the session's revision, hold its row lock: the one place a fence can refuse a write) and hands its
changes to `dag.live.broadcast.publish` after the commit (the heartbeat alone changes nothing a viewer
sees, so it neither advances nor publishes); creating a session (launch, import) publishes
nothing, since no one can be watching it yet:

- launch: `queue_session`;
- recording: `RunWrites` (a run's node writes, queued for the process's group-commit writer, a
  `group_commit.GroupWriter` kept by `process_writer`, committed in batches) and `flush_session`;
  `create_node`, `finish_node` (one transaction each, through prepared SQL in `sql`: what `RunWrites`
  does inside an enclosing transaction);
- a run's status: `claim_session` (with the run's lease), `set_session_status`, `finish_session` (status
  and open nodes at once);
- the broker (Celery): `mark_sent` (a session's task was sent), `claim_resend` (the reaper's
  compare-and-set on queued sessions to send again); like the heartbeat, neither advances nor publishes;
- leases: `renew_leases` (the heartbeat: one UPDATE, no revision), `end_expired_lease` (the reaper);
- stop: `record_stop_request`; crashes and stops: `close_open_nodes`;
- other session fields (a budget's spend, an admin's edit): `update_session`; deletion (each tells the
  session's open pages): `delete_sessions` (an admin's), `delete_owned_session` (an owner's, of an ended
  session), `delete_ended_sessions` (retention);
- share links: `revoke_shares` (every link of a session at once);
- steering (`steering`): a person's `answer_approval` and `request_pause`; the run's
  `create_awaiting_node`, `end_awaiting_node` (a call waiting for approval) and `set_paused`;
- import: `insert_imported_session`.

A run's own database work (its claim, its reads, its end) goes through `borrowed`: a connection taken for
the operation and given back after, so a waiting run holds none, and an outage waited out
(`OPENPROGRAM_DB_OUTAGE_S`, then `DatabaseUnreachable`).

A run's writes pass `lease=` (its worker id): `advance` refuses them with `WriteRefused` (a runtime
`CancelledError`) once the session has ended or another worker holds it.
"""
from .borrowing import DatabaseUnreachable, borrowed
from .deletes import SessionStillActive, delete_ended_sessions, delete_owned_session, delete_sessions
from .process_writer import flush_session
from .imports import insert_imported_session
from .leases import end_expired_lease, renew_leases
from .nodes import close_open_nodes, create_node, finish_node
from .revision import WriteRefused, node_message, session_message
from .run_writes import RunWrites
from .shares import revoke_shares
from .steering import (AlreadyAnswered, NoSuchRequest, answer_approval, create_awaiting_node, end_awaiting_node,
                       request_pause, set_paused)
from .sessions import (NODE_STATUS_AT_END, STOPPED_BEFORE_START, claim_resend, claim_session, finish_session,
                       mark_sent, queue_session, record_stop_request, set_session_status, update_session)

__all__ = ["AlreadyAnswered", "DatabaseUnreachable", "NODE_STATUS_AT_END", "NoSuchRequest", "RunWrites",
           "STOPPED_BEFORE_START", "SessionStillActive", "WriteRefused", "answer_approval", "borrowed",
           "claim_resend", "claim_session", "close_open_nodes", "create_awaiting_node", "create_node",
           "delete_ended_sessions", "delete_owned_session", "delete_sessions", "end_awaiting_node",
           "end_expired_lease", "finish_node", "finish_session", "flush_session", "insert_imported_session",
           "mark_sent", "node_message", "queue_session", "record_stop_request", "renew_leases", "request_pause",
           "revoke_shares", "session_message", "set_paused", "set_session_status", "update_session"]
