"""The stream's snapshot rows (dag.live.node_rows) are exactly `Node.as_dict()`, field for field."""
from datetime import datetime, timedelta, timezone

import pytest

from dag.live.node_rows import node_dicts
from dag.models import Node, Session

pytestmark = pytest.mark.django_db


def test_node_rows_equal_as_dict_for_every_kind_of_node(user):
    session = Session.objects.create(owner=user, function="demo", status="completed", rev=3, node_count=3)
    start = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    entry = Node.objects.create(session=session, seq=0, kind="code", name="demo", status="completed", depth=1,
                                name_depth=1, input={"q": "x", "n": [1, 2]}, output={"a": None}, rev=1,
                                doc="Docs.", render_range={"callers": 3, "subcalls": -1},
                                started_at=start, finished_at=start + timedelta(milliseconds=1234.9))
    Node.objects.create(session=session, seq=1, parent=entry, kind="llm", name="llm", status="running", rev=2,
                        model="sim", usage={"input_tokens": 5, "output_tokens": 7}, started_at=start)
    Node.objects.create(session=session, seq=2, parent=entry, kind="code", name="demo", status="refused",
                        rev=3, refusal="budget:llm_calls", error="BudgetExceeded: no more model calls")
    nodes = Node.objects.filter(session=session).order_by("seq")
    rows = node_dicts(nodes)
    assert rows == [node.as_dict() for node in nodes]
    assert [list(row) for row in rows] == [list(node.as_dict()) for node in nodes]  # the same key order
    assert rows[0]["duration_ms"] == 1234
    # A node read with fields deferred gives the same record: as_dict loads what it does not hold.
    assert [node.as_dict() for node in Node.objects.filter(session=session).only("id", "name").order_by("seq")] == rows
