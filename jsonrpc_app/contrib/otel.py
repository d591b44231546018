"""
OpenTelemetry for JSON-RPC calls (extra ``jsonrpc-app[otel]``): one SERVER
span per call and a call duration histogram, after the OpenTelemetry
semantic conventions for JSON-RPC.

Enable it with::

    JSONRPC = {"OBSERVERS": ["jsonrpc_app.contrib.otel.OpenTelemetryObserver"]}

The span is started in the current context, so it is a child of the HTTP
request's span when Django is instrumented (``opentelemetry-instrumentation-django``),
and it is the current span while the method runs (the method's own spans and
database spans are its children). It is named after the method; a method name
the registry does not know is not used as a name (it would make one span name
per typo): such a span is named ``jsonrpc``.

Which conventions (read once, from ``OTEL_SEMCONV_STABILITY_OPT_IN``, a
comma-separated list, as the OpenTelemetry instrumentations do):

- default (neither value): the long-published ones (semantic conventions
  v1.37.0 and before): ``rpc.system``, ``rpc.method``, ``rpc.jsonrpc.version``,
  ``rpc.jsonrpc.request_id``, ``rpc.jsonrpc.error_code``,
  ``rpc.jsonrpc.error_message``; histogram ``rpc.server.duration`` in ms;
- ``rpc``: only the new ones (v1.45.0): ``rpc.system.name``, ``rpc.method``
  (``_OTHER`` plus ``rpc.method_original`` for a name the registry does not
  know), ``jsonrpc.protocol.version``, ``jsonrpc.request.id``,
  ``rpc.status_code`` and ``error.type`` (the error code as a string);
  histogram ``rpc.server.call.duration`` in seconds;
- ``rpc/dup``: both (``rpc/dup`` wins over ``rpc``).

Every JSON-RPC error sets the span's status to ERROR (described by the error
message). With no tracer provider and no meter provider configured (the API
alone), the observer stays out of the way: the dispatcher does not even call
it; it looks again for a provider at most once a second (``recheck_interval``).
"""

import os
import threading
import time

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode

from ..observe import Observer
from ..protocol import VERSION

OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
# The two schemas emitted: the last release with the old RPC conventions, and
# the release whose RPC conventions the "rpc" opt-in emits.
OLD_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
NEW_SCHEMA_URL = "https://opentelemetry.io/schemas/1.45.0"

SYSTEM = "jsonrpc"
OTHER = "_OTHER"
# rpc.server.call.duration's advised bucket boundaries, in seconds (v1.45.0).
NEW_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)

DEFAULT, NEW, DUP = "default", "rpc", "rpc/dup"

_perf = time.perf_counter


def stability_mode(value=None):
    """The RPC conventions asked for by ``value`` (default: the environment): "default", "rpc" or "rpc/dup"."""
    if value is None:
        value = os.environ.get(OPT_IN_ENV, "")
    opted = {part.strip() for part in value.split(",")}
    if DUP in opted:
        return DUP
    if NEW in opted:
        return NEW
    return DEFAULT


def _package_version():
    try:
        from importlib.metadata import version

        return version("jsonrpc-app")
    except Exception:
        return None


class OpenTelemetryObserver(Observer):
    """
    Spans and the duration histogram of every call.

    ``tracer_provider`` and ``meter_provider`` default to the global ones
    (set by the SDK or ``opentelemetry-instrument``); ``mode`` to the one
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for (see ``stability_mode()``).
    """

    def __init__(self, tracer_provider=None, meter_provider=None, mode=None):
        self.mode = stability_mode() if mode is None else stability_mode(mode)
        self.old = self.mode != NEW
        self.new = self.mode != DEFAULT
        self.schema_url = OLD_SCHEMA_URL if self.mode == DEFAULT else NEW_SCHEMA_URL
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._ready = False
        self._next_check = 0.0
        self._lock = threading.Lock()
        if tracer_provider is not None or meter_provider is not None:
            self._setup()

    # -- when to observe ------------------------------------------------------

    # While no provider is configured, how often to look again, in seconds:
    # the look costs about as much as a call, the clock a tenth of it.
    recheck_interval = 1.0

    def active(self):
        """False while neither a tracer nor a meter provider is configured (nothing would be recorded)."""
        if self._ready:
            return True
        now = _perf()
        if now < self._next_check:
            return False
        self._next_check = now + self.recheck_interval
        if isinstance(trace.get_tracer_provider(), ProxyTracerProvider) and _is_proxy(metrics.get_meter_provider()):
            return False
        self._setup()
        return True

    def _setup(self):
        with self._lock:
            if not self._ready:
                self._make_instruments()

    def _make_instruments(self):
        version = _package_version()
        self.tracer = trace.get_tracer(
            "jsonrpc_app", version, tracer_provider=self._tracer_provider, schema_url=self.schema_url
        )
        meter = metrics.get_meter("jsonrpc_app", version, meter_provider=self._meter_provider, schema_url=self.schema_url)
        self.old_duration = self.new_duration = None
        if self.old:
            self.old_duration = meter.create_histogram(
                "rpc.server.duration", unit="ms", description="Measures the duration of inbound RPC."
            )
        if self.new:
            self.new_duration = meter.create_histogram(
                "rpc.server.call.duration",
                unit="s",
                description="Measures the duration of an incoming Remote Procedure Call (RPC).",
                explicit_bucket_boundaries_advisory=NEW_DURATION_BUCKETS,
            )
        self._ready = True

    # -- the hooks --------------------------------------------------------------

    def start(self, request, context):
        name = request.method
        known = name in context.registry
        attributes = {}
        if self.old:
            attributes["rpc.system"] = SYSTEM
            attributes["rpc.method"] = name
            attributes["rpc.jsonrpc.version"] = VERSION
            if not request.is_notification:
                # "Use empty string in case of null value. Omit entirely if this is a notification."
                attributes["rpc.jsonrpc.request_id"] = "" if request.id is None else str(request.id)
        if self.new:
            attributes["rpc.system.name"] = SYSTEM
            if known:
                attributes["rpc.method"] = name
            else:
                attributes["rpc.method"] = OTHER
                attributes["rpc.method_original"] = name
            attributes["jsonrpc.protocol.version"] = VERSION
            if request.id is not None:
                # "SHOULD NOT capture this attribute when the id is null or omitted."
                attributes["jsonrpc.request.id"] = str(request.id)
        span = self.tracer.start_span(name if known else SYSTEM, kind=SpanKind.SERVER, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        return span, token, known

    def end(self, token, request, context, outcome, duration):
        span, attached, known = token
        error = outcome.error
        if error is not None:
            self._set_error(span, error)
        otel_context.detach(attached)
        span.end()
        method = request.method if known else OTHER
        if self.old:
            attributes = {"rpc.system": SYSTEM, "rpc.method": method}
            if error is not None:
                attributes["rpc.jsonrpc.error_code"] = error.get("code")
            self.old_duration.record(duration * 1000.0, attributes)
        if self.new:
            attributes = {"rpc.system.name": SYSTEM, "rpc.method": method}
            if error is not None:
                attributes["rpc.status_code"] = attributes["error.type"] = str(error.get("code"))
            self.new_duration.record(duration, attributes)

    def invalid(self, item, context):
        """A span named ``jsonrpc`` for an element answered -32600 (no method, no duration metric)."""
        attributes = {}
        if self.old:
            attributes["rpc.system"] = SYSTEM
        if self.new:
            attributes["rpc.system.name"] = SYSTEM
        span = self.tracer.start_span(SYSTEM, kind=SpanKind.SERVER, attributes=attributes)
        self._set_error(span, item.error)
        span.end()

    def _set_error(self, span, error):
        code = error.get("code")
        message = error.get("message")
        if self.old:
            span.set_attribute("rpc.jsonrpc.error_code", code)
            if isinstance(message, str):
                span.set_attribute("rpc.jsonrpc.error_message", message)
        if self.new:
            span.set_attribute("rpc.status_code", str(code))
            span.set_attribute("error.type", str(code))
        span.set_status(Status(StatusCode.ERROR, message if isinstance(message, str) else None))


def _is_proxy(meter_provider):
    # The API's stand-in until a real MeterProvider is set; not exported by
    # name, so told apart from the SDK's (and any other) by what it lacks.
    return type(meter_provider).__name__ == "_ProxyMeterProvider"
