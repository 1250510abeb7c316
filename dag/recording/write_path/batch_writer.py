"""`BatchWriter`: the write side of group commit, writing batches of node writes one after another.

`group_commit.GroupWriter` queues a process's node writes and hands each batch to one of these. A batch
is written in one transaction (`batch_writes.write_parts`); if that fails, each session's part alone, so
one session's bad write costs no other session its writes. The writer keeps what the batches tell it:
the nodes written running (`open`, by session: a later batch backfills them without reading them), and
the part of each outcome that says why a session's writes were refused (`explain`).

On PostgreSQL a batch's statements and COMMIT go to the server in one round trip; while the server works
on them, the writer does what its caller asks (`meanwhile`: a writer process answers the batch before
this one), then takes the next batch if one is ready (`take_next`) and stages it
(`batch_writes.prestage`), so that only its sending is left (`upcoming`). A staged batch is staged again
if the batch before it failed or refused a session's writes: those writes must not go.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...models import Node
from .batch_writes import (NumberedBatch, Outcome, Part, committed, parts_of, prestage, unseen_outcomes,
                           write_parts)
from .borrowing import DatabaseUnreachable, transient, waited_out
from .revision import WriteRefused, refusal
from .write_transaction import PIPELINED_VENDORS, WriteTransaction

log = logging.getLogger(__name__)

# What `take_next` gives: the next batch's token (what its taker knows it by) and its writes; None when
# no batch is ready.
NextBatch = Callable[[], Optional[tuple[Any, list]]]


@dataclass(slots=True)
class Upcoming:
    """A batch taken while the one before it was on the server, and its staging if it has one."""
    token: Any
    writes: list
    staged: Optional[NumberedBatch] = None


class BatchWriter:
    """Writes batches, one after another, in the calling thread's database connection.

    `failures`: why a session's writes are refused, by session; its writes are dropped from every batch
    (read only: whoever learns of a failure from an outcome records it). `gate`: a test's handle: when
    given, each batch, its statements executed, waits for the event before it commits, with `holding`
    set meanwhile.
    """

    def __init__(self, failures: dict, *, gate: Optional[threading.Event] = None,
                 holding: Optional[threading.Event] = None):
        self.failures = failures
        self.open: dict[Any, dict[int, Node]] = {}  # nodes written running, by session
        self.gate = gate
        self.holding = holding if holding is not None else threading.Event()
        self.upcoming: Optional[Upcoming] = None

    def take_upcoming(self) -> Optional[Upcoming]:
        """The batch taken (and staged) while the last one was on the server, if any; it is the caller's."""
        upcoming, self.upcoming = self.upcoming, None
        return upcoming

    def write(self, writes: list, take_next: Optional[NextBatch] = None,
              staged: Optional[NumberedBatch] = None, *,
              meanwhile: Optional[Callable[[], None]] = None) -> dict[tuple, Outcome]:
        """Write `writes` (`staged`: their parts, staged while the batch before was on the server).
        Returns each part's outcome, a refusal's reason found; the nodes now open are kept in `open`.
        `meanwhile`: called while the server works on the batch, before the next batch is taken (it must
        not raise); only where the batch is sent ahead (PostgreSQL, with `take_next`, no test's gate),
        and not if the statements fail before their round trip."""
        parts = staged.parts if staged is not None else parts_of(writes, self.failures)
        if not parts:  # nothing left to write (a flush alone, or writes of failed sessions): no transaction
            return {}
        try:
            with WriteTransaction() as tx:
                # With a test's gate the COMMIT waits for it; otherwise it may go with the statements,
                # and on PostgreSQL the next batch is staged while the server works on them.
                held = self.gate is not None
                pipelined = not held and take_next is not None and tx.connection.vendor in PIPELINED_VENDORS
                outcomes = write_parts(tx, parts, self.open, commit=not held,
                                       meanwhile=partial(self._stage_next, tx, take_next, meanwhile)
                                       if pipelined else None,
                                       staged=staged)
                self._wait_at_gate()
        except Exception as error:
            self._unstage_next()
            outcomes = self._through_outage(parts) if transient(error) else self._part_by_part(parts)
        self._explain_refusals(outcomes)
        if any(outcome.refused or outcome.failure is not None for outcome in outcomes.values()):
            self._unstage_next()  # staged before these sessions' writes were known to fail
        self._keep_open(outcomes)
        return outcomes

    def forget(self, session_id: Any) -> None:
        """Drop the open nodes kept of a session that has ended."""
        self.open.pop(session_id, None)

    def _stage_next(self, tx: WriteTransaction, take_next: NextBatch, first: Optional[Callable[[], None]],
                    in_flight: NumberedBatch) -> None:
        """While the server works on the batch `in_flight`: `first` (the caller's `meanwhile`), then take
        the next batch if it is ready, and stage it (`prestage`, no database work) so that only its
        sending is left for after this batch. It never raises: the batch in flight may be committed
        already, and must not look failed."""
        if first is not None:
            first()
        try:
            taken = take_next()
            if taken is None:
                return
            self.upcoming = upcoming = Upcoming(*taken)
            upcoming.staged = prestage(tx, parts_of(upcoming.writes, self.failures), self.open, in_flight)
        except Exception:  # the batch, if taken, is staged the usual way when it is written
            log.warning("staging the next batch of node writes failed", exc_info=True)

    def _unstage_next(self) -> None:
        if self.upcoming is not None:
            self.upcoming.staged = None

    def _wait_at_gate(self) -> None:
        if self.gate is not None and not self.gate.is_set():
            self.holding.set()
            self.gate.wait()
            self.holding.clear()

    def _part_by_part(self, parts: list[Part]) -> dict[tuple, Outcome]:
        """One session's bad write must not cost the others theirs: each part alone."""
        log.warning("a batch of node writes for %d session(s) failed; writing it session by session",
                    len(parts), exc_info=True)
        outcomes: dict[tuple, Outcome] = {}
        for part in parts:
            outcomes.update(self._write_alone(part))
        return outcomes

    def _through_outage(self, parts: list[Part]) -> dict[tuple, Outcome]:
        """The batch again, the database having gone away during it: tried until it is back (or
        `OPENPROGRAM_DB_OUTAGE_S` has passed: then each session's writes fail, `DatabaseUnreachable`).
        The runs meanwhile go on until the queue is full, then wait for room. A batch whose COMMIT went
        through unseen is found committed, not written twice."""
        connections[DEFAULT_DB_ALIAS].close()  # lost with the batch; the next try opens another

        def attempt() -> dict[tuple, Outcome]:
            if committed(parts):
                return unseen_outcomes(parts)
            with WriteTransaction() as tx:
                return write_parts(tx, parts, self.open)

        try:
            return waited_out(f"a batch of node writes for {len(parts)} session(s)", attempt)
        except DatabaseUnreachable as unreachable:
            log.error("%s", unreachable)
            return {part.key: Outcome(failure=unreachable) for part in parts}
        except Exception:
            return self._part_by_part(parts)

    def _write_alone(self, part: Part) -> dict[tuple, Outcome]:
        try:
            with WriteTransaction() as tx:
                return write_parts(tx, [part], self.open)
        except Exception as exc:
            log.exception("node writes of session %s failed", part.session_id)
            return {part.key: Outcome(failure=exc)}

    def _explain_refusals(self, outcomes: dict[tuple, Outcome]) -> None:
        """Say why each refused part was refused (the session ended, or another worker holds it)."""
        for (session_id, lease), outcome in outcomes.items():
            if outcome.refused:
                try:
                    with WriteTransaction() as tx:
                        outcome.failure = refusal(tx, session_id, lease)
                except Exception as exc:
                    # Refused all the same; and the batch's other sessions, committed, must still be
                    # published and settled.
                    log.warning("why session %s's writes were refused could not be read", session_id, exc_info=True)
                    outcome.failure = WriteRefused(f"session {session_id} no longer belongs to this run "
                                                   f"({lease}); the write was refused and the run stops "
                                                   f"(why could not be read: {type(exc).__name__}: {exc})")

    def _keep_open(self, outcomes: dict[tuple, Outcome]) -> None:
        for (session_id, _), outcome in outcomes.items():
            if outcome.failure is not None:
                continue
            known = self.open.setdefault(session_id, {})
            known.update(outcome.opened)
            for pk in outcome.closed:
                known.pop(pk, None)
            if not known:
                self.open.pop(session_id, None)
