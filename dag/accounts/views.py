"""The login page, behind the password-attempt throttle."""
from __future__ import annotations

from django.contrib.auth import views as auth_views

from .throttles import login_wait


class LoginView(auth_views.LoginView):
    """Django's login page; a POST over `OPENPROGRAM_LOGIN_RATE` is a 429 with Retry-After, and the page
    says when to try again, without checking the password."""

    def post(self, request, *args, **kwargs):
        wait = login_wait(request)
        if wait is None:
            return super().post(request, *args, **kwargs)
        form = self.get_form_class()(request)  # unbound: no password is checked
        response = self.render_to_response(self.get_context_data(form=form, retry_after=wait), status=429)
        response["Retry-After"] = str(wait)
        return response
