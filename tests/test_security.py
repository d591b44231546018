"""
Attacks on the endpoint and the answer each gets. One test (or a few) per
attack; the details of each policy are in test_permissions, test_throttling
and test_limits.

| attack                                              | answer                                         |
| --------------------------------------------------- | ---------------------------------------------- |
| no credentials for a login/permission method        | -32001 Authentication required (that call)     |
| no credentials on an endpoint that requires them    | -32001, "id": null, nothing runs               |
| wrong password / bad token                          | -32001, "id": null, nothing runs               |
| logged in, lacking the permission                   | -32003 Permission denied (that call only)      |
| session cookie without / with a forged CSRF token   | -32003 "CSRF Failed: ...", "id": null          |
| body over the size limit                            | -32600 naming the limit, body never read       |
| a 10 MB string param                                | -32600 body over the limit, never read or run  |
| batch over the length limit (10,000 notifications)  | one -32600 naming the limit, nothing runs      |
| JSON nested deeper than MAX_DEPTH                   | -32600 naming the limit                        |
| JSON nested too deep for any decoder                | -32700, no RecursionError, next call served    |
| a 500,000-digit integer                             | -32700 (Python's int digit limit), no CPU burn |
| invalid UTF-8                                       | -32700                                         |
| __class__, __init__, dunder and dotted-path names   | -32601 Method not found                        |
| rpc.* names that are not served                     | -32601; registering one raises ValueError      |
| params naming the CallContext argument              | -32602 (unexpected parameter) or ignored       |
| params that do not bind                             | -32602, the method never runs                  |
| a disabled method                                   | -32004 Method disabled, never runs             |
| an exception / failing SQL inside a method          | -32603 "Internal error", no text/traceback/SQL |
| NUL, lone surrogates, 100k-char method name         | answered, and the call log still written       |
| sensitive params                                    | "********" in the log's params and body        |
| GET, PUT, DELETE                                    | 405 Allow: POST, nothing runs                  |
| form content types on a session call                | -32003 CSRF (or -32600), never a 500           |
| admin Try it / replay POST by a non-staff user      | 302 to the admin login, nothing runs           |
| ... by staff without the replay permission          | 403, nothing runs                              |
| ... without a CSRF token                            | 403, nothing runs                              |
| Try it / replay of a method the staff user may not  | -32003 for that call, logged                   |
| call                                                |                                                |
"""

import json
import tracemalloc

import pytest
from django.contrib.auth.models import User
from django.test import Client

from jsonrpc_app import MethodRegistry
from jsonrpc_app.models import Call, Envelope
from tests import helpers
from tests.helpers import basic, req
from tests.security_urls import RUNS
from tests.test_limits import LIMIT, Stream, wsgi_post

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.security_urls"),
    pytest.mark.usefixtures("secure_view"),
    pytest.mark.usefixtures("fresh_security_endpoints"),
]


def post(client, body, url="/secure/", **extra):
    return helpers.post(client, url, body, **extra)


def error_of(answer):
    assert "result" not in answer
    return answer["error"]


# --- authentication and permission ----------------------------------------------------


def test_attack_missing_auth_on_a_protected_method(client):
    assert error_of(post(client, req("secure.login"))) == {"code": -32001, "message": "Authentication required"}
    assert error_of(post(client, req("secure.view_users")))["code"] == -32001


def test_attack_missing_auth_on_a_protected_endpoint(client):
    answer = post(client, [req("secure.count", id=1), req("public.echo", [1], id=2)], url="/secure/closed/")
    assert answer["id"] is None
    assert error_of(answer)["code"] == -32001
    assert RUNS["count"] == 0


def test_attack_wrong_credentials(client, alice):
    answer = post(client, req("secure.count"), **basic("alice", "guess"))
    assert (answer["id"], error_of(answer)["code"]) == (None, -32001)
    answer = post(client, req("secure.count"), url="/secure/token/", HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert (answer["id"], error_of(answer)["code"]) == (None, -32001)
    assert RUNS["count"] == 0


def test_attack_wrong_permission(client, alice):
    assert error_of(post(client, req("secure.view_users"), **basic("alice", "alice-pw")))["code"] == -32003
    assert error_of(post(client, req("secure.staff"), **basic("alice", "alice-pw")))["code"] == -32003


def test_attack_denied_call_hidden_in_a_batch_fails_alone(client, alice):
    answer = post(
        client,
        [req("secure.staff", id=1), req("public.echo", ["ok"], id=2)],
        **basic("alice", "alice-pw"),
    )
    by_id = {a["id"]: a for a in answer}
    assert error_of(by_id[1])["code"] == -32003
    assert by_id[2]["result"] == "ok"
    assert sorted(Call.objects.values_list("outcome", flat=True)) == ["error", "ok"]


def test_attack_forged_csrf_on_a_session(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    answer = post(browser, req("secure.count"))
    assert answer["id"] is None
    assert error_of(answer) == {"code": -32003, "message": "CSRF Failed: CSRF cookie not set."}
    browser.cookies["csrftoken"] = "x" * 32
    answer = post(browser, req("secure.count"), HTTP_X_CSRFTOKEN="y" * 32)
    assert error_of(answer)["code"] == -32003
    assert "CSRF Failed" in error_of(answer)["message"]
    assert RUNS["count"] == 0


# --- size, length and depth -----------------------------------------------------------


def test_attack_oversize_body_is_refused_before_reading_it():
    stream = Stream(size=LIMIT + 1)
    answer = wsgi_post("/secure/", stream, content_length=LIMIT + 1)
    assert answer["id"] is None
    assert error_of(answer) == {
        "code": -32600,
        "message": "Invalid Request",
        "data": "request body of %d bytes is over the limit of %d bytes" % (LIMIT + 1, LIMIT),
    }
    assert stream.read_bytes == 0


def test_attack_ten_megabyte_string_param():
    body = json.dumps(req("secure.count_one", ["A" * (10 * 1024 * 1024)])).encode()
    stream = Stream(body, size=len(body))
    answer = wsgi_post("/secure/", stream, content_length=len(body))
    assert error_of(answer)["code"] == -32600
    assert "over the limit of %d bytes" % LIMIT in error_of(answer)["data"]
    assert stream.read_bytes == 0
    assert RUNS["count"] == 0


def test_attack_ten_megabyte_string_param_with_a_lying_content_length():
    body = json.dumps(req("secure.count_one", ["A" * (10 * 1024 * 1024)])).encode()
    stream = Stream(body, size=len(body))
    answer = wsgi_post("/secure/", stream, content_length=None, **{"wsgi.input_terminated": True})
    assert error_of(answer)["code"] == -32600
    assert stream.read_bytes == LIMIT + 1
    assert RUNS["count"] == 0


def traced_peak(func):
    """Run ``func``; return (its result, the peak of memory Python allocated meanwhile)."""
    tracemalloc.start()
    try:
        result = func()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_bounded_under_a_body_just_over_the_limit_and_a_huge_batch(client):
    """The process answers both with the limit errors instead of holding or running them."""
    # Once unmeasured: the first request of a process imports and caches what it needs.
    wsgi_post("/secure/", Stream(b"[", size=LIMIT + 1), content_length=LIMIT + 1)
    stream = Stream(b"[", size=LIMIT + 1)
    answer, peak = traced_peak(lambda: wsgi_post("/secure/", stream, content_length=LIMIT + 1))
    assert error_of(answer)["data"] == "request body of %d bytes is over the limit of %d bytes" % (LIMIT + 1, LIMIT)
    assert stream.read_bytes == 0
    assert peak < LIMIT // 4  # the body was never held

    batch = json.dumps([{"jsonrpc": "2.0", "method": "secure.count"} for _ in range(10_000)]).encode()
    stream = Stream(batch, size=len(batch))
    answer, peak = traced_peak(lambda: wsgi_post("/secure/", stream, content_length=len(batch)))
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request", "data": "batch of 10000 calls is over the limit of 1000"},
        "id": None,
    }
    # Parsed once (10,000 small dicts) and dropped; nothing ran, no call was logged.
    assert peak < 16 * LIMIT
    assert RUNS["count"] == 0
    assert Call.objects.count() == 0
    assert sorted(Envelope.objects.values_list("error_code", flat=True)) == [-32600] * 3


def test_attack_deep_nesting(client):
    nested = "x"
    for _ in range(100):
        nested = [nested]
    answer = post(client, req("public.echo", [nested]))
    assert (answer["id"], error_of(answer)["code"]) == (None, -32600)
    assert error_of(answer)["data"] == "JSON nested deeper than 64 levels"
    answer = post(client, b"[" * 500_000 + b"]" * 500_000)
    assert (answer["id"], error_of(answer)["code"]) == (None, -32600) or error_of(answer)["code"] == -32700
    assert post(client, req("public.echo", ["still up"]))["result"] == "still up"


def test_attack_huge_integer_literal(client):
    body = b'{"jsonrpc":"2.0","method":"public.echo","params":[' + b"9" * 500_000 + b'],"id":1}'
    answer = post(client, body)
    assert (answer["id"], error_of(answer)["code"]) == (None, -32700)


def test_attack_invalid_utf8(client):
    for body in (
        b'{"jsonrpc":"2.0","method":"public.echo","params":["\xff\xfe"],"id":1}',
        b'{"jsonrpc":"2.0","method":"\xc0\xafetc","id":1}',
        b"\xed\xa0\x80",
    ):
        answer = post(client, body)
        assert answer == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}


# --- names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "__class__",
        "__init__",
        "__dict__",
        "__globals__",
        "__builtins__",
        "__import__",
        "public.echo.__globals__",
        "public.echo.__class__",
        "_registry",
        "registry.get",
        "__proto__",
        "constructor",
        "os.system",
        "eval",
        "../public.echo",
        "PUBLIC.ECHO",
        " public.echo",
        "public.echo\x00",
        "",
    ],
)
def test_attack_dunder_and_path_method_names(client, name):
    answer = post(client, req(name, []))
    assert error_of(answer) == {"code": -32601, "message": "Method not found"}
    assert answer["id"] == 1


@pytest.mark.parametrize("name", ["rpc.", "rpc.internal", "rpc.discover.__class__", "rpc.__init__"])
def test_attack_calling_rpc_internals(client, name):
    assert error_of(post(client, req(name)))["code"] == -32601


def test_rpc_names_cannot_be_registered():
    with pytest.raises(ValueError, match="reserved"):
        MethodRegistry("attack").register(lambda: 1, name="rpc.discover")


def test_attack_params_filling_the_context_argument(client):
    answer = post(client, req("secure.whoami", {"context": {"user": "admin", "source": "cli"}}))
    assert error_of(answer)["code"] == -32602
    answer = post(client, req("secure.whoami", [{"user": "admin"}]))
    assert error_of(answer)["code"] == -32602
    answer = post(client, req("secure.echo_context", {"value": 1, "context": "forged"}))
    assert answer["result"]["context_is_real"] is True


def test_attack_params_that_do_not_bind_never_run_the_method(client):
    for params in ([], [1, 2], {"y": 1}, {"x": 1, "y": 2}):
        assert error_of(post(client, req("secure.count_one", params)))["code"] == -32602
    assert RUNS["count"] == 0


def test_attack_calling_a_disabled_method(client):
    assert error_of(post(client, req("secure.disabled"))) == {"code": -32004, "message": "Method disabled"}
    assert RUNS["count"] == 0


# --- leaks --------------------------------------------------------------------------


def test_no_exception_text_traceback_or_sql_in_responses(client):
    for method in ("secure.boom", "secure.bad_sql", "secure.exploding_permission"):
        response = client.generic("POST", "/secure/", json.dumps(req(method)), content_type="application/json")
        assert json.loads(response.content)["error"] == {"code": -32603, "message": "Internal error"}
        for leak in (b"Traceback", b"secret", b"SELECT", b"no_such_table", b"hunter2", b"RuntimeError", b"File "):
            assert leak not in response.content
    tracebacks = list(Call.objects.order_by("id").values_list("traceback", flat=True))
    assert "secret internals" in tracebacks[0]
    assert "no_such_table_xyz" in tracebacks[1]


def test_exception_text_only_with_expose_exceptions(client, settings):
    settings.JSONRPC = {"EXPOSE_EXCEPTIONS": True}
    data = post(client, req("secure.boom"))["error"]["data"]
    assert data["type"] == "RuntimeError"
    assert "secret internals" in data["message"]
    assert "Traceback" in data["traceback"]


def test_sensitive_params_never_reach_the_log_in_plain_text(client):
    post(client, req("secure.set_password", {"username": "alice", "password": "S3cr3t-pa55"}))
    post(client, req("secure.set_password", ["bob", "S3cr3t-pa55"], id=2))
    post(client, req("public.echo", [{"token": "S3cr3t-pa55"}], id=3))
    for logged in Call.objects.all():
        assert "S3cr3t-pa55" not in json.dumps(logged.params)
        assert "S3cr3t-pa55" not in json.dumps(logged.result)
    for envelope in Envelope.objects.all():
        assert "S3cr3t-pa55" not in envelope.request_body
        assert "S3cr3t-pa55" not in envelope.response_body
    named = Call.objects.get(request_id=1)
    assert named.params["username"] == "alice"


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "method": "public.echo\u0000", "id": 1},
        {"jsonrpc": "2.0", "method": "public.echo", "params": ["nul\u0000byte", {"k\u0000": 1}], "id": 1},
        {"jsonrpc": "2.0", "method": "x" * 100_000, "id": 1},
    ],
    ids=["nul-in-method", "nul-in-params", "100k-char-method"],
)
def test_hostile_strings_are_answered_and_logged(client, body):
    answer = post(client, body)
    assert answer["id"] == 1
    assert Envelope.objects.count() == 1
    assert Call.objects.count() == 1


def test_lone_surrogates_are_answered_and_logged(client):
    body = b'{"jsonrpc":"2.0","method":"public.echo","params":["\\ud800"],"id":1}'
    answer = post(client, body)
    assert answer["result"] == "\ud800"
    assert Envelope.objects.count() == 1


@pytest.mark.parametrize("verb", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_http_methods_are_refused_and_run_nothing(client, verb):
    response = client.generic(verb, "/secure/?method=secure.count", json.dumps(req("secure.count")))
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert RUNS["count"] == 0


def test_hidden_and_disabled_methods_are_not_discoverable_but_hidden_is_callable(client):
    document = post(client, req("rpc.discover"))["result"]
    names = {m["name"] for m in document["methods"]}
    assert "public.echo" in names
    assert "secure.hidden" not in names
    assert "secure.disabled" not in names
    assert post(client, req("secure.hidden"))["result"] == "still callable"


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("multipart/form-data; boundary=xyz", b'{"jsonrpc":"2.0","method":"secure.count","id":1}'),
        ("multipart/form-data", b"--\r\n\r\n"),
        ("application/x-www-form-urlencoded", b"&".join(b"a=%d" % i for i in range(5000))),
    ],
    ids=["json-as-multipart", "multipart-without-boundary", "too-many-form-fields"],
)
def test_attack_form_content_types_on_a_session_call(alice, content_type, body):
    # The CSRF check of a session call reads form bodies as forms: a body that is no
    # valid form is refused with a JSON-RPC error, never a 500, and nothing runs.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    # With the cookie set, the check goes on to look for the token in the form.
    browser.cookies["csrftoken"] = "k" * 32
    response = browser.generic("POST", "/secure/", body, content_type=content_type)
    assert response.status_code == 200
    answer = json.loads(response.content)
    assert answer["id"] is None
    assert answer["error"]["code"] in (-32600, -32003)
    assert RUNS["count"] == 0


def test_check_warns_when_exception_text_is_exposed_outside_debug(settings):
    from jsonrpc_app.checks import check_security_settings

    settings.JSONRPC = {"EXPOSE_EXCEPTIONS": True}
    settings.DEBUG = False
    assert [w.id for w in check_security_settings()] == ["jsonrpc_app.W001"]
    settings.DEBUG = True
    assert check_security_settings() == []
    settings.DEBUG = False
    settings.JSONRPC = {}
    assert check_security_settings() == []


# --- the admin's Try it and replay: staff with the replay permission only ---------------

TRY_IT = "/admin/jsonrpc_app/methodentry/%s/"


def replay_url(envelope):
    return "/admin/jsonrpc_app/envelope/%s/replay/" % envelope.pk


@pytest.fixture
def guarded_default_method():
    """A method of the default registry (the one the admin browses) that needs auth.view_user."""
    from jsonrpc_app.registry import registry

    method = registry.register(lambda: "users", name="security.view_users", permissions=["auth.view_user"])
    yield method
    registry.unregister(method.name)


@pytest.fixture
def logged_envelope(client):
    post(client, req("subtract", [5, 3]), url="/rpc/")
    return Envelope.objects.get()


def staff_client(*codenames, username="staff"):
    from django.contrib.auth.models import Permission

    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    browser = Client()
    browser.force_login(user)
    return browser


def test_attack_try_it_post_by_a_non_staff_user(alice):
    browser = Client()
    browser.force_login(alice)
    response = browser.post(TRY_IT % "subtract", {"params": "[5, 3]", "id": "1"})
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert not Envelope.objects.exists()


def test_attack_try_it_post_by_staff_without_the_replay_permission():
    browser = staff_client("view_envelope", "view_call", "view_methodentry")
    response = browser.post(TRY_IT % "subtract", {"params": "[5, 3]", "id": "1"})
    assert response.status_code == 403
    assert not Envelope.objects.exists()


def test_attack_replay_post_by_a_non_staff_user(alice, logged_envelope):
    browser = Client()
    browser.force_login(alice)
    response = browser.post(replay_url(logged_envelope), {"body": logged_envelope.request_body})
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert not Envelope.objects.filter(source="replay").exists()


def test_attack_replay_post_by_staff_without_the_replay_permission(logged_envelope):
    browser = staff_client("view_envelope", "view_call", "view_methodentry")
    response = browser.post(replay_url(logged_envelope), {"body": logged_envelope.request_body})
    assert response.status_code == 403
    assert not Envelope.objects.filter(source="replay").exists()


def test_attack_try_it_and_replay_without_a_csrf_token(logged_envelope):
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin)
    assert browser.post(TRY_IT % "subtract", {"params": "[5, 3]", "id": "1"}).status_code == 403
    assert browser.post(replay_url(logged_envelope), {"body": logged_envelope.request_body}).status_code == 403
    assert Envelope.objects.count() == 1


def test_try_it_and_replay_do_not_get_round_a_methods_permissions(guarded_default_method, logged_envelope):
    browser = staff_client("replay_envelope", "view_envelope", "view_call")
    response = browser.post(TRY_IT % "security.view_users", {"params": "", "id": "1"})
    assert response.status_code == 200
    assert json.loads(response.context["tryit"]["response"])["error"]["code"] == -32003
    body = json.dumps(req("security.view_users", id=7))
    browser.post(replay_url(logged_envelope), {"body": body})
    replayed = Call.objects.get(envelope__source="replay")
    assert (replayed.method, replayed.outcome, replayed.error_code) == ("security.view_users", "error", -32003)


def test_these_tests_run_against_the_sync_and_the_async_view(secure_view):
    from django.urls import resolve

    from jsonrpc_app.views import AsyncJsonRpcView, JsonRpcView

    view = resolve("/secure/token/").func.view_class
    assert view is (AsyncJsonRpcView if secure_view == "async" else JsonRpcView)
