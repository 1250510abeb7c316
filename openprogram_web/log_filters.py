"""Logging filters: records that Django logs louder than they deserve."""
from __future__ import annotations

import logging


class OneWarningLine(logging.Filter):
    """Turn a record into one WARNING line without its traceback.

    For `django.security.DisallowedHost`: any client can send a Host header that is not ours, and Django
    logs each one at ERROR with the full traceback (and mails ADMINS), so one client could fill the
    error log. The message alone says what happened: "Invalid HTTP_HOST header: 'x'".
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True
