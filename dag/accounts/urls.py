"""Account pages under /accounts/: log in (throttled), API tokens, then Django's own pages."""
from django.urls import include, path

from . import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("token/", views.api_tokens, name="api-tokens"),
    path("", include("django.contrib.auth.urls")),
]
