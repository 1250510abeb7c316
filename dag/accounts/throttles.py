"""One throttle in front of every password check: the login page, the admin's login (`admin_site`), the
password change and `POST /api/token/` share it.

Each check costs the server a PBKDF2 hash (about half a second of CPU), so the count is of requests per
client address, right or wrong, through any of these doors: `OPENPROGRAM_LOGIN_RATE` (e.g. "10/min"; "off"
for none). It is DRF's throttle machinery, on the "throttles" cache that every server process shares
(Redis with REDIS_URL, else files under var/; see settings.CACHES); the pages reuse it through `login_wait`.

DRF's throttle reads a client's attempt history, decides and writes it back: attempts sent at once all
read the same history and all pass (60 concurrent guesses against "10/min" all went through). So each
client's read-decide-write holds a lock (`one_at_a_time`): a Redis lock beside the count on Redis, and
on files an exclusive lock on a file in the cache's directory, which every process on the machine
sees. An attempt waits at most LOCK_WAIT_S for it, then is refused as over the rate.

A second count, per account (`AccountLoginThrottle`, `OPENPROGRAM_ACCOUNT_LOGIN_RATE`), holds the failed
checks against one username from every address together: many addresses get no more guesses at one
password than one address.

An IPv6 client is counted by its /64, the block one subscriber or host is usually given: counting each
address on its own would give such a client 2^64 counts.

With the throttle's Redis unreachable no attempt can be counted, so none is checked: each is refused
with `ThrottleUnavailable` (a 503 with Retry-After), and the outage is logged once (`_outage`), not as a
traceback per attempt.
"""
from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import logging
import math
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from django.core.cache import caches
from django.http import HttpResponse
from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.throttling import SimpleRateThrottle

from ..conf import conf


THROTTLE_CACHE = "throttles"
# How long one attempt waits for its client's lock (seconds): the lock is held for a cache read and
# write, so only a pile of attempts from one client waits this long, and what is left of it is refused.
LOCK_WAIT_S = 5.0
_LOCK_HELD_S = 10  # a Redis lock whose holder died is let go after this
# Clients share a fixed number of locks (by a hash of their key), so nothing grows with the addresses seen.
LOCK_STRIPES = 64
_thread_locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
# Sent with the 503 of an attempt made while the throttle's Redis is unreachable (seconds).
OUTAGE_RETRY_AFTER_S = 30
IPV6_COUNTED_PREFIX = 64

logger = logging.getLogger(__name__)


class ThrottleUnavailable(APIException):
    """The password-attempt count cannot be read (its Redis is unreachable): the attempt is refused unchecked.
    DRF answers it as a JSON 503 with Retry-After (`wait`); the pages, through `throttled_post`."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = ("Password checks are paused: the server cannot reach the store that counts login "
                      "attempts. Try again shortly.")
    default_code = "throttle_unavailable"
    wait = OUTAGE_RETRY_AFTER_S


class _OutageNotice:
    """Says once that the throttle's Redis is unreachable, and once that it is back."""

    def __init__(self):
        self._lock = threading.Lock()
        self._failures = 0

    def failed(self, exc: Exception) -> None:
        with self._lock:
            self._failures += 1
            first = self._failures == 1
        if first:
            logger.warning("login throttle: its Redis is unreachable (%s); password checks are refused with "
                           "503 until it is back", exc)

    def reached(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, 0
        if failures:
            logger.info("login throttle: its Redis is reachable again (%d attempts refused meanwhile)", failures)


_outage = _OutageNotice()


def _stripe(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % LOCK_STRIPES


@contextmanager
def one_at_a_time(cache, key: str) -> Iterator[bool]:
    """Hold the lock of counter `key` of `cache` (see the module) for the block; yields False if it could
    not be had within LOCK_WAIT_S (the block must then neither count nor allow the attempt)."""
    from django.core.cache.backends.filebased import FileBasedCache
    from django.core.cache.backends.redis import RedisCache

    if isinstance(cache, RedisCache):
        lock = cache._cache.get_client(write=True).lock(cache.make_key(f"lock:{key}"), timeout=_LOCK_HELD_S,
                                                          blocking_timeout=LOCK_WAIT_S)
        held = lock.acquire()
        try:
            yield held
        finally:
            if held:
                lock.release()
        return
    stripe = _stripe(key)
    thread_lock = _thread_locks[stripe]  # this process's threads, on any cache
    if not thread_lock.acquire(timeout=LOCK_WAIT_S):
        yield False
        return
    try:
        if isinstance(cache, FileBasedCache):
            with _file_lock(os.path.join(cache._dir, f"attempts-{stripe}.lock")) as held:  # other processes
                yield held
        else:
            yield True
    finally:
        thread_lock.release()


@contextmanager
def _file_lock(path: str) -> Iterator[bool]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.005)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class LoginRateThrottle(SimpleRateThrottle):
    scope = "login"

    @property
    def cache(self):
        # Looked up per use (not DRF's class attribute, bound at import to the default cache), so a test's
        # or deployment's CACHES holds.
        return caches[THROTTLE_CACHE]

    def get_rate(self):
        # Read at each request (not DRF's THROTTLE_RATES, fixed at import), so a changed setting holds.
        return rate_or_none(conf.LOGIN_RATE)

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": counted_client(self.get_ident(request))}

    def allow_request(self, request, view):
        """DRF's decision, made under the client's lock (see the module): concurrent attempts count.
        Raises ThrottleUnavailable when the count's Redis cannot be reached."""
        if self.get_rate() is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True  # nothing to count by (an account throttle with no account named)
        try:
            allowed = self._allow_one_at_a_time(request, view, key)
        except RedisError as exc:
            _outage.failed(exc)
            raise ThrottleUnavailable() from None
        _outage.reached()
        return allowed

    def _allow_one_at_a_time(self, request, view, key: str) -> bool:
        with one_at_a_time(self.cache, key) as held:
            if not held:
                self.history, self.now = [], self.timer()  # for wait(): try again in a moment
                self.key = key
                return False
            return super().allow_request(request, view)


class AccountLoginThrottle(LoginRateThrottle):
    """Failed password checks against one account, from every address together
    (`OPENPROGRAM_ACCOUNT_LOGIN_RATE`): a guesser with many addresses gets no more tries at one password
    than one address would. What it trades: anyone can lock an account's password logins for the window
    by failing on purpose (its API tokens and open browser sessions keep working).

    An attempt is counted before its password is checked, under the account's lock like the address
    count (so concurrent guesses cannot all pass before the first failure lands), and given back when the
    password was right (`give_back`): what stays counted are the failures. The account is keyed by a
    digest of the username as sent (any text; unknown usernames are counted alike, so the limit does not
    tell which accounts exist).
    """

    scope = "login-account"

    def __init__(self, username):
        super().__init__()
        self.username = username if isinstance(username, str) and username else None

    def get_rate(self):
        return rate_or_none(conf.ACCOUNT_LOGIN_RATE)

    def get_cache_key(self, request, view):
        if self.username is None:
            return None  # no account named (a password change): the address count alone holds
        digest = hashlib.sha256(self.username.encode("utf-8", "surrogatepass")).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": digest}

    def throttle_failure(self):
        # Once per window, not per refused attempt: a guesser must not fill the log either.
        if self.cache.add(f"{self.key}:told", True, int(self.duration)):
            logger.warning("login throttle: %d failed password checks against the account %r from all addresses "
                           "within %d s (OPENPROGRAM_ACCOUNT_LOGIN_RATE=%s): its password logins are refused "
                           "for the rest of that window", len(self.history), self.username, self.duration,
                           self.rate)
        return super().throttle_failure()

    def give_back(self) -> None:
        """The password was right: uncount this attempt. Not raising: the login has happened already."""
        if getattr(self, "key", None) is None or not self.history or self.history[0] != self.now:
            return  # not counted (no rate, no account, or refused)
        try:
            with one_at_a_time(self.cache, self.key) as held:
                history = self.cache.get(self.key, []) if held else []
                if self.now in history:
                    history.remove(self.now)
                    self.cache.set(self.key, history, self.duration)
        except RedisError as exc:  # it stays counted until its window ends
            _outage.failed(exc)


def rate_or_none(text: str) -> str | None:
    """A rate setting's text as DRF's throttles read it; None for "off" (its form is checked by dag.conf,
    and at start-up by dag.E003)."""
    rate = text.strip()
    return None if rate.lower() in ("", "off", "none", "0") else rate


def counted_client(ident: str) -> str:
    """Whose count an attempt from address `ident` goes to: an IPv6 address's /64, else the address."""
    try:
        address = ipaddress.ip_address(ident)
    except ValueError:
        return ident  # not an address (a test client's, or a proxy's header): counted as written
    if address.version == 4:
        return str(address)
    if address.ipv4_mapped is not None:  # ::ffff:192.0.2.1 is the IPv4 client 192.0.2.1 (a dual-stack socket)
        return str(address.ipv4_mapped)
    return str(ipaddress.ip_network(f"{address}/{IPV6_COUNTED_PREFIX}", strict=False))


def logged_once(refusal):
    """`refusal`, the 503 of ThrottleUnavailable, marked as logged: the outage is logged once (`_outage`),
    where Django would log each 503 at ERROR (and mail ADMINS). `_has_been_logged` is the mark Django's
    own log_response sets and reads (django.utils.log)."""
    refusal._has_been_logged = True
    return refusal


def login_wait(request, account: AccountLoginThrottle | None = None) -> int | None:
    """Count one password attempt from `request`'s client, and against `account` if given (once the
    address is within its rate); None if allowed, else whole seconds to wait."""
    for throttle in (LoginRateThrottle(), account):
        if throttle is not None and not throttle.allow_request(request, None):
            return max(1, math.ceil(throttle.wait() or 1))
    return None


def throttled_post(request, post, show_page):
    """`post()`, the view's password check, while `request`'s client is within the rate; else the page as
    `show_page(wait)` renders it, as a 429 with Retry-After. The page is shown as for a GET (the request's
    method is changed so): an unbound form, and no password looked at. While the count cannot be read
    (`ThrottleUnavailable`), a plain 503 page with Retry-After, and no password looked at either."""
    account = AccountLoginThrottle(request.POST.get("username"))
    try:
        wait = login_wait(request, account)
    except ThrottleUnavailable as refused:
        return logged_once(HttpResponse(f"{refused.detail}\n", status=refused.status_code,
                                        content_type="text/plain; charset=utf-8",
                                        headers={"Retry-After": str(refused.wait)}))
    if wait is None:
        before = getattr(request, "user", None)
        response = post()
        user = getattr(request, "user", None)
        # Django's login() sets the request's user anew: the password was right. A user who was logged in
        # already and failed is the same object, and that failure stays counted.
        if user is not before and user.is_authenticated and user.get_username() == account.username:
            account.give_back()
        return response
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
