"""
The one settings module every benchmark target runs under.

Every target (bare view, jsonrpc_app with logging off and on, django-modern-rpc)
is served by this module with the same apps, middleware, database and URLconf;
the only per-process difference is ``BENCH_LOG`` (jsonrpc_app's LOG_POLICY and
LOG_WRITER).

MIDDLEWARE is empty by default, as in the figures issue 6 quotes; set
``BENCH_MIDDLEWARE=django`` for the middleware of ``startproject`` (every
target then pays about the same extra per request, so the ratios shrink).
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent
RESULTS_DIR = Path(os.environ.get("BENCH_RESULTS_DIR", BASE_DIR / "results"))

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "rest_framework",
    "jsonrpc_app",
    "modernrpc",
    "bench",
]

STARTPROJECT_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
MIDDLEWARE_NAME = os.environ.get("BENCH_MIDDLEWARE", "none")
MIDDLEWARE = STARTPROJECT_MIDDLEWARE if MIDDLEWARE_NAME == "django" else []
if MIDDLEWARE:
    INSTALLED_APPS.append("django.contrib.messages")

ROOT_URLCONF = "bench.urls"
WSGI_APPLICATION = "bench.wsgi.application"

# Persistent connections, as a deployment would run (the default of 0 opens
# and closes a connection per request, which only the logging target pays).
_sqlite = RESULTS_DIR / "bench.sqlite3"
DATABASES = {
    "default": dj_database_url.config(default="sqlite:///" + str(_sqlite), conn_max_age=600)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The way SQLite is deployed for concurrent writers (2 gunicorn workers).
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# DRF's defaults, written out: session and basic authentication on the endpoint.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}

# BENCH_LOG: "0" log off, "1" log on (written by the request), "2" log on,
# written by the background writer (many envelopes per transaction), "3" log
# on, the journal (appended on the request, loaded by each worker's thread),
# "4" the journal appended by the workers only (LOG_LOADER "command").
_BENCH_LOG = os.environ.get("BENCH_LOG")
JSONRPC = {
    "LOG_POLICY": "all" if _BENCH_LOG in ("1", "2", "3", "4") else "none",
    "LOG_WRITER": {"2": "background", "3": "journal", "4": "journal"}.get(_BENCH_LOG, "request"),
    # "4": the workers only append; manage.py jsonrpc_log_loader loads (not while measured).
    "LOG_LOADER": "command" if _BENCH_LOG == "4" else "thread",
    "LOG_JOURNAL_DIR": str(RESULTS_DIR / "journal"),
    "SPOOL_DIR": str(RESULTS_DIR / "spool"),
}
# To compare the loader thread's priorities (LOG_LOADER_NICE) in one run; unset: the default.
if os.environ.get("BENCH_LOADER_NICE"):
    JSONRPC["LOG_LOADER_NICE"] = int(os.environ["BENCH_LOADER_NICE"])

# django-modern-rpc: JSON-RPC only, its default (standard library json) backend.
MODERNRPC_HANDLERS = ["modernrpc.jsonrpc.handler.JsonRpcHandler"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"jsonrpc_app": {"handlers": ["console"], "level": "WARNING"}},
}
