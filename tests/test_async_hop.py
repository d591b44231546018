"""
The async endpoint's hop to Django's sync thread (jsonrpc_app.aio): the same
thread as sync_to_async(thread_sensitive=True) wherever it runs, what it
carries across, and what a cancellation leaves behind.

Under Django's ASGI handler (a ThreadSensitiveContext per request) the hop
hands the call to the request's executor itself; elsewhere it is
sync_to_async. Both are checked here against sync_to_async's own thread.
"""

import asyncio
import contextvars
import json
import threading
import time

from asgiref.local import Local
from asgiref.sync import ThreadSensitiveContext, async_to_sync, sync_to_async

from jsonrpc_app import aio, dispatch, protocol
from jsonrpc_app.context import CallContext
from jsonrpc_app.registry import registry

_here = threading.get_ident


def req(method, params=None, id=None):
    out = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        out["params"] = params
    return out


def in_request(coroutine_function):
    """Run ``coroutine_function()`` as Django's ASGI handler runs a view: in a ThreadSensitiveContext."""

    async def scenario():
        async with ThreadSensitiveContext():
            await sync_to_async(_here)()  # Django's request_started signal makes the thread first
            return await coroutine_function()

    return asyncio.run(scenario())


def test_under_a_thread_sensitive_context_the_hop_is_sync_to_asyncs_thread_without_it():
    async def scenario():
        assert aio._request_executor() is not None  # the direct hand-off, not sync_to_async
        theirs = await sync_to_async(_here, thread_sensitive=True)()
        ours = [await aio.in_sync_thread(_here) for _ in range(3)]
        return _here(), theirs, ours

    loop_thread, theirs, ours = in_request(scenario)
    assert ours == [theirs] * 3 and theirs != loop_thread


def test_calls_of_both_kinds_run_in_the_order_they_were_made_in_the_one_thread():
    seen = []

    def note(tag):
        time.sleep(0.01)
        seen.append((tag, _here()))

    async def scenario():
        await asyncio.gather(aio.in_sync_thread(note, "a"), sync_to_async(note)("b"), aio.in_sync_thread(note, "c"))

    in_request(scenario)
    assert [tag for tag, _ in seen] == ["a", "b", "c"] and len({thread for _, thread in seen}) == 1


def test_under_an_async_to_sync_caller_the_hop_comes_back_to_the_callers_thread():
    # A sync middleware under ASGI: the request's thread waits in async_to_sync
    # for the view; sending the view's sync code to that thread's executor
    # instead would wait for ever.
    def sync_middleware():
        async def view():
            assert aio._request_executor() is None
            return await asyncio.wait_for(aio.in_sync_thread(_here), 5)

        return _here(), async_to_sync(view)()

    async def scenario():
        return await sync_to_async(sync_middleware)()

    caller, hopped_to = in_request(scenario)
    assert hopped_to == caller


def test_without_a_thread_sensitive_context_the_hop_is_sync_to_async():
    async def scenario():
        assert aio._request_executor() is None
        return await sync_to_async(_here)(), await aio.in_sync_thread(_here)

    theirs, ours = asyncio.run(scenario())
    assert ours == theirs


def test_the_hop_sees_the_callers_locals_and_hands_back_the_context_it_changed():
    local = Local()
    var = contextvars.ContextVar("hop_test")

    def inside():
        seen = getattr(local, "language", None)
        var.set("set in the thread")
        return seen

    async def scenario():
        local.language = "fr"
        seen = await aio.in_sync_thread(inside)
        return seen, var.get(None)

    assert in_request(scenario) == ("fr", "set in the thread")


def test_an_exception_in_the_thread_is_raised_to_the_caller():
    def fails():
        raise LookupError("from the thread")

    async def scenario():
        try:
            await aio.in_sync_thread(fails)
        except LookupError as exc:
            return str(exc)

    assert in_request(scenario) == "from the thread"


def test_a_cancelled_hop_not_started_never_runs_and_one_running_is_not_waited_for():
    ran = []

    def slow(tag):
        time.sleep(0.2)
        ran.append(tag)

    async def scenario():
        first = asyncio.ensure_future(aio.in_sync_thread(slow, "running"))
        second = asyncio.ensure_future(aio.in_sync_thread(slow, "queued"))
        await asyncio.sleep(0.05)
        first.cancel()
        second.cancel()
        started = time.monotonic()
        for task in (first, second):
            try:
                await task
            except asyncio.CancelledError:
                pass
        waited = time.monotonic() - started
        await sync_to_async(lambda: None)()  # behind the running one in the thread
        return waited

    waited = in_request(scenario)
    assert waited < 0.1 and ran == ["running"]


def test_cancelled_to_the_end_the_function_finishes_and_on_cancel_is_called_first():
    events = []

    def slow():
        time.sleep(0.2)
        events.append("finished")
        return "result"

    async def scenario():
        task = asyncio.ensure_future(aio.in_sync_thread_to_the_end(slow, on_cancel=lambda: events.append("on_cancel")))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"

    assert in_request(scenario) == "cancelled"
    assert events == ["on_cancel", "finished"]


def _batch(*calls):
    return protocol.parse(json.dumps(list(calls)).encode())


def test_a_cancelled_batch_of_sync_calls_finishes_the_call_running_and_records_the_rest_cancelled():
    parsed = _batch(req("testapp.sync_sleep", [0.3, "running"], id=1), req("testapp.sync_sleep", [0.0, "next"], id=2),
                    {"jsonrpc": "2.0", "id": 3}, req("subtract", [2, 1], id=4))
    context = CallContext(source="cli", log=True, registry=registry)

    async def scenario():
        task = asyncio.ensure_future(dispatch.aexecute(parsed, context))
        await asyncio.sleep(0.1)
        task.cancel()
        try:
            await task
        except aio.Cancelled as cancelled:
            return cancelled.records

    records = in_request(scenario)
    assert [r.index for r in records] == [0, 1, 2, 3]
    assert records[0].result == "running" and records[0].error is None
    assert [r.error["code"] for r in records[1:]] == [-32007, -32007, -32007]


def test_a_batch_of_sync_calls_answers_in_order_with_the_log_records_of_the_sync_executor():
    calls = [req("subtract", [9, i], id=i) for i in range(5)] + [{"jsonrpc": "2.0", "id": "bad"}]
    parsed = _batch(*calls)

    async def scenario():
        return await dispatch.aexecute(parsed, CallContext(source="cli", log=True, registry=registry))

    response, records = in_request(scenario)
    expected, expected_records = dispatch.execute(parsed, CallContext(source="cli", log=True, registry=registry))
    assert response == expected
    assert [(r.index, r.result, r.error) for r in records] == [(r.index, r.result, r.error) for r in expected_records]
