"""The runtime's settings are declared once, in runtime/settings_table.py: every OPENPROGRAM_* variable the
runtime mentions is in its table, its modules read them through the table's readers (so a default lives in
one place), and a bad value names the variable and what is allowed."""
import re
from pathlib import Path

import pytest

from runtime.settings_table import RUNTIME_SETTINGS, read_names, read_number, read_text

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
NAME = re.compile(r"\bOPENPROGRAM_[A-Z][A-Z0-9_]*")
# os.environ.get("OPENPROGRAM_X"...), os.environ["OPENPROGRAM_X"], os.getenv("OPENPROGRAM_X")
DIRECT_READ = re.compile(r"""(?:environ\.get|environ\[|getenv)\(?\s*["'](OPENPROGRAM_[A-Z0-9_]+)""")


def runtime_sources() -> dict[str, str]:
    return {str(path.relative_to(RUNTIME)): path.read_text() for path in sorted(RUNTIME.rglob("*.py"))}


def test_every_openprogram_variable_the_runtime_mentions_is_in_its_table():
    mentioned = {name for source in runtime_sources().values() for name in NAME.findall(source)}
    assert mentioned, "found no OPENPROGRAM_ name in runtime/: the pattern is wrong"
    missing = sorted(mentioned - RUNTIME_SETTINGS.keys())
    assert not missing, f"add these to RUNTIME_SETTINGS in runtime/settings_table.py: {missing}"


def test_the_runtime_reads_its_variables_through_the_table_only():
    direct = {path: DIRECT_READ.findall(source) for path, source in runtime_sources().items()
              if path != "settings_table.py" and DIRECT_READ.search(source)}
    assert not direct, f"read these through runtime.settings_table (read_number, read_text, ...): {direct}"


def test_every_setting_has_a_topic_and_a_one_line_meaning():
    for setting in RUNTIME_SETTINGS.values():
        assert setting.topic and setting.meaning, setting.name
        assert "\n" not in setting.meaning and "|" not in setting.meaning, setting.name


def test_a_setting_not_in_the_table_cannot_be_read():
    with pytest.raises(KeyError):
        read_number("OPENPROGRAM_NOT_A_SETTING")


def test_unset_or_blank_is_the_tables_default(monkeypatch):
    monkeypatch.delenv("OPENPROGRAM_MAX_REPEATS", raising=False)
    monkeypatch.setenv("OPENPROGRAM_MODEL_RETRY_TOTAL_S", "  ")
    monkeypatch.delenv("OPENPROGRAM_UNATTENDED_DENY", raising=False)
    monkeypatch.delenv("OPENPROGRAM_SOURCE", raising=False)
    assert read_number("OPENPROGRAM_MAX_REPEATS") == RUNTIME_SETTINGS["OPENPROGRAM_MAX_REPEATS"].default == 10
    assert read_number("OPENPROGRAM_MODEL_RETRY_TOTAL_S") == 60.0
    assert read_names("OPENPROGRAM_UNATTENDED_DENY") == []
    assert read_text("OPENPROGRAM_SOURCE") is None


def test_a_value_is_read_as_the_defaults_kind(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_TOKENS", "256")
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED_DENY", " publish, ,delete ")
    assert read_number("OPENPROGRAM_MAX_TOKENS") == 256 and isinstance(read_number("OPENPROGRAM_MAX_TOKENS"), int)
    assert read_names("OPENPROGRAM_UNATTENDED_DENY") == ["publish", "delete"]


@pytest.mark.parametrize("name, value, says", [
    ("OPENPROGRAM_MODEL_RETRIES", "2.5", "environment variable OPENPROGRAM_MODEL_RETRIES='2.5' is not a valid int"),
    ("OPENPROGRAM_MODEL_TIMEOUT_S", "-1", "environment variable OPENPROGRAM_MODEL_TIMEOUT_S='-1' must not be negative"),
    ("OPENPROGRAM_MAX_TOKENS", "lots", "environment variable OPENPROGRAM_MAX_TOKENS='lots' is not a valid int"),
])
def test_a_bad_number_names_the_variable_and_what_is_allowed(monkeypatch, name, value, says):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(says)):
        read_number(name)
