"""Page routes of the web app."""
from django.urls import path

from .live import views as live_views
from .pages import compare, session_list, views

urlpatterns = [
    path("", views.function_list, name="function-list"),
    path("functions/<str:name>/", views.function_form, name="function-form"),
    path("sessions/", session_list.session_list, name="session-list"),
    path("sessions/compare/", compare.session_compare, name="session-compare"),
    path("sessions/<uuid:session_id>/", live_views.session_detail, name="session-detail"),
    # A read-only share link: no login (the token is the key; dag.share_links).
    path("shared/<uuid:session_id>/<str:token>/", live_views.shared_session, name="shared-session"),
]
