"""The operating system's name for each long-lived thread of the app.

CPython 3.11 gives every thread the process's name at the OS level ("daphne", "celery"), so `top -H`,
`ps -L`, perf and /proc/<pid>/task cannot tell the group-commit writer from a run thread or the
event loop. Each such thread names itself as it starts: its Python name, shortened to what Linux
keeps (15 characters). Elsewhere (no /proc) naming does nothing.
"""
from __future__ import annotations

import threading

NATIVE_NAME_CHARS = 15  # Linux: TASK_COMM_LEN (16) with its terminating NUL
# Prefixes every thread of one kind shares, shortened so that what tells them apart (a run thread's
# number) fits in the 15 characters.
SHORTER = (("openprogram-", "op-"), ("dag-", ""))


def native_name(name: str) -> str:
    """`name` as the OS keeps it: "openprogram-run-3" -> "op-run-3", "dag-group-commit" -> "group-commit"."""
    for prefix, short in SHORTER:
        if name.startswith(prefix):
            name = short + name[len(prefix):]
            break
    return name[:NATIVE_NAME_CHARS]


def name_native_thread() -> None:
    """Give the calling thread its Python name (shortened) at the OS level; best effort."""
    try:
        with open("/proc/thread-self/comm", "w") as comm:
            comm.write(native_name(threading.current_thread().name))
    except OSError:  # not Linux, or /proc not mounted: the thread keeps the process's name
        pass
