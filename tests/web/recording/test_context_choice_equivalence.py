"""The walk that reads only what a render_range reaches renders exactly what reading the whole session did,
from the stored nodes and from a run's nodes held in memory alike.

Random small DAGs (seeded): calls opened under any open frame, so branches run in parallel and
interleave by seq; every expose value; model calls and code calls; finished, failed and still running
nodes. Every code node is a viewer, under several ranges, caps and chunk sizes.
"""
import random
from functools import partial

import pytest

from dag.recording import context_render
from dag.recording.context_render import render_context_of, render_frame_context
from dag.recording.run_nodes import RunNodes, stored_nodes

from .context_helpers import build_session, reference_render

pytestmark = pytest.mark.django_db

EXPOSES = ("io", "llm", "full", "hidden")
RANGES = [None, {"callers": 0}, {"callers": 1, "subcalls": 1}, {"callers": 2, "subcalls": 0},
          {"callers": 5, "subcalls": 3}, {"subcalls": 2}, {"callers": None, "subcalls": -1}]


# A model request's messages: a first turn, or a tool loop's later turn (its earlier turns repeated).
TURNS = [
    lambda seq, words: [{"role": "user", "content": f"ask {seq} {words}"}],
    lambda seq, words: [{"role": "user", "content": f"ask {seq}"},
                        {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "arguments": {}}]},
                        {"role": "tool", "name": "t", "content": f"found {words}"}],
]


def random_dag(rng: random.Random, size: int) -> tuple[list[dict], list]:
    """(node fields, parent seqs) of a run where calls open, speak and end in random order."""
    nodes, parents, open_frames = [], [], []
    for seq in range(size):
        if not open_frames or (len(open_frames) < 6 and rng.random() < 0.4):
            parent = rng.choice(open_frames) if open_frames else None
            nodes.append({"kind": "code", "name": f"f{seq}", "expose": rng.choice(EXPOSES), "status": "running",
                          "doc": rng.choice(["", f"Doc of f{seq}."]), "input": {"n": seq}})
            open_frames.append(seq)
        else:
            parent = rng.choice(open_frames)
            status = rng.choice(["completed", "completed", "error"])
            nodes.append({"kind": "llm", "name": "llm", "expose": rng.choice(EXPOSES), "status": status,
                          "model": rng.choice(["", "sim-1"]), "error": "Boom: x" if status == "error" else "",
                          "input": {"messages": rng.choice(TURNS)(seq, "w" * rng.randrange(40))},
                          "output": {"text": f"reply {seq}", "tool_calls": []}})
        parents.append(parent)
        if len(open_frames) > 1 and rng.random() < 0.25:  # a call other than the entry ends
            ended = open_frames.pop(rng.randrange(1, len(open_frames)))
            nodes[ended].update(status=rng.choice(["completed", "error", "cancelled"]), output=f"out {ended}",
                                error="E: no" if rng.random() < 0.3 else "")
    return nodes, parents


def stored(session):
    """The context of a viewer, chosen from the session's stored nodes."""
    return partial(render_frame_context, session.id)


def held(session):
    """The context of a viewer, chosen from the session's nodes held in memory, as a run holds its own."""
    nodes = RunNodes(complete=False)
    nodes.read_stored(partial(stored_nodes, session.id))
    return partial(render_context_of, nodes.held())


@pytest.mark.parametrize("source", [stored, held])
@pytest.mark.parametrize("seed", range(16))
def test_random_dags_render_as_the_whole_session_reference(seed, source, monkeypatch):
    rng = random.Random(seed)
    nodes, parents = random_dag(rng, rng.randrange(8, 45))
    session, ids = build_session(nodes, parents)
    render = source(session)
    viewers = [ids[seq] for seq, node in enumerate(nodes) if node["kind"] == "code"]
    shown = left_out = 0
    for limit in (100_000, rng.choice([80, 200])):
        monkeypatch.setattr(context_render, "CONTEXT_LIMIT", limit)
        monkeypatch.setattr(context_render, "_CHUNK", rng.choice([1, 2, 3, 7, 200]))
        for viewer in viewers:
            for render_range in [None, *rng.sample(RANGES[1:], 2)]:
                expected = reference_render(session.id, viewer, None, render_range)
                assert render(viewer, None, render_range) == expected, (
                    f"seed {seed}, viewer {viewer}, range {render_range}, limit {limit}")
                shown += expected is not None
                left_out += "left out" in (expected or "")
    assert shown and left_out  # some viewer saw something, and some context was cut by the cap


@pytest.mark.parametrize("source", [stored, held])
def test_a_session_with_two_roots_and_a_viewer_that_is_not_a_node(source):
    session, ids = build_session([{"name": "first", "expose": "full"}, {"kind": "llm", "name": "llm",
                                  "output": {"text": "hi", "tool_calls": []}}, {"name": "second"},
                                  {"name": "inner", "status": "running"}], [None, 0, None, 2])
    render = source(session)
    for render_range in RANGES:
        assert render(ids[3], None, render_range) == reference_render(session.id, ids[3], None, render_range)
    assert render(ids[3], None, None).startswith("Earlier in this session:\n\nfirst()")
    assert render(10 ** 9, None, None) is None
