"""
The per-call observer hook (jsonrpc_app.observe): what an observer is told of
each call, that nothing is wrapped when none is configured, that a failing
observer never changes an answer, and loading from JSONRPC["OBSERVERS"].
"""

import asyncio
import json
import logging

import pytest

from jsonrpc_app import dispatch, observe, protocol
from jsonrpc_app.context import CallContext

pytestmark = pytest.mark.django_db


class Recorder(observe.Observer):
    """Writes down every hook call, in order."""

    def __init__(self, name="rec", log=None):
        self.name = name
        self.log = [] if log is None else log

    def start(self, request, context):
        self.log.append((self.name, "start", request.method))
        return (self.name, request.method)

    def end(self, token, request, context, outcome, duration):
        assert token == (self.name, request.method)
        error = outcome.error["code"] if outcome.error else None
        self.log.append((self.name, "end", request.method, error, duration > 0))

    def invalid(self, item, context):
        self.log.append((self.name, "invalid", item.error["code"]))


class Broken(observe.Observer):
    def __init__(self, where):
        self.where = where

    def active(self):
        if self.where == "active":
            raise RuntimeError("active broke")
        return True

    def start(self, request, context):
        if self.where == "start":
            raise RuntimeError("start broke")

    def end(self, token, request, context, outcome, duration):
        if self.where == "end":
            raise RuntimeError("end broke")

    def invalid(self, item, context):
        if self.where == "invalid":
            raise RuntimeError("invalid broke")


def req(method, params=None, id=None, notification=False):
    body = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if not notification:
        body["id"] = id
    return body


def use(settings, *observers):
    settings.JSONRPC = {**settings.JSONRPC, "OBSERVERS": list(observers)}


def test_with_no_observer_the_dispatcher_runs_its_own_step_unwrapped(settings):
    use(settings)
    assert observe.observers() == ()
    assert observe.wrap(dispatch.run) is dispatch.run


def test_each_call_is_told_at_its_start_and_end_with_its_error_and_invalid_elements_apart(settings, call):
    recorder = Recorder()
    use(settings, recorder)
    call([req("subtract", [3, 1], id=1), req("nope", id=2), 7, req("notify_hello", [1], notification=True)])
    assert recorder.log == [
        ("rec", "start", "subtract"),
        ("rec", "end", "subtract", None, True),
        ("rec", "start", "nope"),
        ("rec", "end", "nope", -32601, True),
        ("rec", "invalid", -32600),
        ("rec", "start", "notify_hello"),
        ("rec", "end", "notify_hello", None, True),
    ]


@pytest.mark.parametrize("policy", ["all", "none"])
def test_a_failing_notification_s_error_reaches_the_observer_with_or_without_the_log(settings, call, policy):
    recorder = Recorder()
    use(settings, recorder)
    settings.JSONRPC = {**settings.JSONRPC, "LOG_POLICY": policy}
    assert call(req("testapp.boom", notification=True)) is None
    assert recorder.log[-1] == ("rec", "end", "testapp.boom", -32603, True)


def test_observers_start_in_order_and_end_in_reverse_so_spans_nest(settings, call):
    log = []
    use(settings, Recorder("a", log), Recorder("b", log))
    call(req("subtract", [3, 1], id=1))
    assert [(e[0], e[1]) for e in log] == [("a", "start"), ("b", "start"), ("b", "end"), ("a", "end")]


@pytest.mark.parametrize("where", ["active", "start", "end", "invalid"])
def test_an_observer_that_raises_is_logged_and_never_changes_the_answer(settings, call, caplog, where):
    recorder = Recorder()
    use(settings, Broken(where), recorder)
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app.observe"):
        answers = call([req("subtract", [3, 1], id=1), 7])
    assert answers == [
        {"jsonrpc": "2.0", "result": 2, "id": 1},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
    ]
    assert "%s broke" % where in caplog.text
    # The other observer still sees everything.
    assert [e[1] for e in recorder.log] == ["start", "end", "invalid"]


def test_an_observer_not_active_for_now_is_left_out_of_the_envelope(settings):
    class Idle(Recorder):
        def active(self):
            return False

    use(settings, Idle())
    assert observe.wrap(dispatch.run) is dispatch.run


def test_an_entry_that_cannot_be_loaded_is_logged_left_out_and_reported_by_the_check(settings, call, caplog):
    recorder = Recorder()
    use(settings, "no.such.module.Observer", recorder)
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app.observe"):
        assert call(req("subtract", [3, 1], id=1))["result"] == 2
    assert "no.such.module.Observer" in caplog.text
    assert observe.observers() == (recorder,)
    [error] = observe.check_observers()
    assert error.id == "jsonrpc_app.E060"
    assert "no.such.module.Observer" in error.msg


def test_a_class_named_by_dotted_path_is_made_once_per_settings(settings):
    use(settings, "tests.test_observe.Recorder")
    [first] = observe.observers()
    assert isinstance(first, Recorder)
    assert observe.observers()[0] is first
    use(settings, "tests.test_observe.Recorder")
    assert observe.observers()[0] is not first


def test_the_async_wrapper_observes_an_awaited_per_call_step(settings):
    recorder = Recorder()
    use(settings, recorder)

    async def arun(request, context, record=None):
        await asyncio.sleep(0)
        return dispatch.run(request, context, record)

    parsed = protocol.parse(json.dumps([req("subtract", [5, 2], id=1), req("nope", id=2)]).encode())
    context = CallContext(source="test", log=False)
    from jsonrpc_app.registry import registry

    context.registry = registry

    async def main():
        step = observe.awrap(arun)
        assert step is not arun
        return [await step(item, context) for item in parsed.items]

    responses = asyncio.run(main())
    assert responses[0]["result"] == 3 and responses[1]["error"]["code"] == -32601
    assert [e[1:4] for e in recorder.log if e[1] == "end"] == [("end", "subtract", None), ("end", "nope", -32601)]
