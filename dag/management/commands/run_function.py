"""`manage.py run_function NAME key=value ...`: launch a function, watch its call tree grow, Ctrl-C stops it.

Arguments are read exactly like the web form reads its fields (`dag.pages.forms`), so the same text gives the
same values and the same errors. Repeat a key for list parameters (`tags=a tags=b`). The run goes to the
configured executor like any other launch, and the tree is drawn by polling the database, so it works
whichever process executes the run. The exit code says how the run ended (EXIT_CODES_HELP).

On a terminal the run is attended: each call of a tool that needs approval is asked about
(`dag.live.cli_approvals`); with standard input not a terminal, or `--unattended`, such tools are not
offered to the run's models.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from typing import Iterator

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from rich.console import Console
from rich.live import Live

from dag.conf import OFF_WORDS, ON_WORDS, conf
from dag.live.cli_approvals import ask_pending
from dag.live.cli_tree import build_tree
from dag.models import Node, Session
from dag.recording.totals import session_totals, warning_text
from dag.pages.forms import LaunchForm, to_form_text
from dag.runs import catalog
from dag.runs.executors import InProcessExecutor, get_executor
from dag.runs.launch import LaunchRejected, launch
from dag.runs.launch_budget import FIELDS, BudgetProblem, describe, parse_budget_text
from dag.runs.lifecycle import request_stop
from dag.runs.local_user import default_user
from dag.runs.rerun import own_session, start_replay
from runtime.providers.replay import THEN_CHOICES

POLL_S = 0.1
EXIT_CODES = {Session.Status.COMPLETED: 0, Session.Status.ERROR: 1, Session.Status.INTERRUPTED: 1,
              Session.Status.CANCELLED: 130}  # 130: the shell's code for "ended by Ctrl-C"
EXIT_BAD_INVOCATION = 2
# A run that completed although the depth ceiling or a budget refused some of its calls: its result may
# be missing what those calls would have found, so scripts should not take it as a plain success.
EXIT_COMPLETED_WITH_WARNING = 3
# A session deleted (from the admin or the API) while being watched: the run did not complete, and no
# result will ever be read, so it counts as a failed run.
EXIT_SESSION_DELETED = 1
EXIT_CODES_HELP = ("exit codes: 0 completed; 1 error, interrupted or deleted while running; 2 bad invocation; "
                   "3 completed with refused calls or budget breaches (the warning is printed); "
                   "130 cancelled (Ctrl-C or a stop)")


def parse_assignments(pairs: list[str]) -> dict[str, str]:
    """{"key": "value"} from ["key=value", ...]; a repeated key collects its values one per line."""
    values: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"arguments are key=value; got {pair!r}", returncode=EXIT_BAD_INVOCATION)
        values.setdefault(key, []).append(value)
    return {key: "\n".join(items) for key, items in values.items()}


def form_for(tool, given: dict[str, str]) -> LaunchForm:
    """The launch form filled as a browser would: defaults for what was not given, the given text for the rest."""
    form = LaunchForm(tool)
    unknown = sorted(set(given) - set(form.fields))
    if unknown:
        raise CommandError(f"unknown argument(s) {', '.join(unknown)} for {tool.tool_name}; "
                           f"parameters are: {', '.join(form.fields) or 'none'}", returncode=EXIT_BAD_INVOCATION)
    data = {param.name: to_form_text(param, param.schema["default"]) for param in form.params if param.has_default}
    for param in form.params:
        if param.name in given:
            data[param.name] = on_or_off(param.name, given[param.name]) if param.kind == "bool" else given[param.name]
    return LaunchForm(tool, data=data)


def on_or_off(name: str, text: str) -> bool:
    """A bool argument's text as True or False; anything but the on/off words is refused, since a typo
    (`verbose=flase`) read as False would launch a run nobody asked for."""
    word = text.strip().lower()
    if word not in (*ON_WORDS, *OFF_WORDS):
        words = ", ".join(f"{on}/{off}" for on, off in zip(ON_WORDS, OFF_WORDS))
        raise CommandError(f"{name}: expected on or off ({words}), got {text!r}", returncode=EXIT_BAD_INVOCATION)
    return word in ON_WORDS


def page_address(session: Session) -> str:
    """The full address of `session`'s live page (OPENPROGRAM_SITE_URL and its path), for a terminal."""
    return conf.SITE_URL.rstrip("/") + reverse("session-detail", args=[session.pk])


def budget_problem_text(problem: BudgetProblem) -> str:
    """`problem` for a terminal: each limit's message after its name; a problem with the budget as a
    whole (BudgetProblem's "__all__" key, an internal name) as its message alone."""
    return "; ".join(" ".join(messages) if name == "__all__" else f"{name}: {' '.join(messages)}"
                     for name, messages in problem.errors.items())


@contextmanager
def _ctrl_c_counted() -> Iterator[list]:
    """Count Ctrl-C presses in a list instead of raising KeyboardInterrupt.

    An interrupt raised in the middle of a database query leaves the connection unusable (PostgreSQL:
    "connection in transaction status ACTIVE"), and the stop request needs that connection; so the
    presses are noted and acted on between polls. Only the main thread may set a signal handler.
    """
    presses: list = []
    if threading.current_thread() is not threading.main_thread():
        yield presses
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: presses.append(signum))
    try:
        yield presses
    finally:
        signal.signal(signal.SIGINT, previous)


def _leaving_line() -> str:
    """Leave at a second Ctrl-C: a run in this process ends with it, at once; one elsewhere goes on stopping."""
    executor = get_executor()
    if isinstance(executor, InProcessExecutor):
        executor.leave_runs_at_exit()
        return "interrupted again; leaving now: the run, in this process, ends interrupted with it"
    return "interrupted again; leaving the run to stop on its own"


class Command(BaseCommand):
    help = "Run an agentic function, drawing its call tree as it grows. Ctrl-C stops the run."

    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("function", nargs="?", help="the function's name (see the catalog or /api/functions/)")
        parser.add_argument("arguments", nargs="*", metavar="key=value",
                            help="arguments as the form takes them; repeat a key for a list")
        parser.add_argument("--user", help="run as this user (default: the local user)")
        parser.add_argument("--budget", metavar="LIMIT=N,...", default="",
                            help=f"limits for the whole run, e.g. max_llm_calls=20,timeout_s=60 "
                                 f"(any of {', '.join(FIELDS)}); they tighten the function's own budget")
        parser.add_argument("--model", help="the model to run on, one this server offers (GET /api/models/), "
                                            "e.g. sim:naive or openai:gpt-4o-mini; default: OPENPROGRAM_MODEL")
        parser.add_argument("--unattended", action="store_true",
                            help="no one answers here: tools that need a person's approval are not offered to the "
                                 "run's models (the default when standard input is not a terminal; on a terminal "
                                 "each such call is asked about)")
        parser.add_argument("--replay", metavar="SESSION_ID",
                            help="replay that session: its function and arguments again, each model call answered "
                                 "from its recorded reply (no model is called)")
        parser.add_argument("--then", choices=THEN_CHOICES, default="stop",
                            help="with --replay, at a model call the recording has no answer for: stop "
                                 "(ReplayDiverged, the default) or go on with live calls")

    def handle(self, *args, **options):
        if options["replay"] is not None:
            return self._replay(options)
        if options["function"] is None:
            raise CommandError("name the function to run (or --replay SESSION_ID)", returncode=EXIT_BAD_INVOCATION)
        try:
            entry = catalog.get(options["function"])
        except catalog.UnknownFunction as exc:
            raise CommandError(str(exc), returncode=EXIT_BAD_INVOCATION) from None
        form = form_for(entry.tool, parse_assignments(options["arguments"]))
        if not form.is_valid():
            lines = [f"  {name if name != '__all__' else 'arguments'}: {message}"
                     for name, messages in form.errors.items() for message in messages]
            raise CommandError(f"invalid arguments for {entry.name}:\n" + "\n".join(lines),
                               returncode=EXIT_BAD_INVOCATION)
        try:
            budget = parse_budget_text(options["budget"])
        except BudgetProblem as exc:
            raise CommandError(f"invalid --budget: {budget_problem_text(exc)}",
                               returncode=EXIT_BAD_INVOCATION) from None
        user = self._user(options["user"])
        # Counted from before the launch: a Ctrl-C once the run has started, even before the first
        # redraw, is a stop request, never a KeyboardInterrupt that leaves the run going.
        with _ctrl_c_counted() as presses:
            try:
                session = launch(user, entry.name, form.args, budget, model=options["model"],
                                 unattended=True if options["unattended"] or not sys.stdin.isatty() else None)
            except LaunchRejected as exc:  # a model not offered here, or the catalog changed since the check
                raise CommandError(f"cannot launch {entry.name}: {exc}", returncode=EXIT_BAD_INVOCATION) from None
            console = Console(file=getattr(self.stdout, "_out", self.stdout), highlight=False)
            console.print(f"Session {session.pk} (as {user.get_username()}); page: {page_address(session)}",
                          soft_wrap=True)
            if budget:
                console.print(f"Budget: {describe(budget)}", soft_wrap=True)
            session, nodes = self._watch(session, console, presses)
        console.print(build_tree(session.as_dict(), nodes))  # the whole tree, once it is final
        self._report(session, console)

    def _replay(self, options) -> None:
        """`--replay ID`: a replay of the user's session ID (dag.runs.rerun), watched like a launch."""
        if options["function"] is not None or options["arguments"] or options["budget"]:
            raise CommandError("--replay runs the session's own function, arguments and budget: give no "
                               "function, arguments or --budget with it", returncode=EXIT_BAD_INVOCATION)
        user = self._user(options["user"])
        original = own_session(user, options["replay"])
        if original is None:
            raise CommandError(f"no session {options['replay']!r} of {user.get_username()} to replay",
                               returncode=EXIT_BAD_INVOCATION)
        with _ctrl_c_counted() as presses:
            try:
                session = start_replay(user, original, options["then"])
            except LaunchRejected as exc:
                raise CommandError(f"cannot replay {original.pk}: {exc}", returncode=EXIT_BAD_INVOCATION) from None
            console = Console(file=getattr(self.stdout, "_out", self.stdout), highlight=False)
            console.print(f"Session {session.pk}, a replay of {original.pk} (as {user.get_username()}); "
                          f"page: {page_address(session)}", soft_wrap=True)
            session, nodes = self._watch(session, console, presses)
        console.print(build_tree(session.as_dict(), nodes))
        self._report(session, console)

    def _user(self, username: str | None):
        if username is not None:  # `--user ""` names no one: refused, not taken for the local user
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}", returncode=EXIT_BAD_INVOCATION)
            return user
        user = default_user()
        if user is None:
            raise CommandError("no local user; run `manage.py ensure_local_user` or pass --user NAME",
                               returncode=EXIT_BAD_INVOCATION)
        return user

    def _watch(self, session: Session, console: Console, presses: list) -> tuple[Session, dict[int, dict]]:
        """Redraw the tree until the session ends; the first Ctrl-C (one of `presses`, counted by
        `_ctrl_c_counted`) requests a stop and keeps watching.

        While running, the latest calls that fit the terminal are drawn; the display is transient, and
        the caller prints the whole final tree.
        """
        nodes: dict[int, dict] = {}
        seen_rev = 0
        stopping = False
        asked: set[int] = set()  # the approval requests asked about on the terminal
        latest = max(console.size.height - 4, 5)
        with Live(build_tree(session.as_dict(), nodes, latest), console=console, refresh_per_second=10,
                  transient=True) as live:
            while True:
                if presses and not stopping:
                    stopping = True
                    console.print("Stopping… (Ctrl-C again to leave without waiting)")
                    request_stop(session.pk)
                if len(presses) > 1:
                    self._leave(_leaving_line(), EXIT_CODES[Session.Status.CANCELLED])
                self._refresh(session)
                if session.rev > seen_rev:
                    for node in Node.objects.filter(session=session, rev__gt=seen_rev):
                        nodes[node.pk] = node.as_dict()
                    seen_rev = session.rev
                    live.update(build_tree(session.as_dict(), nodes, latest))
                if session.is_terminal:
                    return session, nodes
                if session.waiting_for == Session.Waiting.AWAITING_APPROVAL and not stopping:
                    live.stop()  # the question and the typing need the terminal's line
                    ask_pending(session, partial(console.input, markup=False), asked, console.print)
                    live.start()
                time.sleep(POLL_S)

    def _refresh(self, session: Session) -> None:
        """`session` as stored now; if it was deleted meanwhile, leave (EXIT_SESSION_DELETED)."""
        try:
            session.refresh_from_db()
        except Session.DoesNotExist:
            self._leave(f"session {session.pk} was deleted while running; there is no result to show",
                        EXIT_SESSION_DELETED)

    def _report(self, session: Session, console: Console) -> None:
        """The result of a completed run, and the exit code of its ending (EXIT_CODES_HELP)."""
        if session.status == Session.Status.COMPLETED:
            result = session.result
            console.print(result if isinstance(result, str) else json.dumps(result, indent=2, ensure_ascii=False),
                          markup=False)
            warning = warning_text(session_totals(session.pk)["refusals"])
            if warning:
                self._leave(f"completed · {warning}", EXIT_COMPLETED_WITH_WARNING)
            return
        if session.status == Session.Status.CANCELLED:
            self._leave(f"cancelled: session {session.pk} was stopped; its calls so far are kept",
                        EXIT_CODES[session.status])
        raise CommandError(f"session {session.pk} ended {session.status}: {session.error}",
                           returncode=EXIT_CODES[session.status])

    def _leave(self, line: str, code: int):
        """End with `code` after one plain line on stderr: an expected ending, not a CommandError."""
        self.stderr.write(line)
        raise SystemExit(code)
