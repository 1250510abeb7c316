"""Running one session, start to terminal status, and recovering sessions whose process died.

Whatever ends a run (return, exception, stop, shutdown), the session gets exactly one terminal status
and no node stays `running`. Status changes go through `dag.recording.write_path`, where a terminal
status is final, so a stop's `cancelled` is never overwritten by a late `completed`.
"""
from __future__ import annotations

import asyncio
import logging
import os

from django.utils import timezone

from runtime import CancelledError, create_runtime, use_recorder, use_runtime

from ..models import Session
from ..recording import write_path
from ..recording.recorder import DjangoRecorder, error_text
from . import catalog, launch_budget, leases, reaper, replay_source, steering, stop

log = logging.getLogger(__name__)

QUEUED_IN_DEAD_SERVER = "the server this session was queued in stopped before running it; run it again"
ORPHANED = "the process running this session ended before the session did"


def run_session(session_id) -> None:
    """Claim the session under this process's lease and run its function, recording into its DAG.

    Any executor calls this in the process (and thread) where the run happens; it holds the lease
    (`dag.runs.leases`: the heartbeat and the reaper start with the process's first run), and every
    write of the run is fenced by it.

    The run's own failures end the session and stop here. SystemExit and KeyboardInterrupt end the
    session too, then propagate: they ask the process (or the CLI) to stop, which is not the run's to
    swallow.
    """
    lease, claimed_at = leases.worker_id(), timezone.now()
    # Tried again through a database outage: a retry after a claim that committed unseen finds its own.
    session = write_path.borrowed(f"session {session_id}'s claim", lambda: write_path.claim_session(
        session_id, worker=lease, now=claimed_at))
    if session is None:
        return
    # One spelling of the id (a UUID's text) for the lease, the stop signal and the writes: the heartbeat
    # tells the sessions it renewed by it, and a hex spelling would read as a lost lease.
    session_id = str(session.pk)
    try:
        tool = catalog.get(session.function).tool
        kwargs = tool.validate(session.args)
        # The model the launch chose; a bad runtime setting (OPENPROGRAM_UNATTENDED=maybe on a worker
        # started without the system checks) ends the session saying so, not left running.
        model_runtime = replay_source.runtime_for(session) or create_runtime(model=session.model or None)
    except Exception as exc:  # the function was removed or changed its parameters since the launch
        write_path.finish_session(session_id, Session.Status.ERROR, error=str(exc), lease=lease)
        return
    status, result, error = Session.Status.COMPLETED, None, ""
    leaving: BaseException | None = None
    recorder = DjangoRecorder(session, lease=lease, empty=session.node_count == 0)
    with leases.held(session_id), stop.watch(session_id) as signal, \
            steering.attending(session, lease, signal, model_runtime), use_recorder(recorder), \
            use_runtime(model_runtime):
        try:
            with launch_budget.opened(session.launch_budget):
                outcome = tool(**kwargs)
                # A worker thread has no event loop of its own: an async function gets one for its run.
                result = asyncio.run(outcome) if tool.is_async else outcome
        except CancelledError as exc:
            status, error = _stopped_status(signal), error_text(exc)
        except BaseException as exc:  # whatever ended the run, the session ends too
            # A stop can surface as another error (a closed client); it is still a stop.
            status = _stopped_status(signal) if signal.is_set else _failed_status(exc)
            error = error_text(exc)
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                leaving = exc
        finally:
            lost = recorder.close()  # also ends its write thread for event-loop code, if the run started one
            model_runtime.close()
    if lost is not None and not isinstance(lost, write_path.WriteRefused):
        # A refusal means the run was written off, and its finish below is refused too; any other
        # failure lost calls the session must not look whole without.
        status, error = _with_lost_calls(status, error, lost)
    try:
        _finish(session_id, status, result, error, lease)
    finally:
        if leaving is not None:  # asked of the process, whether or not the session could be ended
            raise leaving


def _finish(session_id, status: str, result, error: str, lease: str) -> None:
    def finish(status: str, **fields) -> None:
        # Fenced too: a run that was written off (reaped, force-finished) changes nothing here. Tried
        # again through an outage: a retry after an end that committed unseen finds the session ended.
        write_path.borrowed(f"session {session_id}'s end", lambda: write_path.finish_session(
            session_id, status, lease=lease, **fields))

    try:
        finish(status, result=result, error=error)
    except write_path.DatabaseUnreachable:
        log.error("session %s: its end (%s) could not be stored, the database out of reach; the reaper ends "
                  "it interrupted once its lease expires", session_id, status)
    except Exception as exc:  # the database refused the result: the session still ends, saying why
        log.exception("session %s: its end (%s) could not be stored", session_id, status)
        finish(Session.Status.ERROR, error=f"the run ended {status}, but its end could not be stored: "
                                           f"{error_text(exc)}")


def _with_lost_calls(status: str, error: str, lost: BaseException) -> tuple[str, str]:
    note = f"some of the run's calls could not be recorded, so its tree is incomplete ({error_text(lost)})"
    return (_failed_status(lost) if status == Session.Status.COMPLETED else status,
            f"{error}; {note}" if error else note)


def _failed_status(error: BaseException) -> str:
    """A run ended by `error`: `interrupted` when the database stayed out of reach past
    OPENPROGRAM_DB_OUTAGE_S (nothing the function did), else `error`."""
    unreachable = isinstance(error, write_path.DatabaseUnreachable) or isinstance(
        error.__cause__, write_path.DatabaseUnreachable)
    return Session.Status.INTERRUPTED if unreachable else Session.Status.ERROR


def _stopped_status(signal: stop.StopSignal) -> str:
    stopped_by_request = signal.reason == stop.STOPPED or not signal.is_set
    return Session.Status.CANCELLED if stopped_by_request else Session.Status.INTERRUPTED


def request_stop(session_id) -> Session:
    """Persist a stop for the session, then signal its run if it runs in this process; idempotent, and a
    no-op once it has ended. Returns the session as stored afterwards (see `write_path.record_stop_request`).
    """
    session = write_path.record_stop_request(session_id)
    if not stop.signal_local(session_id) and session.status == Session.Status.RUNNING:
        stop.publish_stop(session_id)  # running elsewhere: wake its process (the poll is the fallback)
    return session


def recover_at_start(*, in_process: bool, now=None) -> int:
    """End the sessions no process will finish, at server or worker start; how many were ended.

    Only what is provably dead: sessions whose lease expired (the reaper's pass), and, when runs execute
    in the server's own process (`in_process`), the previous server's: sessions running under a worker
    id of this host whose process is gone, or claimed without a lease. Sessions with a live lease (a
    worker's, a `run_function` still going) are left running. Queued sessions wait in the broker with
    Celery (one whose message the broker lost is sent again by the reaper, `reaper.resend_queued`);
    with the in-process executor a queued session was in the previous server's own pool, which died
    with it, so it ends `interrupted` (it would otherwise stay queued, and count against its owner's
    active runs, forever): Run again starts it anew.
    """
    count = len(reaper.reap(now))
    if not in_process:
        return count
    host = leases.worker_id().rsplit(":", 1)[0]
    running = Session.objects.filter(status=Session.Status.RUNNING).values_list("pk", "worker")
    for session_id, worker in running:
        if worker and not _dead_process_of(host, worker):
            continue
        error = ORPHANED + (f" (worker {worker})" if worker else "")
        count += write_path.finish_session(session_id, Session.Status.INTERRUPTED, error=error)
    for session_id in Session.objects.filter(status=Session.Status.QUEUED).values_list("pk", flat=True):
        count += write_path.finish_session(session_id, Session.Status.INTERRUPTED, error=QUEUED_IN_DEAD_SERVER)
    return count


def _dead_process_of(host: str, worker: str) -> bool:
    """True if `worker` ("hostname:pid") was a process of this host that no longer exists."""
    worker_host, _, pid = worker.rpartition(":")
    if worker_host != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
