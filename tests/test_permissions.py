"""
Who may call what: DRF authentication of the endpoint (session, basic,
token), per-endpoint policies, per-method permission_classes / permissions /
login_required, CSRF for session-authenticated calls, the CallContext
argument, hidden and disabled methods.
"""

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token

from jsonrpc_app import CallContext
from jsonrpc_app import dispatch, protocol
from jsonrpc_app.exceptions import AuthenticationRequired, MethodDisabled, PermissionDenied
from jsonrpc_app.models import Call, Envelope
from tests.helpers import basic, post, req
from tests.security_urls import RUNS, secure

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.security_urls"),
    pytest.mark.usefixtures("secure_view"),
    pytest.mark.usefixtures("fresh_security_endpoints"),
]


@pytest.fixture
def bob(db):
    return User.objects.create_user("bob", "bob@example.com", "bob-pw")


# --- authentication of the endpoint -------------------------------------------------


def test_anonymous_call_to_public_method_is_answered(client):
    assert post(client, "/secure/", req("public.echo", [5]))["result"] == 5


def test_basic_authentication_sets_the_caller(client, alice):
    answer = post(client, "/secure/", req("secure.whoami"), **basic("alice", "alice-pw"))
    assert answer["result"] == {"user": "alice", "source": "http", "auth": "BasicAuthentication"}


def test_wrong_basic_password_fails_the_whole_envelope_with_authentication_required(client, alice):
    answer = post(
        client,
        "/secure/",
        [req("public.echo", [1], id=1), req("secure.whoami", id=2)],
        **basic("alice", "wrong"),
    )
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": AuthenticationRequired.code, "message": "Invalid username/password."},
        "id": None,
    }


def test_session_authentication_sets_the_caller(client, alice):
    client.force_login(alice)
    answer = post(client, "/secure/", req("secure.whoami"))
    assert answer["result"]["user"] == "alice"
    assert answer["result"]["auth"] == "SessionAuthentication"


def test_token_authentication_on_an_endpoint_configured_for_it(client, alice):
    token = Token.objects.create(user=alice)
    answer = post(
        client, "/secure/token/", req("secure.whoami"), HTTP_AUTHORIZATION="Token " + token.key
    )
    assert answer["result"]["user"] == "alice"
    assert answer["result"]["auth"] == "TokenAuthentication"


def test_bad_token_is_authentication_required(client, alice):
    answer = post(client, "/secure/token/", req("secure.whoami"), HTTP_AUTHORIZATION="Token nope")
    assert answer["error"] == {"code": AuthenticationRequired.code, "message": "Invalid token."}
    assert answer["id"] is None


def test_endpoint_permission_refuses_anonymous_with_authentication_required(client):
    answer = post(client, "/secure/closed/", req("public.echo", [1]))
    assert answer["error"]["code"] == AuthenticationRequired.code
    assert answer["id"] is None


def test_endpoint_permission_lets_an_authenticated_caller_in(client, alice):
    answer = post(client, "/secure/closed/", req("public.echo", [1]), **basic("alice", "alice-pw"))
    assert answer["result"] == 1


def test_token_endpoint_ignores_basic_credentials(client, alice):
    # The per-endpoint authentication_classes replace the project's defaults.
    answer = post(client, "/secure/token/", req("public.echo", [1]), **basic("alice", "alice-pw"))
    assert answer["error"]["code"] == AuthenticationRequired.code


def test_endpoint_without_authenticators_treats_a_logged_in_session_as_anonymous(client, alice):
    client.force_login(alice)
    answer = post(client, "/secure/anonymous/", req("secure.whoami"))
    assert answer["result"]["user"] is None
    answer = post(client, "/secure/anonymous/", req("secure.login"))
    assert answer["error"]["code"] == AuthenticationRequired.code


def test_an_authenticator_that_crashes_is_an_internal_error_without_its_text(client):
    answer = post(client, "/secure/exploding-auth/", req("public.echo", [1]))
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
    assert "hunter2" not in json.dumps(answer)


def test_denied_envelope_is_logged_with_its_error(client):
    post(client, "/secure/closed/", req("public.echo", [1]))
    envelope = Envelope.objects.get()
    assert envelope.error_code == AuthenticationRequired.code
    assert envelope.user_id is None


# --- CSRF ---------------------------------------------------------------------------


@pytest.fixture
def csrf_client():
    return Client(enforce_csrf_checks=True)


def test_session_call_without_csrf_token_is_refused(csrf_client, alice):
    csrf_client.force_login(alice)
    answer = post(csrf_client, "/secure/", req("secure.whoami"))
    assert answer["error"]["code"] == PermissionDenied.code
    assert "CSRF" in answer["error"]["message"]
    assert answer["id"] is None
    assert "result" not in answer


def test_session_call_with_forged_csrf_token_is_refused(csrf_client, alice):
    csrf_client.force_login(alice)
    csrf_client.cookies["csrftoken"] = "a" * 32
    answer = post(csrf_client, "/secure/session/", req("secure.whoami"), HTTP_X_CSRFTOKEN="b" * 32)
    assert answer["error"]["code"] == PermissionDenied.code
    assert "CSRF" in answer["error"]["message"]


def test_session_call_with_csrf_token_is_answered(csrf_client, alice):
    csrf_client.force_login(alice)
    csrf_client.cookies["csrftoken"] = "c" * 32
    answer = post(csrf_client, "/secure/session/", req("secure.whoami"), HTTP_X_CSRFTOKEN="c" * 32)
    assert answer["result"]["user"] == "alice"


def test_session_call_from_another_origin_is_refused_even_with_the_token(csrf_client, alice):
    csrf_client.force_login(alice)
    csrf_client.cookies["csrftoken"] = "c" * 32
    answer = post(
        csrf_client,
        "/secure/session/",
        req("secure.whoami"),
        HTTP_X_CSRFTOKEN="c" * 32,
        HTTP_ORIGIN="https://evil.example",
    )
    assert answer["error"]["code"] == PermissionDenied.code


def test_csrf_refusal_runs_no_method_and_is_logged_as_anonymous(csrf_client, alice):
    csrf_client.force_login(alice)
    post(csrf_client, "/secure/", [req("secure.count", id=1), req("secure.count", id=2)])
    assert RUNS["count"] == 0
    envelope = Envelope.objects.get()
    assert envelope.error_code == PermissionDenied.code
    assert envelope.user_id is None
    assert envelope.call_count == 0


def test_basic_token_and_anonymous_calls_need_no_csrf_token(csrf_client, alice):
    assert post(csrf_client, "/secure/", req("public.echo", [1]))["result"] == 1
    answer = post(csrf_client, "/secure/", req("secure.whoami"), **basic("alice", "alice-pw"))
    assert answer["result"]["user"] == "alice"
    token = Token.objects.create(user=alice)
    answer = post(
        csrf_client, "/secure/token/", req("secure.whoami"), HTTP_AUTHORIZATION="Token " + token.key
    )
    assert answer["result"]["user"] == "alice"


def test_default_endpoint_enforces_csrf_for_sessions(csrf_client, alice):
    csrf_client.force_login(alice)
    answer = post(csrf_client, "/rpc/", req("subtract", [3, 1]))
    assert answer["error"]["code"] == PermissionDenied.code


# --- per-method permissions -----------------------------------------------------------


def test_login_required_method_refuses_anonymous(client):
    answer = post(client, "/secure/", req("secure.login"))
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": AuthenticationRequired.code, "message": "Authentication required"},
        "id": 1,
    }


def test_login_required_method_answers_a_logged_in_caller(client, alice):
    assert post(client, "/secure/", req("secure.login"), **basic("alice", "alice-pw"))["result"] == "alice"


def test_model_permission_refuses_anonymous_then_users_without_it(client, alice):
    answer = post(client, "/secure/", req("secure.view_users"))
    assert answer["error"]["code"] == AuthenticationRequired.code
    answer = post(client, "/secure/", req("secure.view_users"), **basic("alice", "alice-pw"))
    assert answer["error"] == {"code": PermissionDenied.code, "message": "Permission denied"}


def test_model_permission_lets_a_user_holding_it_call(client, alice):
    alice.user_permissions.add(Permission.objects.get(codename="view_user"))
    answer = post(client, "/secure/", req("secure.view_users"), **basic("alice", "alice-pw"))
    assert answer["result"] == "users"


def test_drf_permission_class_per_method(client, alice, bob):
    assert post(client, "/secure/", req("secure.staff"))["error"]["code"] == AuthenticationRequired.code
    answer = post(client, "/secure/", req("secure.staff"), **basic("alice", "alice-pw"))
    assert answer["error"]["code"] == PermissionDenied.code
    alice.is_staff = True
    alice.save()
    assert post(client, "/secure/", req("secure.staff"), **basic("alice", "alice-pw"))["result"] == "staff"


def test_permission_class_message_is_in_data(client, alice, bob):
    answer = post(client, "/secure/", req("secure.alice"), **basic("bob", "bob-pw"))
    assert answer["error"] == {
        "code": PermissionDenied.code,
        "message": "Permission denied",
        "data": "Only alice may do this.",
    }
    assert post(client, "/secure/", req("secure.alice"), **basic("alice", "alice-pw"))["result"] == "alice"


def test_permission_class_that_crashes_is_an_internal_error_without_its_text(client):
    answer = post(client, "/secure/", req("secure.exploding_permission"))
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
    assert "hunter2" not in json.dumps(answer)
    assert "hunter2" in Call.objects.get().traceback


def test_in_a_batch_only_the_denied_calls_fail_and_each_is_logged(client, alice):
    answer = post(
        client,
        "/secure/",
        [
            req("public.echo", ["a"], id=1),
            req("secure.view_users", id=2),
            req("secure.login", id=3),
            req("secure.staff", id=4),
            req("public.echo", ["b"], id=5),
        ],
        **basic("alice", "alice-pw"),
    )
    by_id = {a["id"]: a for a in answer}
    assert by_id[1]["result"] == "a"
    assert by_id[2]["error"]["code"] == PermissionDenied.code
    assert by_id[3]["result"] == "alice"
    assert by_id[4]["error"]["code"] == PermissionDenied.code
    assert by_id[5]["result"] == "b"
    calls = {c.request_id: c for c in Call.objects.all()}
    assert [calls[i].outcome for i in (1, 2, 3, 4, 5)] == ["ok", "error", "ok", "error", "ok"]
    assert calls[2].error_code == PermissionDenied.code
    assert calls[4].error_code == PermissionDenied.code
    assert {c.user_id for c in calls.values()} == {alice.pk}


def test_denied_notification_runs_nothing_and_is_logged(client):
    assert post(client, "/secure/", {"jsonrpc": "2.0", "method": "secure.login"}) is None
    logged = Call.objects.get()
    assert logged.outcome == "error"
    assert logged.error_code == AuthenticationRequired.code


def test_per_method_checks_apply_to_callers_without_a_request(alice):
    # The command line and other non-HTTP callers: a context with a user and no request.
    anonymous = CallContext(request=None, source="cli", registry=secure)
    envelope = protocol.parse(json.dumps(req("secure.staff")).encode())
    response, _records = dispatch.execute(envelope, anonymous)
    assert response["error"]["code"] == AuthenticationRequired.code
    alice.is_staff = True
    staff = CallContext(request=None, user=alice, source="cli", registry=secure)
    response, _records = dispatch.execute(envelope, staff)
    assert response["result"] == "staff"
    response, _records = dispatch.execute(protocol.parse(json.dumps(req("secure.throttled")).encode()), staff)
    assert response["result"] == "ok"


# --- the caller argument --------------------------------------------------------------


def test_params_cannot_fill_the_context_argument_by_name(client):
    answer = post(client, "/secure/", req("secure.whoami", {"context": {"user": "admin"}}))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == [{"path": "context", "message": "unexpected parameter"}]


def test_params_cannot_fill_the_context_argument_by_position(client):
    answer = post(client, "/secure/", req("secure.whoami", [{"user": "admin"}]))
    assert answer["error"]["code"] == -32602


def test_a_context_key_sent_to_a_method_taking_kwargs_does_not_replace_the_context(client):
    answer = post(client, "/secure/", req("secure.echo_context", {"value": 1, "context": "forged"}))
    assert answer["result"] == {"value": 1, "extra": [], "context_is_real": True}


# --- hidden and disabled methods ------------------------------------------------------


def test_hidden_method_is_callable_and_flagged():
    assert secure.get("secure.hidden").hidden is True


def test_hidden_method_answers_calls(client):
    assert post(client, "/secure/", req("secure.hidden"))["result"] == "still callable"


def test_disabled_method_answers_method_disabled_and_never_runs(client, alice):
    answer = post(client, "/secure/", req("secure.disabled"), **basic("alice", "alice-pw"))
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": MethodDisabled.code, "message": "Method disabled"},
        "id": 1,
    }
    assert RUNS["count"] == 0
    assert "secure.disabled" in secure
    assert Call.objects.get().error_code == MethodDisabled.code


def test_disabling_a_registered_method_takes_effect_on_the_next_call(client):
    method = secure.get("public.echo")
    method.enabled = False
    try:
        assert post(client, "/secure/", req("public.echo", [1]))["error"]["code"] == MethodDisabled.code
    finally:
        method.enabled = True
    assert post(client, "/secure/", req("public.echo", [1]))["result"] == 1


# --- endpoint policies from the JSONRPC setting ----------------------------------------


def test_jsonrpc_setting_gives_the_default_endpoint_its_permission_classes(client, settings, alice):
    settings.JSONRPC = {"PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]}
    answer = post(client, "/rpc/", req("subtract", [3, 1]))
    assert (answer["id"], answer["error"]["code"]) == (None, AuthenticationRequired.code)
    assert post(client, "/rpc/", req("subtract", [3, 1]), **basic("alice", "alice-pw"))["result"] == 2


def test_jsonrpc_setting_gives_the_default_endpoint_its_authentication_classes(client, settings, alice):
    settings.JSONRPC = {"AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
    # Basic credentials are not looked at any more: the caller is anonymous.
    answer = post(client, "/secure/", req("secure.whoami"), **basic("alice", "wrong"))
    assert answer["result"]["user"] is None
    token = Token.objects.create(user=alice)
    answer = post(client, "/secure/", req("secure.whoami"), HTTP_AUTHORIZATION="Token " + token.key)
    assert answer["result"]["user"] == "alice"


def test_view_arguments_win_over_the_jsonrpc_setting(client, settings):
    settings.JSONRPC = {"PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"]}
    # /secure/closed/ sets permission_classes=[IsAuthenticated] itself.
    answer = post(client, "/secure/closed/", req("public.echo", [1]))
    assert answer["error"]["code"] == AuthenticationRequired.code
    settings.JSONRPC = {"AUTHENTICATION_CLASSES": []}
    # /secure/token/ sets TokenAuthentication itself; the empty setting does not apply.
    answer = post(client, "/secure/token/", req("public.echo", [1]), HTTP_AUTHORIZATION="Token nope")
    assert answer["error"] == {"code": AuthenticationRequired.code, "message": "Invalid token."}


# -- exceptions.to_error: the one translator --------------------------------------------


def test_to_error_maps_drf_and_django_exceptions_to_their_classes_and_statuses():
    from django.core import exceptions as django_exceptions
    from rest_framework import exceptions as drf_exceptions

    from jsonrpc_app.exceptions import InvalidParams, InvalidRequest, Throttled, to_error

    throttled = to_error(drf_exceptions.Throttled(2.1))
    assert (type(throttled), throttled.wait, throttled.http_status) == (Throttled, 3, 429)
    assert throttled.as_dict() == {"code": -32029, "message": "Request was throttled", "data": {"wait": 3}}
    unauthenticated = to_error(drf_exceptions.NotAuthenticated())
    assert (type(unauthenticated), unauthenticated.http_status) == (AuthenticationRequired, 401)
    assert unauthenticated.message == "Authentication credentials were not provided."
    denied = to_error(django_exceptions.PermissionDenied("internal detail"))
    assert denied.as_dict() == {"code": -32003, "message": "Permission denied"}
    assert denied.http_status == 403
    assert type(to_error(drf_exceptions.ValidationError({"a": ["bad"]}))) is InvalidParams
    assert type(to_error(django_exceptions.SuspiciousOperation("x"))) is InvalidRequest
    own = MethodDisabled()
    assert to_error(own) is own and own.traceback is None


def test_to_error_answers_anything_else_as_an_internal_error_with_its_traceback(settings):
    from jsonrpc_app.exceptions import InternalError, to_error

    try:
        raise ValueError("secret detail")
    except ValueError as exc:
        error = to_error(exc, "some.method")
    assert type(error) is InternalError
    assert error.as_dict() == {"code": -32603, "message": "Internal error"}
    assert "ValueError: secret detail" in error.traceback
    settings.JSONRPC = {"EXPOSE_EXCEPTIONS": True}
    exposed = to_error(ValueError("shown"))
    assert exposed.data["type"] == "ValueError" and exposed.data["message"] == "shown"
