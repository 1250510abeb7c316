"""Request and response shapes of the REST API.

Responses are the models' own `as_dict()` (one JSON shape for the API, the websocket stream and exports);
the serializers declare those shapes so the OpenAPI schema documents them. A session as the API answers it
adds its run summary (`dag.recording.totals`): nodes by status, model calls and tokens, warning, wall time.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Node, Session
from ..recording.totals import run_summary, session_totals, totals_for
from ..runs import launch_budget
from ..runs.launch_values import holds_non_finite

# The choice sets of the two "status" fields, named in SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].
SESSION_STATUSES = Session.Status.values
NODE_STATUSES = Node.Status.values


class FunctionSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The function's name, used to launch it.")
    label = serializers.CharField()
    description = serializers.CharField(help_text="The function's docstring.")
    spec = serializers.JSONField(help_text='The tool spec: {"name", "description", "parameters"} '
                                           '(JSON schema; hidden parameters are absent).')

    def to_representation(self, entry):
        return entry.as_dict()


class ModelChoiceSerializer(serializers.Serializer):
    model = serializers.CharField(help_text='A model spec to launch with, e.g. "sim:naive".')
    description = serializers.CharField()


class LaunchJSONField(serializers.JSONField):
    """A part of a launch request, handed to the launch checks as parsed.

    DRF's JSONField refuses what json.dumps cannot write, "Value must be valid JSON.", without saying
    where: in parsed JSON that is only a number beyond a float's range (1e400 reads as infinity). The
    launch checks name the argument or limit holding it and what is allowed.
    """

    def to_internal_value(self, data):
        return data if holds_non_finite(data) else super().to_internal_value(data)


@extend_schema_field({"type": "object", "additionalProperties": True, "example": {"n": 5, "delay_s": 0}})
class ArgumentsField(LaunchJSONField):
    """A function's arguments by parameter name: documented as an object (a bare JSONField reads "string")."""


@extend_schema_field({"type": "string", "nullable": True, "example": "sim:naive"})
class ModelSpecField(LaunchJSONField):
    """A model spec, taken as JSON so that the launch names a wrong type (not DRF's generic message)."""


class AsDictSerializer(serializers.Serializer):
    """Read-only: the instance's `as_dict()`."""

    def to_representation(self, instance):
        return instance.as_dict()


class SessionRecordSerializer(AsDictSerializer):
    """A session as recorded: the shape of the websocket stream and of exports."""

    id = serializers.UUIDField()
    function = serializers.CharField()
    args = ArgumentsField()
    status = serializers.ChoiceField(choices=SESSION_STATUSES)
    phase = serializers.CharField(help_text='The status as shown: "cancelling" between a stop request and the '
                                            'end of the run, "awaiting_approval" or "paused" while a running '
                                            "run waits, else the status.")
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    cancel_requested = serializers.BooleanField()
    attended = serializers.BooleanField(help_text="Whether a person may answer its approval requests (launched "
                                                  "attended); if not, tools that need approval are not offered.")
    pause_requested = serializers.BooleanField(help_text="A pause asked for and not yet taken back: the run "
                                                         "pauses at its next function entry, model call or tool call.")
    budget = serializers.JSONField(allow_null=True)
    budget_spend = serializers.JSONField(allow_null=True)
    launch_budget = serializers.JSONField(allow_null=True, help_text="The budget asked for at launch, if any.")
    model = serializers.CharField(allow_blank=True)
    rev = serializers.IntegerField(help_text="The session's revision: bumped by every change to it or its nodes.")
    node_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    worker = serializers.CharField(allow_null=True, help_text='The process running (or that ran) the session, '
                                   '"hostname:pid"; null before it was claimed.')
    replay_of = serializers.UUIDField(allow_null=True, help_text="The session this one replays, if it is a replay.")
    forked_from = serializers.JSONField(allow_null=True, help_text='{"session": id, "node": seq}: the session and '
                                        "model call this one was forked at, if it is a fork.")


class UsageSerializer(serializers.Serializer):
    llm_calls = serializers.IntegerField(help_text="Model calls made so far (llm nodes).")
    input_tokens = serializers.IntegerField(help_text="Tokens sent to the model, summed over the model calls.")
    output_tokens = serializers.IntegerField(help_text="Tokens the model answered with, summed likewise.")


class SessionListSerializer(serializers.ListSerializer):
    """A page of sessions whose totals are read for the whole page in two queries, not two per row."""

    def to_representation(self, data):
        sessions = list(data.all() if hasattr(data, "all") else data)
        totals = totals_for([session.pk for session in sessions])
        return [self.child.represent(session, totals[session.pk]) for session in sessions]


class SessionSerializer(SessionRecordSerializer):
    """A session as the API answers it: as recorded, plus its run summary, read from its nodes when asked,
    so it is current while the run goes."""

    counts = serializers.DictField(child=serializers.IntegerField(),
                                   help_text='Nodes by status, e.g. {"completed": 14, "refused": 1}; '
                                             "statuses with no node are absent.")
    usage = UsageSerializer()
    warning = serializers.CharField(allow_blank=True,
                                    help_text='What the status alone hides, e.g. "1 refused", "2 refused · '
                                              '1 over budget" or "1 loop" (calls the depth ceiling, a budget or '
                                              'the repeated-call guard refused); "" when none.')
    wall_ms = serializers.IntegerField(allow_null=True, help_text="Milliseconds from start to end, or to now "
                                       "while the run goes; null before it started.")
    cost_usd = serializers.FloatField(allow_null=True, help_text="What the model calls cost so far, in US "
                                      "dollars (those of known cost); null when none of them has a known cost.")
    cost_unknown_calls = serializers.IntegerField(help_text="Completed model calls whose cost is unknown (a "
                                                  "model without a price), not counted in cost_usd.")

    class Meta:
        list_serializer_class = SessionListSerializer

    def to_representation(self, session):
        return self.represent(session, session_totals(session.pk))

    @staticmethod
    def represent(session: Session, totals: dict) -> dict:
        return {**session.as_dict(), **run_summary(session, totals)}


class NodeSerializer(AsDictSerializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField(help_text="Position in the session, gap-free, in creation order.")
    parent = serializers.IntegerField(allow_null=True, help_text="The id of the calling node.")
    kind = serializers.ChoiceField(choices=Node.Kind.values)
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=NODE_STATUSES)
    depth = serializers.IntegerField()
    name_depth = serializers.IntegerField(help_text="The recursion guard's per-name counter for this call.")
    expose = serializers.CharField()
    render_range = serializers.JSONField(allow_null=True)
    doc = serializers.CharField(allow_blank=True)
    input = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    traceback = serializers.CharField(allow_blank=True, help_text="For a call that failed: the traceback of "
                                      "its exception, the user's frames as file:line, the runtime's folded; "
                                      "else empty.")
    refusal = serializers.CharField(allow_blank=True, help_text='What refused the call: "depth" (the per-name '
                                    'depth ceiling), "budget:<dimension>", "loop" (a repeated call), or empty.')
    model = serializers.CharField(allow_blank=True)
    usage = serializers.JSONField(allow_null=True, help_text='A model call\'s {"input_tokens", "output_tokens", '
                                  '"cost_usd"}: its cost in US dollars, absent when unknown (a model without a '
                                  'price); other counts the provider reports may be present.')
    rev = serializers.IntegerField(help_text="The session revision of this node's last change.")
    replayed = serializers.BooleanField(help_text="A model call answered from the recorded run (a replay).")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)


class ExportSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    session = SessionRecordSerializer()
    nodes = NodeSerializer(many=True)


def _budget_limit(name: str) -> serializers.Field:
    """A launch budget limit as documented: its bounds are the ones `launch_budget` checks."""
    kind = serializers.IntegerField if name in launch_budget.COUNTS else serializers.FloatField
    # null is taken as the limit not given (`launch_budget.clean_budget`), so the schema allows it too.
    return kind(min_value=launch_budget.MINIMUM[name], max_value=launch_budget.MAXIMUM[name], required=False,
                allow_null=True, help_text=f"{launch_budget.HELP[name]} null: no limit.")


class LaunchBudgetShape(serializers.Serializer):
    """The documented shape of a launch budget (checked by `dag.runs.launch_budget`)."""

    max_depth = _budget_limit("max_depth")
    max_llm_calls = _budget_limit("max_llm_calls")
    max_tokens = _budget_limit("max_tokens")
    timeout_s = _budget_limit("timeout_s")
    max_cost_usd = _budget_limit("max_cost_usd")


@extend_schema_field(LaunchBudgetShape)
class LaunchBudgetField(LaunchJSONField):
    """A launch budget, taken as JSON so that the launch checks it (and names unknown limits)."""


class LaunchSerializer(serializers.Serializer):
    """Checks only the request's shape; the arguments are checked against the function's own schema."""

    function = serializers.CharField(min_length=1, max_length=200,
                                     help_text="The function's name, from GET /api/functions/.")
    args = ArgumentsField(required=False, default=dict,
                                 help_text="Arguments by parameter name, as the function's spec describes.")
    budget = LaunchBudgetField(required=False, allow_null=True, default=None,
                               help_text="Limits for the whole run; they tighten the function's own budget.")
    model = ModelSpecField(required=False, allow_null=True, default=None,
                           help_text="The model to run on, e.g. \"sim\", \"sim:naive\", "
                                     "\"openai:gpt-4o-mini\" (default: the server's); "
                                     "GET /api/models/ lists what this server offers.")
    unattended = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="true: no one attends the run, so tools that need a person's approval are not offered to "
                  "its models. Default false (unless the server sets OPENPROGRAM_UNATTENDED on): such calls "
                  "wait for an answer (GET /api/sessions/{id}/approvals/).")


class LaunchErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(required=False, help_text="A problem with the request as a whole.")
    function = serializers.ListField(child=serializers.CharField(), required=False)
    args = serializers.JSONField(required=False, help_text='{"param": ["message", ...]} or ["message"] '
                                                           'when the arguments as a whole are wrong.')
    budget = serializers.JSONField(required=False, help_text='{"limit": ["message", ...]} or ["message"] '
                                                             'when the budget as a whole is wrong.')
    model = serializers.ListField(child=serializers.CharField(), required=False)


class LaunchLimitedSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="The per-user limit the launch is over (queued or running sessions, "
                                             "or stored data), and the setting that sets it.")


class SinceRevErrorSerializer(serializers.Serializer):
    since_rev = serializers.ListField(child=serializers.CharField())


class ShareLinkSerializer(serializers.Serializer):
    url = serializers.URLField(help_text="The session's page, read-only and live, for anyone who has this link "
                                         "(no login); unguessable, so share it as you would a password.")
    expires_at = serializers.DateTimeField(help_text="When the link stops working (OPENPROGRAM_SHARE_DAYS), unless "
                                                     "DELETE /api/sessions/{id}/share/ revokes it sooner.")


class DeleteRefusedSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Why the session cannot be deleted yet: it is still queued or running; "
                                             "stop it (POST /api/sessions/{id}/stop/), then delete it.")
    status = serializers.ChoiceField(choices=[Session.Status.QUEUED, Session.Status.RUNNING])


class NotFoundSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="No such item among yours (another user's is not found either).")


class PageErrorSerializer(serializers.Serializer):
    """A 400 of the session list: the paging parameter that is not one, and why (one of the two)."""
    page = serializers.ListField(child=serializers.CharField(), required=False)
    page_size = serializers.ListField(child=serializers.CharField(), required=False)


class NoBodySerializer(serializers.Serializer):
    """The body of a POST that reads none (stopping a session): OPTIONS lists no fields for it."""
