"""Pages: the function catalog and each function's launch form (login required for all of them)."""
from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from runtime.environment import unattended_if_set

from ..models import Session
from ..runs import catalog
from ..runs.launch import LaunchLimited, LaunchRejected, launch
from .launch_options import LaunchOptionsForm
from .forms import LaunchForm, parameters_of


def session_page_url(session: Session) -> str:
    # The live view (another part of the app) serves this path.
    return f"/sessions/{session.pk}/"


@login_required
def function_list(request):
    # Each card lists the parameters its form asks for (hidden ones are left out there too).
    cards = [{"entry": entry, "params": [(param.name, _param_summary(param)) for param in parameters_of(entry.tool)]}
             for entry in catalog.entries()]
    return render(request, "functions/list.html", {"cards": cards})


def _param_summary(param) -> str:
    """A parameter's kind and whether it must be given, as its card shows it: `text, required`, `integer = 10`."""
    if param.required:
        return f"{param.kind}, required"
    return f"{param.kind} = {json.dumps(param.schema['default'])}" if param.has_default else param.kind


@login_required
@require_http_methods(["GET", "POST"])
def function_form(request, name: str):
    try:
        entry = catalog.get(name)
    except catalog.UnknownFunction as exc:
        raise Http404(str(exc)) from None
    again = None
    if request.method == "POST":
        status = 400
        form = LaunchForm(entry.tool, data=request.POST)
        options = LaunchOptionsForm(data=request.POST)
        if all([form.is_valid(), options.is_valid()]):  # both checked: every error shown at once
            try:
                session = launch(request.user, entry.name, form.args, options.budget, options.model,
                                 unattended=options.cleaned_data["unattended"])
            except LaunchLimited as exc:
                form.add_error(None, str(exc))
                status = 429
            except LaunchRejected as exc:  # the catalog changed between validation and launch
                form.add_error(None, str(exc))
            else:
                return redirect(session_page_url(session))
    else:
        again = _run_again_session(request, entry.name)
        form = LaunchForm(entry.tool, initial_args=again.args if again and isinstance(again.args, dict) else None)
        options = LaunchOptionsForm(initial_budget=again.launch_budget if again else None,
                                    initial_model=again.model if again else None,
                                    initial_unattended=not again.attended if again else unattended_if_set())
        status = 200
    return render(request, "functions/form.html", {"entry": entry, "form": form, "options": options,
                                                   "repeats": again}, status=status)


def _run_again_session(request, function: str) -> Session | None:
    """The caller's session named by ?from=<id> ("run again"), whose arguments, model and budget the form
    takes."""
    session_id = request.GET.get("from")
    if not session_id:
        return None
    try:
        return get_object_or_404(Session, pk=session_id, owner=request.user, function=function)
    except ValidationError:  # not a UUID
        raise Http404(f"no session {session_id!r} of {function} to run again") from None
