"""Helpers for the context-choice tests: sessions built in one write, the old whole-session algorithm as
the reference, and a count of the rows a block of code read from the database."""
from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dag.models import Node
from dag.recording import context_render, write_path


def build_session(nodes: list[dict], parents: list):
    """A session holding `nodes` (Node fields, in seq order) where node i's parent is the node at seq
    `parents[i]` (None: a root); returns (session, {seq: node id})."""
    owner = get_user_model().objects.create(username=f"ctx-{uuid.uuid4().hex[:12]}")
    defaults = {"kind": "code", "name": "f", "status": "completed", "expose": "io"}
    session = write_path.insert_imported_session(owner, {"function": "entry", "status": "running"},
                                                 [{**defaults, **fields} for fields in nodes], parents)
    return session, dict(Node.objects.filter(session=session).values_list("seq", "id"))


def flat_session(size: int, *, inside: int = 3, text: str = "") -> tuple:
    """An entry call (running) with `size - inside - 2` finished calls under it (code and model calls, every
    expose), then the viewer (running), then `inside` calls inside the viewer; returns (session, viewer id).

    The latest nodes are the same whatever `size` is, so a bounded context should read the same rows."""
    exposes = ("io", "full", "hidden", "llm")
    nodes, parents = [{"name": "entry", "status": "running", "doc": "Entry."}], [None]
    for i in range(size - inside - 2):
        if i % 3 == 2:
            nodes.append(_exchange(f"question {i}{text}", f"answer {i}"))
        else:
            nodes.append({"name": f"step{i % 7}", "expose": exposes[i % 4], "input": {"i": i},
                          "output": f"result {i}{text}"})
        parents.append(0)
    viewer_seq = len(nodes)
    nodes.append({"name": "viewer", "status": "running", "doc": "The viewer."})
    parents.append(0)
    for i in range(inside):
        nodes.append(_exchange(f"inner {i}", "ok") if i % 2 == 0 else {"name": "helper", "input": {"k": i}, "output": i})
        parents.append(viewer_seq)
    session, ids = build_session(nodes, parents)
    return session, ids[viewer_seq]


def _exchange(question: str, answer: str) -> dict:
    return {"kind": "llm", "name": "llm", "model": "sim-1",
            "input": {"messages": [{"role": "user", "content": question}]},
            "output": {"text": answer, "tool_calls": []}}


@dataclass
class Reads:
    queries: int = 0
    rows: int = 0


@contextlib.contextmanager
def counting_reads():
    """Count the queries run in the block and the rows they returned (each SELECT is run again after
    the block, on the same unchanged data, and its rows counted)."""
    reads = Reads()
    with CaptureQueriesContext(connection) as captured:
        yield reads
    reads.queries = len(captured.captured_queries)
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            assert query["sql"].lstrip().upper().startswith(("SELECT", "WITH")), query["sql"]
            cursor.execute(query["sql"])
            reads.rows += len(cursor.fetchall())


# --- the reference: the algorithm before the walk, reading every node of the session ---------------

def reference_render(session_id, node_id: int, seq, render_range) -> str | None:
    """What `render_frame_context` returned when it read the shape of the whole session."""
    limits = {**context_render.DEFAULT_RANGE, **(render_range or {})}
    if limits["callers"] == 0 and limits["subcalls"] == 0:
        return None
    rows = Node.objects.filter(session_id=session_id).order_by("seq").values(
        "id", "seq", "parent_id", "kind", "expose", "name", "status", "doc", "input", "output", "error", "model")
    nodes = {row["id"]: row for row in rows}
    viewer = nodes.get(node_id)
    if viewer is None:
        return None
    seq = viewer["seq"] if seq is None else seq
    chain = _chain(nodes, node_id)
    before, inside = [], []
    frame = {node_id}
    for node in nodes.values():
        if node["seq"] > seq and node["parent_id"] in frame:
            frame.add(node["id"])
        if node["id"] == node_id or not _visible(nodes, node, chain):
            continue
        if node["seq"] < seq:
            before.append(node)
        elif node["id"] in frame:
            inside.append(node)
    before = _latest(before, limits["callers"], unlimited=None)
    inside = _latest(inside, limits["subcalls"], unlimited=-1)
    if not before and not inside:
        return None
    blocks, used = {}, 0
    for node in reversed(before + inside):
        text = context_render._render(node, insider=node["id"] in chain)
        used += len(text) + 2
        if used > context_render.text_budget():
            break
        blocks[node["id"]] = text
    sections = []
    for title, part in (("Earlier in this session:", before), ("So far in this call:", inside)):
        shown = [blocks[node["id"]] for node in part if node["id"] in blocks]
        if shown:
            sections.append(title + "\n\n" + "\n\n".join(shown))
    left_out = len(before) + len(inside) - len(blocks)
    if left_out:
        sections.insert(0, context_render.left_out_notice(left_out))
    return "\n\n".join(sections) or None


def _chain(nodes: dict, node_id) -> set:
    chain = set()
    while node_id is not None and node_id in nodes and node_id not in chain:
        chain.add(node_id)
        node_id = nodes[node_id]["parent_id"]
    return chain


def _visible(nodes: dict, node: dict, chain: set) -> bool:
    if node["kind"] == Node.Kind.CODE and node["id"] not in chain and node["expose"] not in ("io", "full"):
        return False
    child, parent_id = node, node["parent_id"]
    while parent_id is not None and parent_id not in chain:
        wrapper = nodes.get(parent_id)
        if wrapper is None:
            return False
        own_exchange = child is node and node["kind"] == Node.Kind.LLM
        if not (wrapper["expose"] == "full" or (wrapper["expose"] == "llm" and own_exchange)):
            return False
        child, parent_id = wrapper, wrapper["parent_id"]
    return True


def _latest(nodes: list, count, *, unlimited) -> list:
    if count == unlimited:
        return nodes
    return nodes[-count:] if count else []
