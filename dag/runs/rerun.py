"""Starting a replay or a fork of a session, for the API, the page's buttons and `run_function --replay`.

Both launch the original's function with its arguments, budget and model as a new session that records
where it came from (`replay_of`, or `forked_from` and `forked_from_node`); what the run is then served
from is `replay_source`'s. A problem is a LaunchRejected naming the field, as a launch's are.
"""
from __future__ import annotations

import uuid

from runtime.providers.replay import THEN_CHOICES

from ..conf import conf
from ..models import Node, Session
from ..recording import write_path
from .launch import LaunchRejected, launch


def own_session(owner, session_id) -> Session | None:
    """`owner`'s session of id `session_id` (any text; None for one that is no session id of theirs)."""
    try:
        pk = uuid.UUID(str(session_id))
    except ValueError:
        return None
    write_path.flush_session(pk)  # read-your-writes: a run's queued node writes in this process first
    return Session.objects.filter(owner=owner, pk=pk).first()


def start_replay(owner, original: Session, then: str = "stop") -> Session:
    """A replay of `original`: its model calls answered from the record; at a divergence it stops with
    ReplayDiverged (`then="stop"`) or goes on live (`then="live"`)."""
    if then not in THEN_CHOICES:
        raise LaunchRejected({"then": [f"must be one of {', '.join(map(repr, THEN_CHOICES))}, got {then!r}"]})
    return _relaunch(owner, original, original.model or None,
                     {"replay_of": original, "replay_options": {"then": then}})


def start_fork(owner, original: Session, node, reply=None, model=None) -> Session:
    """A fork of `original` at its model call of seq `node`: the calls before it served from the record,
    that one answered with `reply` (or made live on `model`), every call after it live (on `model`, when
    given, else the original's model)."""
    _check_fork_point(original, node)
    if (reply is None) == (model is None):
        raise LaunchRejected({"reply": ['give either "reply" (the edited reply text) or "model" (a model to '
                                        'make the call live with), not both nor neither']})
    if reply is not None:
        _check_reply(reply)
        options = {"reply": reply}
    else:
        if not isinstance(model, str) or not model.strip():
            raise LaunchRejected({"model": ["must be a model spec from GET /api/models/, like 'sim'"]})
        options = {"model": model}
    return _relaunch(owner, original, model or original.model or None,
                     {"forked_from": original, "forked_from_node": node, "replay_options": options})


def _relaunch(owner, original: Session, model, origin: dict) -> Session:
    return launch(owner, original.function, original.args, original.launch_budget, model, origin)


def _check_fork_point(original: Session, node) -> None:
    if isinstance(node, bool) or not isinstance(node, int):
        raise LaunchRejected({"node": [f"must be the seq (a whole number) of one of the session's model calls, "
                                       f"got {node!r:.40}"]})
    if not Node.objects.filter(session=original, seq=node, kind=Node.Kind.LLM).exists():
        raise LaunchRejected({"node": [f"session {original.pk} has no model call of seq {node}; fork at a "
                                       f"model call (kind 'llm')"]})


def _check_reply(reply) -> None:
    if not isinstance(reply, str):
        raise LaunchRejected({"reply": [f"must be the reply's text (a string), got {type(reply).__name__}"]})
    try:
        size = len(reply.encode("utf-8"))
    except UnicodeEncodeError:
        raise LaunchRejected({"reply": ["is not valid Unicode (it holds a lone surrogate)"]}) from None
    if size > conf.MAX_ARGS_BYTES:
        raise LaunchRejected({"reply": [f"is {size} bytes; the limit is {conf.MAX_ARGS_BYTES} bytes "
                                        f"(setting OPENPROGRAM_MAX_ARGS_BYTES)"]})
    if "\x00" in reply:
        raise LaunchRejected({"reply": ["must not hold NUL characters"]})
