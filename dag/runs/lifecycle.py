"""Running one session, start to terminal status, and recovering sessions whose process died.

Whatever ends a run (return, exception, stop, shutdown), the session gets exactly one terminal status
and no node stays `running`. Status changes go through `dag.recording.write_path`, where a terminal status is
final, so a stop's `cancelled` is never overwritten by a late `completed`.
"""
from __future__ import annotations

import asyncio
import logging

from django.db import transaction

from runtime import CancelledError, create_runtime, use_recorder, use_runtime

from ..models import Node, Session
from ..recording import write_path
from ..recording.recorder import DjangoRecorder, error_text
from ..recording.values import clean_text
from . import catalog, launch_budget, stop

log = logging.getLogger(__name__)

STOPPED_BEFORE_START = "stopped before it started"
ORPHANED = "the process running this session ended before the session did"

_NODE_STATUS_AFTER = {
    # Nodes still open when the run is over: a child outlived its caller (e.g. an abandoned thread).
    Session.Status.COMPLETED: Node.Status.INTERRUPTED,
    Session.Status.ERROR: Node.Status.ERROR,
    Session.Status.CANCELLED: Node.Status.CANCELLED,
    Session.Status.INTERRUPTED: Node.Status.INTERRUPTED,
}


def finish(session_id, status: str, *, result=None, error: str = "") -> bool:
    """Close the session's open nodes and give it terminal `status`; False if it had ended already."""
    error = clean_text(error)
    write_path.close_open_nodes(session_id, _NODE_STATUS_AFTER[status], error=error)
    return write_path.set_session_status(session_id, status, result=result, error=error)


def _claim(session_id) -> Session | None:
    """Move a queued session to running and return it; None if it must not run (ended or stopped)."""
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.status != Session.Status.QUEUED:
            return None
        if session.cancel_requested:
            finish(session_id, Session.Status.CANCELLED, error=STOPPED_BEFORE_START)
            return None
        write_path.set_session_status(session_id, Session.Status.RUNNING)
    return session


def run_session(session_id) -> None:
    """Run the session's function with its arguments, recording into its DAG; never raises for the run."""
    session = _claim(session_id)
    if session is None:
        return
    try:
        tool = catalog.get(session.function).tool
        kwargs = tool.validate(session.args)
    except Exception as exc:  # the function was removed or changed its parameters since the launch
        finish(session_id, Session.Status.ERROR, error=str(exc))
        return
    status, result, error = Session.Status.COMPLETED, None, ""
    recorder = DjangoRecorder(session)
    model_runtime = create_runtime(model=session.model or None)  # the model the launch chose
    with stop.watch(session_id) as signal, use_recorder(recorder), use_runtime(model_runtime):
        try:
            with launch_budget.opened(session.launch_budget):
                outcome = tool(**kwargs)
                # A worker thread has no event loop of its own: an async function gets one for its run.
                result = asyncio.run(outcome) if tool.is_async else outcome
        except CancelledError as exc:
            status, error = _stopped_status(signal), error_text(exc)
        except BaseException as exc:  # SystemExit included: whatever ended the run, the session ends too
            # A stop can surface as another error (a closed client); it is still a stop.
            status = _stopped_status(signal) if signal.is_set else Session.Status.ERROR
            error = error_text(exc)
        finally:
            recorder.close()  # its write thread for event-loop code, if the run started one
            model_runtime.close()
    finish(session_id, status, result=result, error=error)


def _stopped_status(signal: stop.StopSignal) -> str:
    return Session.Status.INTERRUPTED if signal.reason == stop.SHUTDOWN else Session.Status.CANCELLED


def request_stop(session_id) -> Session:
    """Persist a stop for the session, then signal its run; idempotent, and a no-op once it has ended.

    A session that has not started yet is cancelled on the spot (its run, when a worker picks it up,
    finds it ended and does nothing); a running one is cancelled by its run at the next function entry
    or model call. Returns the session as stored afterwards.
    """
    # A plain read first: a stop that finds the session ended or its stop persisted has nothing to write,
    # so it returns at once instead of queueing on the row lock behind every other stop.
    current = Session.objects.get(pk=session_id)
    if current.is_terminal:
        return current
    if current.cancel_requested:
        stop.signal_local(session_id)
        return current
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        if session.is_terminal:
            return session
        if session.status == Session.Status.QUEUED:
            write_path.update_session(session_id, unless_terminal=True, cancel_requested=True)
            finish(session_id, Session.Status.CANCELLED, error=STOPPED_BEFORE_START)
        elif not session.cancel_requested:
            write_path.update_session(session_id, unless_terminal=True, cancel_requested=True)
    stop.signal_local(session_id)
    return Session.objects.get(pk=session_id)


def interrupt_orphaned_sessions() -> int:
    """Mark every queued or running session interrupted; for startup, when no run of ours is alive.

    Only valid when every executor that could hold these sessions has died with the previous process
    (the embedded in-process executor); returns how many sessions were interrupted.
    """
    orphaned = Session.objects.filter(status__in=[Session.Status.QUEUED, Session.Status.RUNNING])
    count = 0
    for session_id in orphaned.values_list("pk", flat=True):
        count += finish(session_id, Session.Status.INTERRUPTED, error=ORPHANED)
    return count
