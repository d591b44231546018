"""System checks of jsonrpc_app (IDs jsonrpc_app.E00x / W00x); imported by ``AppConfig.ready()``."""

import os

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import router

from .conf import DEFAULTS, jsonrpc_settings
from .models import Envelope
from .openrpc import error_object
from .registry import all_registries
from .log.journal import journal_dir
from .log.spool import spool_dir

LOG_POLICIES = ("all", "errors", "none")
LOG_WRITERS = ("journal", "request", "background")


@register(Tags.compatibility)
def check_settings(app_configs=None, **kwargs):
    errors = []
    user_settings = getattr(settings, "JSONRPC", None)
    if user_settings is None:
        return errors
    if not isinstance(user_settings, dict):
        return [
            Error(
                "The JSONRPC setting must be a dict.",
                hint="Set JSONRPC = {...} with the keys of the settings reference (docs/reference.md).",
                id="jsonrpc_app.E003",
            )
        ]
    for key in sorted(set(user_settings) - set(DEFAULTS)):
        errors.append(
            Error(
                "JSONRPC has an unknown key %r." % key,
                hint="Known keys: %s." % ", ".join(sorted(DEFAULTS)),
                obj=key,
                id="jsonrpc_app.E001",
            )
        )
    policy = user_settings.get("LOG_POLICY", DEFAULTS["LOG_POLICY"])
    if policy not in LOG_POLICIES:
        errors.append(
            Error(
                "JSONRPC['LOG_POLICY'] must be one of %s, not %r." % (", ".join(LOG_POLICIES), policy),
                id="jsonrpc_app.E004",
            )
        )
    return errors


@register(Tags.compatibility)
def check_call_log_settings(app_configs=None, **kwargs):
    """The call log's settings: its database alias, router, redaction keys and size cap."""
    errors = []
    alias = jsonrpc_settings.LOG_DATABASE
    if alias not in settings.DATABASES:
        errors.append(
            Error(
                "JSONRPC['LOG_DATABASE'] is %r, which is not an alias in DATABASES." % (alias,),
                hint="Use one of: %s." % ", ".join(sorted(settings.DATABASES)),
                id="jsonrpc_app.E030",
            )
        )
    elif router.db_for_write(Envelope) != alias or router.db_for_read(Envelope) != alias:
        errors.append(
            Warning(
                "The call log is written to database %r, but the admin and "
                "jsonrpc_prune would read it from %r."
                % (alias, router.db_for_read(Envelope)),
                hint="Add 'jsonrpc_app.routers.LogRouter' to DATABASE_ROUTERS.",
                id="jsonrpc_app.W030",
            )
        )
    keys = jsonrpc_settings.SENSITIVE_KEYS
    if not isinstance(keys, (list, tuple, set, frozenset)) or not all(isinstance(k, str) for k in keys):
        errors.append(
            Error(
                "JSONRPC['SENSITIVE_KEYS'] must be a list of strings, not %r." % (keys,),
                id="jsonrpc_app.E031",
            )
        )
    limit = jsonrpc_settings.LOG_MAX_VALUE_BYTES
    if limit is not None and (type(limit) is not int or limit < 1):
        errors.append(
            Error(
                "JSONRPC['LOG_MAX_VALUE_BYTES'] must be a positive number of bytes or None, not %r."
                % (limit,),
                id="jsonrpc_app.E032",
            )
        )
    return errors


def _can_create_or_write(directory):
    """True when this process can write ``directory``, or create it in its nearest existing parent."""
    existing = directory
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    return existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)


@register(Tags.compatibility)
def check_spool_settings(app_configs=None, **kwargs):
    """The call log's spool and writer: their timings, and a directory this process can write."""
    errors = []
    for key in ("SPOOL_FLUSH_INTERVAL", "SPOOL_RETRY_DELAY"):
        value = getattr(jsonrpc_settings, key)
        if value is not None and (type(value) not in (int, float) or value < 0):
            errors.append(
                Error(
                    "JSONRPC[%r] must be a number of seconds (0 or more) or None, not %r."
                    % (key, value),
                    id="jsonrpc_app.E040",
                )
            )
    writer = jsonrpc_settings.LOG_WRITER
    if writer not in LOG_WRITERS:
        errors.append(
            Error(
                "JSONRPC['LOG_WRITER'] must be one of %s, not %r." % (", ".join(LOG_WRITERS), writer),
                id="jsonrpc_app.E041",
            )
        )
    delay = jsonrpc_settings.LOG_WRITER_MAX_DELAY
    if type(delay) not in (int, float) or not 0 <= delay <= 60:
        errors.append(
            Error(
                "JSONRPC['LOG_WRITER_MAX_DELAY'] must be a number of seconds from 0 to 60, not %r."
                % (delay,),
                hint="The default is %r." % (DEFAULTS["LOG_WRITER_MAX_DELAY"],),
                id="jsonrpc_app.E042",
            )
        )
    size = jsonrpc_settings.LOG_WRITER_QUEUE_SIZE
    if type(size) is not int or size < 1:
        errors.append(
            Error(
                "JSONRPC['LOG_WRITER_QUEUE_SIZE'] must be a positive number of envelopes, not %r."
                % (size,),
                hint="The default is %r." % (DEFAULTS["LOG_WRITER_QUEUE_SIZE"],),
                id="jsonrpc_app.E043",
            )
        )
    directory = spool_dir()
    if not _can_create_or_write(directory):
        errors.append(
            Warning(
                "The call log's spool directory %s cannot be created or written; envelopes "
                "the log database cannot take would be lost." % directory,
                hint="Set JSONRPC['SPOOL_DIR'] to a directory this process can write, on a "
                "local disk that survives a reboot.",
                id="jsonrpc_app.W040",
            )
        )
    return errors


_CHOICES = {
    "LOG_JOURNAL": ("file", "redis"),
    "LOG_JOURNAL_FSYNC": ("interval", "always", "never"),
    "LOG_JOURNAL_FULL": ("warn", "refuse"),
    "LOG_LOADER": ("thread", "command"),
}
_POSITIVE = (
    "LOG_JOURNAL_FSYNC_INTERVAL",
    "LOG_JOURNAL_ROTATE_BYTES",
    "LOG_JOURNAL_MAX_BYTES",
    "LOG_JOURNAL_REDIS_CLAIM_IDLE",
    "LOG_LOADER_INTERVAL",
    "LOG_LOADER_CHUNK",
)


@register(Tags.compatibility)
def check_journal_settings(app_configs=None, **kwargs):
    """The call log's journal and loader: their choices and numbers, and a directory this process can write."""
    errors = []
    for key, choices in _CHOICES.items():
        value = getattr(jsonrpc_settings, key)
        if value not in choices:
            errors.append(
                Error(
                    "JSONRPC[%r] must be one of %s, not %r." % (key, ", ".join(choices), value),
                    id="jsonrpc_app.E045",
                )
            )
    nice = jsonrpc_settings.LOG_LOADER_NICE
    if type(nice) is not int or not 0 <= nice <= 19:
        errors.append(
            Error(
                "JSONRPC['LOG_LOADER_NICE'] must be a whole number from 0 to 19, not %r." % (nice,),
                hint="The default is %r." % (DEFAULTS["LOG_LOADER_NICE"],),
                id="jsonrpc_app.E046",
            )
        )
    for key in _POSITIVE + ("USAGE_MINUTE_DAYS",):
        value = getattr(jsonrpc_settings, key)
        if key == "USAGE_MINUTE_DAYS" and value is None:
            continue  # minute rows kept for ever
        if type(value) not in (int, float) or value <= 0:
            errors.append(
                Error(
                    "JSONRPC[%r] must be a positive number, not %r." % (key, value),
                    hint="The default is %r." % (DEFAULTS[key],),
                    id="jsonrpc_app.E046",
                )
            )
    if jsonrpc_settings.LOG_WRITER != "journal":
        return errors
    if jsonrpc_settings.LOG_JOURNAL == "redis":
        try:
            import redis  # noqa: F401
        except ImportError:
            errors.append(
                Error(
                    "JSONRPC['LOG_JOURNAL'] is 'redis' but the redis package is not installed.",
                    hint="pip install 'jsonrpc-app[redis]'",
                    id="jsonrpc_app.E047",
                )
            )
        return errors
    if jsonrpc_settings.LOG_JOURNAL != "file":
        return errors
    directory = journal_dir()
    if not _can_create_or_write(directory):
        errors.append(
            Warning(
                "The call log's journal directory %s cannot be created or written; HTTP calls "
                "would be written to the database at once instead (or lost if it cannot take them)."
                % directory,
                hint="Set JSONRPC['LOG_JOURNAL_DIR'] to a directory this process can write, on a "
                "local disk that survives a reboot (or LOG_JOURNAL = 'redis' where none does).",
                id="jsonrpc_app.W041",
            )
        )
    return errors


LIMIT_KEYS = ("MAX_BODY_SIZE", "MAX_BATCH_SIZE", "MAX_DEPTH")


@register(Tags.security)
def check_security_settings(app_configs=None, **kwargs):
    """The hard limits are positive integers (or None); exception text stays out of production answers."""
    errors = []
    user_settings = getattr(settings, "JSONRPC", None)
    if not isinstance(user_settings, dict):
        return errors
    for key in LIMIT_KEYS:
        value = user_settings.get(key, DEFAULTS[key])
        if value is not None and (type(value) is not int or value < 1):
            errors.append(
                Error(
                    "JSONRPC[%r] must be a positive integer or None, not %r." % (key, value),
                    hint="The default is %r; None turns the limit off." % (DEFAULTS[key],),
                    obj=key,
                    id="jsonrpc_app.E005",
                )
            )
    if user_settings.get("EXPOSE_EXCEPTIONS") and not settings.DEBUG:
        errors.append(
            Warning(
                "JSONRPC['EXPOSE_EXCEPTIONS'] is on while DEBUG is off: -32603 answers "
                "carry exception text and tracebacks to every client.",
                hint="Turn EXPOSE_EXCEPTIONS off outside development.",
                id="jsonrpc_app.W001",
            )
        )
    return errors


@register(Tags.compatibility)
def check_declared_errors(app_configs=None, **kwargs):
    """Every entry of a method's errors= is a JsonRpcError subclass (or instance) OpenRPC can describe."""
    errors = []
    for registry in list(all_registries):
        for method in registry:
            for declared in method.errors:
                try:
                    error_object(declared)
                except TypeError:
                    errors.append(
                        Error(
                            "JSON-RPC method %r declares errors=[%r], which is not a JsonRpcError."
                            % (method.name, declared),
                            hint="List JsonRpcError subclasses with class-level code and message.",
                            obj=method.func,
                            id="jsonrpc_app.E050",
                        )
                    )
    return errors


@register(Tags.compatibility)
def check_async_settings(app_configs=None, **kwargs):
    """How async endpoints run calls: the batch concurrency, the sync methods' threads, the timeout."""
    errors = []
    concurrency = jsonrpc_settings.ASYNC_CONCURRENCY
    if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
        errors.append(
            Error(
                "JSONRPC['ASYNC_CONCURRENCY'] must be a positive number of calls or None, not %r." % (concurrency,),
                id="jsonrpc_app.E070",
            )
        )
    threads = jsonrpc_settings.SYNC_METHOD_THREADS
    if type(threads) is not int or threads < 1:
        errors.append(
            Error(
                "JSONRPC['SYNC_METHOD_THREADS'] must be a positive number of threads, not %r." % (threads,),
                id="jsonrpc_app.E071",
            )
        )
    timeout = jsonrpc_settings.METHOD_TIMEOUT
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        errors.append(
            Error(
                "JSONRPC['METHOD_TIMEOUT'] must be a positive number of seconds or None, not %r." % (timeout,),
                id="jsonrpc_app.E072",
            )
        )
    sensitive = jsonrpc_settings.SYNC_METHOD_THREAD_SENSITIVE
    if not isinstance(sensitive, bool):
        errors.append(
            Error(
                "JSONRPC['SYNC_METHOD_THREAD_SENSITIVE'] must be True or False, not %r." % (sensitive,),
                id="jsonrpc_app.E073",
            )
        )
    return errors
