"""The dag app's settings, read through one object: `from dag.conf import conf`, then `conf.EXECUTOR`.

Like Django REST framework's `api_settings`: each setting is `OPENPROGRAM_<NAME>` in Django's settings
(openprogram_web/settings.py fills them from the environment), its default and meaning are here, once,
and a value is read once and kept until a setting changes (`setting_changed`, as tests'
`override_settings` and the `settings` fixture send it). A value set as text (from the environment) is
converted to the default's type, and a wrong one is named. None or "" means the default (except for a
list, where "" is the empty list).
"""
from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from runtime.settings_table import OFF_WORDS, ON_WORDS  # an on/off setting's words, as the runtime's own

PREFIX = "OPENPROGRAM_"

DEFAULTS: dict[str, Any] = {
    # Modules whose agentic functions the catalog shows (comma-separated as text).
    "FUNCTION_MODULES": ["examples.functions"],
    # The address people open the app at, for addresses printed outside its pages (run_function's link to
    # a run's page). `make run`'s own by default; set it when serving elsewhere or behind a proxy.
    "SITE_URL": "http://127.0.0.1:8000",
    # Where runs execute: "inprocess" (threads in this process), "celery" (Celery workers on a Redis
    # broker), or a dotted path to a dag.runs.executors.Executor subclass.
    "EXECUTOR": "inprocess",
    # Sessions the in-process executor runs at once; later ones wait, queued.
    "EXECUTOR_WORKERS": 8,
    # Largest launch-argument payload accepted, in bytes of JSON.
    "MAX_ARGS_BYTES": 100_000,
    # Per user (0: no limit): sessions queued or running at once, and about how many bytes of arguments,
    # results and node data their sessions may hold before a launch is refused (dag.runs.quotas).
    "MAX_ACTIVE_RUNS_PER_USER": 4,
    "MAX_STORED_BYTES_PER_USER": 200_000_000,
    # Seconds between websocket heartbeats (each also repairs a lost last message from the database).
    "WS_HEARTBEAT_S": 5.0,
    # Live websockets (session streams and session lists) one user may hold open at once in one server
    # process (0: no limit); each holds its session's frames while it is sent, so sockets bound memory.
    "MAX_LIVE_SOCKETS_PER_USER": 20,
    # A run's lease, seconds: a running session whose heartbeat is older is written off `interrupted`
    # by the reaper (dag.runs.reaper), and its run's later writes are refused.
    "LEASE_S": 15.0,
    # Seconds between heartbeats, each renewing every lease of a process in one query (dag.runs.leases).
    "HEARTBEAT_S": 2.0,
    # Seconds a lost or refused database connection is waited out (a failover, a restart, a network cut):
    # the writer holds the runs' writes and tries again, and a run's own reads and writes are tried again
    # (dag.recording.write_path.borrowing); past it, what still cannot reach the database fails, named.
    "DB_OUTAGE_S": 30.0,
    # The window in which a burst of DAG changes is coalesced into one channel-layer message, seconds.
    "BROADCAST_WINDOW_S": 0.02,
    # Seconds between two updates of one session's row on the live session list (its last change, and its
    # end, always arrive): a run writing thousands of nodes a second sends a few row updates a second.
    "LIST_UPDATE_S": 0.25,
    # Sessions one Celery worker (`make worker`) runs at once, each on a thread of its pool. Runs mostly
    # wait (on models, tools, people) and hold no database connection meanwhile, so this is high; a
    # waiting run costs a thread's memory (bench/bench_scaled.py measures it), not a connection.
    "WORKER_CONCURRENCY": 200,
    # The Celery queue launches are sent to and workers consume (separate deployments on one Redis).
    "CELERY_QUEUE": "openprogram",
    # Seconds before the broker hands an unacknowledged run to another worker: longer than the longest
    # run, since a run is acknowledged when it ends (a redelivered run finds its session claimed anyway).
    "CELERY_VISIBILITY_TIMEOUT_S": 86_400,
    # With Celery: seconds a session may stay queued after it was last sent to the broker before the
    # reaper sends it again (a message the broker lost: Redis restarted without persistence, the web
    # process died between its commit and the send). The claim is a compare-and-set, so a duplicate
    # runs nothing twice; the waits between sends double, so a session merely waiting behind a long
    # backlog is sent a few times in an hour (after 5, 10, 20, 40 minutes), not every interval.
    "QUEUED_RESEND_S": 300.0,
    # Publish each stop on Redis pub/sub to wake the process running the session at once; off, that
    # process finds the stop by polling the database (every STOP_POLL_S).
    "STOP_PUBSUB": True,
    # Seconds between a process's reads of its runs' stop flags: the latest a stop requested in another
    # process is seen without pub/sub (a stop in the run's own process is immediate).
    "STOP_POLL_S": 0.2,
    # Seconds a session may stay `cancelling` (stop requested, run still going) before the reaper
    # finishes it `cancelled` itself, whatever its run is doing.
    "CANCEL_DEADLINE_S": 30.0,
    # Password checks (the login page and POST /api/token/ together) per client address: "N/s", "N/min",
    # "N/hour" or "N/day"; "off" for no limit.
    "LOGIN_RATE": "10/min",
    # Failed password checks against one account, from every address together (the login page, the admin's
    # login and POST /api/token/), in the same form as LOGIN_RATE: over it, that account's password
    # logins are refused (429) for the rest of the window; its tokens and open sessions keep working.
    "ACCOUNT_LOGIN_RATE": "20/hour",
    # Days after its end an ended session is deleted by the reaper's pass, with its nodes (0: kept for ever).
    "RETENTION_DAYS": 0.0,
    # Days a read-only share link of a session works (POST /api/sessions/{id}/share/), unless revoked sooner.
    "SHARE_DAYS": 7.0,
    # Models a launch may choose beyond the simulated ones and each configured provider's default model,
    # as provider:model specs (comma-separated as text), e.g. "openai:gpt-4o,anthropic:claude-haiku-4-5".
    "MODELS": [],
    # Group commit (dag.recording.write_path.group_commit): node writes of all this process's runs are
    # committed together, one transaction per batch. A batch waits at most WRITE_BATCH_MS milliseconds
    # after its first write (the most a crash of the process can lose) and holds at most WRITE_BATCH_ROWS
    # writes (0: the database's own default, group_commit.BATCH_ROWS_BY_VENDOR).
    "WRITE_BATCH_MS": 5.0,
    "WRITE_BATCH_ROWS": 0,
    # Where a process's batches are written (dag.recording.write_path.writer_process): "process", by a
    # writer process of its own (the batches' database work and the live records' encoding then run
    # beside the runs, not in turns with them under one interpreter lock); "thread", by a thread of the
    # process; "auto", a writer process for the long-lived serving processes (`make run`'s server and
    # `make worker`), a thread for everything else (management commands, scripts, the test process).
    "WRITER": "auto",
    # An OTLP/HTTP receiver (Phoenix, Langfuse, an OpenTelemetry Collector...) every ended node is sent to
    # as a span, one trace per session (dag.telemetry); "" sends nothing. A base URL gets /v1/traces.
    "OTLP_ENDPOINT": "",
    # Seconds one export to it may take before its batch is dropped (and counted in a warning).
    "OTLP_TIMEOUT_S": 5.0,
}
# The smallest value each numeric setting may take (a zero poll interval would be a busy loop).
MINIMUMS: dict[str, float] = {
    "EXECUTOR_WORKERS": 1, "MAX_ARGS_BYTES": 1, "MAX_ACTIVE_RUNS_PER_USER": 0, "MAX_STORED_BYTES_PER_USER": 0,
    "WS_HEARTBEAT_S": 0.1, "MAX_LIVE_SOCKETS_PER_USER": 0, "QUEUED_RESEND_S": 1, "BROADCAST_WINDOW_S": 0, "LIST_UPDATE_S": 0, "WORKER_CONCURRENCY": 1,
    "CELERY_VISIBILITY_TIMEOUT_S": 1, "STOP_POLL_S": 0.01, "CANCEL_DEADLINE_S": 0, "WRITE_BATCH_MS": 0,
    "WRITE_BATCH_ROWS": 0, "LEASE_S": 1, "HEARTBEAT_S": 0.1, "DB_OUTAGE_S": 0, "RETENTION_DAYS": 0,
    "SHARE_DAYS": 0.001, "OTLP_TIMEOUT_S": 0.1,
}
_RATE = re.compile(r"^\d+/(s|sec|second|m|min|minute|h|hour|d|day)$")
# Settings whose text has a form of its own: the check, and what to say when it fails.
FORMATS: dict[str, tuple[Any, str]] = {
    "WRITER": (lambda text: text in ("auto", "thread", "process"), '"auto", "thread" or "process"'),
    "LOGIN_RATE": (lambda text: text.strip().lower() in ("off", "none", "0", "") or _RATE.match(text.strip()),
                   'a rate like "10/min" (per s, min, hour or day), or "off"'),
}
FORMATS["ACCOUNT_LOGIN_RATE"] = FORMATS["LOGIN_RATE"]
FORMATS["SITE_URL"] = (lambda text: text.startswith(("http://", "https://")),
                       'an http:// or https:// address, e.g. "https://agents.example.com"')
FORMATS["OTLP_ENDPOINT"] = (lambda text: text.startswith(("http://", "https://")),
                            'an http:// or https:// URL of an OTLP/HTTP receiver (e.g. "http://127.0.0.1:6006"), or '
                            'empty for none')
# Facts derived from Django's own settings, cached and reloaded the same way: (the setting, how).
DERIVED: dict[str, tuple[str, Any]] = {
    # The channel layer lives in this process's memory: no consumer in another process can hear it.
    "IN_MEMORY_LAYER": ("CHANNEL_LAYERS", lambda layers: (layers or {}).get("default", {}).get("BACKEND", "")
                        .endswith("InMemoryChannelLayer")),
    # Redis, for the channel layer and stop wake-ups ("" when unset: the embedded default).
    "REDIS_URL": ("REDIS_URL", lambda url: url or ""),
    # The Celery broker (CELERY_BROKER_URL, else REDIS_URL; "" when neither is set).
    "CELERY_BROKER_URL": ("CELERY_BROKER_URL", lambda url: url or ""),
    # Django's USE_TZ, read on the recording hot path (dag.recording.clock).
    "USE_TZ": ("USE_TZ", bool),
}


def _convert(name: str, value: Any) -> Any:
    default = DEFAULTS[name]
    try:
        if isinstance(default, list):
            items = value.split(",") if isinstance(value, str) else list(value)
            return [str(item).strip() for item in items if str(item).strip()]
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in (*ON_WORDS, *OFF_WORDS):
                raise ValueError
            return text in ON_WORDS
        if not isinstance(default, (int, float)):
            if name in FORMATS and not FORMATS[name][0](str(value)):
                raise ImproperlyConfigured(f"{PREFIX}{name} must be {FORMATS[name][1]}; got {value!r}")
            return value
        if isinstance(value, bool):
            raise TypeError
        number = type(default)(value)
    except (TypeError, ValueError):
        kind = {list: "a list (comma-separated)", int: "a whole number", float: "a number",
                bool: "on or off (1/0, true/false, yes/no, on/off)"}[type(default)]
        raise ImproperlyConfigured(f"{PREFIX}{name} must be {kind}; got {value!r}") from None
    if not math.isfinite(number):  # "nan" and "inf" parse as floats, and pass every comparison
        raise ImproperlyConfigured(f"{PREFIX}{name} must be a finite number; got {value!r}")
    if name in MINIMUMS and number < MINIMUMS[name]:
        raise ImproperlyConfigured(f"{PREFIX}{name} must be at least {MINIMUMS[name]:g}; got {value!r}")
    return number


class Settings:
    """Attribute access to the settings in DEFAULTS (`conf.WS_HEARTBEAT_S`), cached until `reload()`.

    `generation` counts the reloads, so what is built from settings (the executor) can tell it is stale.
    """

    generation = 0

    def __getattr__(self, name: str) -> Any:
        if name in DERIVED:
            setting, derive = DERIVED[name]
            value = derive(getattr(django_settings, setting, None))
        elif name in DEFAULTS:
            value = getattr(django_settings, PREFIX + name, None)
            unset = value is None or (value == "" and not isinstance(DEFAULTS[name], list))
            value = DEFAULTS[name] if unset else _convert(name, value)
        else:
            raise AttributeError(f"dag.conf has no setting {name!r}; settings are: {', '.join(DEFAULTS)}")
        setattr(self, name, value)  # found on the instance from now on: __getattr__ is not called again
        return value

    def pause_s(self, name: str) -> float:
        """The seconds setting `name` for a daemon thread's pause between rounds, or its default while the
        setting is invalid: the start-up check (dag.E003) refuses an invalid value, so only a change made
        while the process runs (a test's) meets one, and it must not end the reaper or the heartbeat."""
        try:
            return getattr(self, name)
        except ImproperlyConfigured:
            return DEFAULTS[name]

    def reload(self) -> None:
        for name in (*DEFAULTS, *DERIVED):
            self.__dict__.pop(name, None)
        self.generation += 1


conf = Settings()


def _reload(setting: str, **kwargs) -> None:
    if setting.startswith(PREFIX) or setting in {source for source, _ in DERIVED.values()}:
        conf.reload()


setting_changed.connect(_reload)
