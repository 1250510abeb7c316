"""dag.conf: the app's settings through one object, defaults in one place, reloaded when settings change."""
import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dag.conf import DEFAULTS, conf


def test_an_unset_setting_is_its_default(settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = None
    settings.OPENPROGRAM_EXECUTOR = ""
    assert conf.WS_HEARTBEAT_S == DEFAULTS["WS_HEARTBEAT_S"] == 5.0
    assert conf.EXECUTOR == "inprocess"


def test_text_from_the_environment_takes_the_defaults_type(settings):
    settings.OPENPROGRAM_EXECUTOR_WORKERS = "3"
    settings.OPENPROGRAM_BROADCAST_WINDOW_S = "0.5"
    settings.OPENPROGRAM_FUNCTION_MODULES = "examples.functions, more.functions,"
    assert (conf.EXECUTOR_WORKERS, conf.BROADCAST_WINDOW_S) == (3, 0.5)
    assert conf.FUNCTION_MODULES == ["examples.functions", "more.functions"]


def test_a_wrong_value_is_named(settings):
    settings.OPENPROGRAM_MAX_ARGS_BYTES = "lots"
    with pytest.raises(ImproperlyConfigured, match="OPENPROGRAM_MAX_ARGS_BYTES must be a whole number; got 'lots'"):
        conf.MAX_ARGS_BYTES


def test_a_changed_setting_is_read_again(settings):
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 1.5
    assert conf.WS_HEARTBEAT_S == 1.5
    settings.OPENPROGRAM_WS_HEARTBEAT_S = 2.5
    assert conf.WS_HEARTBEAT_S == 2.5


def test_a_daemon_threads_pause_is_the_setting_or_while_it_is_invalid_the_default(settings):
    settings.OPENPROGRAM_STOP_POLL_S = "0.5"
    settings.OPENPROGRAM_LEASE_S = "20"
    assert (conf.pause_s("STOP_POLL_S"), conf.pause_s("LEASE_S")) == (0.5, 20.0)
    settings.OPENPROGRAM_STOP_POLL_S = "soon"
    settings.OPENPROGRAM_LEASE_S = "inf"
    assert (conf.pause_s("STOP_POLL_S"), conf.pause_s("LEASE_S")) == (DEFAULTS["STOP_POLL_S"], DEFAULTS["LEASE_S"])
    with pytest.raises(ImproperlyConfigured):  # read anywhere else, the invalid value is still an error
        conf.STOP_POLL_S


def test_the_channel_layer_kind_follows_channel_layers(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert conf.IN_MEMORY_LAYER is True
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    assert conf.IN_MEMORY_LAYER is False


def test_an_unknown_name_lists_the_settings():
    with pytest.raises(AttributeError, match="no setting 'HEARTBEAT'; settings are: FUNCTION_MODULES"):
        conf.HEARTBEAT


@pytest.mark.parametrize("text, value", [("off", False), ("0", False), ("no", False), ("On", True), ("1", True),
                                         ("true", True), (False, False)])
def test_an_on_off_setting_reads_the_usual_words(settings, text, value):
    settings.OPENPROGRAM_STOP_PUBSUB = text
    assert conf.STOP_PUBSUB is value


def test_an_on_off_setting_names_a_word_it_does_not_know(settings):
    settings.OPENPROGRAM_STOP_PUBSUB = "maybe"
    with pytest.raises(ImproperlyConfigured, match="OPENPROGRAM_STOP_PUBSUB must be on or off"):
        conf.STOP_PUBSUB


def test_the_configuration_page_lists_every_setting():
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    named = set(re.findall(r"`(OPENPROGRAM_[A-Z_]+|[A-Z_]+_URL)`", "\n".join(rows)))
    missing = {f"OPENPROGRAM_{name}" for name in DEFAULTS} - named
    assert not missing, f"docs/configuration.md's table has no row for {sorted(missing)}"
    assert {"CELERY_BROKER_URL", "REDIS_URL", "DATABASE_URL"} <= named


@pytest.mark.parametrize("name, value, words", [
    ("OPENPROGRAM_STOP_POLL_S", "0", "OPENPROGRAM_STOP_POLL_S must be at least 0.01"),
    ("OPENPROGRAM_EXECUTOR_WORKERS", "0", "OPENPROGRAM_EXECUTOR_WORKERS must be at least 1"),
    ("OPENPROGRAM_HEARTBEAT_S", "0", "OPENPROGRAM_HEARTBEAT_S must be at least 0.1"),
    ("OPENPROGRAM_LEASE_S", "0", "OPENPROGRAM_LEASE_S must be at least 1"),
    ("OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER", "-1", "must be at least 0"),
    ("OPENPROGRAM_LOGIN_RATE", "10/fortnight", 'OPENPROGRAM_LOGIN_RATE must be a rate like "10/min"'),
    ("OPENPROGRAM_SITE_URL", "agents.example.com", "OPENPROGRAM_SITE_URL must be an http:// or https:// address"),
    ("OPENPROGRAM_STOP_POLL_S", "nan", "OPENPROGRAM_STOP_POLL_S must be a finite number; got 'nan'"),
    ("OPENPROGRAM_LEASE_S", "inf", "OPENPROGRAM_LEASE_S must be a finite number; got 'inf'"),
])
def test_an_out_of_range_or_malformed_setting_is_a_startup_error_naming_it(settings, name, value, words):
    from django.core.checks import run_checks
    setattr(settings, name, value)
    errors = [e for e in run_checks() if e.id == "dag.E003"]
    assert len(errors) == 1 and words in errors[0].msg
