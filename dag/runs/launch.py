"""Launching a function: check its arguments against its schema, create the session, hand it to the executor.

The form, the API and the CLI all launch through here, so a launch is validated one way whichever door
it came through: by `runtime.spec.argument_errors` against the same `spec` a model sees.
"""
from __future__ import annotations

import json

from runtime.environment import unattended_if_set
from runtime.spec import argument_errors

from ..conf import conf
from ..models import Session
from ..recording import write_path
from . import catalog, quotas
from .executors import get_executor
from .launch_budget import BudgetProblem, clean_budget
from .launch_values import (MAX_DEPTH, NUL_PROBLEM, SURROGATE_PROBLEM, holds_nul, lone_surrogate, nested_deeper_than,
                            non_finite_problem)
from .model_choice import ModelProblem, clean_model, configured_model

NON_FIELD = "__all__"  # launch_budget's key for a problem with the budget as a whole


class LaunchRejected(ValueError):
    """The launch request was wrong. `errors` is {"function": [msg]}, {"args": {param: [msg]} | [msg]},
    {"budget": {limit: [msg]}}, {"model": [msg]} or (LaunchLimited) {"limit": [msg]}; as text, each
    message after the field it is about ("args n: must be from 1 to 10000, got 0")."""

    def __init__(self, errors: dict):
        self.errors = errors
        super().__init__("; ".join(_lines(errors)))


def _lines(errors, where: str = "") -> list[str]:
    # Every key is a field's name, "__all__" too (a parameter may be called that): problems with a field
    # as a whole are a list, not a dict.
    if isinstance(errors, dict):
        return [line for name, inner in errors.items() for line in _lines(inner, f"{where} {name}".strip())]
    return [f"{where}: {message}" if where else str(message) for message in errors]


class LaunchLimited(LaunchRejected):
    """The launch is right but its owner is over a per-user limit (see `quotas`); the API answers 429."""

    def __init__(self, message: str):
        super().__init__({"limit": [message]})
        self.message = message

    def __str__(self) -> str:
        return self.message


def size_problem(args) -> str | None:
    """Why `args` are too large to accept, or None. Limits what a run, a page and the DB must carry."""
    limit = conf.MAX_ARGS_BYTES
    try:
        size = len(json.dumps(args, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return "arguments must be plain JSON values"
    if size > limit:
        return (f"arguments are {size} bytes of JSON; the limit is {limit} bytes "
                f"(setting OPENPROGRAM_MAX_ARGS_BYTES)")
    return None


# The key of problems with the arguments as a whole. Not "__all__" (runtime.spec's): any string, that one
# included, can be a parameter name sent as JSON, and its problems must still be filed under its name.
WHOLE = None


def unicode_problems(args) -> dict:
    """Names and values that are not valid Unicode, which no response (nor PostgreSQL) could hold."""
    if not isinstance(args, dict):
        return {}
    bad_name = lone_surrogate(list(args))
    if bad_name:
        return {WHOLE: [f"parameter name {bad_name} {SURROGATE_PROBLEM}"]}
    return {name: [f"{bad} {SURROGATE_PROBLEM}"] for name, bad in
            ((name, lone_surrogate(value)) for name, value in args.items()) if bad}


def finite_problems(args) -> dict:
    """Values that are or hold an infinite number (JSON's 1e400 reads as one), which JSON cannot write back."""
    if not isinstance(args, dict):
        return {}
    return {name: [problem] for name, problem in ((name, non_finite_problem(value)) for name, value in args.items())
            if problem}


def schema_problems(tool, args) -> dict:
    """What `tool`'s parameter schema says is wrong with `args`."""
    errors = argument_errors(tool.spec["parameters"], args)
    # runtime.spec files "not an object" under "__all__"; for an object that key is a parameter's name.
    return errors if isinstance(args, dict) else {WHOLE: [m for messages in errors.values() for m in messages]}


def argument_problems(tool, args) -> dict:
    """Every problem with `args` for `tool`, by parameter name (WHOLE, None, for the arguments as a whole)."""
    # The doors (the API's parser, the form, the CLI) refuse deeper data before this; a caller in Python
    # must not reach the recursive checks below with it (a RecursionError).
    if nested_deeper_than(args, MAX_DEPTH):
        return {WHOLE: [f"arguments nest objects and arrays deeper than {MAX_DEPTH} levels; send flatter data"]}
    # First what the schema check's messages would quote but no response could carry: a lone surrogate,
    # or a number JSON cannot write (its range message would read "got inf").
    problems = unicode_problems(args) or finite_problems(args) or schema_problems(tool, args)
    if not problems:
        # PostgreSQL text and jsonb cannot hold NUL: the session could not even be saved.
        problems = {name: [NUL_PROBLEM] for name, value in args.items() if holds_nul([name, value])}
    if not problems:
        too_large = size_problem(args)
        if too_large:
            problems = {WHOLE: [too_large]}
    return problems


def create_session(owner, function: str, args, budget: dict | None = None, model: str | None = None,
                   origin: dict | None = None, *, unattended: bool | None = None) -> Session:
    """A queued session for `function(**args)` owned by `owner`, run under `budget` (see `launch_budget`)
    on `model` (see `model_choice`; None: the server's), or LaunchRejected saying what is wrong
    (LaunchLimited when `owner` is over a per-user limit). `origin`: the session fields of a replay or a
    fork (`dag.runs.rerun`). Attended (a person answers its approval requests, `dag.runs.steering`)
    unless `unattended` (None: unless OPENPROGRAM_UNATTENDED is set on): then tools that need approval are
    not offered to its models."""
    if unattended is None:
        unattended = unattended_if_set()
    if not isinstance(unattended, bool):
        raise LaunchRejected({"unattended": [f"must be true or false, got {unattended!r}"]})
    if not isinstance(function, str) or not function:
        raise LaunchRejected({"function": ["give the name of a function to run"]})
    try:
        entry = catalog.get(function)
    except catalog.UnknownFunction as exc:
        raise LaunchRejected({"function": [str(exc)]}) from None
    problems = argument_problems(entry.tool, args)
    if problems:
        # A problem with the arguments as a whole (not an object, too large) comes alone: a list.
        raise LaunchRejected({"args": problems[WHOLE] if WHOLE in problems else problems})
    try:
        budget = clean_budget(budget)
    except BudgetProblem as exc:
        raise LaunchRejected({"budget": exc.errors.get(NON_FIELD) or exc.errors}) from None
    try:
        model = clean_model(model) or configured_model()
    except ModelProblem as exc:
        raise LaunchRejected({"model": [str(exc)]}) from None
    # The storage sum reads the nodes of the user's unfinished sessions; it is approximate anyway, so it
    # runs before the lock (on SQLite the database's write lock) that only the run count needs.
    over_storage = quotas.storage_problem(owner)
    if over_storage:
        raise LaunchLimited(over_storage)
    return write_path.queue_session(owner, admit=lambda: _admit_another_run(owner), function=function, args=args,
                                    model=model, launch_budget=budget, attended=not unattended, **(origin or {}))


def _admit_another_run(owner) -> None:
    """Inside the launch's transaction: lock the owner (launches of one user queue here) and refuse a
    run over their active-run limit."""
    quotas.lock_user(owner)
    limited = quotas.active_runs_problem(owner)
    if limited:
        raise LaunchLimited(limited)


def launch(owner, function: str, args, budget: dict | None = None, model: str | None = None,
           origin: dict | None = None, *, unattended: bool | None = None) -> Session:
    """Create the session and submit it to the configured executor (after the row is committed)."""
    executor = get_executor()  # first: a misconfigured executor must not leave a session queued forever
    session = create_session(owner, function, args, budget, model, origin, unattended=unattended)
    executor.submit(session.pk)
    return session
