"""Page routes of the web app."""
from django.urls import path

from . import views

urlpatterns = [
    path("", views.function_list, name="function-list"),
]
