"""docs/configuration.md's tables of settings, written from the three tables that declare them.

The runtime's variables (runtime.settings_table), the web app's OPENPROGRAM_* settings (dag.conf) and the
variables Django's own settings are built from (openprogram_web.settings_table) are each declared once,
with their default and meaning. `python manage.py configuration_docs` rewrites the part of the page between
BEGIN and END from them, grouped by topic; the prose around it is the page's own. A test fails while the
page and the tables disagree (tests/web/test_configuration_page.py).
"""
from __future__ import annotations

from pathlib import Path

from openprogram_web.settings_table import SERVER_SETTINGS
from runtime.settings_table import RUNTIME_SETTINGS, Setting

from .conf import SETTINGS as DAG_SETTINGS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
COMMAND = "python manage.py configuration_docs"
BEGIN = (f"<!-- Generated from runtime/settings_table.py, dag/conf.py and openprogram_web/settings_table.py "
         f"by `{COMMAND}`: edit those, not the tables below. -->")
END = "<!-- End of the generated tables. -->"
# Each topic's heading, in the page's order.
TOPICS = {
    "serving": "Serving",
    "database": "The database and its writer",
    "runs": "Where runs execute: the executor, Celery, leases and stops",
    "live": "Redis and the live view",
    "models": "Models",
    "budgets": "Budgets and loops",
    "tools": "Tools and approval",
    "limits": "Limits per user",
    "sign-in": "Sign-in and API tokens",
    "https": "HTTPS and proxies",
    "data": "Retention and sharing",
    "telemetry": "Telemetry",
}


def all_settings() -> list[Setting]:
    """Every setting, the server's first (the database and Redis head their topics), then the runtime's and
    the web app's; a name declared twice, or a topic with no heading, is an error naming it."""
    settings = [*SERVER_SETTINGS.values(), *RUNTIME_SETTINGS.values(), *DAG_SETTINGS]
    seen: set[str] = set()
    for setting in settings:
        if setting.name in seen:
            raise ValueError(f"{setting.name} is declared in two tables of settings; keep one")
        if setting.topic not in TOPICS:
            raise ValueError(f"{setting.name}'s topic {setting.topic!r} is none of dag.configuration_docs.TOPICS: "
                             f"{', '.join(TOPICS)}")
        if "|" in setting.meaning or "\n" in setting.meaning:
            raise ValueError(f"{setting.name}'s meaning must be one line without '|' (it is a table cell)")
        seen.add(setting.name)
    return settings


def shown_default(setting: Setting) -> str:
    """The default as the page writes it: `8`, `0.02`, `inprocess`, on, off, none (empty), unset (None)."""
    value = setting.default
    if setting.shown:
        return setting.shown
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "unset"
    if value in ("", []):
        return "none"
    if isinstance(value, list):
        return f"`{','.join(value)}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def tables() -> str:
    """The generated part of the page: a section per topic, a row per setting."""
    settings = all_settings()
    sections = []
    for topic, heading in TOPICS.items():
        rows = [f"| `{s.name}` | {shown_default(s)} | {s.meaning} |" for s in settings if s.topic == topic]
        if rows:
            sections.append("\n".join([f"## {heading}", "", "| variable | default | meaning |",
                                       "| --- | --- | --- |", *rows]))
    return "\n\n".join(sections)


def regenerated(page: str) -> str:
    """`page` with the part between BEGIN and END written afresh from the tables."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise ValueError(f"{PAGE.name} must hold the generated part's two markers once each, in order:\n"
                         f"{BEGIN}\n{END}")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n\n{tables()}\n\n{END}{tail}"
