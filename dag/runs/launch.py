"""Launching a function: check its arguments against its schema, create the session, hand it to the executor.

The form, the API and the CLI all launch through here, so a launch is validated one way whichever door
it came through: by `runtime.spec.argument_errors` against the same `spec` a model sees.
"""
from __future__ import annotations

import json

from django.conf import settings

from runtime.spec import argument_errors

from ..models import Session
from . import catalog
from .executors import get_executor
from .launch_budget import BudgetProblem, clean_budget
from .model_choice import ModelProblem, clean_model, configured_model

NON_FIELD = "__all__"


class LaunchRejected(ValueError):
    """The launch request was wrong. `errors` is {"function": [msg]}, {"args": {param: [msg]} | [msg]},
    {"budget": {limit: [msg]}} or {"model": [msg]}."""

    def __init__(self, errors: dict):
        self.errors = errors
        super().__init__(json.dumps(errors))


def size_problem(args) -> str | None:
    """Why `args` are too large to accept, or None. Limits what a run, a page and the DB must carry."""
    limit = settings.OPENPROGRAM_MAX_ARGS_BYTES
    try:
        size = len(json.dumps(args, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return "arguments must be plain JSON values"
    if size > limit:
        return (f"arguments are {size} bytes of JSON; the limit is {limit} bytes "
                f"(setting OPENPROGRAM_MAX_ARGS_BYTES)")
    return None


# The words of Django's own check on form fields, which the form gets before this.
NUL_PROBLEM = "Null characters are not allowed."


def _holds_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def argument_problems(tool, args) -> dict[str, list[str]]:
    """Every problem with `args` for `tool`, by parameter name ("__all__" for the whole)."""
    problems = argument_errors(tool.spec["parameters"], args)
    if not problems:
        # PostgreSQL text and jsonb cannot hold NUL: the session could not even be saved.
        problems = {name: [NUL_PROBLEM] for name, value in args.items() if _holds_nul([name, value])}
    if not problems:
        too_large = size_problem(args)
        if too_large:
            problems = {NON_FIELD: [too_large]}
    return problems


def create_session(owner, function: str, args, budget: dict | None = None, model: str | None = None) -> Session:
    """A queued session for `function(**args)` owned by `owner`, run under `budget` (see `launch_budget`)
    on `model` (see `model_choice`; None: the server's), or LaunchRejected saying what is wrong."""
    if not isinstance(function, str) or not function:
        raise LaunchRejected({"function": ["give the name of a function to run"]})
    try:
        entry = catalog.get(function)
    except catalog.UnknownFunction as exc:
        raise LaunchRejected({"function": [str(exc)]}) from None
    problems = argument_problems(entry.tool, args)
    if problems:
        # A problem with the arguments as a whole (not an object, too large) comes alone: a list.
        raise LaunchRejected({"args": problems.get(NON_FIELD) or problems})
    try:
        budget = clean_budget(budget)
    except BudgetProblem as exc:
        raise LaunchRejected({"budget": exc.errors.get(NON_FIELD) or exc.errors}) from None
    try:
        model = clean_model(model) or configured_model()
    except ModelProblem as exc:
        raise LaunchRejected({"model": [str(exc)]}) from None
    return Session.objects.create(owner=owner, function=function, args=args, model=model,
                                  launch_budget=budget)


def launch(owner, function: str, args, budget: dict | None = None, model: str | None = None) -> Session:
    """Create the session and submit it to the configured executor (after the row is committed)."""
    executor = get_executor()  # first: a misconfigured executor must not leave a session queued forever
    session = create_session(owner, function, args, budget, model)
    executor.submit(session.pk)
    return session
