"""Settings read from the environment: safe defaults on a fresh machine."""
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_settings(tmp_path, before: str = "", **env):
    """Import the settings in a child process with `env` (after running the code `before`) and report
    what they decided."""
    code = (before + "from openprogram_web import settings as s; "
            "print(s.DATABASES['default']['ENGINE']); print(s.VAR_DIR)")
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OPENPROGRAM_VAR_DIR")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], Path(out[1])


def test_a_new_var_directory_is_private_to_its_owner(tmp_path):
    var = tmp_path / "fresh" / "var"
    _, where = load_settings(tmp_path, OPENPROGRAM_VAR_DIR=str(var))
    assert where == var
    assert stat.S_IMODE(var.stat().st_mode) == 0o700


# Another process (a second worker started at the same moment) makes the var directory after this one
# looked for it and found none.
MADE_MEANWHILE = ("import os, pathlib; looked = pathlib.Path.exists; "
                  "var = pathlib.Path(os.environ['OPENPROGRAM_VAR_DIR']); "
                  "pathlib.Path.exists = lambda self, *a, **k: False if self == var else looked(self, *a, **k); ")


def test_a_var_directory_made_meanwhile_by_another_process_is_used(tmp_path):
    var = tmp_path / "var"
    var.mkdir(mode=0o700)
    _, where = load_settings(tmp_path, before=MADE_MEANWHILE, OPENPROGRAM_VAR_DIR=str(var))
    assert where == var


def test_an_empty_database_url_means_the_embedded_default(tmp_path):
    engine, _ = load_settings(tmp_path, DATABASE_URL="", OPENPROGRAM_VAR_DIR=str(tmp_path / "var"))
    assert engine == "django.db.backends.sqlite3"


def test_every_variable_settings_py_reads_is_in_a_table_of_settings():
    import re

    from dag.configuration_docs import all_settings

    source = (ROOT / "openprogram_web" / "settings.py").read_text()
    read = set(re.findall(r"""(?:environ\.get|environ\[|env_bool|env_list|env_number|default_of)\(?\s*["']([A-Z][A-Z0-9_]+)["']""",
                          source))
    declared = {setting.name for setting in all_settings()}
    assert len(read) > 15 and read <= declared, (
        f"declare in openprogram_web/settings_table.py (the page is generated from it): {sorted(read - declared)}")


def settings_error(tmp_path, **env) -> str:
    """What importing the settings with `env` stops with (the child's stderr); '' if it loads."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OPENPROGRAM_VAR_DIR")}
    done = subprocess.run([sys.executable, "-c", "import openprogram_web.settings"], cwd=ROOT,
                          env={**clean, "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"), **env},
                          capture_output=True, text=True)
    return done.stderr if done.returncode else ""


def test_a_misspelt_on_off_variable_is_named_not_taken_for_off(tmp_path):
    # HTTPS=yse read as off would serve without HTTPS's protections, and say nothing.
    assert "environment variable HTTPS='yse' must be on or off" in settings_error(tmp_path, HTTPS="yse")
    assert settings_error(tmp_path, HTTPS="") == ""  # blank is unset, as for every other setting


def test_a_negative_or_endless_number_of_the_settings_is_named(tmp_path):
    assert "OPENPROGRAM_NUM_PROXIES must be a whole number of 0 or more; got '-1'" in settings_error(
        tmp_path, OPENPROGRAM_NUM_PROXIES="-1")
    assert "OPENPROGRAM_HSTS_SECONDS must be a whole number of 0 or more; got '-5'" in settings_error(
        tmp_path, HTTPS="on", OPENPROGRAM_HSTS_SECONDS="-5")


def database_options(tmp_path, **env) -> dict:
    """The default database's OPTIONS and CONN_HEALTH_CHECKS as the settings decide them with `env`."""
    import json
    code = ("import json; from openprogram_web import settings as s; d = s.DATABASES['default']; "
            "print(json.dumps({'options': d.get('OPTIONS', {}), 'checks': d.get('CONN_HEALTH_CHECKS', False)}))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENPROGRAM_DB_POOL")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**clean, "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"), **env}).stdout
    return json.loads(out)


POSTGRES = "postgres://someone@db.example:5432/openprogram"  # never connected to: settings only


def test_postgresql_connections_come_from_a_pool_that_opens_them_as_needed_and_checks_them(tmp_path):
    decided = database_options(tmp_path, DATABASE_URL=POSTGRES)
    assert decided["options"]["pool"] == {"min_size": 0, "max_size": 10, "max_idle": 60.0, "timeout": 10.0}
    assert decided["checks"] is True  # a connection the server closed is replaced when taken, not handed out
    sized = database_options(tmp_path, DATABASE_URL=POSTGRES, OPENPROGRAM_DB_POOL_SIZE="7",
                             OPENPROGRAM_DB_POOL_IDLE_S="2.5", OPENPROGRAM_DB_POOL_TIMEOUT_S="4")
    assert sized["options"]["pool"] == {"min_size": 0, "max_size": 7, "max_idle": 2.5, "timeout": 4.0}


def test_a_pool_size_of_0_opens_a_connection_each_time_and_sqlite_has_no_pool(tmp_path):
    assert "pool" not in database_options(tmp_path, DATABASE_URL=POSTGRES, OPENPROGRAM_DB_POOL_SIZE="0")["options"]
    assert "pool" not in database_options(tmp_path, DATABASE_URL="")["options"]


def test_a_wrong_pool_setting_is_named_with_what_is_allowed(tmp_path):
    error = settings_error(tmp_path, DATABASE_URL=POSTGRES, OPENPROGRAM_DB_POOL_SIZE="many")
    assert "OPENPROGRAM_DB_POOL_SIZE must be a whole number from 0 to 1000; got 'many'" in error
    error = settings_error(tmp_path, DATABASE_URL=POSTGRES, OPENPROGRAM_DB_POOL_IDLE_S="0")
    assert "OPENPROGRAM_DB_POOL_IDLE_S must be a number above 0 and at most 86400; got '0'" in error
    error = settings_error(tmp_path, DATABASE_URL=POSTGRES, OPENPROGRAM_DB_POOL_TIMEOUT_S="0")
    assert "OPENPROGRAM_DB_POOL_TIMEOUT_S must be a number above 0 and at most 3600; got '0'" in error
