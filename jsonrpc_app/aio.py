"""
How the async executor awaits the steps of a call (``dispatch.arun``): an
async def method under its timeout, a sync method in Django's sync thread or
in a thread pool, the checks that may use the database off the event loop,
and the calls of a batch together under a concurrency limit.

Nothing here knows JSON-RPC; ``dispatch`` decides what runs, this module how
it is awaited.
"""

import asyncio
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async

from .conf import jsonrpc_settings
from .exceptions import CallTimedOut


class Cancelled(asyncio.CancelledError):
    """
    The executor's task was cancelled (under ASGI: the client went away) while
    calls ran; ``records`` are the envelope's CallRecords (None: log off),
    those cancelled saying -32007 Call cancelled.
    """

    def __init__(self, records):
        super().__init__()
        self.records = records


async def call_async(method, args, kwargs):
    """Await ``method`` (an async def Method) with ``args``/``kwargs`` under its timeout."""
    timeout = method.timeout if method.timeout is not None else jsonrpc_settings.METHOD_TIMEOUT
    if timeout is None:
        return await method.func(*args, **kwargs)
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await method.func(*args, **kwargs)
    except TimeoutError:
        if scope.expired():
            raise CallTimedOut(data={"timeout": timeout}) from None
        raise  # the method's own TimeoutError, not ours


_pool_lock = threading.Lock()
_pool = {"executor": None, "size": None}


def _thread_pool():
    size = jsonrpc_settings.SYNC_METHOD_THREADS or 1
    executor = _pool["executor"]
    if executor is None or _pool["size"] != size:
        with _pool_lock:
            if _pool["executor"] is None or _pool["size"] != size:
                _pool["executor"] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="jsonrpc-sync-method")
                _pool["size"] = size
            executor = _pool["executor"]
    return executor


async def call_sync(method, args, kwargs):
    """Run ``method`` (a sync Method) off the event loop: in Django's sync thread, or in the pool when thread-safe."""
    sensitive = method.thread_sensitive
    if sensitive is None:
        sensitive = jsonrpc_settings.SYNC_METHOD_THREAD_SENSITIVE
    if sensitive:
        return await _hop(method.func, args, kwargs, None)
    return await sync_to_async(method.func, thread_sensitive=False, executor=_thread_pool())(*args, **kwargs)


async def in_sync_thread(function, *args):
    """Run ``function(*args)`` (a check that may use the ORM) in Django's sync thread."""
    return await _hop(function, args, None, None)


async def in_sync_thread_to_the_end(function, *args, on_cancel):
    """
    Run ``function(*args)`` in Django's sync thread; cancelled meanwhile, call
    ``on_cancel()`` (on the event loop), let the function finish (a thread
    cannot be stopped) and then go on being cancelled.
    """
    return await _hop(function, args, None, on_cancel)


# Django's sync thread, reached without sync_to_async's own machinery.
#
# sync_to_async(thread_sensitive=True) costs about 270,000 machine
# instructions a call (callgrind; loop.run_in_executor alone: 150,000), the
# hop below about 100,000. Under Django's ASGI handler the thread is the one
# of the request's ThreadSensitiveContext: asgiref makes its executor (one
# worker) the first time the request needs it, which Django's request_started
# signal does before any view runs. When that executor exists and asgiref
# would pick it (no AsyncToSync above us, whose thread would come first; the
# context not exited), the call is handed to that same executor, so it runs in
# the same thread, in order with every sync_to_async call of the request, with
# what sync_to_async's thread_handler sets up: the caller's contextvars (the
# Local storage re-homed as asgiref does) and the loop for async_to_sync
# inside. Anything else (no ThreadSensitiveContext, an AsyncToSync caller, an
# asgiref without these attributes) goes through sync_to_async itself.

try:
    from asgiref.sync import AsyncToSync, SyncToAsync
    from asgiref.sync import _restore_context as _copy_context_back

    _thread_state = SyncToAsync.threadlocal
    _sensitive_context = SyncToAsync.thread_sensitive_context
    _context_executors = SyncToAsync.context_to_thread_executor
    _outer_executors = AsyncToSync.executors
except (ImportError, AttributeError):  # pragma: no cover - an asgiref without them: sync_to_async always
    _copy_context_back = None
try:
    # The context variable under AsyncToSync.executors (an asgiref Local): when
    # it holds nothing, no AsyncToSync is above us, known without the Local's
    # lookup of a missing attribute (two exceptions raised: 20,000 instructions).
    _outer_storage = _outer_executors._storage._data
except (NameError, AttributeError):  # pragma: no cover - another asgiref.local: the Local's own lookup
    _outer_storage = None


def _outer_executor():
    """What sync_to_async reads first: the executor of an AsyncToSync caller's thread, if any."""
    if _outer_storage is not None and _outer_storage.get(None) is None:
        return None
    return getattr(_outer_executors, "current", None)


def _request_executor():
    """The executor sync_to_async(thread_sensitive=True) would use here, when it is the request's and exists; else None."""
    if _copy_context_back is None or _outer_executor():
        return None
    owner = _sensitive_context.get(None)
    if owner is None or getattr(owner, "_exited", False):
        return None
    return _context_executors.get(owner)


def _settle(box, result, error):
    """On the event loop: the thread's outcome onto the future awaited now (none if cancelled and left)."""
    future = box[0]
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _in_context(context, function, args, kwargs):
    _copy_context_back(context)  # re-homes asgiref Local storage to this thread, as sync_to_async does
    if kwargs:
        return function(*args, **kwargs)
    return function(*args)


async def _via_asgiref(function, args, kwargs, on_cancel):
    call = sync_to_async(function, thread_sensitive=True)(*args, **(kwargs or {}))
    if on_cancel is None:
        return await call
    running = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        on_cancel()
        await running
        raise


async def _hop(function, args, kwargs, on_cancel):
    """
    ``function(*args, **kwargs)`` in Django's sync thread. Cancelled: with no
    ``on_cancel``, as sync_to_async (a call not started never runs, one
    running is not waited for); with one, see in_sync_thread_to_the_end().
    """
    executor = _request_executor()
    if executor is None:
        return await _via_asgiref(function, args, kwargs, on_cancel)
    loop = asyncio.get_running_loop()
    box = [loop.create_future()]
    context = contextvars.copy_context()

    def job():
        _thread_state.main_event_loop = loop
        _thread_state.main_event_loop_pid = os.getpid()
        _thread_state.task_context = None
        try:
            result = context.run(_in_context, context, function, args, kwargs)
        except BaseException as exc:
            loop.call_soon_threadsafe(_settle, box, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, box, result, None)

    queued = executor.submit(job)
    try:
        return await box[0]
    except asyncio.CancelledError:
        if on_cancel is None:
            queued.cancel()  # not started yet: never runs
            raise
        if box[0].cancelled():  # the job has not settled: wait for it
            on_cancel()
            box[0] = loop.create_future()
            try:
                await box[0]
            except Exception:
                pass  # its outcome is nobody's now
        raise
    finally:
        _copy_context_back(context)


async def gather_limited(jobs, limit):
    """
    Await the coroutines ``jobs`` together, at most ``limit`` at once (None:
    all), and return their results in order. An exception other than a
    cancellation is the jobs' own to handle: they must not raise.
    """
    if limit is None or limit >= len(jobs):
        return await asyncio.gather(*jobs)
    gate = asyncio.Semaphore(max(1, limit))

    async def gated(job):
        try:
            async with gate:
                return await job
        finally:
            job.close()  # one cancelled while it waited for the gate never started

    return await asyncio.gather(*(gated(job) for job in jobs))
