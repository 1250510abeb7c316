"""The login and password-change pages, behind the password-attempt throttle, and the API token page."""
from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache

from . import tokens
from .throttles import throttled_post


class ThrottledPost:
    """A password-checking form view whose POST over `OPENPROGRAM_LOGIN_RATE` is a 429 with Retry-After:
    the page (as its GET shows it) says when to try again, and no password is checked."""

    def post(self, request, *args, **kwargs):
        return throttled_post(request, lambda: super(ThrottledPost, self).post(request, *args, **kwargs),
                              lambda wait: self._page_saying_wait(wait, *args, **kwargs))

    def _page_saying_wait(self, wait: int, *args, **kwargs):
        self.extra_context = {**(self.extra_context or {}), "retry_after": wait}
        return self.get(self.request, *args, **kwargs)


class LoginView(ThrottledPost, auth_views.LoginView):
    """Django's login page, throttled."""


class PasswordChangeView(ThrottledPost, auth_views.PasswordChangeView):
    """Django's password change, throttled: it checks the old password, as a login does."""


# The cookie a new key travels in, from the POST that made it to the one page view that shows it (seconds).
NEW_KEY_COOKIE, NEW_KEY_SALT, NEW_KEY_MAX_AGE_S = "new_api_token", "dag.accounts.new_api_token", 60


@method_decorator(never_cache, name="dispatch")  # the page shows a new key once; no cache may keep it
class ApiTokensView(LoginRequiredMixin, View):
    """The user's API tokens: when each was issued and expires, a new one (revoking the rest), or none.

    A POST answers with a redirect to the page (POST-redirect-GET): reloading the page after "New token"
    then shows the page again instead of posting again, which rotated again and revoked the key just shown.
    The new key goes to the page in a short-lived signed cookie, only to this page, read once: not in a
    URL, which logs keep, nor in the server's session store, which would hold it in plain text (the
    tokens themselves are stored only as digests). It is shown only while its token still exists."""

    http_method_names = ["get", "head", "post", "options"]  # HEAD is GET's (Django's View), OPTIONS lists them

    def get(self, request):
        new_key = self._new_key(request)
        response = render(request, "accounts/tokens.html", {"tokens": tokens.active(request.user), "new_key": new_key})
        if request.method == "GET":  # a HEAD shows no body, so it must not use up the one showing of the key
            response.delete_cookie(NEW_KEY_COOKIE, path=request.path)
        return response

    def post(self, request):
        action = request.POST.get("action")
        response = redirect("api-tokens")
        if action == "rotate":
            token, key = tokens.rotate(request.user, None)
            response.set_signed_cookie(NEW_KEY_COOKIE, json.dumps([token.pk, key]), salt=NEW_KEY_SALT,
                                       max_age=NEW_KEY_MAX_AGE_S, path=request.path, secure=request.is_secure(),
                                       httponly=True, samesite="Strict")
        elif action == "revoke":
            count = tokens.revoke_all(request.user)
            messages.success(request, f"Revoked {count} token{'s' if count != 1 else ''}.")
            response.delete_cookie(NEW_KEY_COOKIE, path=request.path)
        else:
            return HttpResponseBadRequest("action must be 'rotate' or 'revoke'\n",
                                          content_type="text/plain; charset=utf-8")
        return response

    @staticmethod
    def _new_key(request) -> str | None:
        """The key the last POST made, if it came within NEW_KEY_MAX_AGE_S and its token was not revoked since."""
        raw = request.get_signed_cookie(NEW_KEY_COOKIE, default=None, salt=NEW_KEY_SALT, max_age=NEW_KEY_MAX_AGE_S)
        try:
            token_pk, key = json.loads(raw) if raw else (None, None)
        except (ValueError, TypeError):
            return None
        return key if token_pk is not None and tokens.active(request.user).filter(pk=token_pk).exists() else None
