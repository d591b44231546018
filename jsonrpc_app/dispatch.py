"""
The one executor: run the calls of a parsed body for a caller and return
the responses to send plus what the call log needs.

HTTP, the admin's "try it", replay, the CLI and tests all come through
``execute()``; nothing else runs a method. Each call goes through the same
steps: look the method up, check who may call it, bind the params, call,
and turn an exception into its error object (``exceptions.to_error``).
"""

import asyncio
import time
from operator import attrgetter

from asgiref.sync import async_to_sync

from . import aio, observe, protocol
from .conf import jsonrpc_settings
from .exceptions import CallCancelled, MethodNotFound, to_error
from .permissions import check_method_permissions
from .registry import registry as default_registry
from .serializers import serialize_result, validate_params

_perf = time.perf_counter
_VERSION = protocol.VERSION


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


# The per-call steps: look the method up, check who may call it, bind the
# params, call, map the error, fill the record. run() and arun() take them in
# the same order through the same helpers; they differ only in how a step that
# may block is run: in place (run), or awaited (arun: async def methods on the
# event loop, everything else that may touch the database in Django's sync
# thread, see jsonrpc_app.aio). Sync code calls run() itself (not a generator
# or a coroutine driven in place): the sync path pays nothing for the async one.


def _method_of(request, context, record):
    """Step 1: the Method ``request`` names (MethodNotFound when there is none), noted on ``record``."""
    method = context.registry._registry.get(request.method)
    if method is None:
        raise MethodNotFound()
    if record is not None:
        record.log = method.log
        record.sensitive_params = method.sensitive_params
    return method


def _failed(request, exc, method, record):
    """The last step when a step raised: the error object, on the record and (unless a notification) answered."""
    error, tb = error_of(exc, method)
    if record is not None:
        record.error = error
        record.traceback = tb
    if request.is_notification:
        return None
    return protocol.response(request.id, error=error)


def _succeeded(request, result, record):
    """The last step of a call that returned: its result, on the record and (unless a notification) answered."""
    if record is not None:
        record.result = result
    if request.is_notification:
        return None
    return protocol.response(request.id, result)


def run(request, context, record=None):
    """
    Run one valid Request; return its response dict (None for a notification).

    ``_method_of()``, ``_succeeded()`` and ``protocol.response()`` are
    written out in place here, and a method is called without ``**kwargs``
    when there are none: the sync path is the hot one (callgrind, per call of
    a batch: the two helpers 840 machine instructions, the other two 650).
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
            check_method_permissions(method, context)
        args, kwargs = method.binder.bind(request.params, context)
        if method.params_serializer is not None:
            args, kwargs = validate_params(method, args, kwargs, context)
        if method.is_async:
            # An async def method called from sync code: in an event loop of its own.
            result = async_to_sync(aio.call_async)(method, args, kwargs)
        elif kwargs:
            result = method.func(*args, **kwargs)
        else:
            result = method.func(*args)
        if method.result_serializer is not None:
            result = serialize_result(method, result, context)
    except Exception as exc:
        return _failed(request, exc, method, record)
    if record is not None:
        record.result = result
    if request.is_notification:
        return None
    return {"jsonrpc": _VERSION, "result": result, "id": request.id}  # protocol.response(), written out


async def arun(request, context, record=None):
    """``run()`` awaited: the same steps, async methods awaited, the rest off the event loop."""
    method = None
    try:
        method = _method_of(request, context, record)
        if method.guarded or not method.enabled:
            await aio.in_sync_thread(check_method_permissions, method, context)
        args, kwargs = method.binder.bind(request.params, context)
        if method.params_serializer is not None:
            args, kwargs = await aio.in_sync_thread(validate_params, method, args, kwargs, context)
        if method.is_async:
            result = await aio.call_async(method, args, kwargs)
        else:
            result = await aio.call_sync(method, args, kwargs)
        if method.result_serializer is not None:
            result = await aio.in_sync_thread(serialize_result, method, result, context)
    except Exception as exc:
        return _failed(request, exc, method, record)
    return _succeeded(request, result, record)


_method_name = attrgetter("method")  # a Request's name; None for an InvalidItem


def _has_async_calls(parsed, registry):
    """Whether two or more calls of ``parsed`` are of async def methods (then run together)."""
    names = registry.async_names
    if not names or not parsed.is_batch:
        return False
    items = parsed.items
    if names.isdisjoint(map(_method_name, items)):  # one pass in C: the usual answer
        return False
    return sum(1 for item in items if item.method in names) > 1


def _run_in_places(items, records, context, stop):
    """
    ``execute()``'s loop for the async executor: return one response per item
    (None where there is none); once ``stop`` (a one-item list) holds True, the
    items not started yet are left unrun and recorded as -32007 Call cancelled.
    """
    call = observe.wrap(run)
    Request = protocol.Request
    out = []
    append = out.append
    for i, item in enumerate(items):
        record = records[i] if records is not None else None
        if stop[0]:
            if record is not None:
                record.error = CallCancelled().as_dict()
            append(None)
        elif type(item) is Request:
            if record is None:
                append(call(item, context))
            else:
                start = _perf()
                append(call(item, context, record))
                record.duration = _perf() - start
        else:
            append(item.response())
            if call is not run:
                call.invalid(item, context)
            if record is not None:
                record.error = item.error
                record.params = item.value
    return out


def _finish(parsed, responses, records):
    if parsed.is_batch:
        return (responses or None), records
    return (responses[0] if responses else None), records


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
    if parsed.is_batch and context.registry.async_names and _has_async_calls(parsed, context.registry):
        return async_to_sync(aexecute)(parsed, context)
    return _in_order(parsed, context)


def _in_order(parsed, context, queue=None):
    """
    Run the elements of ``parsed`` one after another, in place; return (response, records).

    ``queue``: a list of the elements to run instead of ``parsed.items``, for
    the async executor, which stops the loop from the event loop by emptying
    it (a list's iterator ends at the list's length: no flag to test per call).
    """
    responses = []
    Request = protocol.Request
    items = parsed.items if queue is None else queue
    # run itself unless observers are configured (jsonrpc_app.observe).
    call = observe.wrap(run)
    if not context.log:
        # The loop without a call log: nothing to time or record per call.
        append = responses.append
        for item in items:
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
        for item in items:
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


ON_LOOP, IN_THREAD, MIXED = "on the loop", "in the sync thread", "mixed"


def _where(names, methods, thread_sensitive):
    """
    Where the async executor runs a body whose elements name the methods
    ``names`` (a set; None for an invalid element): ON_LOOP when none waits or
    may read the database, IN_THREAD when some must go to Django's sync thread
    and none is awaited (then all go there, in order), else MIXED (``_placed``
    says where each goes). Decided per method named, not per element.
    """
    where = ON_LOOP
    for name in names:
        method = methods.get(name)
        if method is None or method.runs_on_loop:
            continue
        if method.is_async:
            return MIXED
        if method.thread_sensitive if method.thread_sensitive is not None else thread_sensitive:
            where = IN_THREAD
        else:
            return MIXED
    return where


def _placed(items, methods, thread_sensitive):
    """
    Where the async executor runs each of ``items``: three lists of indexes,
    (on the event loop: invalid elements, unknown methods, blocking=False
    methods; as tasks: async def methods and thread-safe sync methods; in
    Django's sync thread: every other sync method).
    """
    on_loop, awaited, in_thread = [], [], []
    for i, item in enumerate(items):
        method = methods.get(item.method)  # an InvalidItem's method is None
        if method is None or method.runs_on_loop:
            on_loop.append(i)
        elif method.is_async:
            awaited.append(i)
        elif method.thread_sensitive if method.thread_sensitive is not None else thread_sensitive:
            in_thread.append(i)
        else:
            awaited.append(i)
    return on_loop, awaited, in_thread


async def _in_sync_thread(parsed, context):
    """
    ``aexecute()`` of a body with nothing to await: the sync executor's own
    loop in Django's sync thread, one hop. Cancelled, the call running
    finishes and the rest are left unrun, recorded as -32007 Call cancelled.
    """
    queue = list(parsed.items)
    done = []

    def in_order():
        done.append(_in_order(parsed, context, queue))

    try:
        await aio.in_sync_thread_to_the_end(in_order, on_cancel=queue.clear)
    except asyncio.CancelledError:
        records = done[0][1] if done else None
        if records is not None:
            for item in parsed.items[len(records):]:
                record = CallRecord(item)
                record.error = CallCancelled().as_dict()
                records.append(record)
        raise aio.Cancelled(records) from None
    return done[0]


async def aexecute(parsed, context):
    """
    ``execute()`` awaited: the calls of a batch run concurrently, their
    responses in the batch's order.

    Where each element runs (``_placed``): async def methods (and sync
    methods marked thread-safe, in the thread pool) as tasks, together, at
    most ASYNC_CONCURRENCY at once; every other sync method in Django's one
    sync thread, in order, one hop for all (that hop counts as one task),
    with the invalid elements, unknown methods and ``blocking=False`` methods
    among them, which run at once on the event loop when nothing else goes
    to that thread. Decided first per method named (``_where``): a body with
    nothing to await is run whole by the sync executor's loop, on the event
    loop or (one hop) in the sync thread; only a mixed one is placed element
    by element.

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
    methods = context.registry._registry
    sensitive = jsonrpc_settings.SYNC_METHOD_THREAD_SENSITIVE
    where = _where(set(map(_method_name, items)), methods, sensitive)
    if where is ON_LOOP:
        # Nothing waits or reads the database: the sync executor's loop, on the event loop.
        return _in_order(parsed, context)
    if where is IN_THREAD:
        return await _in_sync_thread(parsed, context)
    on_loop, awaited, in_thread = _placed(items, methods, sensitive)
    if in_thread and on_loop:
        # The hop to the sync thread is paid anyway: the quick ones go with the
        # others, so that the batch's order is kept among them.
        in_thread = sorted(in_thread + on_loop)
        on_loop = []
    records = [CallRecord(item) for item in items] if context.log else None
    answers = [None] * len(items)
    stop = [False]  # set from the event loop, read by the sync thread between calls
    if on_loop:
        # Nothing here waits or reads the database: run now, in order, without a thread.
        group_records = [records[i] for i in on_loop] if records is not None else None
        responses = _run_in_places([items[i] for i in on_loop], group_records, context, stop)
        for i, response in zip(on_loop, responses):
            answers[i] = response
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

    async def rest():
        group = [items[i] for i in in_thread]
        group_records = [records[i] for i in in_thread] if records is not None else None
        # A thread cannot be cancelled: the call it runs finishes, the others are left unrun.
        responses = await aio.in_sync_thread_to_the_end(
            _run_in_places, group, group_records, context, stop, on_cancel=lambda: stop.__setitem__(0, True)
        )
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
    return _finish(parsed, [a for a in answers if a is not None], records)
