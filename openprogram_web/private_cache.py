"""`Cache-Control: private` on every answer made for a logged-in user (pages and API alike).

Such an answer holds that user's data (their sessions, their tokens page, their name in the header). A
shared cache between the server and the browser (a company proxy, a CDN a deployment puts in front)
must not keep it and hand it to the next person who asks for the same URL. A view that says more
already (`never_cache` adds `no-store` and `private`) keeps what it said.
"""
from django.utils.cache import patch_cache_control


class PrivateCacheMiddleware:
    """Mark the responses to an authenticated request `Cache-Control: private`. After Django's
    AuthenticationMiddleware; a DRF view's token login is seen too (DRF sets the user on the request)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            patch_cache_control(response, private=True)
        return response
