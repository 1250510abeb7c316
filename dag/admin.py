"""The Django admin for sessions and their nodes: browse, filter by status and function, read the DAG.

Sessions and nodes are written by runs through `dag.recording.write_path`, so the admin writes through it
too: a run's state (status, result, stop flag, budget, revision, times) is read-only here, a session's
owner may be changed (a new revision, published to its viewers), and a session can be deleted with its
nodes. Nodes are read-only and go with their session.
"""
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import Node, Session
from .recording import write_path
from .recording.values import preview


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "function", "owner", "status", "worker", "heartbeat_at", "node_count", "rev",
                    "args_preview", "created_at", "finished_at")
    list_filter = ("status", "function", "cancel_requested")
    # The lease: which process runs it ("hostname:pid") and when it last renewed that (its last heartbeat).
    search_fields = ("id", "function", "owner__username")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    fields = ("id", "owner", "function", "args", "status", "cancel_requested", "result", "error", "model",
              "budget", "budget_spend", "launch_budget", "rev", "node_count", "stored_bytes", "nodes_link",
              "created_at", "started_at", "finished_at", "worker", "heartbeat_at")
    # Everything but the owner: what a run did is its record, and changing it here would bypass the run.
    readonly_fields = tuple(name for name in fields if name != "owner")

    @admin.display(description="arguments")
    def args_preview(self, session: Session) -> str:
        return preview(session.args, 80)

    @admin.display(description="nodes")
    def nodes_link(self, session: Session) -> str:
        url = reverse("admin:dag_node_changelist") + f"?session__id__exact={session.pk}"
        return format_html('<a href="{}">{} nodes</a>', url, session.node_count)

    def has_add_permission(self, request) -> bool:
        return False  # sessions are created by launching a function

    def save_model(self, request, obj: Session, form, change) -> None:
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        if changed:
            write_path.update_session(obj.pk, **changed)

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Nodes cannot be deleted on their own (see NodeAdmin), but they go with their session.
        perms_needed.discard(Node._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj: Session) -> None:
        write_path.delete_sessions([obj.pk])

    def delete_queryset(self, request, queryset) -> None:
        write_path.delete_sessions(queryset.values_list("pk", flat=True))


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("seq", "kind", "name", "status", "depth", "name_depth", "expose", "input_preview",
                    "output_preview", "duration_ms", "session")
    list_filter = ("status", "kind", "name", "session__function", "expose")
    search_fields = ("name", "session__id")
    list_select_related = ("session",)
    ordering = ("session", "seq")
    raw_id_fields = ("session", "parent")

    @admin.display(description="input")
    def input_preview(self, node: Node) -> str:
        return preview(node.input, 60)

    @admin.display(description="output")
    def output_preview(self, node: Node) -> str:
        return preview(node.output, 60)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a gap in a session's seq would break its resync; delete the session instead
