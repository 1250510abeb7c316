"""A child Python process of this project that its parent talks to over a pair of pipes: the writer
process (`dag.recording.write_path.writer_process`) and the span process (`dag.telemetry.export`)."""
from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import NamedTuple, Optional

try:
    import fcntl
except ImportError:  # not a Unix: pipes keep the size they have
    fcntl = None

# The directory that holds the `dag` package: the child imports the project from there.
PROJECT_ROOT = Path(__file__).resolve().parents[1]


class PipedChild(NamedTuple):
    process: subprocess.Popen
    sending: Connection  # the parent's end of the pipe the child reads
    receiving: Connection  # the parent's end of the pipe the child writes


def widen(end: int, size: int) -> None:
    """Ask for a pipe of `size` bytes; on other systems than Linux, or past /proc/sys/fs/pipe-max-size, it
    keeps the size it has."""
    try:
        fcntl.fcntl(end, fcntl.F_SETPIPE_SZ, size)
    except (AttributeError, OSError):
        pass


def start(program: str, *args: str, sending_bytes: int, receiving_bytes: int = 0,
          env: Optional[dict] = None) -> PipedChild:
    """Run `python -c program <fd it reads> <fd it writes> *args` with the project importable, its pipes
    widened to the sizes given (0: as they are). The child's ends are closed here once it has them; if it
    cannot start, the parent's are too."""
    from_parent, to_child = os.pipe()
    from_child, to_parent = os.pipe()
    for end, size in ((to_child, sending_bytes), (to_parent, receiving_bytes)):
        if size:
            widen(end, size)
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    try:
        process = subprocess.Popen([sys.executable, "-c", program, str(from_parent), str(to_parent), *args],
                                   pass_fds=(from_parent, to_parent), env=env, stdin=subprocess.DEVNULL)
    except BaseException:
        os.close(to_child)
        os.close(from_child)
        raise
    finally:
        os.close(from_parent)
        os.close(to_parent)
    return PipedChild(process, Connection(to_child, readable=False), Connection(from_child, writable=False))
