"""A process that records into a session, then is killed mid-run (test_group_commit, test_writer_process).

`python -m tests.web.recording.recording_child SESSION_ID DURABLE HELD [writer-process]`, with
DATABASE_URL naming the test database: it claims the session under its own lease, opens an `outer`
call, records DURABLE calls inside it and flushes them (durable), then records HELD more calls and
waits to be killed:
- by default, with its group-commit writer held inside that batch's transaction, its statements
  executed but not committed; it prints HOLDING;
- with `writer-process`, its batches go to a writer process (whatever becomes of the HELD calls); it
  prints `WRITER <pid of its writer process>`.
"""
from __future__ import annotations

import os
import sys
import threading


def main(session_id: str, durable: int, held: int, writer_process: bool = False) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    import django
    django.setup()

    from dag.recording import write_path
    from dag.recording.recorder import DjangoRecorder
    from dag.recording.write_path import group_commit, process_writer
    from dag.recording.write_path.writer_process import ProcessWriter
    from dag.runs import leases
    from runtime import agentic_function, use_recorder

    gate = threading.Event()
    gate.set()
    if writer_process:
        writer = ProcessWriter()
    else:  # a window longer than the test: batches commit only when a flush asks for them
        writer = group_commit.GroupWriter(batch_ms=600_000, batch_rows=1000, gate=gate)
    lease = leases.worker_id()
    write_path.claim_session(session_id, worker=lease)
    recorder = DjangoRecorder(session_id, lease=lease)

    @agentic_function(register_globally=False)
    def step(i: int) -> int:
        return i

    @agentic_function(register_globally=False)
    def outer() -> None:
        for i in range(durable):
            step(i)
        recorder.flush()
        gate.clear()
        for i in range(durable, durable + held):
            step(i)
        if writer_process:
            print(f"WRITER {writer._child.process.pid}", flush=True)
        else:
            threading.Thread(target=writer.flush, daemon=True).start()  # the batch goes to the database...
            writer.holding.wait()  # ...and stops short of its commit
            print("HOLDING", flush=True)
        threading.Event().wait()

    with process_writer.use_writer(writer), use_recorder(recorder):
        outer()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["writer-process"])
