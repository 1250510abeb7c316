"""Launching a function: check its arguments against its schema, create the session, hand it to the executor.

The form, the API and the CLI all launch through here, so a launch is validated one way whichever door
it came through: by `runtime.spec.argument_errors` against the same `spec` a model sees.
"""
from __future__ import annotations

import json


from runtime.spec import argument_errors

from ..conf import conf
from ..models import Session
from ..recording import write_path
from . import catalog, quotas
from .executors import get_executor
from .launch_budget import BudgetProblem, clean_budget
from .model_choice import ModelProblem, clean_model, configured_model

NON_FIELD = "__all__"


class LaunchRejected(ValueError):
    """The launch request was wrong. `errors` is {"function": [msg]}, {"args": {param: [msg]} | [msg]},
    {"budget": {limit: [msg]}}, {"model": [msg]} or (LaunchLimited) {"limit": [msg]}; as text, each
    message after the field it is about ("args n: must be from 1 to 10000, got 0")."""

    def __init__(self, errors: dict):
        self.errors = errors
        super().__init__("; ".join(_lines(errors)))


def _lines(errors, where: str = "") -> list[str]:
    if isinstance(errors, dict):
        return [line for name, inner in errors.items()
                for line in _lines(inner, f"{where} {name}".strip() if name != NON_FIELD else where)]
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


# The words of Django's own check on form fields, which the form gets before this.
NUL_PROBLEM = "Null characters are not allowed."


def _first_text(value, test) -> str | None:
    """The first string in `value` (keys included, at any depth) for which `test` is true, or None."""
    if isinstance(value, str):
        return value if test(value) else None
    items = value.items() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        found = _first_text(list(item) if isinstance(value, dict) else item, test)
        if found is not None:
            return found
    return None


def _holds_nul(value) -> bool:
    return _first_text(value, lambda text: "\x00" in text) is not None


def _not_unicode(text: str) -> bool:
    """Whether `text` holds a lone UTF-16 surrogate, which JSON allows as an escape but UTF-8 cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _lone_surrogate(value) -> str | None:
    found = _first_text(value, _not_unicode)
    # repr() escapes surrogates, so the message itself can be sent.
    return None if found is None else (repr(found) if len(found) <= 60 else repr(found[:60]) + "...")


SURROGATE_PROBLEM = "is not valid Unicode: it holds a lone surrogate (half of a UTF-16 pair); send whole characters"


def unicode_problems(args) -> dict[str, list[str]]:
    """Names and values that are not valid Unicode, which no response (nor PostgreSQL) could hold."""
    if not isinstance(args, dict):
        return {}
    bad_name = _lone_surrogate(list(args))
    if bad_name:
        return {NON_FIELD: [f"parameter name {bad_name} {SURROGATE_PROBLEM}"]}
    return {name: [f"{bad} {SURROGATE_PROBLEM}"] for name, bad in
            ((name, _lone_surrogate(value)) for name, value in args.items()) if bad}


def argument_problems(tool, args) -> dict[str, list[str]]:
    """Every problem with `args` for `tool`, by parameter name ("__all__" for the whole)."""
    # First: the schema check's messages name parameters and quote values, and must be sendable.
    problems = unicode_problems(args) or argument_errors(tool.spec["parameters"], args)
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
    on `model` (see `model_choice`; None: the server's), or LaunchRejected saying what is wrong
    (LaunchLimited when `owner` is over a per-user limit)."""
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
    # The storage sum reads every node of the user's sessions; it is approximate anyway, so it runs
    # before the lock (on SQLite the database's write lock) that only the run count needs.
    over_storage = quotas.storage_problem(owner)
    if over_storage:
        raise LaunchLimited(over_storage)
    return write_path.queue_session(owner, admit=lambda: _admit_another_run(owner), function=function, args=args,
                                    model=model, launch_budget=budget)


def _admit_another_run(owner) -> None:
    """Inside the launch's transaction: lock the owner (launches of one user queue here) and refuse a
    run over their active-run limit."""
    quotas.lock_user(owner)
    limited = quotas.active_runs_problem(owner)
    if limited:
        raise LaunchLimited(limited)


def launch(owner, function: str, args, budget: dict | None = None, model: str | None = None) -> Session:
    """Create the session and submit it to the configured executor (after the row is committed)."""
    executor = get_executor()  # first: a misconfigured executor must not leave a session queued forever
    session = create_session(owner, function, args, budget, model)
    executor.submit(session.pk)
    return session
