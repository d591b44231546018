"""service.answer(): one body answered and logged the same way for every caller."""

import json

import pytest
from django.contrib.auth.models import AnonymousUser

from jsonrpc_app import service
from jsonrpc_app.context import CallContext
from jsonrpc_app.exceptions import InvalidRequest
from jsonrpc_app.models import Call, Envelope

pytestmark = pytest.mark.django_db


def test_answer_runs_a_batch_and_logs_it_with_the_callers_source(django_user_model):
    user = django_user_model.objects.create_user("ada")
    context = CallContext(user=user, source="admin")
    body = json.dumps(
        [
            {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
            {"jsonrpc": "2.0", "method": "nope", "id": "x"},
        ]
    )
    answer = service.answer(body, context)
    assert answer.status == 200
    assert json.loads(answer.content) == answer.response == [
        {"jsonrpc": "2.0", "result": 19, "id": 1},
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "x"},
    ]
    env = answer.envelope
    assert env == Envelope.objects.get()
    assert (env.source, env.user, env.is_batch, env.http_status) == ("admin", user, True, 200)
    assert json.loads(env.response_body) == answer.response
    assert sorted(Call.objects.values_list("method", "source", "outcome")) == [
        ("nope", "admin", "error"),
        ("subtract", "admin", "ok"),
    ]


def test_answer_to_notifications_only_is_empty_and_204():
    context = CallContext(user=AnonymousUser(), source="cli")
    answer = service.answer(b'{"jsonrpc": "2.0", "method": "update", "params": [1]}', context)
    assert (answer.status, answer.content, answer.response) == (204, b"", None)
    assert answer.envelope.http_status == 204
    assert Call.objects.get().is_notification


def test_answer_with_an_error_does_not_parse_the_body():
    context = CallContext(user=AnonymousUser(), source="http")
    error = InvalidRequest(data="too large")
    answer = service.answer(b"[not even json", context, error=error)
    assert answer.response == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request", "data": "too large"},
        "id": None,
    }
    assert answer.envelope.error_code == -32600


def test_answer_links_a_replay_to_its_original(django_user_model):
    admin = django_user_model.objects.create_user("root")
    original = service.answer(
        '{"jsonrpc": "2.0", "method": "echo", "params": [1], "id": 7}',
        CallContext(user=AnonymousUser()),
    ).envelope
    replay = service.answer(
        original.request_body,
        CallContext(user=admin, source="replay", replay_of=original),
    ).envelope
    assert (replay.replay_of, replay.source, replay.user) == (original, "replay", admin)
    assert replay.response_body == original.response_body


def test_answer_applies_the_body_size_limit(settings):
    settings.JSONRPC = {"MAX_BODY_SIZE": 10}
    answer = service.answer(b'{"jsonrpc": "2.0", "method": "echo", "id": 1}', CallContext(user=AnonymousUser()))
    assert answer.response["error"]["code"] == -32600
    assert answer.response["error"]["data"] == "request body of 45 bytes is over the limit of 10 bytes"


def test_answer_without_log_writes_nothing():
    context = CallContext(user=AnonymousUser(), log=False)
    answer = service.answer(b'{"jsonrpc": "2.0", "method": "echo", "params": [2], "id": 1}', context)
    assert answer.response == {"jsonrpc": "2.0", "result": 2, "id": 1}
    assert (answer.envelope, answer.records) == (None, None)
    assert not Envelope.objects.exists()
