"""Settings for OpenProgram Web, read from the environment with embedded defaults.

The embedded default (no variables set) is what `make run` serves: SQLite, the in-memory channel layer,
the in-process executor and the offline simulated model. Point DATABASE_URL at PostgreSQL and REDIS_URL
at Redis to scale out.
"""
import math
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dag import conf as dag_conf
from openprogram_web import settings_table
from runtime.settings_table import env_flag

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("OPENPROGRAM_VAR_DIR") or BASE_DIR / "var")
# The SQLite database (API tokens, password hashes), the secret key and the local user's password live
# here: a new directory is private to its owner, whatever the umask. Processes starting at once (two
# workers) may both make it; the second finds it made.
VAR_DIR.mkdir(parents=True, mode=0o700, exist_ok=True)


def default_of(name: str):
    """The default of the environment variable `name`, from openprogram_web/settings_table.py (with what
    it means)."""
    return settings_table.SERVER_SETTINGS[name].default


def env_bool(name: str) -> bool:
    """An on/off variable (unset or blank: its default); a word that is neither is named (HTTPS=yse must
    not quietly mean off)."""
    try:
        return env_flag(name, default_of(name))
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def _range_text(kind_text: str, maximum, positive: bool) -> str:
    if maximum is None:
        return f"{kind_text} {'above 0' if positive else 'of 0 or more'}"
    return f"{kind_text} {'above 0 and at most' if positive else 'from 0 to'} {maximum}"


def env_number(name: str, *, maximum=None, positive: bool = False, allowed: str = ""):
    """A number from 0 (above 0 if `positive`) to `maximum` (None: any) from the environment (unset or
    blank: its default, whose type it takes); a wrong one is named, saying what is `allowed` (by default,
    the kind of number and its range)."""
    default = default_of(name)
    kind = type(default)
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    allowed = allowed or _range_text("a whole number" if kind is int else "a number", maximum, positive)
    try:
        number = kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {allowed}; got {value!r}") from None
    # NaN passes no comparison, so it is refused with the others.
    if not (math.isfinite(number) and (number > 0 if positive else number >= 0)
            and (maximum is None or number <= maximum)):
        raise ImproperlyConfigured(f"{name} must be {allowed}; got {value!r}")
    return number


def env_list(name: str) -> list[str]:
    """Comma-separated names (unset: its default; set but blank: none)."""
    text = os.environ.get(name)
    if text is None:
        return list(default_of(name))
    return [item.strip() for item in text.split(",") if item.strip()]


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in var/ (never in git)."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    path = VAR_DIR / "secret_key"
    try:
        # Created 0600 from the start (not chmod-ed after writing), so it is never readable by others.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG")
# Django's test client's "testserver" is added by the test set-up (pytest-django, Django's runner), not here.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "dag.accounts.apps.AdminConfig",  # Django's admin, its login throttled
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "knox",  # API tokens, stored hashed
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here, not a CDN (works offline)
    "dag",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "openprogram_web.request_charset.RequestCharsetMiddleware",  # before anything decodes a body
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "openprogram_web.private_cache.PrivateCacheMiddleware",  # a logged-in user's answers: no shared cache
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "openprogram_web.security.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "openprogram_web.urls"
ASGI_APPLICATION = "openprogram_web.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database ---------------------------------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}", conn_max_age=0)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Many writers (run threads) and readers (pages, websockets): WAL lets readers proceed during a
    # write, IMMEDIATE takes the write lock at BEGIN so two writers queue instead of deadlocking, and
    # the busy timeout makes them wait rather than fail.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
    }
    # A file, not :memory:, so worker threads and a live server share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
elif DATABASES["default"].get("NAME"):
    # Two test runs at once on one server would otherwise both claim "test_<name>".
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
# Small, and the same whatever a worker's concurrency: a run borrows a connection for one operation at a
# time (dag.recording.write_path.borrowing), and 4 of these are kept for the process's upkeep.
DB_POOL_SIZE = env_number("OPENPROGRAM_DB_POOL_SIZE", maximum=1000)
# Both above 0: the pool looks for an idle connection to close every IDLE_S (0 would never rest), and a
# request waits TIMEOUT_S for a connection the pool opens in the background (0 would fail every first one).
DB_POOL_IDLE_S = env_number("OPENPROGRAM_DB_POOL_IDLE_S", maximum=86_400, positive=True)
DB_POOL_TIMEOUT_S = env_number("OPENPROGRAM_DB_POOL_TIMEOUT_S", maximum=3_600, positive=True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DB_POOL_SIZE:
    # A pool of connections per process (Django's, psycopg_pool): a request, a websocket's read or a run
    # takes a connection already open instead of opening one (3-15 ms each here, and a backend's start-up
    # CPU on the database: nine of them for every run launched and watched). Opened as they are needed
    # (none at start), one idle connection closed every DB_POOL_IDLE_S, so a quiet process ends up holding
    # none; each is checked when taken, so one that the server closed is replaced, not handed out. A
    # request that finds none free waits up to DB_POOL_TIMEOUT_S, for one to come back (past DB_POOL_SIZE
    # at once) or to be opened: while PostgreSQL cannot be reached the pool retries in the background
    # (a restart shorter than the wait is waited out), logs why each attempt failed (logger psycopg.pool),
    # and the request fails when the wait ends.
    DATABASES["default"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), "pool": {
        "min_size": 0, "max_size": DB_POOL_SIZE, "max_idle": DB_POOL_IDLE_S, "timeout": DB_POOL_TIMEOUT_S}}
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- channels ---------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    from redis.exceptions import ConnectionError as RedisConnectionError

    CHANNEL_LAYERS = {
        "default": {
            # channels_redis's layer, quiet about an outage (see the module).
            "BACKEND": "dag.live.redis_layer.OutageTolerantRedisChannelLayer",
            # socket_timeout None: redis-py 8 otherwise drops idle layer connections after 5 s.
            # retry_on_error: a pooled connection that a Redis restart or outage closed fails once on
            # its next use; the command is retried once on a new connection instead of failing.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None,
                                  "retry_on_error": [RedisConnectionError]}], "capacity": 1000},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                  "CONFIG": {"capacity": 1000}}}

# --- caches -----------------------------------------------------------------------------------
# The password-attempt throttle (dag.accounts.throttles) counts in "throttles": a count kept in one
# process's memory would let each server process, and each restart, grant the full rate again. Redis is
# shared by every process when there is one; otherwise files under var/ are shared by the processes of
# this machine (the embedded default is one machine).


def throttle_cache(prefix: str) -> dict:
    """The "throttles" cache with keys named by `prefix`, so that forgetting the attempts
    (dag.accounts.throttles.forget_attempts) forgets only that prefix's: the test suite takes its own and
    leaves a dev server's counts, and another test run's, alone. A file cache cannot clear by prefix
    (its file names are hashes), so there the prefix also names the cache's directory."""
    if not prefix.replace("-", "").replace("_", "").isalnum():
        raise ImproperlyConfigured(f"OPENPROGRAM_THROTTLE_PREFIX must be letters, digits, - and _; got {prefix!r}")
    location = ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL} if REDIS_URL
                else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                      "LOCATION": str(VAR_DIR / "throttles" / prefix)})
    return location | {"KEY_PREFIX": prefix}


CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttles": throttle_cache(os.environ.get("OPENPROGRAM_THROTTLE_PREFIX", "").strip()
                                or default_of("OPENPROGRAM_THROTTLE_PREFIX")),
}

# The Celery broker, when runs execute on Celery workers (OPENPROGRAM_EXECUTOR=celery); see
# openprogram_web/celery.py for how the Celery app is configured.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL

# --- auth -------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "dag.accounts.tokens.RevokeTokensOnPasswordChange"},  # a new password revokes the API tokens
    {"NAME": "dag.runs.local_user.ForgetsItsSavedPassword"},  # and makes var/local_user.txt's copy stale
]
# No mail leaves this server (there is no password reset): anything that tries to send one is an error.
EMAIL_BACKEND = "openprogram_web.mail.RefusingEmailBackend"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the tree page's stop button reads it for fetch()
X_FRAME_OPTIONS = "DENY"
# Pages load scripts and styles from this origin only; page and model text can never run as script even
# if a template or a script ever inserted it as HTML. Inline style attributes stay allowed: the live tree
# indents rows with them. `{websocket}` becomes the request's own websocket origin (ws://host:port).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self' {websocket}; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- HTTPS ------------------------------------------------------------------------------------
# HTTPS=1: the site is reached over HTTPS only, directly or through a TLS proxy. Cookies then travel over
# HTTPS only, browsers are told to use nothing else (HSTS), and a plain-HTTP request is redirected.
HTTPS = env_bool("HTTPS")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_number("OPENPROGRAM_HSTS_SECONDS") if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("OPENPROGRAM_HSTS_INCLUDE_SUBDOMAINS")
SECURE_SSL_REDIRECT = HTTPS and env_bool("OPENPROGRAM_SSL_REDIRECT")


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """The header a TLS proxy sets on requests that came over HTTPS, "X-Forwarded-Proto: https", as Django
    wants it: ("HTTP_X_FORWARDED_PROTO", "https"). Only for a proxy that always sets (or strips) it."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    header, sep, expected = value.partition(":")
    if not sep or not header.strip() or not expected.strip():
        raise ImproperlyConfigured(f"{name}={value!r} must look like 'X-Forwarded-Proto: https'")
    return "HTTP_" + header.strip().upper().replace("-", "_"), expected.strip()


SECURE_PROXY_SSL_HEADER = proxy_ssl_header("OPENPROGRAM_PROXY_SSL_HEADER")
DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000  # launch arguments are small; refuse megabyte bodies

# --- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # The token first: DRF answers a refused login with the first class's WWW-Authenticate, so a missing or
    # bad token is the 401 the schema documents (with the session first, every refusal was a 403). A
    # request without an Authorization header still falls through to the browser session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dag.api.authentication.TokenAuthentication",  # `Authorization: Token <key>` (knox)
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["dag.api.parsers.JSONParser"],  # refuses JSON nested too deep
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # Proxies in front of the server: the client address the throttles count is the one this many hops
    # back in X-Forwarded-For; 0 (the default) ignores that header, which any client can write.
    "NUM_PROXIES": env_number("OPENPROGRAM_NUM_PROXIES"),
}
# API tokens (django-rest-knox: stored hashed) stop working this many days after they are issued; 0: never.
# At most a century: far larger lifetimes overflow the expiry's date, and every token request was a 500.
MAX_API_TOKEN_DAYS = 36_500
OPENPROGRAM_API_TOKEN_DAYS = env_number("OPENPROGRAM_API_TOKEN_DAYS", maximum=MAX_API_TOKEN_DAYS, allowed=(
    f"a number of days from 0 (tokens never expire) to {MAX_API_TOKEN_DAYS}"))
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=OPENPROGRAM_API_TOKEN_DAYS) if OPENPROGRAM_API_TOKEN_DAYS else None,
    "AUTH_HEADER_PREFIX": "Token",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OpenProgram Web API",
    "DESCRIPTION": "Launch agentic functions, read their call DAG, and stop runs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Sessions and nodes each have a "status" of their own choices; named here so neither is a hash.
    "ENUM_NAME_OVERRIDES": {"SessionStatusEnum": "dag.api.serializers.SESSION_STATUSES",
                            "NodeStatusEnum": "dag.api.serializers.NODE_STATUSES"},
}

# --- OpenProgram ------------------------------------------------------------------------------
# Every setting of dag.conf's table (the login rates, the executor, the leases, ...), as the environment
# sets it: read through dag.conf (`conf.EXECUTOR`, ...), which holds each one's default and meaning. Unset
# (None) is the default; text from the environment is converted to the default's type there.
for _setting in dag_conf.SETTINGS:
    globals()[_setting.name] = os.environ.get(_setting.name)
del _setting

# --- the rest ---------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Level and logger on every line, so an operator (and the reliability tests) can tell a warning
    # from an error in the server's output.
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # A bad Host header, which any client can send: one warning line, not an error with a traceback.
    "filters": {"one_warning_line": {"()": "openprogram_web.log_filters.OneWarningLine"}},
    "loggers": {"django.security.DisallowedHost": {"filters": ["one_warning_line"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", default_of("LOG_LEVEL"))},
}
