"""One throttle in front of every password check: the login page and `POST /api/token/` share it.

Each check costs the server a PBKDF2 hash (about half a second of CPU), so the count is of requests per
client address, right or wrong, through either door: `OPENPROGRAM_LOGIN_RATE` (e.g. "10/min"; "off"
for none). It is DRF's throttle machinery, on Django's cache (per server process unless CACHES names a
shared one); the page reuses it through `login_wait`.
"""
from __future__ import annotations

import math

from rest_framework.throttling import SimpleRateThrottle

from ..conf import conf


class LoginRateThrottle(SimpleRateThrottle):
    scope = "login"

    def get_rate(self):
        # Read at each request (not DRF's THROTTLE_RATES, fixed at import), so a changed setting holds.
        rate = conf.LOGIN_RATE.strip()  # its form is checked by dag.conf (and at start-up, dag.E003)
        return None if rate.lower() in ("", "off", "none", "0") else rate

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def login_wait(request) -> int | None:
    """Count one password attempt from `request`'s client; None if allowed, else whole seconds to wait."""
    throttle = LoginRateThrottle()
    if throttle.allow_request(request, None):
        return None
    return max(1, math.ceil(throttle.wait() or 1))
