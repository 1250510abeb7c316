"""One group-commit batch's writes: sorted by session, numbered, and turned into rows and changes.

`GroupWriter` (`group_commit`) queues writes and owns the transaction; this module says what a batch
writes in it. Each session's writes of a batch are a `Part`; `write_parts` advances each session's
counters once and writes its rows: on PostgreSQL by statements that number the rows themselves
(`numbered_sql`, the whole batch and its COMMIT in one round trip), elsewhere by reading the counters
first. Either way the rows are numbered in queue order (`seq` among the new nodes, `rev` along the
queue), a node created and ended within the batch is written once, and an exit of a node that a stop
or crash closed first is dropped with its revision given back. The `Outcome` of each part says what
to publish and which nodes are now open or ended, or that the fence refused it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Optional

from django.db.models import Q

from ...live.frames import NodeItem
from ...models import Node
from . import numbered_sql, sql
from .revision import node_message
from .write_transaction import WriteTransaction


@dataclass(slots=True)
class NodeCreate:
    session_id: str  # `session_key`
    lease: Optional[str]
    node: Node  # id set; the writer owns it from here on (it sets seq, rev and, if merged, the exit)
    # Set (under the writer's lock) once a batch has taken it: until then, the call's exit is applied to
    # `node` in the queue (`GroupWriter.finish_queued`) instead of being queued as a backfill.
    taken: bool = False


@dataclass(slots=True)
class NodeFinish:
    session_id: str  # `session_key`
    lease: Optional[str]
    pk: int
    fields: dict  # status, output, error, finished_at, ...
    taken: bool = False  # as NodeCreate's (nothing is applied to a backfill in the queue)


class Part:
    """One session's writes in a batch (those of one lease), sorted out before any is written."""

    __slots__ = ("key", "session_id", "lease", "entries", "creates", "merged", "backfills", "wanted")

    def __init__(self, key: tuple, entries: list):
        self.key = key
        self.session_id, self.lease = key
        self.entries = entries
        self.creates = {entry.node.id: entry.node for entry in entries if isinstance(entry, NodeCreate)}
        # Exits of nodes created in this batch: each node is written once, already ended.
        self.merged = {entry.pk for entry in entries if isinstance(entry, NodeFinish) and entry.pk in self.creates}
        self.backfills = [entry for entry in entries
                          if isinstance(entry, NodeFinish) and entry.pk not in self.creates]
        self.wanted = len(self.creates) + len(self.backfills)  # revisions, one per row written or changed


@dataclass(slots=True)
class Row:
    """A node row a batch writes: a new node (`fields` None) or a backfill of `fields` into node `pk`."""
    pk: int
    node: Optional[Node]
    change: Optional[NodeItem]
    fields: Optional[dict]
    rev: int
    ended: bool = False  # a backfill that did not apply: the node had ended


@dataclass(slots=True)
class Outcome:
    failure: Optional[BaseException] = None
    refused: bool = False  # the session's advance matched nothing (`failure` says why, once asked)
    messages: list = field(default_factory=list)
    opened: dict = field(default_factory=dict)  # pk -> Node written running
    closed: list = field(default_factory=list)  # pks of nodes that ended


def outcome_of(rows: list[Row]) -> Outcome:
    """What writing `rows` changed: the changes to publish, the nodes now open, those now ended."""
    outcome = Outcome()
    for row in rows:
        if row.ended:
            outcome.closed.append(row.pk)
            continue
        outcome.messages.append(row.change)
        if row.node.status == Node.Status.RUNNING:
            outcome.opened[row.pk] = row.node
        else:
            outcome.closed.append(row.pk)
    return outcome


def committed(parts: list[Part]) -> bool:
    """Whether a batch of `parts` whose COMMIT was sent but not answered (the connection lost) was
    committed after all. A batch is one transaction, so any one of its writes found in the database says
    it was: a node it creates exists, or a node it backfills has the backfill's end time. A batch of
    backfills none of which applied (their nodes had ended) wrote nothing to find, and nothing to lose:
    it is written again."""
    created = [pk for part in parts for pk in part.creates]
    if created:
        return Node.objects.filter(pk__in=created).exists()
    ends = Q()
    for part in parts:
        for entry in part.backfills:
            ends |= Q(pk=entry.pk, finished_at=entry.fields["finished_at"])
    return bool(ends) and Node.objects.filter(ends).exists()


def unseen_outcomes(parts: list[Part]) -> dict[tuple, Outcome]:
    """The outcomes of a batch committed unseen: nothing to publish (a viewer's next heartbeat finds the
    changes by their revisions), and every node it wrote counted as closed, so a later backfill of one
    still running reads it first, as for a node this writer did not write."""
    return {part.key: Outcome(closed=[*part.creates, *(entry.pk for entry in part.backfills)]) for part in parts}


def parts_of(writes: list, refused) -> list[Part]:
    """The batch by (session, lease), in session-id order, so concurrent batches (other processes')
    lock session rows in one order; writes of the `refused` sessions are dropped."""
    parts: dict[tuple, list] = {}
    for entry in writes:
        if entry.session_id not in refused:
            parts.setdefault((entry.session_id, entry.lease), []).append(entry)
    return [Part(key, entries) for key, entries in sorted(parts.items(), key=lambda item: item[0][0])]


def write_parts(tx: WriteTransaction, parts: list[Part], open_nodes: dict, *, commit: bool = True,
                meanwhile: Optional[Callable[["NumberedBatch"], None]] = None,
                staged: Optional["NumberedBatch"] = None) -> dict[tuple, Outcome]:
    """The parts' writes in `tx`, each session's counters advanced once: on PostgreSQL by statements
    that number the rows themselves (the batch and its COMMIT in one round trip), elsewhere by
    reading the counters first. `open_nodes`: the nodes the writer has written running, by session
    (only read here). On PostgreSQL only: `commit`, send the COMMIT with the statements; `meanwhile`,
    called with the batch while the server works on its statements (`WriteTransaction.fetch_all`);
    `staged`, the parts as `prestage` staged them."""
    if staged is None:
        unknown = [entry.pk for part in parts for entry in part.backfills
                   if entry.pk not in open_nodes.get(part.session_id, {})]
        # Nodes this writer did not write running (a restart, a write made inside a transaction): the
        # whole node is needed for its message. Read before the locks; what a stop changes meanwhile
        # (status, rev) the backfill's own running check decides.
        read = {node.pk: node for node in Node.objects.filter(pk__in=unknown)} if unknown else {}
        if tx.connection.vendor != "postgresql":
            return _write_counted_first(tx, parts, open_nodes, read)
        staged = NumberedBatch(tx, parts, open_nodes, read)
    return staged.outcomes(tx.fetch_all(staged.statements, commit=commit,
                                        meanwhile=meanwhile and partial(meanwhile, staged)))


def prestage(tx: WriteTransaction, parts: list[Part], open_nodes: dict,
             in_flight: "NumberedBatch") -> Optional["NumberedBatch"]:
    """The parts staged for PostgreSQL without the database while `in_flight`, the batch before them,
    is on the server; None where that cannot be: elsewhere (the counters are read first), or when a
    backfill's node is neither among `open_nodes` nor created running by `in_flight` (it is read).

    Rows are numbered relative to the counters the database holds when the statements run, so the
    staging does not wait for the batch before. A node that batch creates is ended here on a stand-in
    (a copy): the batch keeps its own node as it wrote it, whatever becomes of it (a retry of the batch
    writes it again), and the stand-in takes the node's final `seq` once it is known (`outcomes`)."""
    if tx.connection.vendor != "postgresql":
        return None
    originals = {}
    for part in parts:
        known, flying = open_nodes.get(part.session_id, {}), in_flight.opened.get(part.session_id, {})
        for entry in part.backfills:
            if entry.pk in known:
                continue
            if entry.pk not in flying:
                return None
            originals[entry.pk] = flying[entry.pk]
    return NumberedBatch(tx, parts, open_nodes, {pk: copy.copy(node) for pk, node in originals.items()},
                         originals=originals)


def _write_counted_first(tx: WriteTransaction, parts: list[Part], open_nodes: dict, read: dict
                         ) -> dict[tuple, Outcome]:
    advanced, running = sql.lock_sessions(
        tx, [(part.session_id, part.wanted, len(part.creates), part.lease) for part in parts],
        [entry.pk for part in parts for entry in part.backfills])
    outcomes = {}
    for part, counters in zip(parts, advanced):
        if counters is None:  # nothing of this session is written: its advance matched nothing
            outcomes[part.key] = Outcome(refused=True)
            continue
        rev, count = counters
        rows = _stage(part, open_nodes.get(part.session_id, {}), read, running,
                      seq0=count - len(part.creates), rev0=rev - part.wanted)
        ended = sum(row.ended for row in rows)
        if ended:
            sql.give_back_revisions(tx, part.session_id, ended)
        sql.insert_nodes(tx, [(row.node, row.change["node"]) for row in rows if row.fields is None])
        sql.update_nodes(tx, [(row.pk, {**row.fields, "rev": row.rev})
                              for row in rows if row.fields is not None and not row.ended])
        outcomes[part.key] = outcome_of(rows)
    return outcomes


class NumberedBatch:
    """PostgreSQL: the parts' rows staged with relative numbers, the statements that write them
    (`numbered_sql`), and `outcomes(results)`, which numbers the rows as the database did."""

    __slots__ = ("statements", "opened", "_staged", "_originals")

    def __init__(self, tx: WriteTransaction, parts: list[Part], open_nodes: dict, read: dict, *,
                 originals: Optional[dict] = None):
        self.statements, self._staged = [], []
        self.opened: dict[str, dict[int, Node]] = {}  # the nodes it writes running, by session
        # The nodes that `read` holds stand-ins of (`prestage`): pk -> the node the batch before holds.
        self._originals = originals or {}
        for part in parts:
            rows = _stage(part, open_nodes.get(part.session_id, {}), read)
            self._staged.append((part, rows, len(self.statements)))
            self.opened.setdefault(part.session_id, {}).update(
                (row.pk, row.node) for row in rows
                if row.fields is None and row.node.status == Node.Status.RUNNING)
            self.statements += numbered_sql.part_statements(
                tx, part.session_id, part.lease, [row.change.record_json for row in rows if row.fields is None],
                [(row.pk, row.rev, row.fields) for row in rows if row.fields is not None])

    @property
    def parts(self) -> list[Part]:
        return [part for part, _, _ in self._staged]

    def outcomes(self, results: list[list[tuple]]) -> dict[tuple, Outcome]:
        outcomes = {}
        for part, rows, first in self._staged:
            if not results[first]:  # refused: the fence kept every statement of the part from writing
                outcomes[part.key] = Outcome(refused=True)
                continue
            rev, node_count = results[first][0]
            rev0, seq0 = rev - part.wanted, node_count - len(part.creates)
            backfilled = {pk for (pk,) in results[first + 1]}
            dropped = 0  # as the database counted them: backfills of nodes that had ended
            for row in rows:
                if row.fields is None:
                    row.node.seq += seq0
                elif row.pk not in backfilled:
                    row.ended, dropped = True, dropped + 1
                    continue
                row.rev = row.node.rev = rev0 + row.rev - dropped
                original = self._originals.get(row.pk)
                if original is not None:  # numbered by its own batch, written before this one
                    row.node.seq = original.seq
                    apply(original, {**row.fields, "rev": row.rev})
                row.change.renumber(row.node.seq, row.rev)
            outcomes[part.key] = outcome_of(rows)
        return outcomes


def _stage(part: Part, known: dict, read: dict, running: Optional[set] = None, *, seq0: int = 0,
           rev0: int = 0) -> list[Row]:
    """The part's rows in queue order, each with its change: `seq` from `seq0` among the new nodes and
    `rev` from `rev0` + 1 along the queue. A backfill of a node that is not `running` (a stop or
    crash closed it first: its exit is final, and dropped) is marked ended and takes no revision;
    with `running` None every backfill takes one, and the database decides which apply. `known`: the
    session's nodes written running, by pk; `read`: the other nodes to backfill, read for their messages."""
    rows, seq, rev = [], seq0, rev0
    for entry in part.entries:
        if isinstance(entry, NodeCreate):
            node = entry.node
            node.seq, seq = seq, seq + 1
            pk, fields = node.id, None
            if pk in part.merged:
                continue  # written once, with its exit
        elif entry.pk in part.creates:
            pk, node, fields = entry.pk, part.creates[entry.pk], None
            apply(node, entry.fields)
        else:
            pk, node, fields = entry.pk, known.get(entry.pk) or read.get(entry.pk), entry.fields
            if running is not None and (node is None or pk not in running):
                rows.append(Row(pk, node, None, fields, rev, ended=True))
                continue
            if node is not None:
                apply(node, fields)
        rev += 1
        if node is None:  # a node no longer there: the database finds none running to backfill
            rows.append(Row(pk, None, None, fields, rev))
            continue
        node.rev = rev
        rows.append(Row(pk, node, node_message(node), fields, rev))
    return rows


def apply(node: Node, fields: dict) -> None:
    """Set a backfill's `fields` (status, output, ...) on `node`."""
    for name, value in fields.items():
        setattr(node, name, value)
