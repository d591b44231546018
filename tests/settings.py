"""Test settings: the demo project plus a test app with its own rpc_methods."""

from project.settings import *  # noqa: F401,F403
from project.settings import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "rest_framework.authtoken", "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

# A second database for the call log (tests/test_recorder.py points
# JSONRPC["LOG_DATABASE"] at it); set up only for the tests that ask for it.
DATABASES = {
    **DATABASES,
    "log": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}
DATABASE_ROUTERS = ["jsonrpc_app.routers.LogRouter"]

# The call log's writer and journal directory are the tests' to choose
# (tests/conftest.py), not the demo's environment's.
from project.settings import JSONRPC  # noqa: E402

JSONRPC = {k: v for k, v in JSONRPC.items() if k not in ("LOG_WRITER", "LOG_JOURNAL_DIR", "LOG_LOADER")}

ROOT_URLCONF = "tests.urls"
