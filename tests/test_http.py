"""The HTTP mapping of the endpoint: POST only, status codes, content types."""

import json

import pytest

pytestmark = pytest.mark.django_db

BODY = b'{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}'


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"])
def test_only_post_is_allowed(client, method):
    response = client.generic(method, "/rpc/", BODY)
    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_answer_is_200_application_json(rpc):
    response = rpc(BODY)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"jsonrpc": "2.0", "result": 19, "id": 1}


def test_error_answers_are_http_200_too(rpc):
    for body in (b"{", b"[]", b'{"jsonrpc":"2.0","method":"nope","id":1}'):
        response = rpc(body)
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"


def test_nothing_to_answer_is_204_with_empty_body(rpc):
    response = rpc(b'{"jsonrpc":"2.0","method":"notify_hello","params":[1]}')
    assert response.status_code == 204
    assert response.content == b""


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json-rpc",
        "application/jsonrequest",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ],
)
def test_body_is_accepted_whatever_the_content_type_claims(rpc, content_type):
    response = rpc(BODY, content_type=content_type)
    assert json.loads(response.content)["result"] == 19


def test_answer_is_compact_utf8_json(rpc):
    response = rpc({"jsonrpc": "2.0", "method": "echo", "params": ["é✓"], "id": 1})
    assert response.content == '{"jsonrpc":"2.0","result":"é✓","id":1}'.encode()


def test_csrf_is_not_required_for_anonymous_calls(client):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/rpc/", BODY, content_type="application/json")
    assert json.loads(response.content)["result"] == 19


def test_endpoint_can_be_mounted_with_its_own_registry(rf):
    from jsonrpc_app import MethodRegistry, rpc_method
    from jsonrpc_app.views import JsonRpcView

    registry = MethodRegistry(name="other")

    @rpc_method(registry=registry)
    def only_here():
        return "here"

    view = JsonRpcView.as_view(registry=registry)
    request = rf.post("/other/", b'{"jsonrpc":"2.0","method":"only_here","id":1}', content_type="application/json")
    assert json.loads(view(request).content)["result"] == "here"
    request = rf.post("/other/", BODY, content_type="application/json")
    assert json.loads(view(request).content)["error"]["code"] == -32601


def test_demo_home_page_shows_endpoint_curl_and_methods(client):
    response = client.get("/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "http://testserver/rpc/" in text
    assert "curl" in text
    assert "subtract" in text
    assert "/admin/" in text
    assert "createsuperuser" in text
