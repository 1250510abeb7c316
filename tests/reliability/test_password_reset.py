"""Item 6: no password reset pages, and no mail ever tried."""
import pytest
from django.core import mail
from django.test import Client, override_settings

from openprogram_web.mail import MailDisabled

pytestmark = pytest.mark.django_db

RESET_PATHS = ["/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/",
               "/accounts/reset/MQ/set-password/", "/accounts/reset/MQ/abc-123/"]


@pytest.mark.parametrize("path", RESET_PATHS)
def test_reset_pages_are_not_found_for_anyone(path, user):
    assert Client().get(path).status_code == 404
    assert Client().post(path, {"email": "alice@example.com"}).status_code == 404
    client = Client()
    client.force_login(user)
    assert client.get(path).status_code == 404


@override_settings(EMAIL_BACKEND="openprogram_web.mail.RefusingEmailBackend")  # pytest-django uses locmem
def test_sending_mail_is_refused_without_any_connection():
    with pytest.raises(MailDisabled, match="sends no mail"):
        mail.send_mail("subject", "body", "from@example.com", ["to@example.com"])
    assert mail.send_mail("subject", "body", "from@example.com", ["to@example.com"], fail_silently=True) == 0


def test_the_configured_backend_is_the_refusing_one():
    # pytest-django swaps in the locmem backend for tests; the setting it replaced is ours.
    from openprogram_web import settings as project_settings
    assert project_settings.EMAIL_BACKEND == "openprogram_web.mail.RefusingEmailBackend"


def test_password_change_still_works(user):
    client = Client()
    client.force_login(user)
    assert client.get("/accounts/password_change/").status_code == 200
