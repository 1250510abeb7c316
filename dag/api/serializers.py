"""Request and response shapes of the REST API.

Responses are the models' own `as_dict()` (one JSON shape for the API, the websocket stream and exports);
the serializers declare those shapes so the OpenAPI schema documents them.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Node, Session
from ..runs import launch_budget


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


class AsDictSerializer(serializers.Serializer):
    """Read-only: the instance's `as_dict()`."""

    def to_representation(self, instance):
        return instance.as_dict()


class SessionSerializer(AsDictSerializer):
    id = serializers.UUIDField()
    function = serializers.CharField()
    args = serializers.JSONField()
    status = serializers.ChoiceField(choices=Session.Status.values)
    phase = serializers.CharField(help_text='The status as shown: "cancelling" between a stop request and the '
                                            "run's end, else the status.")
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    cancel_requested = serializers.BooleanField()
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


class NodeSerializer(AsDictSerializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField(help_text="Position in the session, gap-free, in creation order.")
    parent = serializers.IntegerField(allow_null=True, help_text="The id of the calling node.")
    kind = serializers.ChoiceField(choices=Node.Kind.values)
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Node.Status.values)
    depth = serializers.IntegerField()
    name_depth = serializers.IntegerField(help_text="The recursion guard's per-name counter for this call.")
    expose = serializers.CharField()
    render_range = serializers.JSONField(allow_null=True)
    doc = serializers.CharField(allow_blank=True)
    input = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    refusal = serializers.CharField(allow_blank=True, help_text='What refused the call: "depth" (the per-name '
                                    'depth ceiling), "budget:<dimension>", or empty.')
    model = serializers.CharField(allow_blank=True)
    usage = serializers.JSONField(allow_null=True)
    rev = serializers.IntegerField(help_text="The session revision of this node's last change.")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)


class ExportSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    session = SessionSerializer()
    nodes = NodeSerializer(many=True)


class LaunchBudgetShape(serializers.Serializer):
    """The documented shape of a launch budget (checked by `dag.runs.launch_budget`)."""

    max_depth = serializers.IntegerField(min_value=1, max_value=launch_budget.MAX_COUNT, required=False,
                                         help_text=launch_budget.HELP["max_depth"])
    max_llm_calls = serializers.IntegerField(min_value=1, max_value=launch_budget.MAX_COUNT, required=False,
                                             help_text=launch_budget.HELP["max_llm_calls"])
    max_tokens = serializers.IntegerField(min_value=1, max_value=launch_budget.MAX_COUNT, required=False,
                                          help_text=launch_budget.HELP["max_tokens"])
    # Above 0 (0 itself is refused): the smallest step the form offers stands in for "exclusive".
    timeout_s = serializers.FloatField(min_value=0.001, max_value=launch_budget.MAX_TIMEOUT_S, required=False,
                                       help_text=launch_budget.HELP["timeout_s"])


@extend_schema_field(LaunchBudgetShape)
class LaunchBudgetField(serializers.JSONField):
    """A launch budget, taken as JSON so that the launch checks it (and names unknown limits)."""


class LaunchSerializer(serializers.Serializer):
    """Checks only the request's shape; the arguments are checked against the function's own schema."""

    function = serializers.CharField(max_length=200)
    args = serializers.JSONField(required=False, default=dict,
                                 help_text="Arguments by parameter name, as the function's spec describes.")
    budget = LaunchBudgetField(required=False, allow_null=True, default=None,
                               help_text="Limits for the whole run; they tighten the function's own budget.")
    model = serializers.JSONField(required=False, allow_null=True, default=None,
                                  help_text="The model to run on, e.g. \"sim\", \"sim:naive\", "
                                            "\"openai:gpt-4o-mini\" (default: the server's); "
                                            "GET /api/models/ lists what this server offers.")


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


class NotFoundSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="No such item among yours (another user's is not found either).")


class PageSizeErrorSerializer(serializers.Serializer):
    page_size = serializers.ListField(child=serializers.CharField())
