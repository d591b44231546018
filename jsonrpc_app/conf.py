"""
Settings for jsonrpc_app, all in one dict in the project's settings::

    JSONRPC = {
        "LOG_POLICY": "errors",
        "MAX_BATCH_SIZE": 100,
    }

Read them as ``from jsonrpc_app.conf import jsonrpc_settings`` and
``jsonrpc_settings.MAX_BATCH_SIZE``. Keys left out take the defaults below;
an unknown key is reported by the system check ``jsonrpc_app.E001``.
"""

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

DEFAULTS = {
    # Call log: "all", "errors" or "none".
    "LOG_POLICY": "all",
    # The database alias the call log is written to (see jsonrpc_app.routers).
    "LOG_DATABASE": "default",
    # Keys stored as "********" in logged params and bodies, case-insensitive, at any depth.
    "SENSITIVE_KEYS": ["password", "token", "secret", "api_key", "authorization"],
    # Logged params, results and bodies larger than this many bytes are truncated.
    "LOG_MAX_VALUE_BYTES": 64 * 1024,
    # Include exception text and traceback in -32603 responses (development only).
    "EXPOSE_EXCEPTIONS": False,
    # Hard limits against hostile input, each answered with one -32600 error.
    # Largest body read, in bytes (Django's DATA_UPLOAD_MAX_MEMORY_SIZE applies
    # too when smaller); None: no limit of our own.
    "MAX_BODY_SIZE": 1024 * 1024,
    # Most calls in one batch.
    "MAX_BATCH_SIZE": 1000,
    # Deepest nesting of arrays and objects, the request object being level 1.
    "MAX_DEPTH": 64,
    # DRF policies of the endpoint; None means DRF's own defaults (REST_FRAMEWORK).
    "AUTHENTICATION_CLASSES": None,
    "PERMISSION_CLASSES": None,
    "THROTTLE_CLASSES": None,
    # The "info" object of the OpenRPC document served by rpc.discover.
    "OPENRPC_INFO": {"title": "JSON-RPC API", "version": "1.0.0"},
    # Who writes the call log of HTTP calls: "journal" (the request appends one
    # line to a journal, and a loader writes the lines to the database in bulk:
    # jsonrpc_app.log.journal and .loader), "request" (the request's thread, before
    # the response is sent) or "background" (a thread of each process, grouping
    # the envelopes of many requests into one transaction; see jsonrpc_app.log.writer).
    # The admin's try-it and replay, and the CLI, always write at once.
    "LOG_WRITER": "journal",
    # "journal": where the journal is kept, "file" (LOG_JOURNAL_DIR) or "redis"
    # (a Redis Stream: LOG_JOURNAL_REDIS_URL, LOG_JOURNAL_REDIS_STREAM).
    "LOG_JOURNAL": "file",
    # The journal's directory. None: BASE_DIR / "journal" when the project defines
    # BASE_DIR, else "jsonrpc_app-journal" in the system's temp directory.
    "LOG_JOURNAL_DIR": None,
    # When appended lines reach the disk: "always" (fsync before answering),
    # "interval" (a thread fsyncs every LOG_JOURNAL_FSYNC_INTERVAL seconds) or
    # "never" (the kernel decides). Only a power loss or kernel crash loses what
    # was not fsync'd; a killed process loses nothing.
    "LOG_JOURNAL_FSYNC": "interval",
    # Seconds between those fsyncs: the power-loss window, as Redis's
    # appendfsync everysec. 0.05 cost a single call's request ~20% more CPU
    # (its writes wait on the pages being written back).
    "LOG_JOURNAL_FSYNC_INTERVAL": 1.0,
    # A process starts a new journal file past this many bytes (the loader
    # deletes a sealed file once it is loaded).
    "LOG_JOURNAL_ROTATE_BYTES": 64 * 1024 * 1024,
    # Bytes waiting to be loaded past which the journal is "full": then
    # LOG_JOURNAL_FULL says what happens, "warn" (keep appending, a WARNING on
    # the jsonrpc_app logger once a minute) or "refuse" (calls are answered
    # with the server error -32050 until the loader catches up). Nothing
    # appended is ever dropped.
    "LOG_JOURNAL_MAX_BYTES": 1024 * 1024 * 1024,
    "LOG_JOURNAL_FULL": "warn",
    "LOG_JOURNAL_REDIS_URL": "redis://127.0.0.1:6379/0",
    "LOG_JOURNAL_REDIS_STREAM": "jsonrpc_app:journal",
    # A pending entry of a loader that died is taken over after this many seconds.
    "LOG_JOURNAL_REDIS_CLAIM_IDLE": 30.0,
    # Who loads the journal: "thread" (a thread of each process) or "command"
    # (only manage.py jsonrpc_log_loader; the workers only append).
    "LOG_LOADER": "thread",
    # Seconds between the loader thread's looks at the journal.
    "LOG_LOADER_INTERVAL": 0.2,
    # How far below its process's request threads the loader thread runs, as
    # nice(1) counts (0-19; Linux, where a thread has a priority of its own;
    # elsewhere not applied): on a busy host it takes the CPU they leave.
    "LOG_LOADER_NICE": 19,
    # Most envelopes per loader transaction.
    "LOG_LOADER_CHUNK": 1000,
    # PostgreSQL: load with COPY (False: the multi-row INSERTs of the other databases).
    "LOG_LOADER_COPY": True,
    # Usage rollups (jsonrpc_app.log.rollup): per-method counts, errors and
    # duration histograms per minute, per hour and for all time, maintained in
    # the transaction that writes the calls; the usage pages read only them.
    # False: not maintained (the pages then show what was rolled up before).
    "USAGE_ROLLUPS": True,
    # Minute rows older than this many days are not rebuilt and are deleted by
    # ``manage.py jsonrpc_rollup --trim``; None: kept for ever.
    "USAGE_MINUTE_DAYS": 7,
    # "background": the longest an envelope waits in memory before its group is written.
    "LOG_WRITER_MAX_DELAY": 0.05,
    # "background": the most envelopes waiting in memory; past that, requests
    # write their own envelope as "request" does.
    "LOG_WRITER_QUEUE_SIZE": 1000,
    # Directory of the call log's spool, used while the log database cannot be
    # written (see jsonrpc_app.log.spool). None: BASE_DIR / "spool" when the project
    # defines BASE_DIR, else "jsonrpc_app-spool" in the system's temp directory.
    "SPOOL_DIR": None,
    # Seconds between replays of a non-empty spool by each process's background
    # thread; None or 0: no thread, the next successful write replays it.
    "SPOOL_FLUSH_INTERVAL": 5.0,
    # Seconds after a connection failure during which envelopes go straight to
    # the spool, so that clients do not wait on a database that is down.
    "SPOOL_RETRY_DELAY": 1.0,
    # Async (jsonrpc_app.views.AsyncJsonRpcView, and async def methods anywhere):
    # the most calls of one batch running at once; None: no limit.
    "ASYNC_CONCURRENCY": 10,
    # How the async endpoint runs a sync method: True (thread-sensitive, in the
    # one thread Django keeps for sync code, as the ORM needs) or False (in a
    # thread pool of SYNC_METHOD_THREADS threads, for thread-safe methods, which
    # then run concurrently). A method's own thread_sensitive= option wins.
    "SYNC_METHOD_THREAD_SENSITIVE": True,
    "SYNC_METHOD_THREADS": 10,
    # Seconds after which an async def method's call is cancelled and answered
    # with -32008 Call timed out (a method's own timeout= wins); None: no limit.
    "METHOD_TIMEOUT": None,
    # Observers of every call (see jsonrpc_app.observe): dotted paths to classes
    # (made once, without arguments) or objects, e.g.
    # "jsonrpc_app.contrib.otel.OpenTelemetryObserver" (extra [otel]) or
    # "jsonrpc_app.contrib.prometheus.PrometheusObserver" (extra [prometheus]).
    "OBSERVERS": [],
    # The prometheus_client CollectorRegistry the Prometheus observer registers
    # its metrics in (a dotted path or the object); None: prometheus_client.REGISTRY.
    "PROMETHEUS_REGISTRY": None,
}

# Settings whose values are dotted paths to import.
IMPORT_STRINGS = {"AUTHENTICATION_CLASSES", "PERMISSION_CLASSES", "THROTTLE_CLASSES"}


def _import(value):
    if value is None:
        return None
    if isinstance(value, str):
        return import_string(value)
    if isinstance(value, (list, tuple)):
        return [import_string(v) if isinstance(v, str) else v for v in value]
    return value


class JsonRpcSettings:
    """Attribute access to JSONRPC merged over DEFAULTS, cached until settings change."""

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        self.defaults = defaults or DEFAULTS
        self._cached = set()

    @property
    def user_settings(self) -> dict[str, Any]:
        if not hasattr(self, "_user_settings"):
            self._user_settings = getattr(settings, "JSONRPC", None) or {}
        return self._user_settings

    def __getattr__(self, attr: str) -> Any:
        if attr not in self.defaults:
            raise AttributeError("Invalid jsonrpc_app setting: %r" % attr)
        try:
            value = self.user_settings[attr]
        except KeyError:
            value = self.defaults[attr]
        if attr in IMPORT_STRINGS:
            value = _import(value)
        self._cached.add(attr)
        setattr(self, attr, value)
        return value

    def reload(self) -> None:
        for attr in self._cached:
            delattr(self, attr)
        self._cached.clear()
        if hasattr(self, "_user_settings"):
            delattr(self, "_user_settings")


jsonrpc_settings: JsonRpcSettings = JsonRpcSettings(DEFAULTS)


def reload_jsonrpc_settings(*, setting: str, **kwargs: Any) -> None:
    """Receiver of Django's ``setting_changed`` (connected in ``AppConfig.ready()``)."""
    if setting == "JSONRPC":
        jsonrpc_settings.reload()
