"""What a replay or a fork runs on: the recorded model calls of the session it replays, read from its DAG
and handed to the runtime's `ReplayProvider` (the runtime never reads the database itself).

A call's path is the names of the code nodes from the entry call down to the model call's caller, as
`runtime.providers.replay.call_path` names the call being made, so each recorded reply answers the call
made at the same place.
"""
from __future__ import annotations

from typing import Optional

from runtime import Runtime
from runtime.providers.replay import PATH_SEPARATOR, RecordedCall, ReplayProvider, ReplayRuntime

from ..models import Node, Session


def recorded_calls(session: Session | str) -> list[RecordedCall]:
    """The completed model calls of `session` (a Session or its id), each with its call path, in seq order."""
    nodes = Node.objects.filter(session=session).order_by("seq").values_list(
        "id", "seq", "parent_id", "kind", "name", "status", "output")
    names: dict[int, tuple[Optional[int], str]] = {}
    calls = []
    for node_id, seq, parent, kind, name, status, output in nodes:
        if kind == Node.Kind.CODE:
            names[node_id] = (parent, name)
        elif status == Node.Status.COMPLETED and isinstance(output, dict):
            calls.append(RecordedCall(path=_path(parent, names), seq=seq, reply=output))
    return calls


def _path(parent: Optional[int], names: dict) -> str:
    """The call path of a call made in code node `parent` (its callers were read before it: lower seqs)."""
    parts = []
    while parent is not None and parent in names:
        parent, name = names[parent]
        parts.append(name)
    return PATH_SEPARATOR.join(reversed(parts))


class OriginalGone(LookupError):
    """The session a replay or a fork was made from was deleted before it ran."""


def runtime_for(session: Session) -> Optional[Runtime]:
    """The runtime a replay or a fork of another session runs on; None for any other session. A replay
    whose original was deleted meanwhile raises OriginalGone rather than make its calls live."""
    original_id = session.replay_of_id or session.forked_from_id
    if original_id is None:
        if session.replay_options is not None:
            raise OriginalGone("the session this one replays or forks was deleted before it ran: there is no "
                               "record to answer its model calls from; launch the function again instead")
        return None
    options = session.replay_options or {}
    if session.replay_of_id:
        replay = ReplayProvider(recorded_calls(original_id), then=options.get("then", "stop"))
    else:  # everything after the fork point runs live, so a divergence before it goes on live too
        replay = ReplayProvider(recorded_calls(original_id), then="live", fork_at=session.forked_from_node,
                                fork_reply=options.get("reply"))
    return ReplayRuntime(replay, model=session.model or None)
