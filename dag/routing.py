"""Websocket routes: the live stream of one session's DAG."""
from django.urls import re_path

from .live.consumers import SessionConsumer

websocket_urlpatterns = [
    # Any id shape reaches the consumer, which closes malformed ones with 4400 instead of a bare 1006.
    re_path(r"^ws/sessions/(?P<session_id>[^/]{1,64})/$", SessionConsumer.as_asgi()),
]
