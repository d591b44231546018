"""
How the async executor awaits the steps of a call (``dispatch.arun``): an
async def method under its timeout, a sync method in Django's sync thread or
in a thread pool, the checks that may use the database off the event loop,
and the calls of a batch together under a concurrency limit.

Nothing here knows JSON-RPC; ``dispatch`` decides what runs, this module how
it is awaited.
"""

import asyncio
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
        return await sync_to_async(method.func, thread_sensitive=True)(*args, **kwargs)
    return await sync_to_async(method.func, thread_sensitive=False, executor=_thread_pool())(*args, **kwargs)


async def in_sync_thread(function, *args):
    """Run ``function(*args)`` (a check that may use the ORM) in Django's sync thread."""
    return await sync_to_async(function, thread_sensitive=True)(*args)


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
