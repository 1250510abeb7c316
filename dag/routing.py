"""Websocket routes: the live session list, the live stream of one session's DAG (its owner's, and a
shared page's), and a refusal for every other path."""
from django.urls import re_path

from .live.consumers import NoSuchStreamConsumer, SessionConsumer
from .live.session_list_consumer import SessionListConsumer
from .live.shared_consumer import SharedSessionConsumer

websocket_urlpatterns = [
    re_path(r"^ws/sessions/$", SessionListConsumer.as_asgi()),  # the live session list
    # Any id shape reaches the consumer, which closes malformed ones with 4400 instead of a bare 1006.
    re_path(r"^ws/sessions/(?P<session_id>[^/]{1,64})/$", SessionConsumer.as_asgi()),
    # A shared page's stream: anyone with the share link (the token is the key; dag.share_links).
    re_path(r"^ws/shared/(?P<session_id>[^/]{1,64})/(?P<token>[^/]{1,200})/$", SharedSessionConsumer.as_asgi()),
    # Last: any other path is refused cleanly (URLRouter would raise, and the server answer 500).
    re_path(r"", NoSuchStreamConsumer.as_asgi()),
]
