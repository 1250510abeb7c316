"""The access suite: anonymous clients are refused at every URL the urlconf has (a new URL is covered by
itself) and on the stream; another user gets a 404 for every door to someone's session; CSRF is enforced
on every unsafe request a browser session makes; a page of another origin cannot open the stream; and a
hidden input's value is never shown, in any page, API answer, export or stream frame."""
from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from dag.models import Session
from tests.reliability.access_helpers import MODULE, OWN_PAGE, SECRET, every_path, session_cookie, stream
from tests.reliability.bounds import START_S
from tests.reliability.figures import record
from tests.web.launch_helpers import wait_for_end

# The runs execute in the in-process executor's threads, and the stream's consumer reads the database
# from its own: both must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

UNSAFE = ("post", "put", "patch", "delete")
# (method, path) an anonymous client may use, and why. Everything else must refuse it.
PUBLIC = {
    ("get", "/accounts/login/"): "the login page", ("post", "/accounts/login/"): "logging in (throttled)",
    ("get", "/admin/login/"): "the admin's login page", ("post", "/admin/login/"): "logging in to the admin",
    ("post", "/api/token/"): "a token for a username and password (throttled)",
    ("post", "/accounts/logout/"): "logging out needs no login",
    **{(method, "/admin/logout/"): "logging out needs no login" for method in ("get", *UNSAFE)},
    **{(method, "/admin/login/"): "the admin's login form" for method in UNSAFE},
    **{(method, "/accounts/login/"): "the login form" for method in UNSAFE},
    **{(method, "/favicon.ico"): "a redirect to the static icon" for method in ("get", *UNSAFE)},
}
# A public door may still refuse a method it has no use for (Django's 405), or a request without data.
PUBLIC_REFUSALS = {405, 400}


@pytest.fixture
def access_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [MODULE]


@pytest.fixture
def owned(user, access_functions):
    """A finished session of `user` (alice) with nodes: a run of `uses_secret` through the API."""
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/sessions/", {"function": "uses_secret", "args": {"question": "anything?"}},
                           format="json")
    assert response.status_code == 201, response.content
    session = wait_for_end(Session.objects.get(pk=response.json()["id"]), timeout=START_S)
    assert session.status == "completed", session.error
    return session


def value_for(session):
    samples = {"session_id": str(session.pk), "pk": str(session.pk), "id": str(session.pk), "name": "uses_secret",
               "app_label": "dag", "object_id": "1", "content_type_id": "1", "url": "x", "format": "json",
               "token": "not-a-share-token", "seq": "0"}
    return lambda name: samples[name]


def refused_anonymously(response) -> bool:
    if response.status_code in (401, 403):
        return True
    if response.status_code == 404 and response.request["PATH_INFO"].startswith("/shared/"):
        return True  # a share link opens with its signed token alone, and this is none
    return response.status_code == 302 and "login/" in response["Location"]


# --- anonymous ---------------------------------------------------------------------------------

def test_anonymous_clients_are_refused_at_every_url(owned):
    client, tried, open_doors = Client(), 0, []
    for path, _ in every_path(value_for(owned)):
        for method in ("get", *UNSAFE):
            response = getattr(client, method)(path)
            tried += 1
            if (method, path) in PUBLIC:
                assert response.status_code < 500, (method, path, response.status_code)
            elif not refused_anonymously(response) and not (
                    response.status_code in PUBLIC_REFUSALS and any(p == path for _, p in PUBLIC)):
                open_doors.append((method, path, response.status_code))
    assert open_doors == [], open_doors
    owned.refresh_from_db()
    assert not owned.cancel_requested
    record("access", inputs=tried)


async def test_an_anonymous_stream_is_closed_with_4404(owned):
    accepted, frames, code = await stream(owned.pk, OWN_PAGE)
    assert (accepted, frames, code) == (True, [], 4404)
    record("access", inputs=1)


# --- another user ------------------------------------------------------------------------------

def test_another_user_gets_a_404_at_every_door_to_a_session(owned, other_user):
    browser = Client()
    browser.force_login(other_user)
    api = APIClient()
    api.force_authenticate(other_user)
    doors = [
        (browser.get, f"/sessions/{owned.pk}/"),
        (browser.get, f"/functions/uses_secret/?from={owned.pk}"),  # run again
        (api.get, f"/api/sessions/{owned.pk}/"),
        (api.get, f"/api/sessions/{owned.pk}/nodes/"),
        (api.get, f"/api/sessions/{owned.pk}/export/"),
        (api.post, f"/api/sessions/{owned.pk}/stop/"),
        (api.post, f"/api/sessions/{owned.pk}/share/"),
        (api.delete, f"/api/sessions/{owned.pk}/share/"),
        (api.delete, f"/api/sessions/{owned.pk}/"),
        # Debugging and steering: no replay or fork is launched from it, no call answered, no pause set.
        (api.post, f"/api/sessions/{owned.pk}/replay/"),
        (api.post, f"/api/sessions/{owned.pk}/fork/"),
        (api.get, f"/api/sessions/{owned.pk}/approvals/"),
        (api.post, f"/api/sessions/{owned.pk}/approvals/0/"),
        (api.post, f"/api/sessions/{owned.pk}/pause/"),
        (api.post, f"/api/sessions/{owned.pk}/resume/"),
        (api.get, f"/api/sessions/compare/?a={owned.pk}&b={owned.pk}"),
        (browser.get, f"/sessions/compare/?a={owned.pk}&b={owned.pk}"),
    ]
    for send, path in doors:
        assert send(path).status_code == 404, path
    assert str(owned.pk) not in browser.get("/sessions/").content.decode()
    assert api.get("/api/sessions/").json()["count"] == 0
    owned.refresh_from_db()
    assert not owned.cancel_requested and not owned.pause_requested
    assert list(Session.objects.values_list("pk", flat=True)) == [owned.pk]
    record("access", inputs=len(doors) + 2)


async def test_another_users_stream_is_closed_with_4404(owned, user, other_user):
    accepted, frames, code = await stream(owned.pk, [*await session_cookie(other_user), *OWN_PAGE])
    assert (accepted, frames, code) == (True, [], 4404)
    owner = await stream(owned.pk, [*await session_cookie(user), *OWN_PAGE])
    assert owner[0] and owner[1]  # the owner, on the same path, gets the snapshot
    record("access", inputs=2)


# --- CSRF ----------------------------------------------------------------------------------------

def test_every_unsafe_request_of_a_browser_session_needs_the_csrf_token(owned):
    """Each unsafe request is refused (403) without the token and not refused with it: the token is what
    decides (some 403 pages do not say "CSRF"). Logged in afresh each time: one of them logs out."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owned.owner)
    token = browser.get("/sessions/").cookies["csrftoken"].value
    tried, unprotected = 0, []
    for path, _ in every_path(value_for(owned)):
        for method in UNSAFE:
            # JSON, as the pages' scripts send (a form body to the API is a 415 before CSRF is looked at).
            browser.force_login(owned.owner)
            without = getattr(browser, method)(path, "{}", content_type="application/json").status_code
            browser.force_login(owned.owner)
            with_token = getattr(browser, method)(path, "{}", content_type="application/json",
                                                  HTTP_X_CSRFTOKEN=token).status_code
            tried += 2
            if without != 403 or with_token == 403:
                unprotected.append((method, path, without, with_token))
    assert unprotected == [], unprotected
    # The DELETE sent with the token deleted the (ended) session; no request without it changed anything.
    assert not Session.objects.filter(pk=owned.pk, cancel_requested=True).exists()
    record("access", inputs=tried)


def test_with_the_csrf_token_the_same_requests_are_let_through(owned):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owned.owner)
    token = browser.get("/sessions/").cookies["csrftoken"].value
    stopped = browser.post(f"/api/sessions/{owned.pk}/stop/", content_type="application/json",
                          HTTP_X_CSRFTOKEN=token)
    assert stopped.status_code == 200
    form = browser.post("/functions/uses_secret/", {"question": "again", "csrfmiddlewaretoken": token})
    assert form.status_code == 302
    wait_for_end(Session.objects.exclude(pk=owned.pk).get(), timeout=START_S)


# --- another origin --------------------------------------------------------------------------------

async def test_a_page_of_another_origin_cannot_open_the_owners_stream(owned, user):
    cookie = await session_cookie(user)
    for origin in (b"http://127.0.0.1:3000", b"http://evil.example", b"null", b"https://127.0.0.1:8000"):
        accepted, frames, _ = await stream(owned.pk, [*cookie, (b"origin", origin), (b"host", b"127.0.0.1:8000")])
        assert (accepted, frames) == (False, []), origin
    accepted, frames, _ = await stream(owned.pk, [*cookie, *OWN_PAGE])
    assert accepted and frames  # the same cookie from the site's own page gets the snapshot
    record("access", inputs=5)


# --- hidden values -------------------------------------------------------------------------------

async def test_a_hidden_value_is_never_shown(owned, user):
    from channels.db import database_sync_to_async

    def http_surfaces():
        browser = Client()
        browser.force_login(user)
        api = APIClient()
        api.force_authenticate(user)
        pages = {path: browser.get(path) for path in (
            "/", "/functions/uses_secret/", f"/functions/uses_secret/?from={owned.pk}", "/sessions/",
            f"/sessions/{owned.pk}/")}
        answers = {path: api.get(path) for path in (
            "/api/functions/", "/api/functions/uses_secret/", "/api/sessions/", f"/api/sessions/{owned.pk}/",
            f"/api/sessions/{owned.pk}/nodes/", f"/api/sessions/{owned.pk}/export/")}
        return {path: (response.status_code, response.content.decode()) for path, response in
                {**pages, **answers}.items()}

    shown = await database_sync_to_async(http_surfaces)()
    accepted, frames, _ = await stream(owned.pk, [*await session_cookie(user), *OWN_PAGE])
    assert accepted and frames
    shown["stream"] = (200, "".join(frames))
    for where, (status, text) in shown.items():
        assert status == 200, where
        assert SECRET not in text, where
    # The run did hold the secret (the nested check saw it), and the nodes say a hidden value was there.
    result = (await database_sync_to_async(Session.objects.get)(pk=owned.pk)).result
    assert result["token_ok"] is True
    assert '"api_token": "<hidden>"' in shown[f"/api/sessions/{owned.pk}/nodes/"][1] \
        or '"api_token":"<hidden>"' in shown[f"/api/sessions/{owned.pk}/nodes/"][1]
    record("access", inputs=len(shown))
