"""The dag app's settings, read through one object: `from dag.conf import conf`, then `conf.EXECUTOR`.

Like Django REST framework's `api_settings`: each setting is `OPENPROGRAM_<NAME>` in Django's settings
(openprogram_web/settings.py fills them from the environment), its default and meaning are here, once
(`SETTINGS`, which docs/configuration.md is generated from), and a value is read once and kept until a
setting changes (`setting_changed`, as tests' `override_settings` and the `settings` fixture send it). A value set as text (from the environment) is
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

from runtime.settings_table import OFF_WORDS, ON_WORDS, Setting  # on/off words and a setting, as the runtime's

PREFIX = "OPENPROGRAM_"

# Each setting's default, the topic docs/configuration.md lists it under, and what it means there
# (`python manage.py configuration_docs` writes the page from this table and the runtime's).
SETTINGS: tuple[Setting, ...] = (
    Setting("OPENPROGRAM_FUNCTION_MODULES", ["examples.functions"], "serving",
            "modules whose agentic functions the catalog lists (comma-separated)"),
    Setting("OPENPROGRAM_SITE_URL", "http://127.0.0.1:8000", "serving",
            "the address people open the app at, for addresses printed outside its pages (`run_function`'s "
            "link to a run's page); `make run`'s own by default: set it when serving elsewhere or behind a proxy"),
    Setting("OPENPROGRAM_EXECUTOR", "inprocess", "runs",
            "where runs execute: `inprocess` (threads of the server process), `celery` (Celery workers on a "
            "Redis broker: [scaling](scaling.md)), or the dotted path of a `dag.runs.executors.Executor` "
            "subclass, built by its `from_settings`"),
    Setting("OPENPROGRAM_EXECUTOR_WORKERS", 8, "runs",
            "sessions the in-process executor runs at once; later ones wait, queued"),
    Setting("OPENPROGRAM_MAX_ARGS_BYTES", 100_000, "limits", "largest launch-argument payload, in bytes of JSON"),
    # dag.runs.quotas
    Setting("OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER", 4, "limits",
            "sessions one user may have queued or running at once; a launch over it is refused (API: 429 "
            "naming the limit; `0`: no limit)"),
    Setting("OPENPROGRAM_MAX_STORED_BYTES_PER_USER", 200_000_000, "limits",
            "about how much one user's sessions may hold (arguments, results, node inputs and outputs as JSON "
            "text, and error texts) before launches are refused (API: 429; `0`: no limit); an ended session "
            "counts by the size stored when it ended, so the check does not read its nodes"),
    Setting("OPENPROGRAM_WS_HEARTBEAT_S", 5.0, "live",
            "seconds between websocket heartbeats (each also repairs a lost last message from the database)"),
    Setting("OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER", 20, "live",
            "live websockets (session streams and session lists together) one user may hold open at once in one "
            "server process; one past it is closed with 4429 (`0`: no limit). The server buffers whatever a "
            "socket has not read yet, a whole snapshot for a client that reads nothing, so this bounds what one "
            "user can make it hold"),
    # dag.runs.reaper
    Setting("OPENPROGRAM_LEASE_S", 15.0, "runs",
            "a run's lease: a running session whose process has not renewed it for this many seconds is marked "
            "`interrupted` by the reaper, naming the worker and when it was last seen, and its run's later "
            "writes are refused (at least two heartbeats: start-up check `dag.E004`); reapers pass every "
            "`LEASE_S / 2`, and write off a lease only once the database has been reachable for a whole lease"),
    # dag.runs.leases
    Setting("OPENPROGRAM_HEARTBEAT_S", 2.0, "runs",
            "seconds between heartbeats, each renewing every lease of a process in one query"),
    # dag.recording.write_path.borrowing
    Setting("OPENPROGRAM_DB_OUTAGE_S", 30.0, "database",
            "seconds a lost or refused database connection is waited out (a failover, a restart, a network "
            "cut): the writer keeps the runs' writes and tries again, and a run's own reads and writes are "
            "tried again; past it, a run that still cannot reach the database ends `interrupted`, saying so "
            "([scaling](scaling.md))"),
    Setting("OPENPROGRAM_BROADCAST_WINDOW_S", 0.02, "live",
            "the window in which a burst of changes of one session is sent to its viewers as one message, "
            "seconds"),
    Setting("OPENPROGRAM_LIST_UPDATE_S", 0.25, "live",
            "live session list: the least seconds between two updates of one session's row (the changes in "
            "between arrive in the next one, and a run's end at once), so a run writing thousands of nodes a "
            "second sends a few row updates a second"),
    Setting("OPENPROGRAM_WORKER_CONCURRENCY", 200, "runs",
            "sessions one Celery worker (`make worker`) runs at once, each on a thread of its pool. Runs mostly "
            "wait (on models, tools, people) and a waiting run holds no database connection, so this is high "
            "and does not raise a worker's connections; a waiting run costs a thread's memory "
            "([scaling](scaling.md))"),
    Setting("OPENPROGRAM_CELERY_QUEUE", "openprogram", "runs",
            "the Celery queue launches are sent to and workers consume (separate deployments on one Redis)"),
    Setting("OPENPROGRAM_CELERY_VISIBILITY_TIMEOUT_S", 86_400, "runs",
            "seconds before the broker hands an unacknowledged run to another worker: keep it above the longest "
            "run, since a run is acknowledged when it ends (a redelivered run finds its session claimed anyway)"),
    Setting("OPENPROGRAM_QUEUED_RESEND_S", 300.0, "runs",
            "with Celery, seconds a session may stay queued after it was last sent to the broker before the "
            "reaper sends it again (a message the broker lost: Redis restarted without persistence, the web "
            "process died between its commit and the send); the claim is a compare-and-set, so a duplicate runs "
            "nothing twice, and the waits between sends double, so a session merely waiting behind a backlog is "
            "sent a few times an hour (after 5, 10, 20, 40 minutes), not every interval"),
    Setting("OPENPROGRAM_STOP_PUBSUB", True, "runs",
            "publish each stop on Redis pub/sub to wake the process running the session at once; off, that "
            "process finds the stop by polling the database (every `STOP_POLL_S`)"),
    Setting("OPENPROGRAM_STOP_POLL_S", 0.2, "runs",
            "seconds between a process's reads of its runs' stop flags: the latest a stop requested in another "
            "process is seen without pub/sub (a stop in the run's own process is immediate)"),
    Setting("OPENPROGRAM_CANCEL_DEADLINE_S", 30.0, "runs",
            "seconds a session may stay `cancelling` (stop requested, run still going) before the reaper "
            "finishes it `cancelled` itself, whatever its run is doing"),
    Setting("OPENPROGRAM_LOGIN_RATE", "10/min", "sign-in",
            "password checks per client address, the login page, the admin's login, the password change and "
            "`POST /api/token/` together (`N/s`, `N/min`, `N/hour`, `N/day`; `off`: none); over it a 429 with "
            "`Retry-After`. Counted in a cache every server process shares: Redis when `REDIS_URL` is set, else "
            "files under `OPENPROGRAM_VAR_DIR` (one machine)"),
    Setting("OPENPROGRAM_ACCOUNT_LOGIN_RATE", "20/hour", "sign-in",
            "failed password checks against one account, from every address together (the login page, the "
            "admin's login, `POST /api/token/`), in `OPENPROGRAM_LOGIN_RATE`'s form; over it that account's "
            "password logins are refused (429) for the rest of the window, while its tokens and open sessions "
            "keep working ([data.md](data.md))"),
    Setting("OPENPROGRAM_RETENTION_DAYS", 0.0, "data",
            "days after its end an ended session is deleted by the reaper's pass, with its nodes (`0`: kept for "
            "ever; [data.md](data.md))"),
    Setting("OPENPROGRAM_SHARE_DAYS", 7.0, "data",
            "days a read-only share link of a session works (`POST /api/sessions/{id}/share/`) unless revoked "
            "sooner ([data.md](data.md))"),
    Setting("OPENPROGRAM_MODELS", [], "models",
            "more models a launch may choose, beside `sim`, `sim:naive`, the default model and each configured "
            "provider's default: comma-separated `provider:model` specs of configured providers, e.g. "
            "`openai:gpt-4o,anthropic:claude-haiku-4-5`"),
    # dag.recording.write_path.group_commit
    Setting("OPENPROGRAM_WRITE_BATCH_MS", 5.0, "database",
            "group commit: a process's node writes (all its runs) are committed together, one transaction per "
            "batch, a batch closing at most this many milliseconds after its first write (`0`: as soon as the "
            "writer is free); a crash of the process loses about one batch window of writes (see [What a crash "
            "loses](architecture.md#recording-group-commit-and-the-writer-process))"),
    # group_commit.BATCH_ROWS_BY_VENDOR
    Setting("OPENPROGRAM_WRITE_BATCH_ROWS", 0, "database",
            "the most writes one batch holds (`0`: the database's own size, 100 on SQLite and 200 on "
            "PostgreSQL)"),
    # dag.recording.write_path.writer_process
    Setting("OPENPROGRAM_WRITER", "auto", "database",
            "who writes those batches: `process`, a writer process of the serving process's own (started with "
            "it; the database work and the encoding of what viewers are sent run on another core, beside the "
            "runs, not in turns with them under one interpreter lock); `thread`, a thread of the process; "
            "`auto`, a writer process for `make run`'s server and `make worker`, a thread elsewhere "
            "(`manage.py` commands, scripts, the test process)"),
    # dag.telemetry
    Setting("OPENPROGRAM_OTLP_ENDPOINT", "", "telemetry",
            "an OTLP/HTTP receiver (Phoenix, Langfuse, an OpenTelemetry Collector; a base URL gets "
            "`/v1/traces`) every ended node is sent to as a span, one trace per session "
            "([debugging.md](debugging.md)); empty sends nothing"),
    Setting("OPENPROGRAM_OTLP_TIMEOUT_S", 5.0, "telemetry",
            "seconds one export to that receiver may take before its batch is dropped and counted in a warning"),
)
# Each setting's default by its name in Django's settings without the prefix ("EXECUTOR").
DEFAULTS: dict[str, Any] = {setting.name.removeprefix(PREFIX): setting.default for setting in SETTINGS}
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
