from django.core.checks import run_checks

import pytest

from dag.checks import celery_executor_services, function_modules_import, leases_outlast_heartbeats


def test_listed_function_modules_that_import_pass(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["examples.functions"]
    assert function_modules_import() == []


def test_a_mistyped_function_module_is_named_at_start_up(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["examples.functions", "examples.functoins"]
    errors = [e for e in run_checks() if e.id == "dag.E001"]
    assert len(errors) == 1
    assert "'examples.functoins', which cannot be imported" in errors[0].msg
    assert "ModuleNotFoundError" in errors[0].msg


def test_the_embedded_default_needs_no_services(settings):
    settings.OPENPROGRAM_EXECUTOR, settings.REDIS_URL, settings.CELERY_BROKER_URL = "", "", ""
    assert celery_executor_services() == []


def test_celery_without_redis_or_postgresql_is_refused_naming_what_is_missing(settings):
    settings.OPENPROGRAM_EXECUTOR, settings.REDIS_URL, settings.CELERY_BROKER_URL = "celery", "", ""
    errors = [e for e in run_checks() if e.id == "dag.E002"]
    assert len(errors) == 1
    message = errors[0].msg
    assert "REDIS_URL" in message and "CELERY_BROKER_URL" in message
    from django.db import connection
    assert ("DATABASE_URL naming PostgreSQL" in message) == (connection.vendor == "sqlite")


@pytest.mark.parametrize("executor", ["celery", "dag.runs.celery_executor.CeleryExecutor"])
def test_celery_with_its_services_passes(settings, executor):
    from django.db import connection
    if connection.vendor == "sqlite":
        pytest.skip("PostgreSQL only (the check refuses SQLite)")
    settings.OPENPROGRAM_EXECUTOR, settings.REDIS_URL = executor, "redis://127.0.0.1:6379/0"
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    assert celery_executor_services() == []


@pytest.mark.parametrize("lease_s, heartbeat_s, refused", [(15, 2, False), (2, 1, False), (15, 8, True), (5, 30, True)])
def test_a_lease_must_outlast_two_heartbeats(settings, lease_s, heartbeat_s, refused):
    settings.OPENPROGRAM_LEASE_S, settings.OPENPROGRAM_HEARTBEAT_S = lease_s, heartbeat_s
    errors = leases_outlast_heartbeats()
    assert [error.id for error in errors] == (["dag.E004"] if refused else [])
    if refused:
        assert f"OPENPROGRAM_HEARTBEAT_S ({heartbeat_s} s) must be at most half of OPENPROGRAM_LEASE_S" in errors[0].msg


@pytest.mark.parametrize("variable, value, words", [
    ("OPENPROGRAM_MAX_LLM_CALLS", "nan", "OPENPROGRAM_MAX_LLM_CALLS='nan': expected a whole number of model calls"),
    ("OPENPROGRAM_MAX_LLM_CALLS", "-3", "OPENPROGRAM_MAX_LLM_CALLS='-3'"),
    ("OPENPROGRAM_MODEL_TIMEOUT_S", "inf", "OPENPROGRAM_MODEL_TIMEOUT_S='inf' must be a finite number"),
    ("OPENPROGRAM_MODEL_RETRY_TOTAL_S", "nan", "OPENPROGRAM_MODEL_RETRY_TOTAL_S='nan' must be a finite number"),
    ("OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY", "many", "OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY='many' is not a valid int"),
    ("OPENPROGRAM_UNATTENDED", "of", "OPENPROGRAM_UNATTENDED='of' must be on or off"),
    ("OPENPROGRAM_MODEL", "openai:", "OPENPROGRAM_MODEL: model 'openai:' has nothing after its ':'"),
])
def test_a_bad_runtime_variable_is_a_startup_error_not_an_error_in_every_run(monkeypatch, variable, value, words):
    # Read only when a run needs it, such a value let the server start and then ended each run `error`.
    monkeypatch.setenv(variable, value)
    errors = [e for e in run_checks() if e.id == "dag.E005"]
    assert len(errors) == 1 and words in errors[0].msg


def test_the_runtime_variables_as_set_here_pass():
    assert not [e for e in run_checks() if e.id == "dag.E005"]


@pytest.mark.parametrize("value, words", [
    ("nosuch.Thing", "OPENPROGRAM_EXECUTOR='nosuch.Thing' cannot be imported"),
    ("dag.models.Session", "is not a dag.runs.executors.Executor subclass"),
    ("tests.web.runs.unloadable_executor.Executor", "cannot be loaded: ImproperlyConfigured: this executor needs QUEUE_URL"),
])
def test_an_executor_that_is_not_one_is_a_startup_error(settings, value, words):
    settings.OPENPROGRAM_EXECUTOR = value
    errors = [e for e in run_checks() if e.id == "dag.E006"]
    assert len(errors) == 1 and words in errors[0].msg
