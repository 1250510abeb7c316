"""A serving process whose batches go to a writer process, killed mid-run (test_writer_process).

`python -m tests.web.recording.writer_process_child SESSION_ID`, with DATABASE_URL naming the test
database: it claims the session under its own lease, opens an `outer` call, records 10 calls inside it
and flushes them (durable), then records 10 more, prints `WRITER <pid of its writer process>` and waits
to be killed.
"""
from __future__ import annotations

import os
import sys
import threading


def main(session_id: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    import django
    django.setup()

    from dag.recording import write_path
    from dag.recording.recorder import DjangoRecorder
    from dag.recording.write_path import process_writer
    from dag.recording.write_path.writer_process import ProcessWriter
    from dag.runs import leases
    from runtime import agentic_function, use_recorder

    writer = ProcessWriter()
    lease = leases.worker_id()
    write_path.claim_session(session_id, worker=lease)
    recorder = DjangoRecorder(session_id, lease=lease)

    @agentic_function(register_globally=False)
    def step(i: int) -> int:
        return i

    @agentic_function(register_globally=False)
    def outer() -> None:
        for i in range(10):
            step(i)
        recorder.flush()
        for i in range(10, 20):
            step(i)
        print(f"WRITER {writer._child.process.pid}", flush=True)
        threading.Event().wait()

    with process_writer.use_writer(writer), use_recorder(recorder):
        outer()


if __name__ == "__main__":
    main(sys.argv[1])
