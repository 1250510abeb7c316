"""The runtime's settings from the environment: how each kind of value is read, and what a bad one says."""
from __future__ import annotations

import math
import os

# The words an on/off setting may say, in pairs (the web app's settings and CLI read them too).
ON_WORDS, OFF_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_flag(name: str, default: bool) -> bool:
    """An on/off environment variable (unset or blank: `default`); a word that is neither is named, so a
    typo ("of") is not taken for either."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word not in (*ON_WORDS, *OFF_WORDS):
        raise ValueError(f"environment variable {name}={value!r} must be on or off "
                         f"({'/'.join(ON_WORDS)} or {'/'.join(OFF_WORDS)})")
    return word in ON_WORDS


def env_number(name: str, default, kind: type = float):
    """A number from the environment variable `name` (unset or blank: `default`); a bad value names it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a valid {kind.__name__}") from None
    if not math.isfinite(value):  # float() reads "nan" and "inf", which pass any comparison or none
        raise ValueError(f"environment variable {name}={raw!r} must be a finite number")
    if value < 0:
        raise ValueError(f"environment variable {name}={raw!r} must not be negative")
    return value
