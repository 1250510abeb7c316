"""System checks run at start-up (`manage.py check`, `migrate`, `runserver`, the test runner)."""
from __future__ import annotations

import importlib

from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from runtime.environment import environment_problems

from .conf import DEFAULTS, conf
from .recording.write_path import borrowing
from .runs.executor_setting import EXECUTORS, executor_class, executor_path


@register()
def settings_are_valid(app_configs=None, **kwargs) -> list[Error]:
    """Every OPENPROGRAM_* setting reads: a typo or an out-of-range value is named at start-up, not as a
    500 at the first request that needs it."""
    errors = []
    for name in DEFAULTS:
        try:
            getattr(conf, name)
        except ImproperlyConfigured as exc:
            errors.append(Error(str(exc), hint="Fix or unset the variable (docs/configuration.md).",
                                id="dag.E003"))
    return errors


@register()
def runtime_environment_is_valid(app_configs=None, **kwargs) -> list[Error]:
    """The runtime's own OPENPROGRAM_* variables (the default budget, model timeouts and retries, the
    reply caps, OPENPROGRAM_UNATTENDED) read too: each is read only when a run needs it, where a bad
    value would end every run `error` on a server that started as if all were well."""
    return [Error(problem, hint="Fix or unset the variable (docs/configuration.md).", id="dag.E005")
            for problem in environment_problems()]


@register()
def executor_is_known(app_configs=None, **kwargs) -> list[Error]:
    """OPENPROGRAM_EXECUTOR names an executor: a typo is named here, not as a traceback at the first launch."""
    try:
        name = conf.EXECUTOR
    except ImproperlyConfigured:
        return []  # said by settings_are_valid
    try:
        executor_class(name)
    except Exception as exc:  # whatever importing its module raised (an ImproperlyConfigured of its own, too)
        return [Error(f"{exc}" if isinstance(exc, (ImportError, TypeError)) else
                      f"OPENPROGRAM_EXECUTOR={name!r} cannot be loaded: {type(exc).__name__}: {exc}",
                      hint="Fix or unset the variable (docs/configuration.md).", id="dag.E006")]
    return []


@register()
def leases_outlast_heartbeats(app_configs=None, **kwargs) -> list[Error]:
    """A lease must outlast a few heartbeats: with OPENPROGRAM_HEARTBEAT_S near OPENPROGRAM_LEASE_S, one
    late beat (a busy machine, a slow query) gets a healthy run written off by the reaper."""
    try:
        lease_s, heartbeat_s = conf.LEASE_S, conf.HEARTBEAT_S
    except ImproperlyConfigured:
        return []  # said by settings_are_valid
    if heartbeat_s * 2 <= lease_s:
        return []
    return [Error(f"OPENPROGRAM_HEARTBEAT_S ({heartbeat_s:g} s) must be at most half of OPENPROGRAM_LEASE_S "
                  f"({lease_s:g} s): a run whose lease is renewed less often than that is written off as soon "
                  f"as one heartbeat is late",
                  hint="Lower OPENPROGRAM_HEARTBEAT_S or raise OPENPROGRAM_LEASE_S (defaults: 2 and 15).",
                  id="dag.E004")]


@register()
def upkeep_is_never_starved(app_configs=None, **kwargs) -> list[Error]:
    """The pool (PostgreSQL) leaves room for runs beside the process's upkeep, and a heartbeat that has to
    wait for a connection still renews its lease in time: otherwise healthy runs are written off."""
    try:
        lease_s, heartbeat_s = conf.LEASE_S, conf.HEARTBEAT_S
    except ImproperlyConfigured:
        return []  # said by settings_are_valid
    size, upkeep, timeout_s, errors = (borrowing.pool_size(), borrowing.UPKEEP_CONNECTIONS,
                                       borrowing.pool_timeout_s(), [])
    if size and size <= upkeep:
        errors.append(Error(
            f"OPENPROGRAM_DB_POOL_SIZE ({size}) leaves no connection for runs beside the {upkeep} each process "
            f"keeps for its upkeep (heartbeat, reaper, stop watcher, writer), whatever "
            f"OPENPROGRAM_WORKER_CONCURRENCY is",
            hint=f"Set OPENPROGRAM_DB_POOL_SIZE to {upkeep + 6} (the default) or more, at least {upkeep + 1}, "
                 f"or 0 for no pool.", id="dag.E007"))
    margin = lease_s - heartbeat_s
    if size and timeout_s >= margin:
        errors.append(Error(
            f"OPENPROGRAM_DB_POOL_TIMEOUT_S ({timeout_s:g} s) must be below OPENPROGRAM_LEASE_S less "
            f"OPENPROGRAM_HEARTBEAT_S ({margin:g} s): a heartbeat waiting that long for a connection lets its "
            f"runs' leases expire",
            hint=f"Set OPENPROGRAM_DB_POOL_TIMEOUT_S to {max(margin / 2, 0.5):g} or raise OPENPROGRAM_LEASE_S.",
            id="dag.E008"))
    return errors


@register()
def function_modules_import(app_configs=None, **kwargs) -> list[Error]:
    """Every module in OPENPROGRAM_FUNCTION_MODULES imports: a typo is named here, not as a 500 on `/`."""
    errors = []
    for name in conf.FUNCTION_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing module, or one whose import fails
            errors.append(Error(
                f"OPENPROGRAM_FUNCTION_MODULES lists {name!r}, which cannot be imported: "
                f"{type(exc).__name__}: {exc}",
                hint="Fix the module name (a dotted path importable from the project directory or "
                     "PYTHONPATH) or remove it from OPENPROGRAM_FUNCTION_MODULES.",
                id="dag.E001"))
    return errors


CELERY_NEEDS = {
    "REDIS_URL": "REDIS_URL (the Redis channel layer that carries a worker's runs to the web processes' "
                 "live pages, and the stop wake-ups), e.g. redis://127.0.0.1:6379/0",
    "CELERY_BROKER_URL": "a broker: CELERY_BROKER_URL, or REDIS_URL, which it defaults to",
    "DATABASE_URL": "DATABASE_URL naming PostgreSQL (SQLite is one machine's file, with one writer at a time: "
                    "workers elsewhere cannot share it), e.g. postgres://user@host:5432/openprogram",
}


@register()
def celery_executor_services(app_configs=None, **kwargs) -> list[Error]:
    """OPENPROGRAM_EXECUTOR=celery needs Redis and PostgreSQL: named here, not as runs that never start."""
    if executor_path(conf.EXECUTOR) != EXECUTORS["celery"]:
        return []
    missing = [need for name, need in CELERY_NEEDS.items()
               if (name == "DATABASE_URL" and connections["default"].vendor == "sqlite")
               or (name != "DATABASE_URL" and not getattr(conf, name))]
    if not missing:
        return []
    return [Error(
        "OPENPROGRAM_EXECUTOR=celery runs sessions on Celery workers, which needs what is not set: "
        + "; ".join(missing) + ".",
        hint="Set these in the environment of every web and worker process (docs/scaling.md), or "
             "unset OPENPROGRAM_EXECUTOR for the embedded default.",
        id="dag.E002")]
