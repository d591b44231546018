"""Test settings: the demo project plus a test app with its own rpc_methods."""

from project.settings import *  # noqa: F401,F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "rest_framework.authtoken", "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
