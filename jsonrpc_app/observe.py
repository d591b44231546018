"""
Observers of calls: the one hook tracing and metrics hang on.

An observer sees every call the dispatcher runs, around the whole per-call
step (lookup, permission, binding, the method, the error mapping)::

    class Observer:
        def active(self) -> bool: ...              # asked once per envelope
        def start(self, request, context): ...     # -> a token handed to end()
        def end(self, token, request, context, outcome, duration): ...
        def invalid(self, item, context): ...      # an element that is no request

``request`` is the ``protocol.Request``, ``context`` the ``CallContext``,
``outcome`` has ``.error`` (the error object sent, or that a notification
would have got; None on success) and ``.result``; ``duration`` is in seconds.
``invalid()`` is told of each element of a body that is not a valid request
object (answered -32600 before any method is looked up); a body answered by
one error as a whole (parse error, empty or oversized batch, refused
authentication) is not a call and is left to the HTTP instrumentation.

Observers are listed in ``JSONRPC["OBSERVERS"]``: dotted paths to classes
(made once, without arguments) or to objects, or the objects themselves.
The bundled ones are ``jsonrpc_app.contrib.otel.OpenTelemetryObserver``
(extra ``[otel]``) and ``jsonrpc_app.contrib.prometheus.PrometheusObserver``
(extra ``[prometheus]``).

Cost: with no observer configured the dispatcher pays one check per
envelope (``wrap()`` hands back ``run`` itself), nothing per call. An
observer whose ``active()`` is False for now (OpenTelemetry without a
provider) is left out for that envelope. An observer that raises is logged
and never changes the answer.
"""

import logging
import time

from django.core import checks
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from .conf import jsonrpc_settings

logger = logging.getLogger("jsonrpc_app.observe")

_perf = time.perf_counter

# The loaded observers, or None until the first envelope after a change of JSONRPC.
_observers = None


class Observer:
    """A base for observers: every hook does nothing; override the ones you need."""

    def active(self):
        """Whether to observe the calls of the envelope about to run (asked once per envelope)."""
        return True

    def start(self, request, context):
        """A call is about to run; return a token for ``end()``."""
        return None

    def end(self, token, request, context, outcome, duration):
        """The call ran (``outcome.error`` is None on success); ``duration`` in seconds."""

    def invalid(self, item, context):
        """``item`` (a protocol.InvalidItem) was answered with ``item.error`` without any lookup."""


class Outcome:
    """What ``dispatch.run()`` writes of a call when the call log is off (a CallRecord's fields)."""

    __slots__ = ("result", "error", "traceback", "log", "sensitive_params")

    def __init__(self):
        self.result = None
        self.error = None
        self.traceback = None
        self.log = True
        self.sensitive_params = ()


def _build(entry):
    value = import_string(entry) if isinstance(entry, str) else entry
    return value() if isinstance(value, type) else value


def load():
    """Load ``JSONRPC["OBSERVERS"]``; return the tuple of observers (entries that fail are logged and left out)."""
    global _observers
    found = []
    for entry in jsonrpc_settings.OBSERVERS or ():
        try:
            found.append(_build(entry))
        except Exception:
            logger.exception("jsonrpc_app: the observer %r could not be loaded; calls go on without it", entry)
    _observers = tuple(found)
    return _observers


def observers():
    """The configured observers (a tuple, empty when there are none)."""
    return _observers if _observers is not None else load()


def reset(*, setting=None, **kwargs):
    """Forget the loaded observers (``setting_changed`` receiver: JSONRPC changed)."""
    global _observers
    if setting is None or setting == "JSONRPC":
        _observers = None


setting_changed.connect(reset, dispatch_uid="jsonrpc_app.observe.reset")


def wrap(run):
    """
    Return the per-call step to use for one envelope: ``run`` itself when no
    observer is configured or active, else ``run`` wrapped by the observers.

    The wrapper takes ``(request, context, record=None)`` as ``run`` does and
    has an ``invalid(item, context)`` attribute for the elements that are no
    valid request.
    """
    found = _observers if _observers is not None else load()
    if not found:
        return run
    active = [o for o in found if _is_active(o)]
    if not active:
        return run

    def observed(request, context, record=None):
        return call(active, run, request, context, record)

    observed.invalid = lambda item, context: invalid(active, item, context)
    return observed


def _is_active(observer):
    active = getattr(observer, "active", None)
    if active is None:
        return True
    try:
        return active()
    except Exception:
        logger.exception("jsonrpc_app: observer %r failed in active()", observer)
        return False


_FAILED = object()


def _start(observers, request, context):
    tokens = []
    for observer in observers:
        try:
            tokens.append(observer.start(request, context))
        except Exception:
            logger.exception("jsonrpc_app: observer %r failed in start()", observer)
            tokens.append(_FAILED)
    return tokens


def _end(observers, tokens, request, context, outcome, duration):
    for i in range(len(observers) - 1, -1, -1):
        token = tokens[i]
        if token is _FAILED:
            continue
        try:
            observers[i].end(token, request, context, outcome, duration)
        except Exception:
            logger.exception("jsonrpc_app: observer %r failed in end()", observers[i])


def call(observers, run, request, context, record=None):
    """Run ``run(request, context, record)`` seen by ``observers``; return its response."""
    outcome = record if record is not None else Outcome()
    tokens = _start(observers, request, context)
    start = _perf()
    try:
        return run(request, context, outcome)
    finally:
        _end(observers, tokens, request, context, outcome, _perf() - start)


async def acall(observers, arun, request, context, record=None):
    """``call()`` for an async per-call step: ``await arun(request, context, record)``."""
    outcome = record if record is not None else Outcome()
    tokens = _start(observers, request, context)
    start = _perf()
    try:
        return await arun(request, context, outcome)
    finally:
        _end(observers, tokens, request, context, outcome, _perf() - start)


def awrap(arun):
    """``wrap()`` for an async per-call step (a coroutine function taking ``(request, context, record=None)``)."""
    found = _observers if _observers is not None else load()
    active = [o for o in found if _is_active(o)]
    if not active:
        return arun

    async def observed(request, context, record=None):
        return await acall(active, arun, request, context, record)

    observed.invalid = lambda item, context: invalid(active, item, context)
    return observed


def invalid(observers, item, context):
    """Tell ``observers`` of ``item``, an element of a body that is no valid request (a protocol.InvalidItem)."""
    for observer in observers:
        report = getattr(observer, "invalid", None)
        if report is None:
            continue
        try:
            report(item, context)
        except Exception:
            logger.exception("jsonrpc_app: observer %r failed in invalid()", observer)


@checks.register(checks.Tags.compatibility)
def check_observers(app_configs=None, **kwargs):
    """jsonrpc_app.E060: an entry of JSONRPC["OBSERVERS"] cannot be loaded (e.g. its extra is not installed)."""
    errors = []
    for entry in jsonrpc_settings.OBSERVERS or ():
        try:
            _build(entry)
        except Exception as exc:
            hint = None
            if isinstance(exc, ImportError) and isinstance(entry, str) and entry.startswith("jsonrpc_app.contrib."):
                extra = entry.split(".")[2]
                hint = 'pip install "jsonrpc-app[%s]"' % extra
            errors.append(
                checks.Error(
                    "JSONRPC['OBSERVERS'] entry %r cannot be loaded: %s" % (entry, exc),
                    hint=hint,
                    id="jsonrpc_app.E060",
                )
            )
    return errors
