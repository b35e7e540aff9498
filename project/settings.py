"""Compactor settings: one module, deploy differences come from the environment.

See README.md for the table of variables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from compaction.core.prompts import validate_custom_prompt  # pure Python: safe before Django is set up

from .env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_proxy_ssl_header,
    env_rate,
    env_str,
    env_writable_dir,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# Relative to the project directory, whatever the working directory: the server, the worker, beat
# and every management command must find the same database, broker folders and files.
VAR_DIR = env_writable_dir("COMPACTOR_VAR_DIR", str(BASE_DIR / "var"), base=BASE_DIR)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY in the environment (or DEBUG=1 for a development key)."
        )
    SECRET_KEY = "django-insecure-development-key-do-not-use-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS (production behind TLS) ---------------------------------------------------------
# COMPACTOR_HTTPS=1 turns on everything `check --deploy` asks for; each variable below can
# still be set on its own. SECURE_PROXY_SSL_HEADER is for a TLS-terminating proxy that sets
# the header (e.g. "X-Forwarded-Proto: https"); only set it when the proxy strips the header
# from clients, or anyone can claim HTTPS.
HTTPS = env_bool("COMPACTOR_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
# Preloading is a lasting promise about the whole domain that only its owner can make (and a
# preload header lets anyone submit the domain), so it is off by default and its deploy check
# (W021) silenced; SECURE_HSTS_PRELOAD=1 opts in.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Served on every response by project.security.SecurityHeadersMiddleware. No inline script
# anywhere (htmx and the dashboard's JS are static files); inline style attributes only (the
# usage bar's width), no <style> elements.
CONTENT_SECURITY_POLICY = env_str(
    "COMPACTOR_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'",
)
PERMISSIONS_POLICY = env_str(
    "COMPACTOR_PERMISSIONS_POLICY",
    "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), "
    "payment=(), usb=(), interest-cohort=()",
)
# Login throttling (project.security): after this many failed logins from one address for one
# username (or LOGIN_FAILURE_LIMIT_PER_ADDRESS for any username), login POSTs get a 429 until
# the window that started with the first failure has passed.
LOGIN_FAILURE_LIMIT = env_int("COMPACTOR_LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_FAILURE_LIMIT_PER_ADDRESS = env_int("COMPACTOR_LOGIN_FAILURE_LIMIT_PER_ADDRESS", 20, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("COMPACTOR_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
TRUST_X_FORWARDED_FOR = env_bool("COMPACTOR_TRUST_X_FORWARDED_FOR", False)
# API requests per API key ("1200/min"; s, min, hour, day); "off" disables. Over it: 429 + Retry-After.
API_THROTTLE_RATE = env_rate("COMPACTOR_API_THROTTLE_RATE", "1200/min")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_api_key",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "sessions.apps.AgentSessionsConfig",
    "compaction.apps.CompactionConfig",
    "gateway.apps.GatewayConfig",
    "ops.apps.OpsConfig",
    "project.apps.ProjectConfig",  # connects project.security's login throttling to auth's signals
]

MIDDLEWARE = [
    # Outermost: /healthz, /readyz and /metrics are answered here, before the host check and the
    # HTTPS redirect (probes and scrapers address the pod or host directly, over plain HTTP).
    "ops.middleware.ProbeMiddleware",
    # Every other request is timed and counted from here (by view and status).
    "ops.middleware.RequestMetricsMiddleware",
    # The database unavailable: 503 + Retry-After in each API's own error shape, never a 500.
    "project.outage.DatabaseOutageMiddleware",
    # First: an oversized API request is refused before sessions, auth or parsing run.
    "sessions.middleware.JsonApiErrorsMiddleware",
    "sessions.middleware.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "project.security.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Before CSRF and auth: a locked-out client's login POST is refused without a password check.
    "project.security.LoginThrottleMiddleware",
    # Django's, with a 308 (method and body kept) for a POST whose path lacks its trailing slash.
    "project.slashes.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

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
    }
]

# Database: DATABASE_URL, default an SQLite file (the embedded mode).
_database_url = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'compactor.sqlite3'}")
try:
    # A pooled connection is checked before its first use in each request (or task), so the first
    # request after a database restart reconnects instead of failing on the dead connection.
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
except Exception as exc:  # dj_database_url raises several types for bad URLs
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
# The database unavailable: requests are answered 503 with this Retry-After (project.outage).
DB_RETRY_AFTER_SECONDS = env_int("COMPACTOR_DB_RETRY_AFTER", 2, minimum=1)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A request thread keeps its connection (opening one parsed the schema again: ~1 ms a call, ~1.5 ms
    # to close it), and commits go to a write-ahead log instead of a rollback journal's fsync chain:
    # synchronous=NORMAL syncs at checkpoints only; a power cut can lose the last commits, never
    # corrupt the file (bench/cli_replay_bench.py --baseline shows the difference per gateway call).
    DATABASES["default"]["CONN_MAX_AGE"] = 60
    # Appends take a write lock at BEGIN so concurrent writers queue instead of failing
    # with "database is locked" half-way through a transaction.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A database host that drops packets would hold every request (and /readyz) until the kernel
    # gives up on the TCP connect, minutes later. `?connect_timeout=` in DATABASE_URL wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("COMPACTOR_DB_CONNECT_TIMEOUT", 5, minimum=1)
    )
# The append path's statements are prepared once per PostgreSQL connection (sessions.statements):
# PostgreSQL then skips planning them on every append. Off behind a pooler that cannot keep
# SQL prepared statements (PgBouncer in transaction mode).
COMPACTOR_DB_PREPARE = env_bool("COMPACTOR_DB_PREPARE", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:session-list"
LOGOUT_REDIRECT_URL = "login"

# A verified API key is remembered this long per process (Django's default cache), so a
# request costs no key lookup; revoking through the dashboard or the admin forgets it at once,
# any other change (another process, the database) takes effect within this bound. 0: no cache.
API_KEY_CACHE_SECONDS = env_int("COMPACTOR_API_KEY_CACHE_SECONDS", 5, minimum=0)

# Requests bigger than this are refused with 413 before they are parsed.
MAX_REQUEST_BYTES = env_int("COMPACTOR_MAX_REQUEST_BYTES", 8 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES

# A history search's statement may run this long (PostgreSQL's statement_timeout, SQLite's
# progress handler) before it is stopped and answered with a 400 asking for a narrower query.
SEARCH_TIMEOUT_MS = env_int("COMPACTOR_SEARCH_TIMEOUT_MS", 1000, minimum=10)
# On PostgreSQL, of the messages holding every word of a query, the newest this many are checked
# for word order and substrings and ranked (sessions.search): what bounds a common word's cost.
SEARCH_CANDIDATES = env_int("COMPACTOR_SEARCH_CANDIDATES", 2000, minimum=100)
# ... and of those whose words are in order, the newest this many checked as text (identifiers'
# substrings, long messages' phrases): reading a message's text costs ~0.15 ms.
SEARCH_SUBSTRING_CANDIDATES = env_int("COMPACTOR_SEARCH_SUBSTRING_CANDIDATES", 400, minimum=20)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sessions.auth.BearerAPIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["sessions.api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "sessions.api.errors.exception_handler",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["project.security.ApiKeyRateThrottle"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Compactor API",
    "DESCRIPTION": "Keeps LLM agent conversations inside their context windows.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Unknown fields are a 400 (RejectUnknownFieldsMixin): request bodies say so.
    "ENUM_ADD_EXPLICIT_BLANK_NULL_CHOICE": False,
    # A search hit's `status` beside a compaction's: each keeps a name of its own.
    "ENUM_NAME_OVERRIDES": {"StatusEnum": "compaction.models.Status", "HitStatusEnum": "sessions.search.HIT_STATUSES"},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "sessions.api.schema.add_error_responses",
    ],
}

# --- Celery -----------------------------------------------------------------------------
# REDIS_URL set: Redis is the broker. Unset: the embedded mode uses kombu's filesystem
# transport, which needs no server, and `make run` starts a worker beside the web process.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"REDIS_URL must start with redis://, rediss:// or unix://, got {REDIS_URL!r}")

# --- Cache: login and API throttling counters. Redis when there is one (shared by every web
# process); the embedded mode's single web process keeps them in memory.
if REDIS_URL:
    CACHES = {
        "default": {
            # Redis down: misses, not 500s (project/cache.py).
            "BACKEND": "project.cache.ForgivingRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "compactor",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

COMPACTION_SOFT_TIME_LIMIT = env_int("COMPACTOR_SOFT_TIME_LIMIT", 300, minimum=5)
COMPACTION_HARD_TIME_LIMIT = COMPACTION_SOFT_TIME_LIMIT + 60
# A running job holds a lease its worker renews (compaction.lease); the sweeper re-queues a job
# whose lease lapsed (its worker died) on its next run: recovery within lease + sweep interval.
# A worker restarted under its name re-queues its dead process's jobs as it starts, and the
# sweeper does as soon as it sees that worker's heartbeat restarted (compaction_sweep_stuck).
COMPACTION_LEASE_SECONDS = env_int("COMPACTOR_LEASE_SECONDS", 30, minimum=3)
COMPACTION_SWEEP_SECONDS = env_int("COMPACTOR_SWEEP_SECONDS", 5, minimum=1)
# A QUEUED job no worker has started this long after its message was sent is sent again by the
# sweeper (the message was lost: broker down at commit, queue flushed). Exactly once still
# holds: a worker claims the row with a conditional UPDATE, so a second delivery is a no-op.
COMPACTION_REQUEUE_QUEUED_SECONDS = env_int("COMPACTOR_REQUEUE_QUEUED_SECONDS", 45, minimum=5)
# `wait` on a compaction request holds a web thread while it polls: at most this long, and at
# most this many waiting requests per web process (beyond that the answer comes at once).
COMPACTION_MAX_WAIT_SECONDS = env_int("COMPACTOR_MAX_WAIT_SECONDS", 30, minimum=1)
COMPACTION_MAX_WAITERS = env_int("COMPACTOR_MAX_WAITERS", 4, minimum=0)
# An uploaded transcript's import (API, dashboard) stops past this many seconds with a 422 and
# stores nothing, rather than holding a web thread; `manage.py import_transcript` has no limit.
IMPORT_TIME_BUDGET = env_float("COMPACTOR_IMPORT_TIME_BUDGET", 60.0, minimum=1, maximum=3600)
# A job that failed this many times (worker killed, time limit) is marked failed by the sweeper.
COMPACTION_MAX_ATTEMPTS = env_int("COMPACTOR_MAX_ATTEMPTS", 3, minimum=1)
# Overflow recovery runs inside the agent's request: the LLM gets this long per call and the
# whole compaction this budget before the offline summarizer takes over.
COMPACTION_OVERFLOW_LLM_TIMEOUT = env_float("COMPACTOR_OVERFLOW_LLM_TIMEOUT", 20.0, minimum=0.1, maximum=600)
COMPACTION_OVERFLOW_TIME_BUDGET = env_float("COMPACTOR_OVERFLOW_TIME_BUDGET", 30.0, minimum=0.1, maximum=600)
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
        # Must outlive the hard time limit, or Redis re-delivers a job that is still running.
        "visibility_timeout": COMPACTION_HARD_TIME_LIMIT * 2,
    }
else:
    _broker_dir = VAR_DIR / "broker"
    # kombu's filesystem transport needs its folders to exist in both web and worker.
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
# --- Operations: /readyz and /metrics (ops/) ---------------------------------------------
# Every Celery worker records a heartbeat this often; /readyz answers 503 (and the
# compactor_workers_alive gauge drops) when none was seen within the max age.
WORKER_HEARTBEAT_SECONDS = env_float("COMPACTOR_WORKER_HEARTBEAT_SECONDS", 10.0, minimum=0.2, maximum=3600)
WORKER_HEARTBEAT_MAX_AGE = env_float("COMPACTOR_WORKER_HEARTBEAT_MAX_AGE", 60.0, minimum=0.5, maximum=86400)
if WORKER_HEARTBEAT_MAX_AGE <= WORKER_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"COMPACTOR_WORKER_HEARTBEAT_MAX_AGE ({WORKER_HEARTBEAT_MAX_AGE:g} s) must be longer than "
        f"COMPACTOR_WORKER_HEARTBEAT_SECONDS ({WORKER_HEARTBEAT_SECONDS:g} s), or a live worker reads as gone"
    )
# /metrics answers only `Authorization: Bearer <this>`; unset, /metrics is off (404).
METRICS_TOKEN = env_str("COMPACTOR_METRICS_TOKEN").strip()
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured(
        "COMPACTOR_METRICS_TOKEN must be at least 16 characters "
        "(generate one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )
# How long /readyz waits for the broker before naming it down.
READINESS_BROKER_TIMEOUT = env_float("COMPACTOR_READINESS_BROKER_TIMEOUT", 2.0, minimum=0.1, maximum=60)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# The broker queue jobs are sent to (web, beat's sweeper, a worker re-sending what its previous
# process left): one name for every process of a deployment; another for deployments sharing a Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("COMPACTOR_CELERY_QUEUE", "celery")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULE = {
    "sweep-stuck-compactions": {
        "task": "compaction.tasks.sweep_stuck_compactions",
        "schedule": float(COMPACTION_SWEEP_SECONDS),
    },
    "purge-trash": {"task": "sessions.tasks.purge_trash", "schedule": 3600.0},
}
# Deleted sessions stay restorable this long, then the hourly purge deletes them for good.
TRASH_RETENTION_DAYS = env_int("COMPACTOR_TRASH_RETENTION_DAYS", 30, minimum=0)

# --- Summarizer -------------------------------------------------------------------------
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL") or None
ANTHROPIC_TIMEOUT = env_float("COMPACTOR_ANTHROPIC_TIMEOUT", 120.0, minimum=0.1, maximum=3600)
ANTHROPIC_MAX_RETRIES = env_int("COMPACTOR_ANTHROPIC_MAX_RETRIES", 3, minimum=0)

# --- Gateway: the Anthropic-compatible /anthropic/v1/messages (gateway/) --------------------
# Requests go on to this Messages API with the server's own key; an agent's Compactor key
# never leaves the service.
GATEWAY_UPSTREAM_URL = env_str("COMPACTOR_UPSTREAM_URL", "https://api.anthropic.com").rstrip("/")
_upstream = urlsplit(GATEWAY_UPSTREAM_URL)
if _upstream.scheme not in ("http", "https") or not _upstream.netloc or _upstream.query or _upstream.fragment:
    raise ImproperlyConfigured(
        f"COMPACTOR_UPSTREAM_URL must be an http(s) URL without query, e.g. https://api.anthropic.com, "
        f"got {GATEWAY_UPSTREAM_URL!r}"
    )
GATEWAY_UPSTREAM_API_KEY = env_str("COMPACTOR_UPSTREAM_API_KEY") or ANTHROPIC_API_KEY
GATEWAY_UPSTREAM_TIMEOUT = env_float("COMPACTOR_UPSTREAM_TIMEOUT", 600.0, minimum=1, maximum=3600)
# How long a call may wait for a running summary when its context would not fit the window
# otherwise (below that the compaction simply finishes in the background).
GATEWAY_SUMMARY_WAIT = env_float("COMPACTOR_GATEWAY_SUMMARY_WAIT", 60.0, minimum=0, maximum=600)
# Agents resend their whole history (images included) on every call: the Messages API's own limit.
GATEWAY_MAX_REQUEST_BYTES = env_int("COMPACTOR_GATEWAY_MAX_REQUEST_BYTES", 32 * 1024 * 1024, minimum=1024)

# --- Gateway: the OpenAI-compatible /openai/v1/chat/completions and /responses (gateway/openai/)
# The same rules, on to an OpenAI-compatible API (OpenAI, Azure's /openai/v1, OpenRouter, vLLM…).
OPENAI_GATEWAY_UPSTREAM_URL = env_str("COMPACTOR_OPENAI_UPSTREAM_URL", "https://api.openai.com/v1").rstrip("/")
_openai_upstream = urlsplit(OPENAI_GATEWAY_UPSTREAM_URL)
if (
    _openai_upstream.scheme not in ("http", "https")
    or not _openai_upstream.netloc
    or _openai_upstream.query
    or _openai_upstream.fragment
):
    raise ImproperlyConfigured(
        f"COMPACTOR_OPENAI_UPSTREAM_URL must be an http(s) URL without query, e.g. https://api.openai.com/v1, "
        f"got {OPENAI_GATEWAY_UPSTREAM_URL!r}"
    )
OPENAI_GATEWAY_UPSTREAM_API_KEY = env_str("COMPACTOR_OPENAI_UPSTREAM_API_KEY") or env_str("OPENAI_API_KEY")

# --- Compaction defaults (overridable per session and per request) ----------------------
COMPACTOR: dict[str, Any] = {
    "DEFAULT_CONTEXT_WINDOW": env_int("COMPACTOR_DEFAULT_CONTEXT_WINDOW", 128_000, minimum=1024),
    "RESERVE_TOKENS": env_int("COMPACTOR_RESERVE_TOKENS", 16_384, minimum=0),
    "KEEP_RECENT_TOKENS": env_int("COMPACTOR_KEEP_RECENT_TOKENS", 10_000, minimum=0),
    "AUTO_COMPACT_RATIO": env_float("COMPACTOR_AUTO_COMPACT_RATIO", None, minimum=0.05, maximum=1),
    "AUTO_COMPACT_TOKEN_LIMIT": env_int("COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT", None, minimum=1),
    "PRESERVE_MESSAGES": env_int("COMPACTOR_PRESERVE_MESSAGES", None, minimum=1),
    "AUTO_COMPACT": env_bool("COMPACTOR_AUTO_COMPACT", True),
    "SUMMARIZER_MODEL": env_str("COMPACTOR_SUMMARIZER_MODEL", "claude-haiku-4-5"),
    "SUMMARY_MAX_TOKENS": env_int("COMPACTOR_SUMMARY_MAX_TOKENS", None, minimum=256),
    "COMPACT_PROMPT": env_str("COMPACTOR_COMPACT_PROMPT") or None,
    "PRUNE_TOOL_OUTPUTS": env_bool("COMPACTOR_PRUNE_TOOL_OUTPUTS", True),
    # compaction.core.policy: where a compaction lands, and when a prune alone is worth its cache cost.
    "TARGET_RATIO": env_float("COMPACTOR_TARGET_RATIO", 0.5, minimum=0.1, maximum=0.9),
    "PRUNE_MIN_RELIEF": env_float("COMPACTOR_PRUNE_MIN_RELIEF", 0.5, minimum=0.0, maximum=1.0),
}

if COMPACTOR["COMPACT_PROMPT"]:
    _prompt_problems = validate_custom_prompt(COMPACTOR["COMPACT_PROMPT"])
    if _prompt_problems:
        raise ImproperlyConfigured(f"COMPACTOR_COMPACT_PROMPT is not a valid prompt: {'; '.join(_prompt_problems)}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    },
    "loggers": {"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}, "anthropic": {"level": "WARNING"}},
}
