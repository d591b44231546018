"""
Settings of the jsonrpc_app demo project.

SQLite by default; set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)
to use another database.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-demo-key-change-me-in-production")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "jsonrpc_app",
    "examples",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

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

WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default="sqlite:///" + str(BASE_DIR / "db.sqlite3"),
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
    )
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several workers (gunicorn -w 4) write the call log at once: WAL lets
    # readers run beside the one writer, IMMEDIATE takes the write lock at
    # BEGIN (where the busy timeout applies, so no "database is locked" from
    # a lock upgrade), and a writer waits up to 10 s for the lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"init_command": "PRAGMA journal_mode=WAL", "transaction_mode": "IMMEDIATE", "timeout": 10}
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A database that does not answer costs a request at most this many
    # seconds before its call log goes to the spool (jsonrpc_app.log.spool).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}

JSONRPC = {
    "OPENRPC_INFO": {
        "title": "jsonrpc_app demo",
        "version": "1.0.0",
        "description": "The JSON-RPC 2.0 specification's example methods, served by jsonrpc_app.",
    },
    # Where the call log waits while its database cannot be written; unset:
    # BASE_DIR / "spool".
    "SPOOL_DIR": os.environ.get("JSONRPC_SPOOL_DIR") or None,
    # "journal" (the default: one line appended on the request, loaded into the
    # database off it), "request" (written before the answer) or "background"
    # (docs/call-log.md).
    "LOG_WRITER": os.environ.get("JSONRPC_LOG_WRITER") or "journal",
    # Where the journal is kept; unset: BASE_DIR / "journal".
    "LOG_JOURNAL_DIR": os.environ.get("JSONRPC_JOURNAL_DIR") or None,
    # "thread" (each worker loads the journal) or "command" (manage.py jsonrpc_log_loader does).
    "LOG_LOADER": os.environ.get("JSONRPC_LOG_LOADER") or "thread",
    # Usage rollups maintained as calls are written (docs/admin.md, "Usage rollups");
    # JSONRPC_USAGE_ROLLUPS=0 turns them off (the benchmarks' comparison).
    "USAGE_ROLLUPS": os.environ.get("JSONRPC_USAGE_ROLLUPS", "1") != "0",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"jsonrpc_app": {"handlers": ["console"], "level": "WARNING"}},
}
