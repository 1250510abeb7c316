"""`runtime.interrupt.wait`: the outcome of the work, whichever moment it arrives."""
from concurrent.futures import Future

import pytest

from runtime import interrupt


class FinishesAsTheSliceRunsOut(Future):
    """A future whose work completes in the gap between a slice's timeout and the waiter's next look:
    the race a real thread hits rarely, held open here so it happens every time."""

    def __init__(self, outcome):
        super().__init__()
        self.outcome = outcome

    def result(self, timeout=None):
        if not self.done():
            self.outcome(self)
            raise TimeoutError  # what Future.result says for the slice that just ran out
        return super().result(timeout)


def test_work_that_finishes_as_a_slice_runs_out_gives_its_result_not_a_timeout():
    future = FinishesAsTheSliceRunsOut(lambda f: f.set_result("the answer"))
    assert interrupt.wait(future, check=lambda: None, timeout=60) == "the answer"


def test_work_that_raises_timeout_error_itself_gives_its_own_error():
    mine = TimeoutError("the work's own")
    future = FinishesAsTheSliceRunsOut(lambda f: f.set_exception(mine))
    with pytest.raises(TimeoutError) as caught:
        interrupt.wait(future, check=lambda: None)
    assert caught.value is mine
