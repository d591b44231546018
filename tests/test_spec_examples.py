"""
Every example of the JSON-RPC 2.0 specification's "Examples" section (7), posted
over HTTP to the demo endpoint. Batch responses may come in any order, so they
are compared as sorted lists.
"""

import json

import pytest

pytestmark = pytest.mark.django_db


def _sorted(responses):
    return sorted(responses, key=lambda r: json.dumps(r, sort_keys=True))


def test_positional_parameters(call):
    # --> {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}
    # <-- {"jsonrpc": "2.0", "result": 19, "id": 1}
    assert call({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}) == {
        "jsonrpc": "2.0",
        "result": 19,
        "id": 1,
    }
    assert call({"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}) == {
        "jsonrpc": "2.0",
        "result": -19,
        "id": 2,
    }


def test_named_parameters(call):
    assert call(
        {"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}
    ) == {"jsonrpc": "2.0", "result": 19, "id": 3}
    assert call(
        {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}
    ) == {"jsonrpc": "2.0", "result": 19, "id": 4}


def test_notifications_answer_nothing(rpc):
    # --> {"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}
    # --> {"jsonrpc": "2.0", "method": "foobar"}
    for body in (
        {"jsonrpc": "2.0", "method": "update", "params": [1, 2, 3, 4, 5]},
        {"jsonrpc": "2.0", "method": "foobar"},
    ):
        response = rpc(body)
        assert response.status_code == 204
        assert response.content == b""


def test_non_existent_method(call):
    assert call({"jsonrpc": "2.0", "method": "foobar", "id": "1"}) == {
        "jsonrpc": "2.0",
        "error": {"code": -32601, "message": "Method not found"},
        "id": "1",
    }


def test_invalid_json(call):
    assert call(b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]') == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }


def test_invalid_request_object(call):
    assert call({"jsonrpc": "2.0", "method": 1, "params": "bar"}) == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request"},
        "id": None,
    }


def test_batch_invalid_json(call):
    body = (
        b'[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},'
        b'{"jsonrpc": "2.0", "method"]'
    )
    assert call(body) == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }


def test_empty_batch_is_one_invalid_request_error(call):
    assert call(b"[]") == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request"},
        "id": None,
    }


def test_invalid_batch_but_not_empty(call):
    assert call(b"[1]") == [
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}
    ]


def test_invalid_batch_answers_each_element(call):
    error = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}
    assert call(b"[1,2,3]") == [error, error, error]


def test_batch_of_calls_notifications_and_errors(call):
    body = [
        {"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"},
    ]
    expected = [
        {"jsonrpc": "2.0", "result": 7, "id": "1"},
        {"jsonrpc": "2.0", "result": 19, "id": "2"},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
        {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"},
    ]
    assert _sorted(call(body)) == _sorted(expected)


def test_batch_of_only_notifications_answers_nothing(rpc):
    response = rpc(
        [
            {"jsonrpc": "2.0", "method": "notify_sum", "params": [1, 2, 4]},
            {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        ]
    )
    assert response.status_code == 204
    assert response.content == b""
