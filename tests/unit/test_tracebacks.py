"""runtime.tracebacks: the user's frames kept as file:line, the runtime's folded into one line."""
from __future__ import annotations

from runtime import agentic_function
from runtime.tracebacks import MAX_FRAMES, user_traceback


def caught(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test wants whatever it raised
        return exc
    raise AssertionError("expected the call to raise")


def test_user_frames_are_kept_and_runtime_frames_folded():
    @agentic_function(register_globally=False)
    def inner() -> None:
        raise KeyError("missing")

    @agentic_function(register_globally=False)
    def outer() -> None:
        inner()

    text = user_traceback(caught(outer))
    assert text.startswith("Traceback (most recent call last):\n")
    assert f'File "{__file__}"' in text and "in outer" in text and "in inner" in text
    assert "[1 frame of the openprogram runtime]" in text  # the wrappers' __call__, one line each
    assert "runtime/function.py" not in text
    assert text.rstrip().endswith("KeyError: 'missing'")


def test_a_deep_recursion_keeps_its_innermost_frames():
    def down(n: int) -> None:
        if n == 0:
            raise ValueError("bottom")
        down(n - 1)

    text = user_traceback(caught(lambda: down(200)))
    assert "outer frames not kept" in text and text.count(", in down") == MAX_FRAMES
    assert text.rstrip().endswith("ValueError: bottom")


def test_no_error_no_traceback():
    assert user_traceback(None) == "" and user_traceback(ValueError("never raised")) == ""
