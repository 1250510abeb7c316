"""REST API routes."""
urlpatterns: list = []
