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
