"""Item 2: password checks are throttled per client address, on the login page and POST /api/token/ alike.

The window is driven by the throttle's clock, never by sleeping.
"""
import os
import shutil

import pytest
from django.core.cache import CacheHandler, caches
from django.test import Client
from rest_framework.test import APIClient

from dag.accounts.throttles import THROTTLE_CACHE, LoginRateThrottle, forget_attempts
from openprogram_web.settings import throttle_cache

pytestmark = pytest.mark.django_db

WRONG = {"username": "alice", "password": "wrong"}
RIGHT = {"username": "alice", "password": "alice-password-1"}


@pytest.fixture(autouse=True)
def three_a_minute(settings):
    settings.OPENPROGRAM_LOGIN_RATE = "3/min"


@pytest.fixture
def clock(monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr(LoginRateThrottle, "timer", lambda self: now[0])
    return now


def test_the_login_page_refuses_the_right_password_after_too_many_attempts(user, clock):
    client = Client()
    for _ in range(3):
        assert client.post("/accounts/login/", WRONG).status_code == 200
    refused = client.post("/accounts/login/", {**RIGHT, "next": "/"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) == 60
    assert b"Too many login attempts" in refused.content
    assert client.get("/").status_code == 302  # not logged in

    clock[0] += 61  # the window has passed
    assert client.post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302


def test_the_token_endpoint_is_throttled_with_retry_after(user, clock):
    client = APIClient()
    for _ in range(3):
        assert client.post("/api/token/", WRONG, format="json").status_code == 400
    refused = client.post("/api/token/", RIGHT, format="json")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "throttled" in refused.json()["detail"].lower()


def test_both_doors_share_one_count(user, clock):
    Client().post("/accounts/login/", WRONG)
    Client().post("/accounts/login/", WRONG)
    APIClient().post("/api/token/", WRONG, format="json")
    assert APIClient().post("/api/token/", RIGHT, format="json").status_code == 429
    assert Client().post("/accounts/login/", RIGHT).status_code == 429


def test_a_forged_forwarded_for_header_does_not_reset_the_count(user, clock):
    client = Client()
    for index in range(3):
        client.post("/accounts/login/", WRONG, HTTP_X_FORWARDED_FOR=f"10.0.0.{index}")
    assert client.post("/accounts/login/", RIGHT, HTTP_X_FORWARDED_FOR="10.0.0.99").status_code == 429


def test_viewing_the_login_page_is_not_counted(user, clock):
    client = Client()
    for _ in range(10):
        assert client.get("/accounts/login/").status_code == 200
    assert client.post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302


def test_the_throttle_can_be_turned_off(settings, user, clock):
    settings.OPENPROGRAM_LOGIN_RATE = "off"
    client = Client()
    for _ in range(5):
        assert client.post("/accounts/login/", WRONG).status_code == 200


def test_two_server_processes_share_one_count(user, settings):
    """Attempts counted by another process (another server behind the same proxy, or this one before a
    restart) count here: the throttle's cache is shared (Redis with REDIS_URL, else files under var/)."""
    settings.OPENPROGRAM_LOGIN_RATE = "3/day"  # a window no slow start-up of the other process can outlast
    import os
    import subprocess
    import sys
    from pathlib import Path

    other_process = (
        "import django; django.setup()\n"
        "from django.test import RequestFactory\n"
        "from dag.accounts.throttles import login_wait\n"
        "print([login_wait(RequestFactory().post('/accounts/login/')) for _ in range(3)])\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_LOGIN_RATE": "3/day"}
    out = subprocess.run([sys.executable, "-c", other_process], env=env, cwd=Path(__file__).parents[2],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[None, None, None]"  # three allowed there
    refused = Client().post("/accounts/login/", {**RIGHT, "next": "/"})  # the same address, here
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_forgetting_the_attempts_leaves_another_prefixes_counts_alone():
    """A test run counts under its own prefix, so its `forget_attempts()` before and after every test never
    wipes a dev server's counts (the default prefix) or another run's on the same files or Redis database."""
    own = caches[THROTTLE_CACHE]
    assert own.key_prefix == os.environ["OPENPROGRAM_THROTTLE_PREFIX"] != "openprogram-throttle"
    other_settings = throttle_cache(f"{own.key_prefix}-other")
    other = CacheHandler({"other": other_settings})["other"]
    try:
        own.set("attempts", [1.0])
        other.set("attempts", [2.0])
        forget_attempts()
        assert own.get("attempts") is None
        assert other.get("attempts") == [2.0]
    finally:
        other.delete("attempts")  # never `clear()`: on Redis it would empty the whole database
        if other_settings["BACKEND"].endswith("FileBasedCache"):
            shutil.rmtree(other_settings["LOCATION"], ignore_errors=True)


def test_the_admin_login_shares_the_count(admin_user, clock):
    client = Client()
    wrong = {"username": admin_user.username, "password": "wrong", "next": "/admin/"}
    Client().post("/accounts/login/", WRONG)
    for _ in range(2):
        assert client.post("/admin/login/", wrong).status_code == 200
    refused = client.post("/admin/login/", {**wrong, "password": "password"})  # pytest-django's admin_user
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 60
    assert b"Too many login attempts" in refused.content
    assert client.get("/admin/").status_code == 302  # not logged in

    clock[0] += 61
    assert client.post("/admin/login/", {**wrong, "password": "password"}).status_code == 302
    assert client.get("/admin/").status_code == 200


@pytest.mark.parametrize("page, who, password", [("/accounts/password_change/", "user", RIGHT["password"]),
                                                  ("/admin/password_change/", "admin_user", "password")])
def test_a_password_change_is_throttled_as_it_checks_the_old_password(request, clock, page, who, password):
    someone = request.getfixturevalue(who)
    client = Client()
    client.force_login(someone)
    change = {"old_password": "wrong", "new_password1": "a-new-password-9", "new_password2": "a-new-password-9"}
    for _ in range(3):
        assert client.post(page, change).status_code == 200
    refused = client.post(page, {**change, "old_password": password})
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 60
    assert b"Too many password attempts" in refused.content
    someone.refresh_from_db()
    assert someone.check_password(password)  # unchanged


def test_the_admins_refusal_is_never_cached_and_keeps_the_way_back_to_the_admin(admin_user, clock):
    client = Client()
    for _ in range(3):
        client.post("/admin/login/", {"username": admin_user.username, "password": "wrong"})
    refused = client.post("/admin/login/", {"username": admin_user.username, "password": "password"})
    assert refused.status_code == 429 and "no-cache" in refused["Cache-Control"]
    assert b'name="next" value="/admin/"' in refused.content


def test_attempts_sent_at_once_are_all_counted(settings):
    """DRF's throttle reads the history, decides, writes it back: without a lock, attempts arriving
    together all read the same history and all pass (60 of 60 against "10/min")."""
    import threading

    from django.test import RequestFactory

    from dag.accounts.throttles import login_wait

    settings.OPENPROGRAM_LOGIN_RATE = "10/min"
    together = threading.Barrier(60)
    allowed = []

    def attempt():
        request = RequestFactory().post("/accounts/login/", REMOTE_ADDR="203.0.113.7")
        together.wait()
        if login_wait(request) is None:
            allowed.append(request)

    threads = [threading.Thread(target=attempt) for _ in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == 10


def test_attempts_from_several_processes_at_once_are_all_counted(settings):
    """The lock holds across processes too (a Redis lock, or a file lock beside the file cache)."""
    import subprocess
    import sys
    from pathlib import Path

    settings.OPENPROGRAM_LOGIN_RATE = "10/day"
    script = (
        "import django; django.setup()\n"
        "from django.test import RequestFactory\n"
        "from dag.accounts.throttles import login_wait\n"
        "print(sum(login_wait(RequestFactory().post('/accounts/login/', REMOTE_ADDR='203.0.113.9')) is None"
        " for _ in range(15)))\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_LOGIN_RATE": "10/day"}
    processes = [subprocess.Popen([sys.executable, "-c", script], env=env, cwd=Path(__file__).parents[2],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in outputs]
    assert sum(int(out.strip()) for out, _ in outputs) == 10


# --- another site's posts to POST /api/token/ ---------------------------------------------------------

@pytest.mark.parametrize("content_type, body", [
    ("application/x-www-form-urlencoded", "username=alice&password=guess"),  # a plain <form>
    ("text/plain", '{"username": "alice", "password": "guess"}'),  # fetch(..., {mode: "no-cors"})
    ("multipart/form-data; boundary=B",
     '--B\r\nContent-Disposition: form-data; name="username"\r\n\r\nalice\r\n--B--\r\n'),
])
def test_another_sites_posts_cannot_use_up_the_visitors_login_attempts(user, clock, content_type, body):
    """What a page on any site can make a visitor's browser send without a CORS preflight is refused
    (415) before it is counted, so it cannot lock the visitor out of the login page sharing the count."""
    for _ in range(10):
        refused = Client().post("/api/token/", body, content_type=content_type, HTTP_SEC_FETCH_SITE="cross-site",
                                HTTP_ORIGIN="https://elsewhere.example")
        assert refused.status_code == 415 and refused["Content-Type"] == "application/json"
    assert Client().post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302


@pytest.mark.parametrize("headers", [{"HTTP_SEC_FETCH_SITE": "cross-site"},
                                     {"HTTP_ORIGIN": "https://elsewhere.example"},
                                     {"HTTP_ORIGIN": "null"}])
def test_json_a_browser_says_another_site_sent_is_refused_uncounted(user, clock, headers):
    for _ in range(5):
        refused = APIClient().post("/api/token/", RIGHT, format="json", **headers)
        assert refused.status_code == 403 and "another site" in refused.json()["detail"]
    assert APIClient().post("/api/token/", RIGHT, format="json").status_code == 200


def test_json_from_this_sites_own_pages_gets_a_token(user, clock):
    for headers in ({"HTTP_SEC_FETCH_SITE": "same-origin"}, {"HTTP_ORIGIN": "http://testserver"}):
        assert APIClient().post("/api/token/", RIGHT, format="json", **headers).status_code == 200


def test_a_json_login_is_still_counted(user, clock):
    for _ in range(3):
        assert APIClient().post("/api/token/", WRONG, format="json").status_code == 400
    assert Client().post("/accounts/login/", RIGHT).status_code == 429


# --- IPv6 clients -----------------------------------------------------------------------------------------

def test_an_ipv6_client_is_counted_by_its_64_not_by_each_address(user, clock):
    for host in ("2001:db8:0:7::1", "2001:db8:0:7::2", "2001:db8:0:7:ffff:ffff:ffff:ffff"):
        assert Client(REMOTE_ADDR=host).post("/accounts/login/", WRONG).status_code == 200
    assert Client(REMOTE_ADDR="2001:db8:0:7:abcd::9").post("/accounts/login/", RIGHT).status_code == 429
    assert APIClient(REMOTE_ADDR="2001:db8:0:7::3").post("/api/token/", RIGHT, format="json").status_code == 429
    # Another /64 has a count of its own.
    assert Client(REMOTE_ADDR="2001:db8:0:8::1").post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302


def test_an_ipv4_client_on_a_dual_stack_socket_is_counted_as_its_ipv4_address(user, clock):
    for _ in range(3):
        Client(REMOTE_ADDR="::ffff:192.0.2.5").post("/accounts/login/", WRONG)
    assert Client(REMOTE_ADDR="192.0.2.5").post("/accounts/login/", RIGHT).status_code == 429
    assert Client(REMOTE_ADDR="192.0.2.6").post("/accounts/login/", {**RIGHT, "next": "/"}).status_code == 302
