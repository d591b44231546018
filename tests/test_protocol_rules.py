"""
The MUSTs of the JSON-RPC 2.0 specification, one test each, over HTTP.
Each test quotes the sentence it checks.
"""

import json

import pytest

pytestmark = pytest.mark.django_db

INVALID_REQUEST = {"code": -32600, "message": "Invalid Request"}
PARSE_ERROR = {"code": -32700, "message": "Parse error"}


def error_code(answer):
    assert set(answer) == {"jsonrpc", "error", "id"}, answer
    return answer["error"]["code"]


# 4. Request object -------------------------------------------------------------

@pytest.mark.parametrize("version", [None, "1.0", "2", 2.0, 2, ["2.0"], "2.0 "])
def test_jsonrpc_member_must_be_exactly_2_0(call, version):
    # "jsonrpc: A String specifying the version of the JSON-RPC protocol. MUST be exactly "2.0"."
    body = {"method": "subtract", "params": [1, 1], "id": 1}
    if version is not None:
        body["jsonrpc"] = version
    answer = call(body)
    assert error_code(answer) == -32600


@pytest.mark.parametrize("method", [1, None, ["subtract"], {"name": "subtract"}, True])
def test_method_must_be_a_string(call, method):
    # "method: A String containing the name of the method to be invoked."
    answer = call({"jsonrpc": "2.0", "method": method, "id": 1})
    assert error_code(answer) == -32600


def test_missing_method_is_invalid_request(call):
    assert error_code(call({"jsonrpc": "2.0", "id": 1})) == -32600


def test_rpc_prefixed_names_are_reserved(call):
    # "Method names that begin with the word rpc followed by a period character
    # (U+002E or ASCII 46) are reserved for rpc-internal methods and extensions
    # and MUST NOT be used for anything else."
    from jsonrpc_app import MethodRegistry

    registry = MethodRegistry(name="reserved-test")
    with pytest.raises(ValueError, match="reserved"):
        registry.register(lambda: 1, "rpc.mine")
    assert error_code(call({"jsonrpc": "2.0", "method": "rpc.mine", "id": 1})) == -32601


@pytest.mark.parametrize("params", ["bar", 1, 1.5, True, None])
def test_params_must_be_structured(call, params):
    # "params: A Structured value that holds the parameter values ... MAY be omitted."
    # "If present, parameters for the rpc call MUST be provided as a Structured value."
    answer = call({"jsonrpc": "2.0", "method": "echo", "params": params, "id": 1})
    assert error_code(answer) == -32600


def test_params_may_be_omitted(call):
    assert call({"jsonrpc": "2.0", "method": "get_data", "id": 1})["result"] == ["hello", 5]


@pytest.mark.parametrize("bad_id", [{"a": 1}, [1], True, False])
def test_id_must_be_string_number_or_null(call, bad_id):
    # "id: An identifier established by the Client that MUST contain a String,
    # Number, or NULL value if included."
    answer = call({"jsonrpc": "2.0", "method": "get_data", "id": bad_id})
    assert error_code(answer) == -32600
    # "If there was an error in detecting the id in the Request object ..., it MUST be Null."
    assert answer["id"] is None


@pytest.mark.parametrize(
    "request_id",
    ["1", 1, 0, -7, "", "ünïcödé ✓", 2**64, -(2**70), 1.5, 12345678901234567890, None],
)
def test_response_id_is_the_request_id_exactly(rpc, request_id):
    # "id: ... It MUST be the same as the value of the id member in the Request Object."
    response = rpc({"jsonrpc": "2.0", "method": "get_data", "id": request_id})
    answer = json.loads(response.content)
    assert answer["id"] == request_id
    assert type(answer["id"]) is type(request_id)


def test_string_id_1_stays_a_string_in_the_raw_bytes(rpc):
    content = rpc({"jsonrpc": "2.0", "method": "get_data", "id": "1"}).content
    assert b'"id":"1"' in content


def test_null_id_is_a_request_not_a_notification(call):
    # A Request object with "id": null is answered (only a missing id makes a notification).
    assert call({"jsonrpc": "2.0", "method": "get_data", "id": None}) == {
        "jsonrpc": "2.0",
        "result": ["hello", 5],
        "id": None,
    }


def test_unknown_members_are_ignored(call):
    answer = call({"jsonrpc": "2.0", "method": "get_data", "id": 1, "extra": True})
    assert answer["result"] == ["hello", 5]


# 4.1 Notifications -----------------------------------------------------------------

@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "method": "no.such.method"},
        {"jsonrpc": "2.0", "method": "subtract", "params": [1]},
        {"jsonrpc": "2.0", "method": "testapp.boom"},
        {"jsonrpc": "2.0", "method": "testapp.app_error", "params": []},
    ],
)
def test_notifications_are_never_answered_even_on_error(rpc, body):
    # "The Server MUST NOT reply to a Notification, including those that are within a batch request."
    # "Notifications are not confirmable by definition, since they do not have a
    # Response object to be returned. As such, the Client would not be aware of any errors."
    response = rpc(body)
    assert response.status_code == 204
    assert response.content == b""


def test_notification_runs_the_method(rpc, django_user_model):
    from django.contrib.auth.models import Group

    from jsonrpc_app import MethodRegistry, rpc_method
    from jsonrpc_app.views import JsonRpcView

    registry = MethodRegistry(name="notify-test")

    @rpc_method(registry=registry)
    def make_group(name):
        Group.objects.create(name=name)

    from django.test import RequestFactory

    request = RequestFactory().post(
        "/rpc/", b'{"jsonrpc":"2.0","method":"make_group","params":["made"]}', content_type="application/json"
    )
    response = JsonRpcView.as_view(registry=registry)(request)
    assert response.status_code == 204
    assert Group.objects.filter(name="made").exists()


def test_notifications_inside_a_batch_get_no_response(call):
    answer = call(
        [
            {"jsonrpc": "2.0", "method": "no.such.method"},
            {"jsonrpc": "2.0", "method": "get_data", "id": 1},
            {"jsonrpc": "2.0", "method": "testapp.boom"},
        ]
    )
    assert answer == [{"jsonrpc": "2.0", "result": ["hello", 5], "id": 1}]


# 4.2 Parameter structures ------------------------------------------------------

def test_by_position_binds_in_order(call):
    assert call({"jsonrpc": "2.0", "method": "subtract", "params": [10, 3], "id": 1})["result"] == 7


def test_by_name_binds_by_name(call):
    answer = call({"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 3, "minuend": 10}, "id": 1})
    assert answer["result"] == 7


@pytest.mark.parametrize(
    "params, path",
    [
        ([1], "subtrahend"),
        ([1, 2, 3], "[2]"),
        ({"minuend": 1}, "subtrahend"),
        ({"minuend": 1, "subtrahend": 2, "other": 3}, "other"),
        ({}, "minuend"),
    ],
)
def test_params_that_do_not_fit_are_invalid_params_naming_the_parameter(call, params, path):
    answer = call({"jsonrpc": "2.0", "method": "subtract", "params": params, "id": 1})
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == "Invalid params"
    assert path in [item["path"] for item in answer["error"]["data"]]


def test_omitted_params_for_a_method_that_needs_them_is_invalid_params(call):
    answer = call({"jsonrpc": "2.0", "method": "subtract", "id": 1})
    assert answer["error"]["code"] == -32602


def test_keyword_only_parameters_bind_by_name_only(call):
    answer = call({"jsonrpc": "2.0", "method": "testapp.kwonly", "params": {"a": 1, "b": 2}, "id": 1})
    assert answer["result"] == [1, 2, 3]
    answer = call({"jsonrpc": "2.0", "method": "testapp.kwonly", "params": [1, 2], "id": 1})
    assert answer["error"]["code"] == -32602


def test_variadic_method_takes_any_count(call):
    assert call({"jsonrpc": "2.0", "method": "sum", "params": [], "id": 1})["result"] == 0
    assert call({"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 3, 4.5], "id": 1})["result"] == 10.5


def test_context_parameter_cannot_be_filled_by_the_client(call):
    answer = call({"jsonrpc": "2.0", "method": "testapp.whoami", "params": {"context": "me"}, "id": 1})
    assert answer["error"]["code"] == -32602
    answer = call({"jsonrpc": "2.0", "method": "testapp.whoami", "params": ["me"], "id": 1})
    assert answer["error"]["code"] == -32602
    answer = call({"jsonrpc": "2.0", "method": "testapp.whoami", "id": 1})
    assert answer["result"] == {"user": "AnonymousUser", "source": "http"}


# 5. Response object --------------------------------------------------------------

def test_success_has_result_and_no_error(call):
    # "result: This member is REQUIRED on success. This member MUST NOT exist if
    # there was an error invoking the method."
    answer = call({"jsonrpc": "2.0", "method": "get_data", "id": 1})
    assert set(answer) == {"jsonrpc", "result", "id"}
    assert answer["jsonrpc"] == "2.0"


def test_none_result_is_present_as_null(rpc):
    content = rpc({"jsonrpc": "2.0", "method": "testapp.none", "id": 1}).content
    assert json.loads(content) == {"jsonrpc": "2.0", "result": None, "id": 1}
    assert b'"result":null' in content


def test_error_has_error_and_no_result(call):
    # "error: This member is REQUIRED on error. This member MUST NOT exist if there
    # was no error triggered during invocation."
    answer = call({"jsonrpc": "2.0", "method": "nope", "id": 1})
    assert set(answer) == {"jsonrpc", "error", "id"}


# 5.1 Error object ------------------------------------------------------------------

def test_error_object_has_integer_code_and_string_message(call):
    # "code: A Number that indicates the error type that occurred. This MUST be an integer."
    for body in (b"{", b"[]", {"jsonrpc": "2.0", "method": "nope", "id": 1}):
        error = call(body)["error"]
        assert type(error["code"]) is int
        assert type(error["message"]) is str


def test_exception_in_method_is_internal_error_without_details(rpc):
    response = rpc({"jsonrpc": "2.0", "method": "testapp.boom", "id": 7})
    answer = json.loads(response.content)
    assert answer == {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal error"}, "id": 7}
    assert b"secret" not in response.content
    assert b"Traceback" not in response.content
    assert b"RuntimeError" not in response.content


def test_type_error_inside_method_is_internal_error_not_invalid_params(call):
    answer = call({"jsonrpc": "2.0", "method": "testapp.type_error_inside", "params": ["abc"], "id": 1})
    assert answer["error"]["code"] == -32603


def test_expose_exceptions_setting_opts_in_to_details(call, settings):
    settings.JSONRPC = {"EXPOSE_EXCEPTIONS": True}
    answer = call({"jsonrpc": "2.0", "method": "testapp.boom", "id": 1})
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"]["type"] == "RuntimeError"
    assert "Traceback" in answer["error"]["data"]["traceback"]


def test_json_rpc_error_passes_through_exactly(call):
    assert call({"jsonrpc": "2.0", "method": "testapp.app_error", "id": "x"}) == {
        "jsonrpc": "2.0",
        "error": {"code": -32001, "message": "Out of stock", "data": {"sku": "X1"}},
        "id": "x",
    }


def test_application_error_subclass_with_class_level_code(call):
    answer = call({"jsonrpc": "2.0", "method": "shop.reserve", "params": ["X1", 2], "id": 1})
    assert answer["error"] == {
        "code": -32010,
        "message": "Out of stock",
        "data": {"sku": "X1", "available": 0},
    }


# 6. Batch ---------------------------------------------------------------------------

def test_batch_answer_is_an_array_with_one_response_per_call(call):
    answer = call([{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(5)])
    assert isinstance(answer, list)
    assert sorted((r["id"], r["result"]) for r in answer) == [(i, i - 1) for i in range(5)]


def test_single_element_batch_is_answered_with_an_array(call):
    answer = call([{"jsonrpc": "2.0", "method": "get_data", "id": 1}])
    assert answer == [{"jsonrpc": "2.0", "result": ["hello", 5], "id": 1}]


def test_batch_never_answers_an_empty_array(rpc):
    # "If there are no Response objects contained within the Response array as it
    # is to be sent to the client, the server MUST NOT return an empty Array and
    # should return nothing at all."
    response = rpc([{"jsonrpc": "2.0", "method": "notify_hello", "params": [1]}])
    assert response.status_code == 204
    assert response.content == b""


def test_invalid_element_does_not_stop_the_valid_call_beside_it(call):
    answer = call([1, {"jsonrpc": "2.0", "method": "get_data", "id": 2}, {"method": "x", "id": 3}])
    assert {"jsonrpc": "2.0", "result": ["hello", 5], "id": 2} in answer
    assert len(answer) == 3
    assert sorted(r["error"]["code"] for r in answer if "error" in r) == [-32600, -32600]


def test_nested_batch_is_an_invalid_element(call):
    answer = call([[{"jsonrpc": "2.0", "method": "get_data", "id": 1}]])
    assert answer == [{"jsonrpc": "2.0", "error": INVALID_REQUEST, "id": None}]


@pytest.mark.parametrize("body", [b"1", b'"subtract"', b"null", b"true", b"3.5"])
def test_top_level_value_that_is_not_object_or_array_is_invalid_request(call, body):
    assert call(body) == {"jsonrpc": "2.0", "error": INVALID_REQUEST, "id": None}


# Strict JSON (RFC 8259) -------------------------------------------------------------

@pytest.mark.parametrize(
    "body",
    [
        b"",
        b" ",
        b"NaN",
        b'{"jsonrpc":"2.0","method":"echo","params":[NaN],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[Infinity],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[-Infinity],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[1,],"id":1}',
        b"{'jsonrpc':'2.0','method':'echo','id':1}",
        b'{"jsonrpc":"2.0","method":"echo","id":1,}',
        b'{"jsonrpc":"2.0","method":"echo","id":01}',
        b'{"jsonrpc":"2.0","method":"echo","id":1} // comment',
        b'{"jsonrpc":"2.0","method":"echo","id":1}{"jsonrpc":"2.0","method":"echo","id":2}',
        b'{"jsonrpc":"2.0","method":"echo","params":["\xff\xfe"],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":["\xed\xa0\x80"],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":["tab\there"],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[.5],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[0x10],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":[+1],"id":1}',
        b'{"jsonrpc":"2.0","method":"echo","params":["\\x41"],"id":1}',
        b"\xef\xbb\xbf{}",
        '{"jsonrpc":"2.0","method":"get_data","id":1}'.encode("utf-16"),
        '{"jsonrpc":"2.0","method":"get_data","id":1}'.encode("utf-32"),
    ],
)
def test_anything_but_strict_json_is_a_parse_error(call, body):
    assert call(body) == {"jsonrpc": "2.0", "error": PARSE_ERROR, "id": None}


@pytest.mark.parametrize(
    "value",
    [2**64, -(2**80), 1e308, 0.1, -0.0, "\u0000", "\ud800", "😀", "\u2028", [], {}, [[[]]], "a" * 10000],
)
def test_valid_json_values_echo_back_exactly(rpc, value):
    response = rpc({"jsonrpc": "2.0", "method": "echo", "params": [value], "id": 1})
    answer = json.loads(response.content)
    assert answer["result"] == value
    assert type(answer["result"]) is type(value)


def test_deep_nesting_is_a_parse_error_and_the_next_request_is_served(call):
    answer = call(b"[" * 200_000 + b"]" * 200_000)
    assert answer == {"jsonrpc": "2.0", "error": PARSE_ERROR, "id": None}
    answer = call(b'{"jsonrpc":"2.0","method":"echo","params":' + b"[" * 5000 + b"]" * 5000 + b',"id":1}')
    assert answer["error"]["code"] in (-32600, -32700)
    assert answer["id"] is None
    assert call({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1})["result"] == 19


def test_whitespace_around_the_json_text_is_allowed(call):
    answer = call(b' \t\r\n{"jsonrpc":"2.0","method":"get_data","id":1} \n')
    assert answer["result"] == ["hello", 5]


# jsonrpc_app.protocol itself -------------------------------------------------------


@pytest.mark.django_db(databases=[])
def test_protocol_imports_no_django():
    """protocol (and the package it lives in) can be imported, and parse, without Django."""
    import pathlib
    import subprocess
    import sys

    script = (
        "import sys\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')]\n"
        "from jsonrpc_app import protocol\n"
        "parsed = protocol.parse(b'{\"jsonrpc\": \"2.0\", \"method\": \"m\", \"id\": 1}')\n"
        "assert parsed.items[0].method == 'm'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))\n"
    )
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
