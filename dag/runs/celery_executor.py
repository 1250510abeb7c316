"""Runs on Celery workers (`OPENPROGRAM_EXECUTOR=celery`): the executor, the task, and the worker's shutdown.

The web process sends one task per session, after the session row commits, with the session id as the
task id. A worker runs it with `lifecycle.run_session`, whose claim is a compare-and-set from `queued`:
a duplicate or redelivered message finds the session claimed or ended and does nothing. So a message
the broker may have lost is simply sent again: the reaper (dag.runs.reaper) re-sends every session
still queued `OPENPROGRAM_QUEUED_RESEND_S` after it was last sent (`Session.sent_at`). The Celery app
and why each of its settings is what it is: openprogram_web/celery.py.
"""
from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.exceptions import Reject
from celery.signals import worker_process_shutdown, worker_ready, worker_shutting_down
from django.db import transaction
from django.utils import timezone
from kombu.utils.url import maybe_sanitize_url

from ..conf import conf
from ..models import Session
from ..recording import write_path
from . import lifecycle, reaper, stop
from .executors import Executor, run_in_this_thread

log = logging.getLogger(__name__)

TASK_NAME = "openprogram.run_session"
NOT_QUEUED = "the run could not be queued on the Celery broker"

# Set when this worker begins to shut down: a message it still starts is handed back to the queue.
_shutting_down = threading.Event()


class CeleryExecutor(Executor):
    """Sends each session to the Celery queue `queue`; any number of workers (`make worker`) run them."""

    supports_resend = True  # a broker can lose a message

    def __init__(self, queue: str):
        self.queue = queue

    @classmethod
    def from_settings(cls, settings) -> "CeleryExecutor":
        return cls(queue=settings.CELERY_QUEUE)

    def submit(self, session_id) -> None:
        # After commit: the worker's claim must find the session row.
        transaction.on_commit(lambda: self.send(str(session_id)))

    def send(self, session_id: str) -> None:
        """Send the session's task now, stamped sent first (the reaper sends it again if no worker claims
        it for `QUEUED_RESEND_S`); a broker that cannot take it ends the session `error`, named."""
        write_path.mark_sent([session_id], timezone.now())
        try:
            self._publish(session_id)
        except Exception as exc:  # kombu retried already; the session must not wait, queued, forever
            broker = _broker()
            log.exception("session %s could not be sent to the Celery broker %s", session_id, broker)
            write_path.finish_session(session_id, Session.Status.ERROR, error=(
                f"{NOT_QUEUED} {broker}: {type(exc).__name__}: {exc}. Check that Redis answers there "
                f"(CELERY_BROKER_URL, else REDIS_URL), then run the function again."))

    def resend(self, session_ids) -> None:
        """Send again the tasks of sessions the reaper stamped sent (`write_path.claim_resend`). A broker
        that cannot take one now is not asked for the rest either (each attempt waits on its retries):
        they stay queued, and a later pass tries again. They were accepted once, and a broker that lost
        their messages is likely one that is coming back."""
        for index, session_id in enumerate(session_ids):
            try:
                self._publish(str(session_id))
            except Exception as exc:
                log.warning("%d session(s) could not be sent to the Celery broker %s again (%s: %s); they stay "
                            "queued and a later reaper pass tries again", len(session_ids) - index, _broker(),
                            type(exc).__name__, exc)
                return

    def _publish(self, session_id: str) -> None:
        from openprogram_web.celery import app  # the configured app; imported only when Celery is in use

        app.send_task(TASK_NAME, args=[session_id], task_id=session_id, queue=self.queue)


def _broker() -> str:
    return maybe_sanitize_url(conf.CELERY_BROKER_URL) or "(none)"


@shared_task(name=TASK_NAME, ignore_result=True, acks_late=True)
def run_session_task(session_id: str) -> None:
    """Run one session on this worker's thread; a no-op for a session already claimed or ended."""
    if _shutting_down.is_set():
        # Not started: back to the queue for another worker (acknowledging it would strand the session).
        raise Reject("this worker is shutting down", requeue=True)
    run_in_this_thread(session_id)


@worker_ready.connect
def recover_and_reap_at_start(**kwargs) -> None:
    """A worker starting up writes off only expired leases (never another live worker's runs), then
    keeps reaping: every process that runs sessions runs a reaper (dag.runs.reaper)."""
    count = lifecycle.recover_at_start(in_process=False)
    if count:
        log.warning("worker start: %d session(s) with an expired lease marked interrupted", count)
    reaper.start()


@worker_shutting_down.connect
@worker_process_shutdown.connect
def stop_runs_at_shutdown(**kwargs) -> None:
    """A worker told to stop (SIGTERM, Ctrl-C) ends its runs `interrupted` now, not after the lease.

    Celery's warm shutdown then waits for the runs' threads, which record that promptly.
    """
    _shutting_down.set()
    count = stop.shut_down_local_runs()
    if count:
        log.warning("worker shutting down: %d run(s) stopped; they end interrupted", count)
