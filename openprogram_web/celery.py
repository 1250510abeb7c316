"""The Celery app that runs sessions on workers (`OPENPROGRAM_EXECUTOR=celery`, `make worker`).

`celery -A openprogram_web worker` finds this module by name. Nothing imports it on the embedded default,
so `make run` pays nothing for Celery. A run is long (minutes), cancellable and recorded in the
database, which is the truth about it; each setting below says what that asks of Celery.
"""
from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")

from dag.conf import conf  # noqa: E402 (reads Django's settings, which need the module set above)

app = Celery("openprogram_web", include=["dag.runs.celery_executor"])
app.conf.update(
    # CELERY_BROKER_URL, else REDIS_URL (openprogram_web/settings.py); the check dag.E002 names a missing one.
    broker_url=conf.CELERY_BROKER_URL or None,
    # Launches go to one named queue, which the worker consumes: two deployments can share a Redis.
    task_default_queue=conf.CELERY_QUEUE,
    # Acknowledge a run when it ends, not when it starts: a worker that dies mid-run leaves the message to
    # be redelivered, and the redelivery finds the session claimed or ended and does nothing (the claim is
    # a compare-and-set from queued), so nothing is lost and nothing runs twice.
    task_acks_late=True,
    # A worker reserves no more runs than it has threads: a long run never holds back queued ones that
    # another worker with a free thread could start (with late acks, running ones count as reserved).
    worker_prefetch_multiplier=1,
    # No result backend: the session row holds the status and result; a second copy would only disagree.
    result_backend=None,
    task_ignore_result=True,
    # Redis redelivers a message not acknowledged within this time, so it must be longer than the longest
    # run; otherwise a second worker would be handed a run still going (it would find the session claimed,
    # so nothing runs twice, but the message would circulate).
    broker_transport_options={"visibility_timeout": conf.CELERY_VISIBILITY_TIMEOUT_S},
    # A broker blip must not cancel runs: their work is in the database, and their late ack failing only
    # means a redelivery that finds the session claimed and does nothing.
    worker_cancel_long_running_tasks_on_connection_loss=False,
    # A worker lost mid-run leaves a session the reaper writes off `interrupted`; requeueing the message
    # would only deliver it again to a session already ended (and, with a run that kills its worker,
    # loop), so the message is acknowledged.
    task_reject_on_worker_lost=False,
    # Runs wait on models and tools (I/O), so threads; a run borrows a database connection only for
    # each operation it makes (dag.recording.write_path.borrowing), so they share a small pool.
    worker_pool="threads",
    worker_concurrency=conf.WORKER_CONCURRENCY,
    # Wait for Redis at start-up instead of exiting (workers usually start beside it).
    broker_connection_retry_on_startup=True,
)


@worker_init.connect
def _tune_garbage_collector(**_) -> None:
    from openprogram_web.gc_tuning import tune_for_serving
    tune_for_serving()  # the worker has imported the tasks and Django: see gc_tuning


@worker_init.connect
def _start_the_writer_process(**_) -> None:
    from dag.recording.write_path import process_writer
    process_writer.serving_process()  # its runs' node writes go to a writer process (OPENPROGRAM_WRITER=auto)
