"""Request bodies in the character sets the site reads: the UTF encodings, ASCII and Latin-1.

Django and DRF decode a body in whatever codec its Content-Type's `charset` names, if Python knows it.
Some of Python's codecs are pure Python and slow down with the square of their input (punycode: 13 s
of CPU for one 1 MB body, before any login or throttle is reached), so a single anonymous request could
hold the server. JSON is UTF-8 (RFC 8259) and browsers send forms in the page's UTF-8; a body in any
other charset is refused with 415 before anything reads it (the CSRF check reads a form's body).
"""
from __future__ import annotations

import codecs

from django.http import HttpResponse, JsonResponse
from django.utils.http import parse_header_parameters

# Python's names for them (`codecs.lookup(...).name`), so every alias of one ("UTF8", "utf_8") passes.
READ_CHARSETS = frozenset({"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le",
                           "utf-32-be", "ascii", "latin-1", "iso8859-1", "cp1252"})


def refused_charset(content_type: str) -> str | None:
    """The charset `content_type` names if the site does not read it (a known codec outside
    READ_CHARSETS), else None. An unknown one is ignored, as Django ignores it (it reads UTF-8)."""
    _, params = parse_header_parameters(content_type or "")
    charset = params.get("charset")
    if not charset:
        return None
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        return None
    return None if name in READ_CHARSETS else charset


class RequestCharsetMiddleware:
    """Refuses (415) a request whose body is declared in a charset outside READ_CHARSETS."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        charset = refused_charset(request.META.get("CONTENT_TYPE", ""))
        if charset is None:
            return self.get_response(request)
        message = f"charset {charset[:40]!r} is not read here; send the body as UTF-8"
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=415)
        return HttpResponse(message, status=415, content_type="text/plain; charset=utf-8")
