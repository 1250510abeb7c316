"""What the server tells caches and logs about answers: a logged-in user's pages and API answers are
`Cache-Control: private`; a Host header not ours is one warning line; `testserver` is a test host only."""
import logging
import os
import subprocess
import sys

import pytest

from .test_settings import ROOT

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/sessions/", "/api/sessions/", "/api/functions/", "/accounts/token/"])
def test_a_logged_in_users_pages_and_api_answers_are_private(client, user, other_user, path):
    for someone in (user, other_user):
        client.force_login(someone)
        response = client.get(path)
        assert response.status_code == 200
        assert "private" in response.headers["Cache-Control"]


def test_a_token_users_api_answer_is_private(user):
    from rest_framework.test import APIClient

    from dag.accounts import tokens

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tokens.issue(user)[1]}")
    response = client.get("/api/sessions/")
    assert response.status_code == 200 and "private" in response.headers["Cache-Control"]


def test_a_host_header_not_ours_is_one_warning_line_without_a_traceback(client, caplog):
    with caplog.at_level(logging.INFO):
        response = client.get("/accounts/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    records = [record for record in caplog.records if "evil.example" in record.getMessage()]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING and records[0].exc_info is None and records[0].exc_text is None


def test_testserver_is_not_an_allowed_host_outside_the_tests():
    clean = {k: v for k, v in os.environ.items() if k != "ALLOWED_HOSTS"}
    hosts = subprocess.run([sys.executable, "-c", "from openprogram_web import settings; print(settings.ALLOWED_HOSTS)"],
                           cwd=ROOT, env=clean, capture_output=True, text=True, check=True).stdout
    assert "testserver" not in hosts and "127.0.0.1" in hosts
