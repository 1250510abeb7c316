"""Account pages under /accounts/: log in (throttled), then Django's own pages."""
from django.urls import include, path

from . import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("", include("django.contrib.auth.urls")),
]
