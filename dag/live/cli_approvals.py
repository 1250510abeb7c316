"""`run_function`'s side of approvals: it asks on the terminal about each call waiting for one.

The question is `approve <tool>(<arguments>)? [y/N/reason]`: "y" or "yes" approves, an empty line, "n" or
"no" denies, and any other text denies with that text as the reason (the model reads it). The answer
goes through the same path as the page's and the API's (`dag.runs.steering.answer_approval`), so a call
answered meanwhile in the browser is only reported.
"""
from __future__ import annotations

import json
from typing import Callable

from ..models import Session
from ..recording import write_path
from ..runs import steering

APPROVING = ("y", "yes")
DENYING = ("", "n", "no")


def question(request: dict) -> str:
    """The prompt for one pending request (`steering.pending_approvals`' shape)."""
    arguments = ", ".join(f"{name}={json.dumps(value, ensure_ascii=False)}"
                          for name, value in request["arguments"].items())
    return f"approve {request['tool']}({arguments})? [y/N/reason] "


def read_answer(text: str) -> tuple[bool, str]:
    """(approve, reason) from what was typed."""
    typed = text.strip()
    if typed.lower() in APPROVING:
        return True, ""
    if typed.lower() in DENYING:
        return False, ""
    return False, typed


def ask_pending(session: Session, ask: Callable[[str], str], asked: set, say: Callable[[str], None]) -> None:
    """Ask (`ask(prompt) -> typed line`) about each request of `session` not in `asked` yet, and answer it."""
    for request in steering.pending_approvals(session):
        if request["node"] in asked:
            continue
        asked.add(request["node"])
        approve, reason = read_answer(ask(question(request)))
        try:
            steering.answer_approval(session, request["node"], approve, reason)
        except (write_path.AlreadyAnswered, write_path.NoSuchRequest):
            say(f"the call of {request['tool']} was answered elsewhere (or timed out) first")
