"""The app's long-lived threads carry their names at the OS level, where `top -H`, `ps -L`, perf and
/proc/<pid>/task (the recording bench's CPU by thread) read them."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dag.recording.write_path import group_commit, process_writer
from dag.runs.daemon import DaemonThread
from dag.thread_names import NATIVE_NAME_CHARS, name_native_thread, native_name

from .dag_helpers import new_session, parent, recording

needs_proc = pytest.mark.skipif(not Path("/proc/thread-self/comm").exists(), reason="thread names live in Linux's /proc")


def os_name(thread: threading.Thread) -> str:
    return Path(f"/proc/self/task/{thread.native_id}/comm").read_text().rstrip("\n")


def test_names_keep_what_tells_threads_of_one_kind_apart_within_linux_limit():
    assert native_name("openprogram-run-12") == "op-run-12"
    assert native_name("dag-group-commit") == "group-commit"
    assert native_name("openprogram-stop-watcher") == "op-stop-watcher"
    assert native_name("dag-recorder_0") == "recorder_0"
    assert native_name("a-very-long-name-of-a-thread") == "a-very-long-nam"
    assert all(len(native_name(name)) <= NATIVE_NAME_CHARS for name in ("x" * 40, "openprogram-" + "y" * 40))


@needs_proc
def test_a_thread_that_names_itself_shows_that_name_to_the_os():
    seen = {}

    def work():
        name_native_thread()
        seen["name"] = Path("/proc/thread-self/comm").read_text().rstrip("\n")

    thread = threading.Thread(target=work, name="openprogram-run-7")
    thread.start()
    thread.join()
    assert seen["name"] == "op-run-7"


@needs_proc
def test_a_daemon_thread_is_named_before_its_work_starts():
    seen, done = {}, threading.Event()

    def work(tag):
        seen["name"], seen["tag"] = Path("/proc/thread-self/comm").read_text().rstrip("\n"), tag
        done.set()

    DaemonThread("openprogram-heartbeat", work).ensure("given")
    assert done.wait(30)
    assert seen == {"name": "op-heartbeat", "tag": "given"}


@needs_proc
@pytest.mark.django_db(transaction=True)
def test_the_group_commit_writer_is_named_at_the_os_level():
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=1)):
        with recording(new_session()):
            parent(2)
        thread = next(thread for thread in threading.enumerate() if thread.name == "dag-group-commit")
        assert os_name(thread) == "group-commit"
