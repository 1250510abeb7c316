"""The Django admin's login and password change behind the password-attempt throttle (`throttles`).

`/admin/login/` and `/admin/password_change/` check passwords as the login page and `POST /api/token/`
do, so they share their count; otherwise they would be doors where a staff password could be guessed at
full speed. Installed as the default admin site by `dag.accounts.apps.AdminConfig` (in INSTALLED_APPS in
place of "django.contrib.admin").
"""
from __future__ import annotations

import functools

from django.contrib import admin
from django.http import HttpResponseBadRequest


class ThrottledAdminSite(admin.AdminSite):
    """Django's admin site; a POST to its login or its password change over `OPENPROGRAM_LOGIN_RATE` is a
    429 with Retry-After, and the page says when to try again, without checking the password. A query
    string holding a NUL is a 400 on every admin page: list filters and searches pass their values to
    the database as they are, and PostgreSQL refuses NUL in text (a 500). No stored text holds one."""

    def admin_view(self, view, cacheable=False):
        guarded = super().admin_view(view, cacheable)

        @functools.wraps(guarded)
        def refusing_nul(request, *args, **kwargs):
            for name, values in request.GET.lists():
                if "\x00" in name or any("\x00" in value for value in values):
                    return HttpResponseBadRequest(f"the filter {name!r} cannot contain a NUL character; remove it",
                                                  content_type="text/plain; charset=utf-8")
            return guarded(request, *args, **kwargs)
        return refusing_nul

    def login(self, request, extra_context=None):
        return self._throttled(super().login, request, extra_context)

    def password_change(self, request, extra_context=None):
        return self._throttled(super().password_change, request, extra_context)

    @staticmethod
    def _throttled(view, request, extra_context):
        if request.method != "POST":
            return view(request, extra_context)
        from .throttles import throttled_post  # after the app registry: it reads dag.conf
        # Django's own view shows the page (its context, `next` and never_cache included).
        return throttled_post(request, lambda: view(request, extra_context),
                              lambda wait: view(request, {**(extra_context or {}), "retry_after": wait}))
