"""Websocket routes (the live-view consumers are added here)."""
websocket_urlpatterns: list = []
