"""Failed password checks against one account are limited from every address together
(OPENPROGRAM_ACCOUNT_LOGIN_RATE): five addresses get no more guesses at alice's password than one would.
Right passwords do not count; another account, tokens and open sessions are not affected. The window is
driven by the throttle's clock, never by sleeping."""
import logging
import threading

import pytest
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from dag.accounts.throttles import AccountLoginThrottle, login_wait
from tests.reliability.test_login_throttle import clock  # noqa: F401 (the throttles' clock, a fixture)

pytestmark = pytest.mark.django_db

ADDRESSES = [f"198.51.100.{n}" for n in range(1, 6)]


@pytest.fixture(autouse=True)
def rates(settings):
    settings.OPENPROGRAM_LOGIN_RATE = "10/min"  # per address: each of the five stays within it
    settings.OPENPROGRAM_ACCOUNT_LOGIN_RATE = "20/hour"


def wrong(username: str) -> dict:
    return {"username": username, "password": "wrong"}


def fail_from_every_address(username: str, each: int = 4) -> None:
    """`each` wrong passwords for `username` from each of five addresses, through both doors."""
    for address in ADDRESSES:
        for attempt in range(each):
            if attempt % 2:
                assert Client(REMOTE_ADDR=address).post("/accounts/login/", wrong(username)).status_code == 200
            else:
                assert APIClient(REMOTE_ADDR=address).post("/api/token/", wrong(username),
                                                           format="json").status_code == 400


def test_twenty_failures_from_five_addresses_lock_the_accounts_password_logins(user, other_user, clock, caplog):
    fail_from_every_address("alice")
    with caplog.at_level(logging.WARNING, logger="dag.accounts.throttles"):
        token = APIClient(REMOTE_ADDR="198.51.100.9").post(
            "/api/token/", {"username": "alice", "password": "alice-password-1"}, format="json")
        page = Client(REMOTE_ADDR="198.51.100.10").post(
            "/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/"})
    assert token.status_code == 429 and int(token["Retry-After"]) > 0
    assert page.status_code == 429 and int(page["Retry-After"]) > 0
    told = [record for record in caplog.records if "'alice'" in record.getMessage()]
    assert len(told) == 1 and told[0].levelno == logging.WARNING  # once per window, naming the account
    # Another account, from the same addresses, is not affected.
    assert APIClient(REMOTE_ADDR=ADDRESSES[0]).post(
        "/api/token/", {"username": "bob", "password": "bob-password-1"}, format="json").status_code == 200

    clock[0] += 3601  # the window has passed
    assert Client(REMOTE_ADDR="198.51.100.11").post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/"}).status_code == 302


def test_tokens_and_open_sessions_keep_working_while_the_password_is_locked(user, clock):
    key = APIClient().post("/api/token/", {"username": "alice", "password": "alice-password-1"},
                           format="json").json()["token"]
    browser = Client()
    browser.force_login(user)
    fail_from_every_address("alice")
    with_token = APIClient()
    with_token.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert with_token.get("/api/sessions/").status_code == 200
    assert browser.get("/sessions/").status_code == 200


def test_right_passwords_are_not_counted(user, other_user, clock):
    for n in range(25):  # past the account's rate, each from an address of its own
        for username, password in (("alice", "alice-password-1"), ("bob", "bob-password-1")):
            answer = APIClient(REMOTE_ADDR=f"192.0.2.{n}").post(
                "/api/token/", {"username": username, "password": password}, format="json")
            assert answer.status_code == 200, (n, username, answer.content)
    assert Client(REMOTE_ADDR="192.0.2.99").post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/"}).status_code == 302


def test_an_unknown_account_is_limited_alike(clock):
    fail_from_every_address("nobody")
    assert APIClient(REMOTE_ADDR="198.51.100.9").post("/api/token/", wrong("nobody"),
                                                      format="json").status_code == 429


def test_attempts_sent_at_once_from_many_addresses_are_all_counted(settings):
    settings.OPENPROGRAM_ACCOUNT_LOGIN_RATE = "10/hour"
    together = threading.Barrier(40)
    allowed = []

    def attempt(n):
        request = RequestFactory().post("/accounts/login/", wrong("alice"), REMOTE_ADDR=f"203.0.113.{n}")
        together.wait()
        if login_wait(request, AccountLoginThrottle("alice")) is None:
            allowed.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == 10


def test_failures_sent_while_logged_in_as_the_account_are_counted(user, clock):
    # A stolen browser session of alice's must not guess at her password past the account's limit: a
    # failure, where she stays logged in, is not the right password that gives its attempt back.
    for n, address in enumerate(ADDRESSES * 4):
        browser = Client(REMOTE_ADDR=address)
        browser.force_login(user)
        assert browser.post("/accounts/login/", wrong("alice")).status_code == 200, n
    assert Client(REMOTE_ADDR="198.51.100.9").post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/"}).status_code == 429
