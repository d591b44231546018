"""
The one executor: run the calls of a parsed body for a caller and return
the responses to send plus what the call log needs.

HTTP, the admin's "try it", replay, the CLI and tests all come through
``execute()``; nothing else runs a method. Each call goes through the same
steps: look the method up, check who may call it, bind the params, call,
and turn an exception into its error object (``exceptions.to_error``).
"""

import asyncio
import threading
import time

from asgiref.sync import async_to_sync, sync_to_async

from . import aio, observe, protocol
from .conf import jsonrpc_settings
from .exceptions import CallCancelled, MethodNotFound, to_error
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


# What _steps() yields to its driver: work that the async executor must not
# run on the event loop (it may use the database), or the method's call.
_CHECK = 0
_CALL = 1


def _steps(request, context, record):
    """
    The per-call steps, once for both executors: look the method up, check who
    may call it, bind the params, call, map the error, fill ``record``.

    A generator: it yields ``(_CHECK, function, args)`` for each check that may
    block (permissions, serializers) and ``(_CALL, method, (args, kwargs))`` for
    the call itself, and is sent back the value (or thrown the exception); the
    sync executor (``run``) runs them in place, the async one (``arun``) awaits
    them. It returns the response dict, None for a notification.
    """
    method = None
    try:
        method = context.registry._registry.get(request.method)
        if method is None:
            raise MethodNotFound()
        if record is not None:
            record.log = method.log
            record.sensitive_params = method.sensitive_params
        if method.guarded or not method.enabled:
            yield _CHECK, check_method_permissions, (method, context)
        args, kwargs = method.binder.bind(request.params, context)
        if method.params_serializer is not None:
            args, kwargs = yield _CHECK, validate_params, (method, args, kwargs, context)
        result = yield _CALL, method, (args, kwargs)
        if method.result_serializer is not None:
            result = yield _CHECK, serialize_result, (method, result, context)
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


def run(request, context, record=None):
    """Run one valid Request; return its response dict (None for a notification)."""
    steps = _steps(request, context, record)
    try:
        kind, target, args = steps.send(None)
        while True:
            try:
                if kind == _CALL:
                    if target.is_async:
                        value = async_to_sync(aio.call_async)(target, args[0], args[1])
                    else:
                        value = target.func(*args[0], **args[1])
                else:
                    value = target(*args)
            except Exception as exc:
                kind, target, args = steps.throw(exc)
            else:
                kind, target, args = steps.send(value)
    except StopIteration as done:
        return done.value


async def arun(request, context, record=None):
    """``run()`` awaited: async methods awaited, sync ones and the checks run off the event loop."""
    steps = _steps(request, context, record)
    try:
        kind, target, args = steps.send(None)
        while True:
            try:
                if kind == _CALL:
                    if target.is_async:
                        value = await aio.call_async(target, args[0], args[1])
                    else:
                        value = await aio.call_sync(target, args[0], args[1])
                else:
                    value = await aio.in_sync_thread(target, *args)
            except Exception as exc:
                kind, target, args = steps.throw(exc)
            else:
                kind, target, args = steps.send(value)
    except StopIteration as done:
        return done.value


def _has_async_calls(parsed, registry):
    """Whether two or more calls of ``parsed`` are of async def methods (then run together)."""
    if not registry.async_count or not parsed.is_batch:
        return False
    methods = registry._registry
    found = 0
    Request = protocol.Request
    for item in parsed.items:
        if type(item) is Request:
            method = methods.get(item.method)
            if method is not None and method.is_async:
                found += 1
                if found > 1:
                    return True
    return False


def _run_in_order(items, records, context, stop=None):
    """
    Run ``items`` one after another with the sync executor; return their
    responses in order (None where there is nothing to answer).

    ``records`` (one CallRecord per item, or None when the log is off) are
    filled in. ``stop`` (a threading.Event), once set, leaves the items not
    started yet unrun, recorded as -32007 Call cancelled.
    """
    call = observe.wrap(run)  # run itself unless observers are configured (jsonrpc_app.observe)
    Request = protocol.Request
    responses = []
    append = responses.append
    if records is None:
        # The loop without a call log: nothing to time or record per call.
        for item in items:
            if stop is not None and stop.is_set():
                append(None)
            elif type(item) is Request:
                append(call(item, context))
            else:
                append(item.response())
                if call is not run:
                    call.invalid(item, context)
        return responses
    for item, record in zip(items, records):
        if stop is not None and stop.is_set():
            record.error = CallCancelled().as_dict()
            append(None)
        elif type(item) is Request:
            start = _perf()
            append(call(item, context, record))
            record.duration = _perf() - start
        else:
            append(item.response())
            if call is not run:
                call.invalid(item, context)
            record.error = item.error
            record.params = item.value
    return responses


def _finish(parsed, responses, records):
    answers = [r for r in responses if r is not None]
    if parsed.is_batch:
        return (answers or None), records
    return (answers[0] if answers else None), records


def execute(parsed, context):
    """
    Run every call of ``parsed`` (a protocol.ParsedBody); return (response, records).

    ``response`` is what to send: a dict, a list of dicts, or None when there
    is nothing to answer. ``records`` is a list of CallRecord, or None when
    ``context.log`` is off. A context without a registry is served by the
    default one. A batch with several calls of async def methods runs as
    ``aexecute()`` does, in an event loop of its own, so that they run together.
    """
    if context.registry is None:
        context.registry = default_registry
    if parsed.error is not None:
        return parsed.error_response(), ([] if context.log else None)
    if _has_async_calls(parsed, context.registry):
        return async_to_sync(aexecute)(parsed, context)
    items = parsed.items
    records = [CallRecord(item) for item in items] if context.log else None
    return _finish(parsed, _run_in_order(items, records, context), records)


def _awaited(item, methods, thread_sensitive):
    """Whether the async executor awaits ``item`` on its own: an async def method, or a thread-safe sync one."""
    if type(item) is not protocol.Request:
        return False
    method = methods.get(item.method)
    if method is None:
        return False
    if method.is_async:
        return True
    return not (method.thread_sensitive if method.thread_sensitive is not None else thread_sensitive)


async def aexecute(parsed, context):
    """
    ``execute()`` awaited: the calls of a batch run concurrently, their
    responses in the batch's order.

    Calls of async def methods (and of sync methods marked thread-safe) are
    awaited together, at most ASYNC_CONCURRENCY at once; the others (sync
    methods, which Django runs in its one sync thread anyway, unknown methods,
    invalid elements) run in order in that thread, in one hop for all.

    When the task is cancelled (the client went away), the calls still
    running are cancelled, those in the sync thread are let finish and the
    rest left unrun; their records say -32007 Call cancelled, and
    ``aio.Cancelled`` (a CancelledError) carries the records to the caller.
    """
    if context.registry is None:
        context.registry = default_registry
    if parsed.error is not None:
        return parsed.error_response(), ([] if context.log else None)
    items = parsed.items
    records = [CallRecord(item) for item in items] if context.log else None
    methods = context.registry._registry
    sensitive = jsonrpc_settings.SYNC_METHOD_THREAD_SENSITIVE
    awaited, in_thread = [], []
    for i, item in enumerate(items):
        (awaited if _awaited(item, methods, sensitive) else in_thread).append(i)
    answers = [None] * len(items)
    call = observe.awrap(arun)

    started = [False] * len(items)

    async def one(i):
        started[i] = True
        record = records[i] if records is not None else None
        start = _perf()
        try:
            answers[i] = await call(items[i], context, record)
        except asyncio.CancelledError:
            if record is not None:
                record.result = None
                record.error = CallCancelled().as_dict()
            raise
        finally:
            if record is not None:
                record.duration = _perf() - start

    stop = threading.Event()

    async def rest():
        group = [items[i] for i in in_thread]
        group_records = [records[i] for i in in_thread] if records is not None else None
        running = asyncio.ensure_future(
            sync_to_async(_run_in_order, thread_sensitive=True)(group, group_records, context, stop)
        )
        try:
            responses = await asyncio.shield(running)
        except asyncio.CancelledError:
            # A thread cannot be cancelled: the call it runs finishes, the others are left unrun.
            stop.set()
            await running
            raise
        for i, response in zip(in_thread, responses):
            answers[i] = response

    jobs = [one(i) for i in awaited]
    if in_thread:
        jobs.append(rest())
    try:
        if len(jobs) == 1:
            await jobs[0]
        else:
            await aio.gather_limited(jobs, jsonrpc_settings.ASYNC_CONCURRENCY)
    except asyncio.CancelledError:
        if records is not None:
            for i in awaited:
                if not started[i]:
                    records[i].error = CallCancelled().as_dict()
        raise aio.Cancelled(records) from None
    return _finish(parsed, answers, records)
