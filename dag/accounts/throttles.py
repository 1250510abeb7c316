"""One throttle in front of every password check: the login page, the admin's login (`admin_site`), the
password change and `POST /api/token/` share it.

Each check costs the server a PBKDF2 hash (about half a second of CPU), so the count is of requests per
client address, right or wrong, through any of these doors: `OPENPROGRAM_LOGIN_RATE` (e.g. "10/min"; "off"
for none). It is DRF's throttle machinery, on the "throttles" cache that every server process shares
(Redis with REDIS_URL, else files under var/; see settings.CACHES); the pages reuse it through `login_wait`.
"""
from __future__ import annotations

import math

from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle

from ..conf import conf


THROTTLE_CACHE = "throttles"


class LoginRateThrottle(SimpleRateThrottle):
    scope = "login"

    @property
    def cache(self):
        # Looked up per use (not DRF's class attribute, bound at import to the default cache), so a test's
        # or deployment's CACHES holds.
        return caches[THROTTLE_CACHE]

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


def throttled_post(request, post, show_page):
    """`post()`, the view's password check, while `request`'s client is within the rate; else the page as
    `show_page(wait)` renders it, as a 429 with Retry-After. The page is shown as for a GET (the request's
    method is changed so): an unbound form, and no password looked at."""
    wait = login_wait(request)
    if wait is None:
        return post()
    request.method = "GET"
    response = show_page(wait)
    if response.status_code == 200:  # not the redirect a logged-in user's admin login is
        response.status_code = 429
        response["Retry-After"] = str(wait)
    return response


def forget_attempts() -> None:
    """Forget every password attempt counted under this process's OPENPROGRAM_THROTTLE_PREFIX (tests; an
    administrator after a lock-out); attempts counted under another prefix stay.

    On files the prefix has a directory of its own (settings.CACHES), which `clear()` empties. On Redis
    only the keys under the prefix go: `clear()` would empty the whole Redis database, which the channel
    layer, the Celery broker and other prefixes' counts may share."""
    from django.core.cache.backends.redis import RedisCache

    cache = caches[THROTTLE_CACHE]
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    # Django's cache API has no delete-by-pattern, so this reaches the redis-py client behind the cache
    # (RedisCache._cache, private but stable since Django 4.0): it is the cache's own connection pool and
    # LOCATION, and `make_key("*")` puts KEY_PREFIX and the key version in the pattern, as in every key.
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match=cache.make_key("*")))
    if keys:
        client.delete(*keys)
