"""The page of one session's live tree (the session list is dag.pages.session_list).

Thin: the session page is a shell whose tree, gauge and details are filled by
static/js/session_page.js from the websocket stream.
"""
from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from runtime import max_recursion_depth

from ..conf import conf
from ..models import Session
from ..runs.launch_budget import describe

# For the pages' scripts (`data-terminal`), so the browser never keeps its own list.
TERMINAL_STATUSES = sorted(str(value) for value in Session.TERMINAL)


@login_required
def session_detail(request, session_id: uuid.UUID):
    session = get_object_or_404(Session, pk=session_id, owner=request.user)
    return render(request, "sessions/detail.html", {
        "session": session,
        "launch_budget": describe(session.launch_budget),
        "ceiling": max_recursion_depth(),
        "terminal": TERMINAL_STATUSES,
        "heartbeat_s": conf.WS_HEARTBEAT_S,
    })
