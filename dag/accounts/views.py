"""The login and password-change pages, behind the password-attempt throttle, and the API token page."""
from __future__ import annotations

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


# Where a new key waits, in the user's server-side session, for the one page view that shows it.
NEW_KEY_SESSION_KEY = "accounts.new_api_token"


@method_decorator(never_cache, name="dispatch")  # the page shows a new key once; no cache may keep it
class ApiTokensView(LoginRequiredMixin, View):
    """The user's API tokens: when each was issued and expires, a new one (revoking the rest), or none.

    A POST answers with a redirect to the page (POST-redirect-GET): reloading the page after "New token"
    then shows the page again instead of posting again, which rotated again and revoked the key just shown.
    The new key goes to the page through the session, read once; never in a URL, which logs keep."""

    http_method_names = ["get", "head", "post", "options"]  # HEAD is GET's (Django's View), OPTIONS lists them

    def get(self, request):
        # A HEAD shows no body, so it must not use up the one showing of the key.
        read = request.session.pop if request.method == "GET" else request.session.get
        new_key = read(NEW_KEY_SESSION_KEY, None)
        return render(request, "accounts/tokens.html", {"tokens": tokens.active(request.user), "new_key": new_key})

    def post(self, request):
        action = request.POST.get("action")
        if action == "rotate":
            _, request.session[NEW_KEY_SESSION_KEY] = tokens.rotate(request.user, None)
        elif action == "revoke":
            request.session.pop(NEW_KEY_SESSION_KEY, None)
            count = tokens.revoke_all(request.user)
            messages.success(request, f"Revoked {count} token{'s' if count != 1 else ''}.")
        else:
            return HttpResponseBadRequest("action must be 'rotate' or 'revoke'\n",
                                          content_type="text/plain; charset=utf-8")
        return redirect("api-tokens")
