"""The Django admin for sessions and their nodes: browse, filter by status and function, read the DAG.

Nodes are written by runs only, so they are read-only here; a session can be deleted (with its nodes).
"""
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import Node, Session
from .recording.values import preview


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "function", "owner", "status", "node_count", "rev", "args_preview", "created_at",
                    "finished_at")
    list_filter = ("status", "function", "cancel_requested")
    search_fields = ("id", "function", "owner__username")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    readonly_fields = ("id", "rev", "node_count", "created_at", "started_at", "finished_at", "nodes_link")
    fields = ("id", "owner", "function", "args", "status", "cancel_requested", "result", "error", "model",
              "budget", "budget_spend", "rev", "node_count", "nodes_link", "created_at", "started_at",
              "finished_at")

    @admin.display(description="arguments")
    def args_preview(self, session: Session) -> str:
        return preview(session.args, 80)

    @admin.display(description="nodes")
    def nodes_link(self, session: Session) -> str:
        url = reverse("admin:dag_node_changelist") + f"?session__id__exact={session.pk}"
        return format_html('<a href="{}">{} nodes</a>', url, session.node_count)


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
