"""For the access suite: a function with a hidden input, every URL of the urlconf as a concrete path, and
a websocket client of the stream."""
from __future__ import annotations

import json
import re

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from runtime import agentic_function, function

from .bounds import REPLY_S

MODULE = __name__
SECRET = "s3cr3t-hidden-value-7f1e"


@function(register_globally=False, input={"token": {"hidden": True}})
def check_token(token: str = "") -> bool:
    """Whether the token it was given is the secret one."""
    return token == SECRET


@agentic_function(register_globally=False, input={"api_token": {"hidden": True}})
def uses_secret(question: str, api_token: str = SECRET, runtime=None) -> dict:
    """Ask the model, holding a credential that must never be shown."""
    answer = runtime.llm(question)
    return {"answer": answer, "token_ok": check_token(token=api_token)}


# --- every URL pattern as a path ------------------------------------------------------------------

def patterns(resolver: URLResolver | None = None, prefix: str = ""):
    """(pattern text, its view) of every URL the urlconf has, includes flattened."""
    for entry in (resolver or get_resolver()).url_patterns:
        text = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from patterns(entry, text)
        elif isinstance(entry, URLPattern):
            yield text, entry.callback


_ROUTE_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def _fill_regex_groups(text: str, value_of) -> str:
    """Replace each `(?P<name>...)` group (nested parentheses and all) by a value for `name`."""
    out, index = [], 0
    while (start := text.find("(?P<", index)) != -1:
        name = text[start + 4:text.index(">", start)]
        depth, end = 0, start
        while True:
            depth += {"(": 1, ")": -1}.get(text[end], 0) if text[end - 1:end] != "\\" else 0
            if depth == 0:
                break
            end += 1
        out += [text[index:start], value_of(name)]
        index = end + 1
    return "".join(out) + text[index:]


def concrete_path(pattern: str, value_of) -> str:
    """A request path the pattern matches, its parameters filled by `value_of(name)`."""
    text = _fill_regex_groups(pattern, value_of)  # first: a regex group's `<name>` looks like a route's
    text = _ROUTE_PARAM.sub(lambda m: value_of(m.group("name")), text)
    text = text.replace("^", "").replace("$", "").replace("\\Z", "").replace("/?", "/").replace("\\.", ".")
    return "/" + text


def every_path(value_of) -> list[tuple[str, object]]:
    """(path, view) of every URL pattern; each path is checked to resolve to that pattern's view, so a new
    URL the filling cannot handle fails loudly instead of going untested."""
    paths = []
    for pattern, view in patterns():
        path = concrete_path(pattern, value_of)
        assert resolve(path).func == view, f"{pattern!r} filled as {path!r} resolves elsewhere"
        paths.append((path, view))
    return paths


# --- the live stream ------------------------------------------------------------------------------

OWN_PAGE = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


async def session_cookie(user) -> list[tuple[bytes, bytes]]:
    def login():
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value
    return [(b"cookie", f"sessionid={await database_sync_to_async(login)()}".encode())]


async def stream(session_id, headers, path: str | None = None) -> tuple[bool, list[dict], int | None]:
    """(accepted, the frames up to the end of the snapshot, the close code) of one stream connection, to
    the owner's stream of the session or to `path` (a shared page's)."""
    from openprogram_web.asgi import application

    communicator = WebsocketCommunicator(application, path or f"/ws/sessions/{session_id}/", headers=headers)
    accepted, code = await communicator.connect(timeout=REPLY_S)
    frames = []
    while accepted:
        message = await communicator.receive_output(timeout=REPLY_S)
        if message["type"] == "websocket.close":
            code = message.get("code")
            break
        frames.append(message.get("text") or "")
        frame = json.loads(frames[-1])
        if frame.get("type", "").startswith("snapshot") and not frame.get("more"):
            break
    await communicator.disconnect()
    return accepted, frames, code
