"""The page comparing two runs: `/sessions/compare/?a=<id>&b=<id>`, calls aligned by call path
(`dag.recording.compare`), differences marked. Rendered on the server; while either run goes on, the
page reloads itself every few seconds."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from ..recording.compare import COMPARED, compare_sessions, shown
from ..runs.rerun import own_session

RELOAD_S = 2


@login_required
def session_compare(request):
    sessions = [own_session(request.user, request.GET.get(side, "")) for side in ("a", "b")]
    if None in sessions:
        raise Http404("give two of your sessions' ids as ?a=<id>&b=<id>")
    comparison = compare_sessions(*sessions)
    rows = [{**row, "cells": [_cells(row["a"], row["differences"]), _cells(row["b"], row["differences"])]}
            for row in comparison["rows"]]
    running = not all(session.is_terminal for session in sessions)
    return render(request, "sessions/compare.html", {
        "a": sessions[0], "b": sessions[1], "rows": rows, "different": comparison["different"],
        "compared": list(COMPARED), "reload_s": RELOAD_S if running else None})


def _cells(side, differences: list[str]) -> list[dict] | None:
    """One side's compared values as text, each marked if it differs from the other side's."""
    if side is None:
        return None
    return [{"name": name, "text": shown(side[name]), "differs": name in differences} for name in COMPARED]
