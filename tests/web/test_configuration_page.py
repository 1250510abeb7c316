"""docs/configuration.md says what the code does: every setting of `dag.conf` and every number or on/off
setting of `openprogram_web/settings_table.py` has a row, and the row's default is the code's."""
from __future__ import annotations

import re
from pathlib import Path

from dag.conf import DEFAULTS, PREFIX
from openprogram_web.settings_table import SERVER_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def documented_defaults() -> dict[str, str]:
    """Each variable of the page's table with the text of its default (a row naming several variables lists
    their defaults in the same order, comma-separated)."""
    defaults = {}
    for row in PAGE.read_text().splitlines():
        if not row.startswith("| `"):
            continue
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        names = re.findall(r"`([A-Z_]+)`", cells[0])
        parts = cells[1].split(", ") if len(names) > 1 else [cells[1]]
        assert len(parts) == len(names), f"the row of {', '.join(names)} gives {len(parts)} defaults: {cells[1]!r}"
        defaults.update(zip(names, (part.strip() for part in parts)))
    return defaults


def as_documented(value) -> str:
    """A default as the page writes it: `8`, `0.02`, `inprocess`, on, off, none (an empty list or text)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return f"`{','.join(value)}`" if value else "none"
    return f"`{value}`" if value != "" else "none"


def leading_value(text: str) -> str:
    """The default's own value, without what the page adds after it (`31536000` (a year), on with `HTTPS=1`);
    "unset" and "none" both say there is none."""
    match = re.match(r"`[^`]*`|(?:on|off|none|unset)\b", text)
    value = match.group(0) if match else text
    return "none" if value == "unset" else value


def test_every_dag_setting_is_on_the_page_with_its_default():
    documented = documented_defaults()
    wrong = {}
    for key, value in DEFAULTS.items():
        name = PREFIX + key
        if name not in documented:
            wrong[name] = "missing from docs/configuration.md"
        elif leading_value(documented[name]) != as_documented(value):
            wrong[name] = f"the page says {documented[name]!r}, dag/conf.py {as_documented(value)}"
    assert not wrong, wrong


def test_every_number_and_switch_of_the_server_table_is_on_the_page_with_its_default():
    documented = documented_defaults()
    wrong = {}
    for name, setting in SERVER_SETTINGS.items():
        if not isinstance(setting.default, (bool, int, float)):
            continue
        if name not in documented:
            wrong[name] = "missing from docs/configuration.md"
        elif leading_value(documented[name]) != as_documented(setting.default):
            wrong[name] = f"the page says {documented[name]!r}, settings_table.py {as_documented(setting.default)}"
    assert not wrong, wrong
