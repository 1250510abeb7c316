"""The time a recorded call started or ended: `django.utils.timezone.now()`, read cheaply.

`timezone.now()` reads `settings.USE_TZ` through Django's lazy settings object on every call, which
costs more than the clock itself; every recorded call asks twice. `dag.conf` keeps the setting (and
reloads it when a test changes it).
"""
from __future__ import annotations

from datetime import datetime, timezone

from ..conf import conf


def now() -> datetime:
    """Now, aware in UTC when USE_TZ is on (Django's default here), naive local time when it is off."""
    return datetime.now(timezone.utc) if conf.USE_TZ else datetime.now()
