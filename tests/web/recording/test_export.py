"""Export of a session's whole DAG as JSON, the management command, and the import round-trip."""
import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from dag.models import Session
from dag.recording import write_path
from dag.recording.export import SessionImportError, export_session, import_session
from runtime import agentic_function

from ..dag_helpers import model_call, new_session, recording

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded_session():
    """A finished session with nested code nodes, llm nodes, an error and a non-JSON value."""
    @agentic_function
    def flaky(n: int):
        """Fails on purpose."""
        raise RuntimeError(f"attempt {n} failed")

    @agentic_function(expose="full", render_range={"callers": 1, "subcalls": -1})
    def research(topic: str, tags=frozenset({"b", "a"})):
        """Research a topic."""
        model_call(f"tell me about {topic}", "cats purr", tool_calls=[{"name": "flaky", "arguments": {"n": 1}}])
        try:
            flaky(1)
        except RuntimeError:
            pass
        return {"summary": "cats purr", "raw": b"\x01\x02"}

    session = new_session(function="research", args={"topic": "cats"})
    write_path.set_session_status(session.id, "running")
    with recording(session):
        result = research("cats")
    write_path.set_session_status(session.id, "completed", result=result)
    session.refresh_from_db()
    return session


def _without_ids(document: dict) -> dict:
    """The export with ids replaced by what they point at, for comparing two copies of one DAG."""
    seq_of = {node["id"]: node["seq"] for node in document["nodes"]}
    nodes = [{**node, "id": None, "parent": seq_of.get(node["parent"])} for node in document["nodes"]]
    return {**document, "session": {**document["session"], "id": None}, "nodes": nodes}


def test_export_has_the_session_and_its_nodes_in_seq_order(recorded_session):
    document = export_session(recorded_session)
    assert document["version"] == 1
    assert document["session"] == recorded_session.as_dict()
    assert [(n["seq"], n["kind"], n["name"], n["status"]) for n in document["nodes"]] == [
        (0, "code", "research", "completed"), (1, "llm", "llm", "completed"), (2, "code", "flaky", "error")]
    assert document["nodes"][0]["output"] == {"summary": "cats purr", "raw": "<bytes: 2 bytes>"}
    json.dumps(document)  # JSON all the way down


def test_import_of_an_export_round_trips_through_json(recorded_session):
    original = export_session(recorded_session)
    other_owner = new_session(username="bob").owner
    copy = import_session(json.loads(json.dumps(original)), other_owner)

    assert copy.pk != recorded_session.pk and copy.owner == other_owner
    again = export_session(copy)
    assert _without_ids(again) == _without_ids(original)
    assert {n["id"] for n in again["nodes"]}.isdisjoint({n["id"] for n in original["nodes"]})
    # the copy keeps recording where the original left off
    assert write_path.create_node(copy.id, kind="code", name="more").seq == len(original["nodes"])


def test_import_keeps_the_worker_and_launch_budget(recorded_session):
    Session.objects.filter(pk=recorded_session.pk).update(worker="host:123", launch_budget={"timeout_s": 60.0})
    recorded_session.refresh_from_db()
    original = json.loads(json.dumps(export_session(recorded_session)))
    copy = import_session(original, new_session().owner)
    assert copy.worker == "host:123" and copy.launch_budget == {"timeout_s": 60.0}
    assert _without_ids(export_session(copy)) == _without_ids(original)


def test_import_accepts_values_at_the_edges_of_what_is_stored(recorded_session):
    document = json.loads(json.dumps(export_session(recorded_session)))
    document["session"].update(rev=2**63 - 1, started_at="0001-01-01T00:00:00-01:00")
    document["nodes"][0].update(depth=2**31 - 1, output=_nested(32))
    # A usage's other counts beside the two the totals add up round-trip, whatever their shape (the
    # recorder keeps only flat numbers, `clean_usage`; an export may come from elsewhere).
    usage = {"input_tokens": 5, "output_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}}
    document["nodes"][1].update(usage=usage)
    copy = import_session(document, new_session().owner)
    assert copy.rev == 2**63 - 1 and copy.nodes.get(seq=0).output == _nested(32)
    assert copy.nodes.get(seq=1).usage == usage


def test_export_session_command_prints_or_writes_the_document(recorded_session, tmp_path):
    out = StringIO()
    call_command("export_session", str(recorded_session.pk), stdout=out)
    assert json.loads(out.getvalue()) == json.loads(json.dumps(export_session(recorded_session)))

    target = tmp_path / "session.json"
    call_command("export_session", str(recorded_session.pk), "-o", str(target), stderr=StringIO())
    assert json.loads(target.read_text())["session"]["id"] == str(recorded_session.pk)


@pytest.mark.parametrize("target, reason", [("missing/session.json", "No such file or directory"),
                                            (".", "Is a directory")])
def test_export_session_command_names_a_path_it_cannot_write(recorded_session, tmp_path, target, reason):
    path = tmp_path / target
    with pytest.raises(CommandError, match=re.escape(f"cannot write {path}: {reason}; -o takes a file path")):
        call_command("export_session", str(recorded_session.pk), "-o", str(path), stderr=StringIO())


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_export_session_command_names_an_unknown_session(bad_id):
    with pytest.raises(CommandError, match=f"no session with id '{bad_id}'"):
        call_command("export_session", bad_id)


def _nested(levels: int) -> list:
    """`levels` lists, each the only item of the one around it (built without recursion)."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("nodes"), "'nodes' must be a list"),
    (lambda d: d.update(version=9), "version must be 1"),
    (lambda d: d["session"].update(status="paused"), "session.status must be one of queued"),
    (lambda d: d["nodes"][1].update(seq=5), r"nodes\[1\].seq must be 1"),
    (lambda d: d["nodes"][2].update(parent=-1), r"nodes\[2\].parent -1 names no earlier node"),
    (lambda d: d["nodes"][0].update(kind="tool"), r"nodes\[0\].kind must be one of code, llm"),
    (lambda d: d["nodes"][0].update(depth=-2), r"nodes\[0\].depth must be a whole number"),
    (lambda d: d["nodes"][0].update(started_at="yesterday"), r"nodes\[0\].started_at must be an ISO 8601"),
    (lambda d: d["nodes"][0].update(name="n" * 201), r"nodes\[0\].name must be at most 200 characters"),
    # Hostile values, each once a crash (or a row a page then failed on) instead of this refusal:
    (lambda d: d["session"].update(error="cut \ud83d"), "session.error must be valid Unicode text without NUL"),
    (lambda d: d["nodes"][0].update(doc="a\x00b"), r"nodes\[0\].doc must be valid Unicode text without NUL"),
    (lambda d: d["session"].update(rev=2**64), "session.rev must be a whole number from 0 to 9223372036854775807"),
    (lambda d: d["nodes"][0].update(depth=2**70), r"nodes\[0\].depth must be a whole number from 0 to 2147483647"),
    (lambda d: d["session"]["args"].update(topic=float("nan")), r"session.args\['topic'\] must be a finite number"),
    (lambda d: d["nodes"][0].update(output=_nested(5_000)), r"nodes\[0\].output(\[0\]){32} must be nested at most 32"),
    (lambda d: d["session"].update(args={"topic": _nested(40)}), r"session.args\['topic'\]\[0\].* nested at most 32"),
    (lambda d: d["session"].update(args=["cats"]), "session.args must be an object of argument names"),
    (lambda d: d["session"].update(started_at="9999-12-31T23:59:59-05:00"),
     "session.started_at must be a time from year 1 to 9999 in UTC"),
    (lambda d: d["nodes"][1].update(usage={"input_tokens": "lots"}),
     r"nodes\[1\].usage\['input_tokens'\] must be a whole number from 0 to 2147483647, got 'lots'"),
    (lambda d: d["nodes"][1].update(usage={"output_tokens": -1}), r"nodes\[1\].usage\['output_tokens'\] must be"),
    (lambda d: d["nodes"][0].update(expose="zzz"), r"nodes\[0\].expose must be one of io, llm, full, hidden"),
    (lambda d: d["nodes"][0].update(render_range="all"), r"nodes\[0\].render_range: render_range must be a dict"),
    (lambda d: d["nodes"][1].update(seq=True), r"nodes\[1\].seq must be 1"),
    (lambda d: d["nodes"][2].update(parent=True), r"nodes\[2\].parent True names no earlier node"),
    (lambda d: d["nodes"][1].update(id=d["nodes"][0]["id"]), r"nodes\[1\].id .* is also nodes\[0\]'s"),
    (lambda d: d["session"].update(launch_budget="max_llm_calls=3"),
     "session.launch_budget must be an object with any of max_depth, max_llm_calls"),
    (lambda d: d["session"].update(launch_budget={"max_llm_calls": "3"}),
     "session.launch_budget.max_llm_calls must be a whole number from 1 to"),
])
def test_import_rejects_a_malformed_document_naming_the_field(recorded_session, mutate, message):
    document = json.loads(json.dumps(export_session(recorded_session)))
    mutate(document)
    owner_sessions = Session.objects.filter(owner=recorded_session.owner)
    sessions_before = owner_sessions.count()
    with pytest.raises(SessionImportError, match=message):
        import_session(document, recorded_session.owner)
    assert owner_sessions.count() == sessions_before  # nothing half-imported


class _CountingNode(dict):
    """An exported node that counts how often the importer reads its id."""

    reads = 0

    def get(self, key, default=None):
        if key == "id":
            _CountingNode.reads += 1
        return super().get(key, default)

    def __getitem__(self, key):
        if key == "id":
            _CountingNode.reads += 1
        return super().__getitem__(key)


def test_import_finds_parents_without_rescanning_earlier_nodes(user):
    # A flat run (one caller, many calls: slow_count) used to cost a scan back to the caller per node,
    # quadratic in the node count: seconds at 10,000 nodes.
    count = 300
    nodes = [_CountingNode(id=1000 + seq, seq=seq, parent=None if seq == 0 else 1000, kind="code",
                           name="step", status="completed") for seq in range(count)]
    _CountingNode.reads = 0
    copy = import_session({"version": 1, "session": {"function": "slow_count"}, "nodes": nodes}, user)
    assert copy.nodes.filter(parent__isnull=False).count() == count - 1
    assert _CountingNode.reads <= 2 * count


def test_an_export_taken_mid_run_is_imported_interrupted(user):
    document = {"version": 1, "session": {"function": "slow_count", "status": "running"},
                "nodes": [{"id": 1, "seq": 0, "parent": None, "kind": "code", "name": "slow_count",
                           "status": "running"},
                          {"id": 2, "seq": 1, "parent": 1, "kind": "code", "name": "count_step",
                           "status": "completed"}]}
    copy = import_session(document, user)
    assert copy.status == "interrupted" and "imported as interrupted" in copy.error
    assert list(copy.nodes.order_by("seq").values_list("status", flat=True)) == ["interrupted", "completed"]


@pytest.mark.django_db(transaction=True)
def test_an_export_of_a_session_that_runs_on_meanwhile_is_the_session_and_its_nodes_at_one_moment():
    from django.db import connection

    session = new_session(function="f")
    write_path.set_session_status(session.id, "running")
    root = write_path.create_node(session.id, kind="code", name="f", depth=1)
    stale = Session.objects.get(pk=session.pk)
    write_path.create_node(session.id, kind="code", name="g", depth=2, parent_id=root.pk)
    writes_meanwhile = iter([lambda: write_path.finish_node(root, status="completed"),
                             lambda: write_path.create_node(session.id, kind="code", name="h", depth=2,
                                                            parent_id=root.pk)])

    def the_run_goes_on_before_each_node_read(execute, sql, params, many, context):
        if 'FROM "dag_node"' in sql:  # between the export's read of the session and of its nodes
            write = next(writes_meanwhile, None)
            if write is not None:
                write()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(the_run_goes_on_before_each_node_read):
        document = export_session(stale)
    newest = max(node["rev"] for node in document["nodes"])
    assert newest <= document["session"]["rev"] and document["session"]["node_count"] == len(document["nodes"])
    assert Session.objects.get(pk=session.pk).as_dict() == document["session"]  # nothing after the last round
    assert [(node["name"], node["status"]) for node in document["nodes"]] == [
        ("f", "completed"), ("g", "running"), ("h", "running")]


@pytest.mark.django_db(transaction=True)
def test_an_export_of_a_run_that_never_pauses_between_two_reads_is_read_whole_in_one_transaction():
    from django.db import connection

    from dag.recording import export
    session = new_session(function="f")
    write_path.set_session_status(session.id, "running")
    root = write_path.create_node(session.id, kind="code", name="f", depth=1)

    def a_change_before_every_read_outside_a_transaction(execute, sql, params, many, context):
        if 'FROM "dag_node"' in sql and not connection.in_atomic_block:
            write_path.create_node(session.id, kind="code", name="g", depth=2, parent_id=root.pk)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(a_change_before_every_read_outside_a_transaction):
        document = export_session(session)
    assert max(node["rev"] for node in document["nodes"]) <= document["session"]["rev"]
    assert document["session"]["node_count"] == len(document["nodes"]) == 1 + export._EXPORT_ROUNDS
