"""Account pages under /accounts/: log in and change the password (both throttled), log out, API tokens.

No password reset: this server sends no mail, so a reset link could reach nobody (and an anonymous form
that tries SMTP is a liability). An administrator sets a forgotten password (`manage.py changepassword`).
"""
from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("token/", views.ApiTokensView.as_view(), name="api-tokens"),
]
