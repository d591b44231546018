"""
Throttling with DRF throttle classes: per endpoint (once per HTTP request,
the whole envelope answered -32029) and per method (once per call, so a
batch cannot get round it), with the wait in seconds in ``data``.
"""

import base64
import json

import pytest
from django.contrib.auth.models import User

from jsonrpc_app.exceptions import Throttled
from jsonrpc_app.models import Call, Envelope
from tests.helpers import post, req
from tests.security_urls import RUNS

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.security_urls"),
    pytest.mark.usefixtures("secure_view"),
    pytest.mark.usefixtures("fresh_security_endpoints"),
]


def assert_throttled(error):
    assert error["code"] == Throttled.code
    assert error["message"] == "Request was throttled"
    wait = error["data"]["wait"]
    assert isinstance(wait, int) and 0 < wait <= 60


def test_method_throttle_answers_throttled_with_the_wait_in_data(client):
    assert post(client, "/secure/", req("secure.throttled"))["result"] == "ok"
    assert post(client, "/secure/", req("secure.throttled"))["result"] == "ok"
    answer = post(client, "/secure/", req("secure.throttled"))
    assert_throttled(answer["error"])
    assert answer["id"] == 1


def test_method_throttle_counts_each_call_of_a_batch(client):
    answer = post(client, "/secure/", [req("secure.throttled", id=i) for i in range(4)])
    by_id = {a["id"]: a for a in answer}
    assert [by_id[i].get("result") for i in range(4)] == ["ok", "ok", None, None]
    assert_throttled(by_id[2]["error"])
    assert_throttled(by_id[3]["error"])


def test_method_throttle_leaves_other_methods_of_the_batch_alone(client):
    post(client, "/secure/", [req("secure.throttled", id=i) for i in range(2)])
    answer = post(client, "/secure/", [req("secure.throttled", id=1), req("public.echo", [7], id=2)])
    by_id = {a["id"]: a for a in answer}
    assert_throttled(by_id[1]["error"])
    assert by_id[2]["result"] == 7


def test_throttled_call_is_logged_with_its_error(client):
    for _ in range(3):
        post(client, "/secure/", req("secure.throttled"))
    outcomes = list(Call.objects.order_by("id").values_list("outcome", "error_code"))
    assert outcomes == [("ok", None), ("ok", None), ("error", Throttled.code)]


def test_method_user_throttle_counts_per_user(client):
    alice = User.objects.create_user("alice", password="pw")
    User.objects.create_user("bob", password="pw")

    def as_user(name):
        token = base64.b64encode(("%s:pw" % name).encode()).decode()
        return {"HTTP_AUTHORIZATION": "Basic " + token}

    assert post(client, "/secure/", req("secure.user_throttled"), **as_user("alice"))["result"] == "ok"
    assert_throttled(post(client, "/secure/", req("secure.user_throttled"), **as_user("alice"))["error"])
    assert post(client, "/secure/", req("secure.user_throttled"), **as_user("bob"))["result"] == "ok"
    assert Call.objects.filter(user=alice, error_code=Throttled.code).count() == 1


def test_scoped_rate_throttle_reads_the_methods_throttle_scope(client):
    assert post(client, "/secure/", req("secure.scoped"))["result"] == "ok"
    assert_throttled(post(client, "/secure/", req("secure.scoped"))["error"])


def test_endpoint_throttle_fails_the_whole_envelope(client):
    first = post(client, "/secure/throttled/", [req("secure.count", id=1), req("secure.count", id=2)])
    assert sorted(a["result"] for a in first) == [1, 2]
    answer = post(client, "/secure/throttled/", [req("secure.count", id=3), req("public.echo", [1], id=4)])
    assert answer["id"] is None
    assert_throttled(answer["error"])
    assert RUNS["count"] == 2
    assert Envelope.objects.filter(error_code=Throttled.code).count() == 1


def test_endpoint_throttle_does_not_touch_other_endpoints(client):
    post(client, "/secure/throttled/", req("public.echo", [1]))
    assert_throttled(post(client, "/secure/throttled/", req("public.echo", [1]))["error"])
    assert post(client, "/secure/", req("public.echo", [1]))["result"] == 1


def test_endpoint_throttle_counts_per_client_address(client):
    post(client, "/secure/throttled/", req("public.echo", [1]), REMOTE_ADDR="10.0.0.1")
    assert_throttled(
        post(client, "/secure/throttled/", req("public.echo", [1]), REMOTE_ADDR="10.0.0.1")["error"]
    )
    assert post(client, "/secure/throttled/", req("public.echo", [1]), REMOTE_ADDR="10.0.0.2")["result"] == 1


def test_endpoint_throttle_sends_retry_after_and_method_throttle_does_not(client):
    client.generic("POST", "/secure/throttled/", json.dumps(req("public.echo", [1])), content_type="application/json")
    response = client.generic("POST", "/secure/throttled/", json.dumps(req("public.echo", [1])), content_type="application/json")
    wait = json.loads(response.content)["error"]["data"]["wait"]
    assert response["Retry-After"] == str(wait)
    for _ in range(3):
        response = client.generic("POST", "/secure/", json.dumps(req("secure.throttled")), content_type="application/json")
    assert json.loads(response.content)["error"]["code"] == Throttled.code
    # Other calls of the same batch may have succeeded: no header for one call.
    assert not response.has_header("Retry-After")
