"""docs/configuration.md is what `manage.py configuration_docs` writes from the tables of settings
(runtime/settings_table.py, dag/conf.py, openprogram_web/settings_table.py), and every OPENPROGRAM_*
variable the code names is in one of those tables, so a new setting cannot skip the page."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dag import configuration_docs
from dag.configuration_docs import BEGIN, END, PAGE, all_settings, regenerated
from runtime.settings_table import RUNTIME_SETTINGS, Setting

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bOPENPROGRAM_[A-Z][A-Z0-9_]*")
REGENERATE = ".venv/bin/python manage.py configuration_docs"


def test_the_configuration_page_is_what_the_generator_writes():
    page = PAGE.read_text()
    fresh = regenerated(page)
    diff = "\n".join(list(difflib.unified_diff(page.splitlines(), fresh.splitlines(), "docs/configuration.md",
                                               "generated", lineterm="", n=0))[:20])
    assert fresh == page, f"docs/configuration.md differs from the tables of settings; run `{REGENERATE}`\n{diff}"


def test_every_openprogram_variable_the_code_names_is_in_a_table():
    named: dict[str, str] = {}
    for room in ("runtime", "dag", "openprogram_web"):
        for path in sorted((ROOT / room).rglob("*.py")):
            for name in NAME.findall(path.read_text()):
                named.setdefault(name, str(path.relative_to(ROOT)))
    assert len(named) > 40, "found few OPENPROGRAM_ names in the source: the pattern is wrong"
    declared = {setting.name for setting in all_settings()}
    missing = {name: where for name, where in named.items() if name not in declared}
    assert not missing, (f"declare these in a table of settings (runtime/settings_table.py, dag/conf.py or "
                         f"openprogram_web/settings_table.py), then run `{REGENERATE}`: {missing}")


def test_a_change_to_a_table_makes_the_page_stale(monkeypatch):
    page = PAGE.read_text()
    setting = RUNTIME_SETTINGS["OPENPROGRAM_MAX_LLM_CALLS"]
    monkeypatch.setitem(RUNTIME_SETTINGS, setting.name, Setting(setting.name, 50, setting.topic, setting.meaning))
    fresh = regenerated(page)
    assert fresh != page and "| `OPENPROGRAM_MAX_LLM_CALLS` | `50` |" in fresh


def test_the_prose_around_the_tables_is_kept():
    page = f"# Configuration\n\nHand-written.\n\n{BEGIN}\nold rows\n{END}\n\nMore prose.\n"
    fresh = regenerated(page)
    assert fresh.startswith(f"# Configuration\n\nHand-written.\n\n{BEGIN}\n\n## Serving\n")
    assert fresh.endswith(f"\n\n{END}\n\nMore prose.\n") and "old rows" not in fresh


def test_a_page_without_its_markers_is_refused():
    with pytest.raises(ValueError, match="markers"):
        regenerated("# Configuration\n\nno markers\n")


def test_a_setting_without_a_known_topic_is_named(monkeypatch):
    monkeypatch.setitem(RUNTIME_SETTINGS, "OPENPROGRAM_X", Setting("OPENPROGRAM_X", 1, "misc", "x"))
    with pytest.raises(ValueError, match="OPENPROGRAM_X's topic 'misc'"):
        all_settings()


@pytest.mark.parametrize("value, shown", [(True, "on"), (False, "off"), (None, "unset"), ("", "none"), ([], "none"),
                                          (["a", "b"], "`a,b`"), (30.0, "`30`"), (0.02, "`0.02`"), ("auto", "`auto`")])
def test_a_default_is_written_as_the_page_writes_it(value, shown):
    assert configuration_docs.shown_default(Setting("X", value, "serving", "x")) == shown


def test_the_command_checks_and_writes_the_page(tmp_path, monkeypatch):
    page = tmp_path / "configuration.md"
    page.write_text(f"# Configuration\n\n{BEGIN}\n{END}\n")
    monkeypatch.setattr("dag.management.commands.configuration_docs.PAGE", page)
    with pytest.raises(CommandError, match="run `python manage.py configuration_docs`"):
        call_command("configuration_docs", "--check")
    call_command("configuration_docs")
    assert page.read_text() == regenerated(page.read_text())
    call_command("configuration_docs", "--check")
