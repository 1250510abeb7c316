"""Running one session, start to terminal status, and recovering sessions whose process died.

Whatever ends a run (return, exception, stop, shutdown), the session gets exactly one terminal status
and no node stays `running`. Status changes go through `dag.recording.write_path`, where a terminal
status is final, so a stop's `cancelled` is never overwritten by a late `completed`.
"""
from __future__ import annotations

import asyncio
import logging

from runtime import CancelledError, create_runtime, use_recorder, use_runtime

from ..models import Session
from ..recording import write_path
from ..recording.recorder import DjangoRecorder, error_text
from . import catalog, launch_budget, stop

log = logging.getLogger(__name__)

ORPHANED = "the process running this session ended before the session did"


def run_session(session_id) -> None:
    """Run the session's function with its arguments, recording into its DAG.

    The run's own failures end the session and stop here. SystemExit and KeyboardInterrupt end the
    session too, then propagate: they ask the process (or the CLI) to stop, which is not the run's to
    swallow.
    """
    session = write_path.claim_session(session_id)
    if session is None:
        return
    try:
        tool = catalog.get(session.function).tool
        kwargs = tool.validate(session.args)
    except Exception as exc:  # the function was removed or changed its parameters since the launch
        write_path.finish_session(session_id, Session.Status.ERROR, error=str(exc))
        return
    status, result, error = Session.Status.COMPLETED, None, ""
    leaving: BaseException | None = None
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
        except BaseException as exc:  # whatever ended the run, the session ends too
            # A stop can surface as another error (a closed client); it is still a stop.
            status = _stopped_status(signal) if signal.is_set else Session.Status.ERROR
            error = error_text(exc)
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                leaving = exc
        finally:
            recorder.close()  # its write thread for event-loop code, if the run started one
            model_runtime.close()
    write_path.finish_session(session_id, status, result=result, error=error)
    if leaving is not None:
        raise leaving


def _stopped_status(signal: stop.StopSignal) -> str:
    return Session.Status.INTERRUPTED if signal.reason == stop.SHUTDOWN else Session.Status.CANCELLED


def request_stop(session_id) -> Session:
    """Persist a stop for the session, then signal its run if it runs in this process; idempotent, and a
    no-op once it has ended. Returns the session as stored afterwards (see `write_path.record_stop_request`).
    """
    session = write_path.record_stop_request(session_id)
    if not stop.signal_local(session_id) and session.status == Session.Status.RUNNING:
        stop.publish_stop(session_id)  # running elsewhere: wake its process (the poll is the fallback)
    return session


def interrupt_orphaned_sessions() -> int:
    """Mark every queued or running session interrupted; for startup, when no run of ours is alive.

    Only valid when every executor that could hold these sessions has died with the previous process
    (the embedded in-process executor); returns how many sessions were interrupted.
    """
    orphaned = Session.objects.filter(status__in=[Session.Status.QUEUED, Session.Status.RUNNING])
    count = 0
    for session_id in orphaned.values_list("pk", flat=True):
        count += write_path.finish_session(session_id, Session.Status.INTERRUPTED, error=ORPHANED)
    return count
