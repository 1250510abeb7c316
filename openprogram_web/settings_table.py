"""The environment variables Django's own settings are built from (the database, Redis, HTTPS, API tokens,
...), declared once: name, default, topic and meaning.

openprogram_web/settings.py reads each through its `env_*` helpers, which take the default from here. The
web app's OPENPROGRAM_* settings are in dag.conf's table and the runtime's in runtime.settings_table;
docs/configuration.md is generated from the three (`python manage.py configuration_docs`). A `shown`
default is one the settings work out (a path under var/, another variable's value), written for the page.
"""
from __future__ import annotations

from runtime.settings_table import Setting

SERVER_SETTINGS: dict[str, Setting] = {setting.name: setting for setting in (
    # -- serving -----------------------------------------------------------------------------------
    # Read by the Makefile (`make run`), not by the settings.
    Setting("HOST", "127.0.0.1", "serving", "where `make run` serves: the address"),
    Setting("PORT", 8000, "serving", "where `make run` serves: the port"),
    Setting("OPENPROGRAM_VAR_DIR", None, "serving",
            "the SQLite database, secret key and local user's password (a new directory is private to its "
            "owner)", shown="`var/` in the project"),
    Setting("SECRET_KEY", None, "serving", "Django's secret key", shown="generated once into `var/secret_key`"),
    Setting("LOG_LEVEL", "INFO", "serving", "the server log's level"),
    Setting("DEBUG", False, "serving", "Django's debug pages: never on a server others reach"),
    Setting("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"], "serving",
            "the host names the site answers to (comma-separated), as Django's setting"),
    Setting("CSRF_TRUSTED_ORIGINS", [], "serving",
            "origins (comma-separated, with their scheme) trusted beside the site's own, as Django's setting; "
            "they also decide which pages may open the live stream: the site's own origin (scheme, host and "
            "port of the request; behind a TLS proxy, `https` when `OPENPROGRAM_PROXY_SSL_HEADER` says so) "
            "or a trusted one"),
    # -- the database ------------------------------------------------------------------------------
    Setting("DATABASE_URL", None, "database", "e.g. `postgres://user@host:5432/openprogram`",
            shown="SQLite in `var/db.sqlite3` (WAL, IMMEDIATE transactions)"),
    # Small, and the same whatever a worker's concurrency: a run borrows a connection for one operation at
    # a time (dag.recording.write_path.borrowing).
    Setting("OPENPROGRAM_DB_POOL_SIZE", 10, "database",
            "PostgreSQL only: each process takes its connections from a pool of at most this many at once, 4 "
            "of them kept for its upkeep (at least 5: check `dag.E007`; `0`: no pool, a connection opened for "
            "each request, websocket read and run operation, as Django does by default), opened as needed and "
            "checked when taken; a writer process keeps its one connection outside the pool"),
    # Both above 0: the pool looks for an idle connection to close every IDLE_S (0 would never rest), and
    # a request waits TIMEOUT_S for a connection the pool opens in the background (0 would fail every one).
    Setting("OPENPROGRAM_DB_POOL_IDLE_S", 60.0, "database",
            "one idle pooled connection is closed every this many seconds (above 0), so a quiet process ends "
            "up holding none"),
    Setting("OPENPROGRAM_DB_POOL_TIMEOUT_S", 10.0, "database",
            "seconds (above 0) a request that finds no pooled connection free waits for one (past the size, "
            "or while PostgreSQL cannot be reached: a restart shorter than that is waited out), then fails "
            "with \"couldn't get a connection\"; why connecting failed is logged (logger `psycopg.pool`)"),
    # -- where runs execute and Redis --------------------------------------------------------------
    Setting("REDIS_URL", None, "live",
            "`redis://127.0.0.1:6379/0` for the Redis channel layer (several server processes), stop wake-ups "
            "and the login throttles' counts", shown="unset: in-memory channel layer"),
    Setting("CELERY_BROKER_URL", None, "runs", "the Celery broker, with `OPENPROGRAM_EXECUTOR=celery`",
            shown="`REDIS_URL`"),
    # -- sign-in -----------------------------------------------------------------------------------
    Setting("OPENPROGRAM_API_TOKEN_DAYS", 90.0, "sign-in",
            "days an API token works after it is issued (`0`: until revoked; at most 36500)"),
    Setting("OPENPROGRAM_THROTTLE_PREFIX", "openprogram-throttle", "sign-in",
            "the name of the login throttles' cache keys (and on files, its directory "
            "`var/throttles/<prefix>`): servers that share it must share the prefix; forgetting the attempts "
            "forgets only this prefix's, so the test suite uses its own (`test-<pid>`) and leaves a dev "
            "server's counts alone"),
    # -- HTTPS and proxies -------------------------------------------------------------------------
    Setting("HTTPS", False, "https",
            "on (`1`): the site is served over HTTPS only (directly or behind a TLS proxy): secure session and "
            "CSRF cookies, HSTS, and plain-HTTP requests redirected to HTTPS"),
    Setting("OPENPROGRAM_HSTS_SECONDS", 31536000, "https", "with `HTTPS=1`: how long browsers keep to HTTPS",
            shown="`31536000` (a year)"),
    Setting("OPENPROGRAM_HSTS_INCLUDE_SUBDOMAINS", False, "https",
            "with `HTTPS=1`: whether browsers keep subdomains to HTTPS too"),
    Setting("OPENPROGRAM_SSL_REDIRECT", True, "https",
            "`0` leaves plain-HTTP requests unredirected (e.g. when the proxy redirects itself)",
            shown="on with `HTTPS=1`"),
    Setting("OPENPROGRAM_PROXY_SSL_HEADER", None, "https",
            "behind a TLS proxy, the header it sets on HTTPS requests, e.g. `X-Forwarded-Proto: https` (only "
            "if the proxy always sets or strips it); without it, `HTTPS=1` behind a proxy redirects forever"),
    Setting("OPENPROGRAM_NUM_PROXIES", 0, "https",
            "proxies in front of the server: the client address counted is the one that many hops back in "
            "`X-Forwarded-For` (`0`: the header is ignored, as any client can forge it)"),
)}
