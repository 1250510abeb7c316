"""Item 4: HTTPS=1 turns on secure cookies, HSTS, the redirect and the proxy's header; check --deploy is clean."""
import ast
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTTPS_WARNINGS = ("security.W004", "security.W008", "security.W012", "security.W016")


def run(tmp_path, args, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENPROGRAM_", "HTTPS", "DATABASE_URL"))}
    env = {**clean, "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"), "DEBUG": "0",
           "SECRET_KEY": secrets.token_urlsafe(50), **env}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)


def deploy_check(tmp_path, **env) -> str:
    result = run(tmp_path, ["manage.py", "check", "--deploy"], **env)
    return result.stdout + result.stderr


def settings_of(tmp_path, names, **env):
    code = "from openprogram_web import settings as s; " + "; ".join(f"print(repr(s.{n}))" for n in names)
    result = run(tmp_path, ["-c", code], **env)
    assert result.returncode == 0, result.stderr
    return [ast.literal_eval(line) for line in result.stdout.splitlines()]


def test_check_deploy_with_https_has_none_of_the_https_warnings(tmp_path):
    output = deploy_check(tmp_path, HTTPS="1")
    assert not [code for code in HTTPS_WARNINGS if code in output], output


def test_without_https_the_check_names_them(tmp_path):
    output = deploy_check(tmp_path)
    assert all(code in output for code in HTTPS_WARNINGS), output


def test_https_settings(tmp_path):
    names = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_SSL_REDIRECT",
             "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_PROXY_SSL_HEADER"]
    assert settings_of(tmp_path, names) == [False, False, 0, False, False, None]
    assert settings_of(tmp_path, names, HTTPS="1", OPENPROGRAM_HSTS_INCLUDE_SUBDOMAINS="1",
                       OPENPROGRAM_PROXY_SSL_HEADER="X-Forwarded-Proto: https") == [
        True, True, 31536000, True, True, ("HTTP_X_FORWARDED_PROTO", "https")]
    assert settings_of(tmp_path, ["SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"], HTTPS="1",
                       OPENPROGRAM_SSL_REDIRECT="0", OPENPROGRAM_HSTS_SECONDS="600") == [False, 600]


def test_a_malformed_proxy_header_is_refused_by_name(tmp_path):
    result = run(tmp_path, ["-c", "import openprogram_web.settings"], OPENPROGRAM_PROXY_SSL_HEADER="https")
    assert result.returncode != 0 and "OPENPROGRAM_PROXY_SSL_HEADER='https'" in result.stderr


@pytest.mark.django_db
def test_behind_the_proxy_a_plain_request_is_redirected_and_an_https_one_served(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/accounts/login/"
    secure = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200 and secure["Strict-Transport-Security"].startswith("max-age=31536000")
