"""
Prometheus metrics of JSON-RPC calls (extra ``jsonrpc-app[prometheus]``).

Enable it with::

    JSONRPC = {"OBSERVERS": ["jsonrpc_app.contrib.prometheus.PrometheusObserver"]}

Three series families, registered in ``prometheus_client``'s default
registry (so the ``/metrics`` view of django-prometheus or of
``prometheus_client`` shows them) or in ``JSONRPC["PROMETHEUS_REGISTRY"]``:

- ``jsonrpc_calls_total{method}``: calls, notifications included;
- ``jsonrpc_errors_total{method, code}``: calls answered with an error, by code;
- ``jsonrpc_call_duration_seconds{method}``: a histogram of the calls' durations.

The ``method`` label only takes names the method registries know: any other
name a client sends becomes ``<unknown>``, and an element of a body that is
no valid request (-32600) ``<invalid>`` (counted as a call and an error, with
no duration). A client can thus not grow the number of series by sending
made-up method names.
"""

import threading

import prometheus_client
from django.utils.module_loading import import_string

from ..conf import jsonrpc_settings
from ..observe import Observer

UNKNOWN = "<unknown>"
INVALID = "<invalid>"

_lock = threading.Lock()
# The metric families of each registry, made once: a registry refuses a second
# family of the same name (and settings, hence observers, can be made anew).
_families = {}


def families(registry):
    """(calls, errors, duration) of ``registry``, made on first use."""
    key = id(registry)
    found = _families.get(key)
    if found is not None and found[0] is registry:
        return found[1]
    with _lock:
        found = _families.get(key)
        if found is not None and found[0] is registry:
            return found[1]
        made = (
            prometheus_client.Counter(
                "jsonrpc_calls", "JSON-RPC calls, by method.", ["method"], registry=registry
            ),
            prometheus_client.Counter(
                "jsonrpc_errors", "JSON-RPC calls answered with an error, by method and code.", ["method", "code"],
                registry=registry,
            ),
            prometheus_client.Histogram(
                "jsonrpc_call_duration_seconds", "Duration of JSON-RPC calls, by method.", ["method"],
                registry=registry,
            ),
        )
        _families[key] = (registry, made)
        return made


def configured_registry():
    """The registry of ``JSONRPC["PROMETHEUS_REGISTRY"]`` (a dotted path or the object), else the default one."""
    value = jsonrpc_settings.PROMETHEUS_REGISTRY
    if value is None:
        return prometheus_client.REGISTRY
    return import_string(value) if isinstance(value, str) else value


class PrometheusObserver(Observer):
    """Counts calls and errors and observes durations, per method; ``registry`` defaults to the setting."""

    def __init__(self, registry=None):
        self.registry = configured_registry() if registry is None else registry
        self.calls, self.errors, self.duration = families(self.registry)
        # Children per label value, to skip .labels()'s lock and lookups on each call.
        self._children = {}
        self._error_children = {}
        self._invalid_calls = None

    def _child(self, method):
        found = self._children.get(method)
        if found is None:
            found = self._children[method] = (self.calls.labels(method), self.duration.labels(method))
        return found

    def _error(self, method, code):
        key = (method, code)
        found = self._error_children.get(key)
        if found is None:
            found = self._error_children[key] = self.errors.labels(method, str(code))
        return found

    def start(self, request, context):
        return None

    def end(self, token, request, context, outcome, duration):
        method = request.method if request.method in context.registry else UNKNOWN
        calls, durations = self._child(method)
        calls.inc()
        durations.observe(duration)
        error = outcome.error
        if error is not None:
            self._error(method, error.get("code")).inc()

    def invalid(self, item, context):
        if self._invalid_calls is None:
            self._invalid_calls = self.calls.labels(INVALID)
        self._invalid_calls.inc()
        self._error(INVALID, item.error.get("code")).inc()
