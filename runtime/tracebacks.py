"""An exception's traceback as a person debugging their function wants it: their own frames, file:line
each, and the runtime's frames (the wrapper, the model loop, dispatch) folded into one line per run of
them, since they say nothing about the user's code and would bury it.

Only what Python's traceback text holds is kept (file, line, function, source line, the exception's
type and message): no local variables, so no secret a frame held is added.
"""
from __future__ import annotations

import os
import traceback
from typing import Optional

RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# A RecursionError's traceback has a thousand frames; the innermost ones say where it went wrong.
MAX_FRAMES = 40
MAX_CHARS = 20_000


def is_runtime_frame(filename: str) -> bool:
    """True for a frame of this package's own code (not of the user's functions)."""
    return os.path.abspath(filename).startswith(RUNTIME_DIR)


def folded_frames(frames: list[traceback.FrameSummary]) -> list[str]:
    """The frames as traceback lines, each consecutive run of runtime frames as one line."""
    lines: list[str] = []
    folded = 0
    for frame in frames:
        if is_runtime_frame(frame.filename):
            folded += 1
            continue
        if folded:
            lines.append(_fold_line(folded))
            folded = 0
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n')
        if frame.line:
            lines.append(f"    {frame.line.strip()}\n")
    if folded:
        lines.append(_fold_line(folded))
    return lines


def _fold_line(count: int) -> str:
    return f"  [{count} frame{'s' if count != 1 else ''} of the openprogram runtime]\n"


def user_traceback(error: Optional[BaseException]) -> str:
    """`error`'s traceback with the runtime's frames folded (see the module), "" for no error or one
    raised without a traceback."""
    if error is None or error.__traceback__ is None:
        return ""
    frames = traceback.extract_tb(error.__traceback__)
    skipped = max(0, len(frames) - MAX_FRAMES)
    lines = ["Traceback (most recent call last):\n"]
    if skipped:
        lines.append(f"  [{skipped} outer frames not kept]\n")
    lines += folded_frames(list(frames)[skipped:])
    lines += traceback.format_exception_only(type(error), error)
    text = "".join(lines)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + "\n[traceback cut]\n"
