"""What choosing a model call's context reads: counted queries and rows, never timed.

A bounded render_range reads the same rows at 100, 1,000 and 10,000 nodes; the default range (callers
unlimited) on a 10,000-node session reads about what the CONTEXT_LIMIT cap can hold and counts the
rest in one query.
"""
import pytest

from dag.models import Node
from dag.recording import context_render
from dag.recording.context_render import render_frame_context

from .context_helpers import counting_reads, flat_session, reference_render

pytestmark = pytest.mark.django_db

BOUNDED = {"callers": 5, "subcalls": 2}


def test_a_bounded_range_reads_the_same_few_rows_whatever_the_sessions_length():
    reads, texts = {}, {}
    for size in (100, 1_000, 10_000):
        session, viewer = flat_session(size)
        with counting_reads() as reads[size]:
            texts[size] = render_frame_context(session.id, viewer, None, BOUNDED)
        assert texts[size] == reference_render(session.id, viewer, None, BOUNDED)
    assert reads[100] == reads[1_000] == reads[10_000]
    # The chain (2 rows), then per slice a read of the latest shapes and one of the chosen texts;
    # hidden calls among the latest make the callers' walk read once more, a little past its 5.
    assert reads[10_000].queries <= 8 and reads[10_000].rows <= 30, reads[10_000]
    assert texts[10_000].count("\n\n[model call") + texts[10_000].count(")\n->") == 7


def test_a_walled_range_reads_nothing():
    session, viewer = flat_session(1_000)
    with counting_reads() as reads:
        assert render_frame_context(session.id, viewer, None, {"callers": 0, "subcalls": 0}) is None
    assert reads.queries == 0


def test_nothing_is_read_before_the_entry_call():
    """A model call of the entry function (an agent's loop) sees every call before its frame, and none
    can come before seq 0: its callers' slice is not read."""
    session, _ = flat_session(100)
    entry = Node.objects.get(session=session, seq=0).pk
    with counting_reads() as reads:
        assert render_frame_context(session.id, entry, None, {"callers": None, "subcalls": 0}) is None
    assert reads.queries == 1  # the chain, nothing more


def test_the_default_range_on_a_long_session_reads_what_the_cap_holds_and_counts_the_rest():
    session, viewer = flat_session(10_000, text=" " + "x" * 200)
    entry = Node.objects.get(session=session, seq=0).pk
    # The viewer late in the session (its callers overflow the cap), and the entry call (its own frame does).
    for frame in (viewer, entry):
        with counting_reads() as reads:
            text = render_frame_context(session.id, frame, None, None)
        assert text == reference_render(session.id, frame, None, None)
        left_out = int(text.split(" earlier calls left out")[0].lstrip("("))
        shown = text.count("\n-> ")
        assert left_out > 5_000 and shown < 1_000
        # Each shown node costs a shape row and a text row, and a third of the calls are hidden (a shape
        # row each); the walk reads at most a chunk of each past the cap, and counts the rest in one row.
        assert reads.rows <= shown // 2 + 2 * (shown + context_render._CHUNK) + 10, (reads, shown)
        assert reads.rows < 2_000
    with counting_reads() as bounded:
        render_frame_context(session.id, entry, None, {"subcalls": 3, "callers": 5})
    assert bounded.rows <= 15, bounded
