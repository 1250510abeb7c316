"""The page of one session's live tree, for its owner and, read-only, for anyone with a share link (the
session list is dag.pages.session_list).

Thin: the session page is a shell whose tree, gauge and details are filled by
static/js/session_page.js from the websocket stream.
"""
from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils.cache import patch_cache_control

from runtime import max_recursion_depth

from .. import share_links
from ..conf import conf
from ..models import Session
from ..runs.launch_budget import describe

# For the pages' scripts (`data-terminal`), so the browser never keeps its own list.
TERMINAL_STATUSES = sorted(str(value) for value in Session.TERMINAL)


def session_page(request, session: Session, ws_path: str, shared: bool = False):
    return render(request, "sessions/detail.html", {
        "session": session,
        "ws_path": ws_path,
        "shared": shared,
        "launch_budget": describe(session.launch_budget),
        "ceiling": max_recursion_depth(),
        "terminal": TERMINAL_STATUSES,
        "heartbeat_s": conf.WS_HEARTBEAT_S,
    })


@login_required
def session_detail(request, session_id: uuid.UUID):
    session = get_object_or_404(Session, pk=session_id, owner=request.user)
    return session_page(request, session, f"/ws/sessions/{session.pk}/")


def shared_session(request, session_id: uuid.UUID, token: str):
    """The session page, read-only, for anyone with a share link (`dag.share_links`): no login, no
    Stop, Run again, Replay, Fork, Delete or Share, no link to the owner's other pages."""
    session = share_links.shared_session(session_id, token)
    if session is None:
        raise Http404("this share link has expired or was revoked, or it is no link to a session")
    response = session_page(request, session, f"/ws/shared/{session.pk}/{token}/", shared=True)
    # The owner's data, to whoever holds the link: no shared cache keeps it, and no browser stores it.
    patch_cache_control(response, private=True, no_store=True)
    return response
