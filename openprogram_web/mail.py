"""The mail backend: this server sends no mail, so nothing ever connects to an SMTP server."""
from django.core.mail.backends.base import BaseEmailBackend


class MailDisabled(RuntimeError):
    pass


class RefusingEmailBackend(BaseEmailBackend):
    """Refuses every message, saying why, instead of trying SMTP on localhost:25."""

    def send_messages(self, email_messages):
        if not email_messages:
            return 0
        if self.fail_silently:
            return 0
        raise MailDisabled("this server sends no mail (EMAIL_BACKEND is openprogram_web.mail.RefusingEmailBackend); "
                           "set EMAIL_BACKEND in the settings to a real backend to send it")
