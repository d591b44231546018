"""
The one executor: run the calls of a parsed envelope for a caller and
return the responses to send plus what the call log needs.

HTTP, the admin's "try it", replay, the CLI and tests all come through
``execute()``; nothing else runs a method. Each call goes through the same
steps, each a function of its own: look the method up, check who may call
it, bind the params, call, map an exception to an error object.
"""

import logging
import time
import traceback

from . import protocol
from .conf import jsonrpc_settings
from .exceptions import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    JsonRpcError,
)

logger = logging.getLogger("jsonrpc_app")

_perf = time.perf_counter
METHOD_NOT_FOUND_OBJECT = {"code": METHOD_NOT_FOUND, "message": "Method not found"}


class CallRecord:
    """What happened to one element of an envelope, for the call log."""

    __slots__ = (
        "index",
        "method",
        "id",
        "is_notification",
        "params",
        "result",
        "error",
        "traceback",
        "duration",
        "log",
        "sensitive_params",
    )

    def __init__(self, item):
        self.index = item.index
        self.method = item.method
        self.id = item.id
        self.is_notification = item.is_notification
        self.params = item.params
        self.result = None
        self.error = None
        self.traceback = None
        self.duration = 0.0
        self.log = True
        self.sensitive_params = ()


class _NotFound(JsonRpcError):
    code = METHOD_NOT_FOUND
    message = "Method not found"


_METHOD_NOT_FOUND = _NotFound()


def check_permissions(method, context):
    """Raise a JsonRpcError if the caller may not call ``method``."""
    from .permissions import check_method_permissions

    check_method_permissions(method, context)


def handle_exception(exc, method=None, context=None):
    """
    Map an exception raised while running a call to (error object, traceback).

    JsonRpcError passes through as it is; DRF and Django errors map to their
    JSON-RPC codes; anything else is an internal error, logged with its
    traceback, whose text reaches the client only if EXPOSE_EXCEPTIONS is on.
    """
    if isinstance(exc, JsonRpcError):
        return exc.as_dict(), None
    mapped = _map_framework_exception(exc)
    if mapped is not None:
        return mapped.as_dict(), None
    tb = "".join(traceback.format_exception(exc))
    logger.error(
        "Internal error in JSON-RPC method %s",
        getattr(method, "name", "?"),
        exc_info=exc,
    )
    error = {"code": INTERNAL_ERROR, "message": "Internal error"}
    if jsonrpc_settings.EXPOSE_EXCEPTIONS:
        error["data"] = {"type": type(exc).__name__, "message": str(exc), "traceback": tb}
    return error, tb


def _map_framework_exception(exc):
    from .permissions import map_exception

    return map_exception(exc)


def call(item, context, record=None):
    """Run one valid request; return its response dict (None for a notification)."""
    method = None
    try:
        method = context.registry._registry.get(item.method)
        if method is None:
            raise _METHOD_NOT_FOUND
        if record is not None:
            record.log = method.log
            record.sensitive_params = method.sensitive_params
        if method.guarded or not method.enabled:
            check_permissions(method, context)
        args, kwargs = method.binder.bind(item.params, context)
        if method.params_serializer is not None:
            args, kwargs = _validate_with_serializer(method, args, kwargs, context)
        result = method.func(*args, **kwargs)
        if method.result_serializer is not None:
            result = _serialize_result(method, result, context)
    except Exception as exc:
        error, tb = handle_exception(exc, method, context)
        if record is not None:
            record.error = error
            record.traceback = tb
        if item.is_notification:
            return None
        return {"jsonrpc": "2.0", "error": error, "id": item.id}
    if record is not None:
        record.result = result
    if item.is_notification:
        return None
    return {"jsonrpc": "2.0", "result": result, "id": item.id}


def _validate_with_serializer(method, args, kwargs, context):
    from .serializers import validate_params

    return validate_params(method, args, kwargs, context)


def _serialize_result(method, result, context):
    from .serializers import serialize_result

    return serialize_result(method, result, context)


def execute(envelope, context):
    """
    Run every call of ``envelope``; return (response, records).

    ``response`` is what to send: a dict, a list of dicts, or None when there
    is nothing to answer. ``records`` is a list of CallRecord, or None when
    ``context.log`` is off.
    """
    if envelope.error is not None:
        return envelope.error_response(), ([] if context.log else None)
    log = context.log
    responses = []
    if not log:
        # The loop without a call log: nothing to time or record per call.
        append = responses.append
        Request = protocol.Request
        for item in envelope.items:
            response = call(item, context) if type(item) is Request else item.response()
            if response is not None:
                append(response)
        if envelope.is_batch:
            return (responses or None), None
        return (responses[0] if responses else None), None
    records = []
    for item in envelope.items:
        record = CallRecord(item)
        if type(item) is protocol.Request:
            start = _perf()
            response = call(item, context, record)
            record.duration = _perf() - start
        else:
            response = item.response()
            record.error = item.error
            record.params = item.value
        records.append(record)
        if response is not None:
            responses.append(response)
    if envelope.is_batch:
        return (responses or None), records
    return (responses[0] if responses else None), records
