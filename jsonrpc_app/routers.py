"""
A database router that keeps the call log in ``JSONRPC["LOG_DATABASE"]``.

A busy site can write its call log to a database of its own::

    DATABASES = {"default": {...}, "rpclog": {...}}
    DATABASE_ROUTERS = ["jsonrpc_app.routers.LogRouter"]
    JSONRPC = {"LOG_DATABASE": "rpclog"}

then ``python manage.py migrate --database rpclog``. Reads and writes of
``Envelope`` and ``Call`` (the admin, ``jsonrpc_prune``) go to that alias,
and jsonrpc_app's tables are created there and nowhere else. Models of other
apps are left to the project's other routers.
"""

from .conf import jsonrpc_settings

APP_LABEL = "jsonrpc_app"


class LogRouter:
    """Route jsonrpc_app's models to LOG_DATABASE."""

    def _is_log(self, model):
        return model._meta.app_label == APP_LABEL

    def db_for_read(self, model, **hints):
        if self._is_log(model):
            return jsonrpc_settings.LOG_DATABASE
        return None

    def db_for_write(self, model, **hints):
        if self._is_log(model):
            return jsonrpc_settings.LOG_DATABASE
        return None

    def allow_relation(self, obj1, obj2, **hints):
        # The log's user keys have no database constraint on purpose: they
        # may point into another database.
        if self._is_log(type(obj1)) or self._is_log(type(obj2)):
            return True
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if app_label == APP_LABEL:
            return db == jsonrpc_settings.LOG_DATABASE
        return None
