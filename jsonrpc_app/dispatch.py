"""
The one executor: run the calls of a parsed body for a caller and return
the responses to send plus what the call log needs.

HTTP, the admin's "try it", replay, the CLI and tests all come through
``execute()``; nothing else runs a method. Each call goes through the same
steps: look the method up, check who may call it, bind the params, call,
and turn an exception into its error object (``exceptions.to_error``).
"""

import time

from . import observe, protocol
from .exceptions import MethodNotFound, to_error
from .permissions import check_method_permissions
from .registry import registry as default_registry
from .serializers import serialize_result, validate_params

_perf = time.perf_counter


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


def error_of(exc, method=None):
    """Return (error object, traceback text or None) answering ``exc`` (see exceptions.to_error)."""
    # The JsonRpcError is not kept in the caller's frame: a raised one holds
    # that frame in its traceback, a reference cycle for every error.
    error = to_error(exc, getattr(method, "name", None))
    return error.as_dict(), error.traceback


def run(request, context, record=None):
    """Run one valid Request; return its response dict (None for a notification)."""
    method = None
    try:
        method = context.registry._registry.get(request.method)
        if method is None:
            raise MethodNotFound()
        if record is not None:
            record.log = method.log
            record.sensitive_params = method.sensitive_params
        if method.guarded or not method.enabled:
            check_method_permissions(method, context)
        args, kwargs = method.binder.bind(request.params, context)
        if method.params_serializer is not None:
            args, kwargs = validate_params(method, args, kwargs, context)
        result = method.func(*args, **kwargs)
        if method.result_serializer is not None:
            result = serialize_result(method, result, context)
    except Exception as exc:
        error, tb = error_of(exc, method)
        if record is not None:
            record.error = error
            record.traceback = tb
        if request.is_notification:
            return None
        return protocol.response(request.id, error=error)
    if record is not None:
        record.result = result
    if request.is_notification:
        return None
    return protocol.response(request.id, result)


def execute(parsed, context):
    """
    Run every call of ``parsed`` (a protocol.ParsedBody); return (response, records).

    ``response`` is what to send: a dict, a list of dicts, or None when there
    is nothing to answer. ``records`` is a list of CallRecord, or None when
    ``context.log`` is off. A context without a registry is served by the
    default one.
    """
    if context.registry is None:
        context.registry = default_registry
    if parsed.error is not None:
        return parsed.error_response(), ([] if context.log else None)
    responses = []
    Request = protocol.Request
    # run itself unless observers are configured (jsonrpc_app.observe).
    call = observe.wrap(run)
    if not context.log:
        # The loop without a call log: nothing to time or record per call.
        append = responses.append
        for item in parsed.items:
            if type(item) is Request:
                response = call(item, context)
            else:
                response = item.response()
                if call is not run:
                    call.invalid(item, context)
            if response is not None:
                append(response)
        records = None
    else:
        records = []
        for item in parsed.items:
            record = CallRecord(item)
            if type(item) is Request:
                start = _perf()
                response = call(item, context, record)
                record.duration = _perf() - start
            else:
                response = item.response()
                if call is not run:
                    call.invalid(item, context)
                record.error = item.error
                record.params = item.value
            records.append(record)
            if response is not None:
                responses.append(response)
    if parsed.is_batch:
        return (responses or None), records
    return (responses[0] if responses else None), records
