"""The Django admin's login behind the password-attempt throttle (`throttles.login_wait`).

`/admin/login/` checks passwords as the login page and `POST /api/token/` do, so it shares their count;
otherwise it would be the one door where a staff password could be guessed at full speed. Installed as
the default admin site by `dag.accounts.apps.AdminConfig` (in INSTALLED_APPS in place of
"django.contrib.admin").
"""
from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.template.response import TemplateResponse


class ThrottledAdminSite(admin.AdminSite):
    def login(self, request, extra_context=None):
        """Django's admin login; a POST over `OPENPROGRAM_LOGIN_RATE` is a 429 with Retry-After, and the
        page says when to try again, without checking the password."""
        if request.method == "POST":
            from .throttles import login_wait  # after the app registry: it reads dag.conf
            wait = login_wait(request)
            if wait is not None:
                return self._refused(request, wait)
        return super().login(request, extra_context)

    def _refused(self, request, wait: int) -> TemplateResponse:
        context = {**self.each_context(request), "title": "Log in", "subtitle": None,
                   "app_path": request.get_full_path(), "username": request.user.get_username(),
                   "form": (self.login_form or AdminAuthenticationForm)(request), "retry_after": wait}
        response = TemplateResponse(request, self.login_template or "admin/login.html", context, status=429)
        response["Retry-After"] = str(wait)
        return response
