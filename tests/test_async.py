"""
async def methods, on both endpoints: the async view (ASGI) awaits them and
runs a batch's calls together; the sync view (WSGI) runs them in an event
loop of its own, a batch's async calls together too. Concurrency is read
from the calls' own timestamps (tests.testapp.rpc_methods.TIMELINE).

The tests through the ``call`` fixture run once per endpoint; those marked
for one endpoint say why. A real uvicorn server serves the last ones.
"""

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from jsonrpc_app import rpc_method
from jsonrpc_app.dispatch import _run_in_places
from jsonrpc_app.models import Call, Envelope
from jsonrpc_app.registry import MethodRegistry
from tests.testapp.rpc_methods import TIMELINE

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db(transaction=False)


def req(method, params=None, id=None):
    body = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if id is not None:
        body["id"] = id
    return body


@pytest.fixture(autouse=True)
def _timeline():
    TIMELINE.clear()
    yield
    TIMELINE.clear()


def spans(*tags):
    found = {tag: (start, end, thread) for tag, start, end, thread in TIMELINE}
    return [found[tag] for tag in tags]


def overlapped(*tags):
    """Whether all the calls tagged ``tags`` were running at one moment."""
    found = spans(*tags)
    return max(s for s, _, _ in found) < min(e for _, e, _ in found)


def most_at_once():
    """The most calls of TIMELINE running at one moment."""
    events = sorted([(s, 1) for _, s, _, _ in TIMELINE] + [(e, -1) for _, _, e, _ in TIMELINE])
    running = best = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


# -- the registry ----------------------------------------------------------------------


def test_the_registry_knows_which_methods_are_coroutines():
    reg = MethodRegistry("async-test")

    @rpc_method(registry=reg)
    async def later(x: int) -> int:
        return x

    @rpc_method(registry=reg)
    def now(x: int) -> int:
        return x

    assert reg.get("later").is_async and not reg.get("now").is_async
    assert reg.async_count == 1
    reg.unregister("later")
    assert reg.async_count == 0


def test_a_timeout_on_a_sync_method_is_refused_when_it_is_registered():
    reg = MethodRegistry("async-test-timeout")
    with pytest.raises(TypeError, match="async def methods only"):

        @rpc_method(registry=reg, timeout=1)
        def slow():
            pass

    with pytest.raises(TypeError, match="number of seconds"):

        @rpc_method(registry=reg, timeout=0)
        async def slower():
            pass


def test_async_methods_are_in_the_openrpc_document_like_the_others(call):
    doc = call(req("rpc.discover", id=1))["result"]
    names = {m["name"] for m in doc["methods"]}
    assert {"wait", "testapp.async_sleep"} <= names
    (wait,) = [m for m in doc["methods"] if m["name"] == "wait"]
    assert wait["params"][0]["name"] == "seconds" and wait["params"][0]["schema"]["type"] == "number"


# -- answers, on both endpoints ------------------------------------------------------------


def test_an_async_method_answers_a_single_call(call):
    assert call(req("wait", [0.01], id=1)) == {"jsonrpc": "2.0", "result": 0.01, "id": 1}


def test_async_and_sync_methods_in_one_batch_each_answer_with_their_ids(call):
    answers = call([
        req("testapp.async_sleep", [0.05, "a"], id="a"),
        req("subtract", [42, 23], id=2),
        req("testapp.async_sleep", [0.05, "b"], id="b"),
        req("testapp.sync_sleep", [0.01, "s"], id="s"),
        req("nope", id=5),
        7,
        req("testapp.async_sleep", [0.01, "n"]),  # a notification
    ])
    by_id = {a["id"]: a for a in answers}
    assert len(answers) == 6
    assert by_id["a"]["result"] == "a" and by_id["b"]["result"] == "b" and by_id["s"]["result"] == "s"
    assert by_id[2]["result"] == 19
    assert by_id[5]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32600
    assert overlapped("a", "b")


def test_the_async_calls_of_a_batch_run_at_the_same_time(call):
    call([req("testapp.async_sleep", [0.1, "t%d" % i], id=i) for i in range(5)])
    assert overlapped(*["t%d" % i for i in range(5)])


def test_the_concurrency_limit_is_honoured(settings, call):
    settings.JSONRPC = {**settings.JSONRPC, "ASYNC_CONCURRENCY": 2}
    answers = call([req("testapp.async_sleep", [0.05, "t%d" % i], id=i) for i in range(6)])
    assert [a["result"] for a in answers] == ["t%d" % i for i in range(6)]
    assert most_at_once() == 2


def test_an_exception_in_one_call_leaves_the_others_answered(call):
    answers = call([
        req("testapp.async_sleep", [0.02, "a"], id=1),
        req("testapp.async_boom", id=2),
        req("testapp.async_sleep", [0.02, "b"], id=3),
    ])
    assert [a.get("result") for a in answers] == ["a", None, "b"]
    assert answers[1]["error"] == {"code": -32603, "message": "Internal error"}


def test_a_call_past_its_timeout_is_cancelled_and_answered_as_timed_out(call):
    start = time.monotonic()
    answers = call([req("testapp.async_slow", id=1), req("testapp.async_sleep", [0.01, "a"], id=2)])
    assert time.monotonic() - start < 2.0  # the method sleeps 5 s: it was cancelled at 0.05 s
    assert answers[0]["error"] == {"code": -32008, "message": "Call timed out", "data": {"timeout": 0.05}}
    assert answers[1]["result"] == "a"
    logged = Call.objects.get(method="testapp.async_slow")
    assert (logged.error_code, logged.error_message, logged.outcome) == (-32008, "Call timed out", "error")


def test_the_method_timeout_setting_applies_to_async_methods_without_their_own(settings, call):
    settings.JSONRPC = {**settings.JSONRPC, "METHOD_TIMEOUT": 0.05}
    answer = call(req("testapp.async_sleep", [5, "x"], id=1))
    assert answer["error"]["code"] == -32008
    # A method's own timeout wins over the setting (0.05 s here either way), and sync methods have none.
    assert call(req("testapp.sync_sleep", [0.1, "s"], id=2))["result"] == "s"


def test_a_timeout_error_raised_by_the_method_itself_is_an_internal_error(call):
    assert call(req("testapp.async_own_timeout", id=1))["error"]["code"] == -32603


def test_permissions_are_checked_per_call_for_async_methods(call, client, alice):
    anonymous = call([req("testapp.async_private", id=1), req("wait", [0], id=2)])
    assert anonymous[0]["error"]["code"] == -32001 and anonymous[1]["result"] == 0
    client.force_login(alice)
    # A session call needs its CSRF token; the test client does not enforce CSRF by default.
    assert call(req("testapp.async_private", id=1))["result"] == "alice"


def test_throttles_are_applied_per_call_on_both_endpoints(call):
    from django.core.cache import cache

    cache.clear()
    answers = call([req("testapp.throttled_async", id=i) for i in range(3)])
    assert [a.get("result") for a in answers[:2]] == ["ok", "ok"]
    assert answers[2]["error"]["code"] == -32029
    cache.clear()


def test_methods_reach_the_database_from_both_endpoints(call, alice):
    assert call(req("testapp.async_users", id=1))["result"] == 1
    assert call(req("testapp.sync_users", id=2))["result"] == 1
    answers = call([req("testapp.async_users", id=1), req("testapp.sync_users", id=2)])
    assert [a["result"] for a in answers] == [1, 1]


def test_the_log_of_an_async_batch_equals_the_log_of_the_same_batch_run_sync(client):
    batch = [
        req("testapp.async_sleep", [0.01, "a"], id=1),
        req("subtract", [5, 3], id="two"),
        req("testapp.async_boom", id=3),
        req("testapp.async_slow", id=4),
        req("testapp.async_sleep", [0.01, "n"]),
        {"jsonrpc": "2.0", "method": 1, "id": 6},
        req("nope", id=7),
    ]
    body = json.dumps(batch)
    for path in ("/rpc/", "/rpc-async/"):
        assert client.post(path, body, content_type="application/json").status_code == 200
    sync_env, async_env = Envelope.objects.order_by("id")
    fields = ["position", "method", "request_id", "is_notification", "params", "result", "error_code",
              "error_message", "error_data", "outcome"]

    def rows(envelope):
        return [tuple(getattr(c, f) for f in fields) for c in Call.objects.filter(envelope=envelope).order_by("position")]

    assert rows(sync_env) == rows(async_env)
    assert len(rows(sync_env)) == 7
    for field in ("request_body", "http_status", "source", "endpoint"):
        if field == "endpoint":
            assert (sync_env.endpoint, async_env.endpoint) == ("/rpc/", "/rpc-async/")
        else:
            assert getattr(sync_env, field) == getattr(async_env, field), field
    assert json.loads(sync_env.response_body) == json.loads(async_env.response_body)


# -- how each endpoint runs them -----------------------------------------------------------


def test_sync_methods_of_an_async_batch_run_in_order_in_one_thread(client):
    body = json.dumps([req("testapp.sync_sleep", [0.02, "s%d" % i], id=i) for i in range(3)])
    client.post("/rpc-async/", body, content_type="application/json")
    found = spans("s0", "s1", "s2")
    assert len({thread for _, _, thread in found}) == 1
    assert found[0][1] <= found[1][0] and found[1][1] <= found[2][0]


def test_thread_safe_sync_methods_run_together_in_the_thread_pool(client):
    body = json.dumps([req("testapp.sync_sleep_safe", [0.1, "p%d" % i], id=i) for i in range(4)])
    answers = json.loads(client.post("/rpc-async/", body, content_type="application/json").content)
    assert [a["result"] for a in answers] == ["p0", "p1", "p2", "p3"]
    assert overlapped("p0", "p1", "p2", "p3")
    assert all(thread.startswith("jsonrpc-sync-method") for _, _, thread in spans("p0", "p1", "p2", "p3"))


def test_the_thread_sensitive_setting_sends_sync_methods_to_the_pool(settings, client):
    settings.JSONRPC = {**settings.JSONRPC, "SYNC_METHOD_THREAD_SENSITIVE": False}
    body = json.dumps([req("testapp.sync_sleep", [0.1, "p%d" % i], id=i) for i in range(3)])
    client.post("/rpc-async/", body, content_type="application/json")
    assert overlapped("p0", "p1", "p2")


def test_the_sync_endpoint_runs_a_batch_of_async_calls_in_one_event_loop_together(client):
    body = json.dumps([req("testapp.async_sleep", [0.1, "w%d" % i], id=i) for i in range(4)])
    answers = json.loads(client.post("/rpc/", body, content_type="application/json").content)
    assert [a["result"] for a in answers] == ["w0", "w1", "w2", "w3"]
    assert overlapped("w0", "w1", "w2", "w3")


def test_the_async_client_of_pytest_django_calls_the_async_endpoint(async_client, alice):
    async def scenario():
        body = json.dumps([req("wait", [0.01], id=1), req("testapp.async_users", id=2)])
        response = await AsyncClient().post("/rpc-async/", body, content_type="application/json")
        return response.status_code, json.loads(response.content)

    status, answers = async_to_sync(scenario)()
    assert status == 200 and [a["result"] for a in answers] == [0.01, 1]


def test_the_async_endpoint_answers_get_with_405_and_allow_post(client):
    response = client.get("/rpc-async/")
    assert response.status_code == 405 and response["Allow"] == "POST"


def test_a_session_call_without_its_csrf_token_is_refused_by_the_async_endpoint(alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    answer = json.loads(client.post("/rpc-async/", json.dumps(req("testapp.whoami", id=1)),
                                    content_type="application/json").content)
    assert answer["error"]["code"] == -32003 and "CSRF" in answer["error"]["message"]


def test_a_stop_leaves_the_sync_calls_not_started_unrun_and_recorded_cancelled():
    from jsonrpc_app import protocol
    from jsonrpc_app.context import CallContext
    from jsonrpc_app.dispatch import CallRecord

    parsed = protocol.parse(json.dumps([req("subtract", [2, 1], id=1), req("subtract", [3, 1], id=2)]).encode())
    stop = [True]
    records = [CallRecord(item) for item in parsed.items]
    context = CallContext(source="cli")
    from jsonrpc_app.registry import registry

    context.registry = registry
    assert _run_in_places(parsed.items, records, context, stop) == [None, None]
    assert [r.error["code"] for r in records] == [-32007, -32007]


# -- a real uvicorn ------------------------------------------------------------------------


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def uvicorn_server(tmp_path_factory):
    """The demo (tests.settings) under uvicorn on 127.0.0.1, a SQLite file for its log; yields (url, db path)."""
    work = tmp_path_factory.mktemp("uvicorn")
    db = work / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": "sqlite:///%s" % db,
        "DJANGO_SETTINGS_MODULE": "tests.asgi_settings",
        "TEST_JOURNAL_DIR": str(work / "journal"),
        "TEST_SPOOL_DIR": str(work / "spool"),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    url = "http://127.0.0.1:%d/rpc/" % port
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("uvicorn exited: %s" % proc.stdout.read().decode(errors="replace"))
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("uvicorn did not answer within 30 s")
    try:
        yield url, db, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _post(url, body, timeout=10):
    import urllib.request

    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _rows(db, sql, args=(), wait=10.0):
    """The rows of ``sql`` once there are some (the server's loader writes the log a moment later)."""
    deadline = time.monotonic() + wait
    while True:
        with sqlite3.connect(db, timeout=10) as conn:
            found = conn.execute(sql, args).fetchall()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_uvicorn_answers_a_batch_of_ten_waits_together(uvicorn_server):
    url, db, _ = uvicorn_server
    _post(url, req("wait", [0], id=0))  # the first request opens the database and the journal
    start = time.monotonic()
    answers = _post(url, [req("wait", [0.2], id=i) for i in range(10)])
    elapsed = time.monotonic() - start
    assert sorted(a["id"] for a in answers) == list(range(10)) and {a["result"] for a in answers} == {0.2}
    # One after another they would take 2 s.
    assert elapsed < 1.0, elapsed
    logged = _rows(db, "SELECT COUNT(*) FROM jsonrpc_app_call WHERE method = 'wait' HAVING COUNT(*) >= 11")
    assert logged == [(11,)]


def test_uvicorn_serves_sync_and_async_methods_and_the_database(uvicorn_server):
    url, _, _ = uvicorn_server
    answers = _post(url, [req("subtract", [42, 23], id=1), req("testapp.async_users", id=2),
                          req("testapp.sync_users", id=3), req("testapp.async_private", id=4)])
    assert [a.get("result") for a in answers] == [19, 0, 0, None]
    assert answers[3]["error"]["code"] == -32001


def test_uvicorn_runs_a_batch_of_sync_calls_in_one_thread_off_the_loop_with_the_database(uvicorn_server):
    url, _, _ = uvicorn_server
    answers = _post(url, [req("testapp.sync_users", id=1), req("subtract", [5, 2], id=2),
                          req("testapp.whoami_thread", id=3), req("testapp.whoami_thread", id=4)])
    assert [a["result"] for a in answers[:2]] == [0, 3]
    assert answers[2]["result"] == answers[3]["result"] != "MainThread"


def test_a_client_that_disconnects_mid_batch_cancels_the_calls_still_running(uvicorn_server):
    url, db, port = uvicorn_server
    body = json.dumps([req("testapp.async_sleep", [0.01, "quick"], id="quick"),
                       req("testapp.async_sleep", [30, "slow1"], id="slow1"),
                       req("testapp.async_sleep", [30, "slow2"], id="slow2")]).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"POST /rpc/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.5)  # the quick call has answered, the slow ones are running
    # The connection is closed: the view is cancelled, the envelope logged as the client left it.
    found = _rows(db, "SELECT e.http_status, c.request_id, c.error_code, c.result FROM jsonrpc_app_envelope e "
                      "JOIN jsonrpc_app_call c ON c.envelope_id = e.id WHERE e.http_status = 499 ORDER BY c.position")
    assert [(status, code) for status, _, code, _ in found] == [(499, None), (499, -32007), (499, -32007)]
    assert json.loads(found[0][3]) == "quick"


@pytest.mark.django_db(transaction=True)
def test_under_atomic_requests_the_async_endpoint_answers_outside_a_request_transaction(client, monkeypatch):
    from django.contrib.auth.models import Group
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    body = json.dumps([req("testapp.rollback", id=1), req("subtract", [2, 1], id=2)])
    response = client.post("/rpc-async/", body, content_type="application/json")
    # Django refuses to wrap an async view in a transaction: no 500, the methods commit as they go.
    assert response.status_code == 200
    answers = json.loads(response.content)
    assert answers[1]["result"] == 1
    assert Call.objects.count() == 2
    assert answers[0]["error"]["code"] == -32050 and not Group.objects.filter(name="rolled-back").exists()


@pytest.mark.parametrize(
    "key, value, check_id",
    [
        ("ASYNC_CONCURRENCY", 0, "jsonrpc_app.E070"),
        ("ASYNC_CONCURRENCY", "10", "jsonrpc_app.E070"),
        ("SYNC_METHOD_THREADS", 0, "jsonrpc_app.E071"),
        ("METHOD_TIMEOUT", -1, "jsonrpc_app.E072"),
        ("METHOD_TIMEOUT", True, "jsonrpc_app.E072"),
        ("SYNC_METHOD_THREAD_SENSITIVE", "yes", "jsonrpc_app.E073"),
    ],
)
def test_a_wrong_async_setting_is_a_system_check_error(settings, key, value, check_id):
    from jsonrpc_app.checks import check_async_settings

    settings.JSONRPC = {**settings.JSONRPC, key: value}
    assert [e.id for e in check_async_settings()] == [check_id]


def test_the_async_settings_defaults_pass_the_checks():
    from jsonrpc_app.checks import check_async_settings

    assert check_async_settings() == []


# -- the admin and the command line: through the sync service, async methods included ----


def test_try_it_in_the_admin_runs_an_async_method(admin_client):
    url = "/admin/jsonrpc_app/methodentry/wait/"
    page = admin_client.get(url)
    assert page.status_code == 200 and b"(seconds: float) -&gt; float" in page.content
    response = admin_client.post(url, {"params": "[0.01]", "id": "3"})
    assert json.loads(response.context["tryit"]["response"]) == {"jsonrpc": "2.0", "result": 0.01, "id": 3}
    assert Call.objects.get(method="wait").source == "admin"


def test_the_method_browser_lists_async_methods_with_the_others(admin_client):
    page = admin_client.get("/admin/jsonrpc_app/methodentry/").content
    assert b"testapp.async_sleep" in page and b"subtract" in page


def test_jsonrpc_call_runs_an_async_method_from_the_command_line():
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("jsonrpc_call", "wait", "[0.01]", stdout=out)
    assert json.loads(out.getvalue())["result"] == 0.01


def test_a_replayed_batch_of_async_calls_runs_them_together_again(admin_client):
    from jsonrpc_app import service
    from jsonrpc_app.context import CallContext

    body = json.dumps([req("testapp.async_sleep", [0.1, "r%d" % i], id=i) for i in range(3)])
    answer = service.answer(body, CallContext(source="replay"))
    assert [a["result"] for a in answer.response] == ["r0", "r1", "r2"]
    assert overlapped("r0", "r1", "r2")


# -- blocking=False: sync methods called on the event loop ---------------------------------


def test_a_non_blocking_sync_method_runs_on_the_event_loop_with_no_thread_hop(client):
    body = json.dumps([req("testapp.quick_thread", id=1), req("testapp.async_thread", id=2)])
    answers = json.loads(client.post("/rpc-async/", body, content_type="application/json").content)
    assert answers[0]["result"] == answers[1]["result"]  # the event loop's thread, both
    sync_thread = json.loads(client.post("/rpc-async/", json.dumps(req("testapp.whoami_thread", id=3)),
                                         content_type="application/json").content)
    assert sync_thread["result"] != answers[0]["result"]


def test_a_non_blocking_method_that_uses_the_orm_is_an_internal_error_not_a_wrong_answer(call, endpoint):
    answer = call(req("testapp.quick_orm", id=1))
    if endpoint == "/rpc/":
        assert answer["result"] == 0  # the sync endpoint calls it in the request's thread
    else:
        assert answer["error"]["code"] == -32603
        assert "SynchronousOnlyOperation" in Call.objects.get(method="testapp.quick_orm").traceback


def test_blocking_false_is_refused_for_an_async_method():
    reg = MethodRegistry("async-test-blocking")
    with pytest.raises(TypeError, match="blocking=False is for sync methods"):

        @rpc_method(registry=reg, blocking=False)
        async def later():
            pass
