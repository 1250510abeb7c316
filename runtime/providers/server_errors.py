"""What a model server's error body says, read into something a person can act on.

`complaint(exc)` is the server's own message: an OpenAI-style `{"error": {"message": ...}}` body, a
FastAPI `{"detail": [...]}` list, or the SDK's text, with a pydantic list of validation errors boiled
down to the fields it names (llama-cpp-python's server lists every branch of its message union, most
of them noise). `is_context_overflow` tells a refusal because the prompt does not fit the model's
context, and `context_overflow` reads it into the two numbers that matter: the model's context and the
prompt's size.
"""
from __future__ import annotations

import re
from typing import Any, Optional

# One pydantic error as llama-cpp-python's server prints it: {'type': ..., 'loc': (...), 'msg': ..., ...}.
_PRINTED_ERROR = re.compile(r"""'type': '(?P<type>\w+)', 'loc': \((?P<loc>[^)]*)\), 'msg': (?P<msg>"[^"]*"|'[^']*')""")
# Branches of a union that did not match: each says "wrong role" or "field missing" for a shape the
# message never meant to have, so they are shown only when nothing else is wrong.
_UNION_NOISE = ("literal_error", "missing")
_SHOWN_COMPLAINTS = 3

_CONTEXT_WORDS = re.compile(r"context (?:length|window|size)|maximum context|prompt is too long", re.IGNORECASE)
_CONTEXT_SIZE = re.compile(r"(?:maximum context length is|context window of|context length of|context size \(|"
                           r"n_ctx[ =:]*|tokens >)\s*(\d+)", re.IGNORECASE)
# How llama-cpp-python, vLLM, OpenAI, llama.cpp's server and Anthropic ("prompt is too long: 208310
# tokens > 200000 maximum") each say how big the prompt was.
_PROMPT_SIZE = [re.compile(pattern, re.IGNORECASE) for pattern in (
    r"(\d+) in the messages", r"messages resulted in (\d+) tokens", r"(\d+) input tokens",
    r"requested (\d+) tokens in the messages", r"Requested tokens \((\d+)\)",
    r"prompt (?:contains|is) (?:at least |too long: )?(\d+)", r"request \((\d+) tokens\)")]


def complaint(exc: Exception) -> str:
    """The server's complaint in an HTTP error `exc` (an SDK's status error), a list of validation
    errors shortened to the ones that matter."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list) and detail:  # FastAPI's own 422 body
            return _validation_summary(len(detail), [(str(d.get("type", "")), _path(d.get("loc") or ()),
                                                      str(d.get("msg", ""))) for d in detail if isinstance(d, dict)])
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            # llama-cpp-python answers a failed assertion (tool_choice "required" among several tools) so
            return _boiled_down(error["message"]) if error["message"].strip() else "the server gave no reason"
        if isinstance(error, str):  # Ollama's native error body: {"error": "..."}
            return _boiled_down(error)
    return getattr(exc, "message", None) or str(exc)


def error_code(exc: Exception) -> Optional[str]:
    """The `code` of an OpenAI-style error body ("context_length_exceeded", ...), if it has one."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _boiled_down(message: str) -> str:
    printed = [(m["type"], _path(part.strip().strip("'\"") for part in m["loc"].split(",")), m["msg"][1:-1])
               for m in _PRINTED_ERROR.finditer(message)]
    if not printed:
        return message
    count = re.search(r"(\d+) validation errors?", message)
    return _validation_summary(int(count.group(1)) if count else len(printed), printed)


def _validation_summary(count: int, errors: list[tuple[str, str, str]]) -> str:
    relevant = ([e for e in errors if e[0] not in _UNION_NOISE] or [e for e in errors if e[0] != "literal_error"]
                or errors)
    shown = "; ".join(f"{where}: {msg}" for _, where, msg in relevant[:_SHOWN_COMPLAINTS])
    return f"{count} validation error{'s' if count != 1 else ''} in the request: {shown}"


def _path(loc: Any) -> str:
    return ".".join(str(part) for part in loc if str(part) and part != "body")


def is_context_overflow(message: str, code: Optional[str]) -> bool:
    """Whether an error says the prompt (with room for the reply) does not fit the model's context."""
    return code == "context_length_exceeded" or bool(_CONTEXT_WORDS.search(message))


def context_overflow(message: str, reply_cap: Optional[int], cap_setting: str) -> str:
    """The error for a context-length refusal: the model's context and the prompt's size as the server
    gave them, and what to do about it."""
    context = _CONTEXT_SIZE.search(message)
    prompt = next((m for m in (p.search(message) for p in _PROMPT_SIZE) if m), None)
    context_text = f"{context.group(1)} tokens" if context else "not said by the server"
    prompt_text = f"{prompt.group(1)} tokens" if prompt else "not said by the server"
    fix = "shorten the conversation (fewer turns, smaller tool results) or serve the model with a larger context"
    if context and prompt and int(prompt.group(1)) < int(context.group(1)) and reply_cap:
        fix = f"lower {cap_setting} (now {reply_cap}, the room asked for the reply) or {fix}"
    return (f"the prompt does not fit the model's context (the model's context: {context_text}; the prompt: "
            f"{prompt_text}); {fix}. The server said: {message}")
