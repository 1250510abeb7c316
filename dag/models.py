"""A run of an agentic function (Session) and the calls it made (Node): the session DAG.

The database is the truth the browser resynchronises from: every change to a session or one of its
nodes bumps `Session.rev` and stamps the changed row with it, so "everything after revision R" is one
indexed query.
"""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from .timestamps import iso


class Session(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        ERROR = "error"
        CANCELLED = "cancelled"
        INTERRUPTED = "interrupted"  # the process running it died

    TERMINAL = frozenset({Status.COMPLETED, Status.ERROR, Status.CANCELLED, Status.INTERRUPTED})

    class Waiting(models.TextChoices):
        AWAITING_APPROVAL = "awaiting_approval"  # a tool call waits for a person's answer
        PAUSED = "paused"  # stopped at a boundary until resumed

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions")
    function = models.CharField(max_length=200, db_index=True)
    args = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Persisted before it is acted on, so a stop pressed before the run starts is not lost.
    cancel_requested = models.BooleanField(default=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)  # when; the cancel deadline counts from it
    budget = models.JSONField(null=True, blank=True)  # the limits of a delegation budget, if any
    budget_spend = models.JSONField(null=True, blank=True)  # what the run spent against them
    # The budget asked for at launch ({"max_depth", "max_llm_calls", "max_tokens", "timeout_s"}, each
    # optional): opened around the entry call, so it tightens the function's own.
    launch_budget = models.JSONField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    rev = models.PositiveBigIntegerField(default=0)
    node_count = models.PositiveIntegerField(default=0)  # also the next node's seq
    # What the session holds, as the per-user storage limit counts it (`dag.stored_size`): measured by
    # the write path when the session ends (it cannot grow after), None while it has not.
    stored_bytes = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The run's lease (dag.runs.leases): the process that claimed it ("hostname:pid", "" before a claim)
    # and when that process last renewed it. A running session whose heartbeat is older than
    # OPENPROGRAM_LEASE_S is written off by the reaper, and the old run's writes are refused from then on.
    worker = models.CharField(max_length=255, blank=True, default="")
    heartbeat_at = models.DateTimeField("last heartbeat", null=True, blank=True)
    # With Celery: when the session's task was last sent to the broker (None from before this field:
    # then its created_at counts). The reaper sends a session still queued OPENPROGRAM_QUEUED_RESEND_S
    # after it again, since a broker can lose a message.
    sent_at = models.DateTimeField("last sent to the broker", null=True, blank=True, editable=False)
    # Read-only share links (dag.share_links) are signed with the number of this session's revocations
    # so far: revoking bumps it, and every link signed before stops working at once.
    share_generation = models.PositiveIntegerField(default=0, editable=False)
    # A replay (model calls served from the recorded run) or a fork (served up to one model call, then
    # live) of another session, and how it was asked for: {"then": "stop" | "live"} for a replay,
    # {"reply": text} or {"model": spec} for a fork (dag.runs.replay_source reads it at the run's start).
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    forked_from_node = models.PositiveIntegerField(null=True, blank=True)  # the seq of the model call forked at
    replay_options = models.JSONField(null=True, blank=True, editable=False)
    # Steering (dag.runs.steering): a person may answer this run's approval requests (launched attended);
    # the pause asked for; what the run waits for now; the answers given, by the waiting node's id
    # ({"<id>": {"approve": bool, "reason": str}}), kept so a second answer is refused.
    attended = models.BooleanField(default=False)
    pause_requested = models.BooleanField(default=False)
    waiting_for = models.CharField(max_length=24, choices=Waiting.choices, blank=True, default="")
    approval_answers = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="session_owner_newest")]

    def __str__(self) -> str:
        return f"{self.function} ({self.status}) {self.id}"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def phase(self) -> str:
        """The status as shown: `cancelling` between a stop request and the run's end, what a running run
        waits for (`awaiting_approval`, `paused`), else the status.

        Derived here only; pages, the API and the stream show it, and the browser reads it.
        """
        if self.cancel_requested and not self.is_terminal:
            return "cancelling"
        if self.waiting_for and self.status == self.Status.RUNNING:
            return self.waiting_for
        return self.status

    @property
    def phase_label(self) -> str:
        """The phase as pages write it: "awaiting approval"."""
        return self.phase.replace("_", " ")

    def as_dict(self) -> dict:
        """The JSON shape of a session in the API, the websocket stream and exports."""
        return {
            "id": str(self.id),
            "function": self.function,
            "args": self.args,
            "status": self.status,
            "phase": self.phase,
            "result": self.result,
            "error": self.error,
            "cancel_requested": self.cancel_requested,
            "attended": self.attended,
            "pause_requested": self.pause_requested,
            "budget": self.budget,
            "budget_spend": self.budget_spend,
            "launch_budget": self.launch_budget,
            "model": self.model,
            "rev": self.rev,
            "node_count": self.node_count,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "worker": self.worker or None,
            "replay_of": str(self.replay_of_id) if self.replay_of_id else None,
            "forked_from": ({"session": str(self.forked_from_id), "node": self.forked_from_node}
                            if self.forked_from_id else None),
        }


class Node(models.Model):
    class Kind(models.TextChoices):
        CODE = "code"
        LLM = "llm"

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        ERROR = "error"
        CANCELLED = "cancelled"
        REFUSED = "refused"  # turned away by the recursion guard or a budget before its body ran
        INTERRUPTED = "interrupted"
        AWAITING_APPROVAL = "awaiting_approval"  # a tool call waiting for a person's answer before it runs

    TERMINAL = frozenset({Status.COMPLETED, Status.ERROR, Status.CANCELLED, Status.REFUSED, Status.INTERRUPTED})

    # No index of its own: the (session, seq) unique index starts with it, and every index is one
    # more b-tree each recorded call has to write.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="nodes", db_index=False)
    seq = models.PositiveIntegerField()  # gap-free per session, in creation order
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=200)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.RUNNING)
    depth = models.PositiveIntegerField(default=1)  # nesting level of code frames, 1 for the entry call
    name_depth = models.PositiveIntegerField(default=0)  # the guard's per-name counter for this call
    expose = models.CharField(max_length=8, default="io")
    render_range = models.JSONField(null=True, blank=True)
    doc = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    usage = models.JSONField(null=True, blank=True)  # {"input_tokens": N, "output_tokens": M}
    error = models.TextField(blank=True)
    # An error's traceback as the user's frames (runtime.tracebacks): "" for a call that did not fail.
    traceback = models.TextField(blank=True)
    # What turned a refused call away, as data for the browser: "depth" (the per-name ceiling) or
    # "budget:<dimension>"; empty for a call that was not refused.
    refusal = models.CharField(max_length=32, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    rev = models.PositiveBigIntegerField(default=0)  # the session revision of this row's last change
    replayed = models.BooleanField(default=False)  # a model call answered from a recorded run (a replay)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="node_seq_unique_per_session")]
        indexes = [
            models.Index(fields=["session", "rev"], name="node_session_rev"),
            # The nodes a session's end (or a stop, or the reaper) must close, found without reading
            # every node of the session. Only rows stored `running` are in it: a call whose entry and
            # exit are written in one batch never is.
            models.Index(fields=["session", "seq"], condition=models.Q(status="running"),
                         name="node_running_per_session"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind} {self.name} ({self.status})"

    @property
    def duration_ms(self) -> int | None:
        return duration_ms(self.started_at, self.finished_at)

    def as_dict(self) -> dict:
        """The JSON shape of a node in the API, the websocket stream and exports."""
        try:
            return _node_record(self.__dict__)
        except KeyError:  # a field deferred (`.only()`): read through its descriptor, which loads it
            return _node_record({field.attname: getattr(self, field.attname) for field in self._meta.concrete_fields})


def _node_record(values: dict) -> dict:
    """`Node.as_dict` from the node's field values by attribute name (its `__dict__`: every recorded call
    is made into a record, and the descriptors of its foreign keys and properties cost a call each)."""
    started, finished = values["started_at"], values["finished_at"]
    return {
        "id": values["id"],
        "seq": values["seq"],
        "parent": values["parent_id"],
        "kind": values["kind"],
        "name": values["name"],
        "status": values["status"],
        "depth": values["depth"],
        "name_depth": values["name_depth"],
        "expose": values["expose"],
        "render_range": values["render_range"],
        "doc": values["doc"],
        "input": values["input"],
        "output": values["output"],
        "error": values["error"],
        "traceback": values["traceback"],
        "refusal": values["refusal"],
        "model": values["model"],
        "usage": values["usage"],
        "rev": values["rev"],
        "replayed": values["replayed"],
        "started_at": iso(started),
        "finished_at": iso(finished),
        "duration_ms": duration_ms(started, finished),
    }


def duration_ms(started, finished) -> int | None:
    """Whole milliseconds from `started` to `finished` (datetimes), None unless both are set; never below
    0 (a clock stepped back). The one place the code turns two datetimes into a duration."""
    if started and finished:
        return max(0, int((finished - started).total_seconds() * 1000))
    return None

