"""A live node change that encodes its record once (`frames.NodeItem`) says exactly what a plain message
dict with the same record says, before and after the write path gives it its final seq and rev."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.live import frames
from dag.recording.write_path.sql import new_node

# Text that looks like the keys renumbering looks for, inside values that come before and after them.
LOOKALIKE = st.sampled_from(['seq', 'rev', '"seq":', ',"seq":1,', '"rev":', ',"rev":2,', '{"id":3,"seq":4', ","]) | st.text(max_size=12)
VALUE = st.recursive(st.none() | st.integers() | LOOKALIKE,
                     lambda children: st.lists(children, max_size=3) | st.dictionaries(LOOKALIKE, children, max_size=3),
                     max_leaves=8)


def _node(**fields):
    fields = {"id": 7, "session_id": "s", "seq": 0, "kind": "code", "name": "n", "status": "completed",
              "started_at": datetime(2026, 12, 1, 18, 0, 0, 5, tzinfo=timezone.utc),
              "finished_at": datetime(2026, 12, 1, 18, 0, 2, tzinfo=timezone.utc), "rev": 1, **fields}
    return new_node(**fields)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(name=LOOKALIKE, doc=LOOKALIKE, input=VALUE, output=VALUE, usage=VALUE, seq=st.integers(0, 10 ** 6),
       rev=st.integers(1, 10 ** 9))
def test_a_renumbered_change_is_encoded_as_a_fresh_one_with_those_numbers(name, doc, input, output, usage, seq, rev):
    node = _node(name=name, doc=doc, input=input, output=output, usage=usage)
    item = frames.NodeItem(type="node", rev=node.rev, node=node.as_dict())
    assert item.record_json == frames.dumps(node.as_dict())  # made before the final numbers are known
    item.renumber(seq, rev)
    node.seq, node.rev = seq, rev
    fresh = {"type": "node", "rev": rev, "node": node.as_dict()}
    assert item == fresh
    assert item.record_json == frames.dumps(node.as_dict())
    assert frames.encode_item(item) == frames.encode_item(fresh)
    assert json.loads(frames.encode_item(item)) == fresh


@settings(max_examples=200, derandomize=True, deadline=None)
@given(name=LOOKALIKE, doc=LOOKALIKE, input=VALUE, output=VALUE, usage=VALUE)
def test_a_change_not_encoded_for_the_database_is_encoded_whole_as_a_plain_one(name, doc, input, output, usage):
    node = _node(name=name, doc=doc, input=input, output=output, usage=usage)
    item = frames.NodeItem(type="node", rev=node.rev, node=node.as_dict())
    plain = {"type": "node", "rev": node.rev, "node": node.as_dict()}
    assert frames.encode_item(item) == frames.encode_item(plain)
    assert json.loads(frames.encode_item(item)) == plain


def test_an_oversized_change_is_fitted_like_a_plain_one():
    node = _node(output="x" * (frames.NODE_LIMIT + 10))
    whole, known = (frames.NodeItem(type="node", rev=1, node=node.as_dict()) for _ in range(2))
    known.record_json  # noqa: B018 (its record encoded first, as for PostgreSQL's rows)
    plain = frames.encode_item({"type": "node", "rev": 1, "node": node.as_dict()})
    for item in (whole, known):
        encoded = frames.encode_item(item)
        assert encoded == plain
        assert len(encoded) < frames.NODE_LIMIT and json.loads(encoded)["node"]["truncated"] == ["output"]
