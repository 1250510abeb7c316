"""The login and password-change pages, behind the password-attempt throttle, and the API token page."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

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


@login_required
@never_cache  # the page shows a new key once; no cache may keep it
@require_http_methods(["GET", "POST"])
def api_tokens(request):
    """The user's API tokens: when each was issued and expires, a new one (revoking the rest), or none."""
    new_key = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "rotate":
            _, new_key = tokens.rotate(request.user, None)
        elif action == "revoke":
            count = tokens.revoke_all(request.user)
            messages.success(request, f"Revoked {count} token{'s' if count != 1 else ''}.")
            return redirect("api-tokens")
        else:
            return HttpResponseBadRequest("action must be 'rotate' or 'revoke'")
    return render(request, "accounts/tokens.html", {"tokens": tokens.active(request.user), "new_key": new_key})
