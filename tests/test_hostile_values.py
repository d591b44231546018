"""
Values that databases refuse are still stored in the call log, escaped in the
documented way (jsonrpc_app.log.escaping), on SQLite and PostgreSQL alike; the
client's answer is the same as if the log were not there.
"""

import json
import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jsonrpc_app.log.escaping import (
    escape_body,
    escape_json,
    escape_text,
    unescape_body,
    unescape_json,
    unescape_text,
)
from jsonrpc_app.models import Envelope

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _spool_in_tmp(settings, tmp_path):
    settings.JSONRPC = {**getattr(settings, "JSONRPC", {}), "SPOOL_DIR": str(tmp_path / "spool")}
    yield
    # Nothing may have gone to the spool: every value was written to the log.
    assert not list((tmp_path / "spool").glob("*")) if (tmp_path / "spool").exists() else True


def _post(rpc, body):
    response = rpc(body)
    assert response.status_code == 200
    return json.loads(response.content)


def _logged():
    envelope = Envelope.objects.get()
    return envelope, list(envelope.calls.order_by("position"))


def _echo(value, id=1):
    return '{"jsonrpc":"2.0","method":"echo","params":[%s],"id":%s}' % (value, id)


def test_nul_in_a_string_param_is_stored_escaped_and_answered_as_sent(rpc):
    body = _echo('"a\\u0000b"').encode()
    assert _post(rpc, body) == {"jsonrpc": "2.0", "result": "a\x00b", "id": 1}
    envelope, (call,) = _logged()
    assert call.params == ["a\\u0000b"]
    assert call.result == "a\\u0000b"
    assert unescape_json(call.params) == ["a\x00b"]
    assert unescape_body(envelope.request_body) == body


def test_nul_in_a_notification_result_is_stored_escaped_even_when_both_bodies_are_plain(rpc):
    # The result of a notification is in no body: the recorder cannot tell from the
    # bodies that it needs no escaping, so it looks at the value.
    body = b'[{"jsonrpc":"2.0","method":"testapp.nul_text"},{"jsonrpc":"2.0","method":"subtract","params":[3,1],"id":1}]'
    assert _post(rpc, body) == [{"jsonrpc": "2.0", "result": 2, "id": 1}]
    _envelope, (notification, call) = _logged()
    assert notification.result == "a\\u0000b" and unescape_json(notification.result) == "a\x00b"
    assert call.result == 2


def test_a_nan_result_is_stored_as_null_like_the_answer_in_a_plain_batch(rpc):
    body = b'[{"jsonrpc":"2.0","method":"testapp.not_a_number","id":1},{"jsonrpc":"2.0","method":"testapp.not_a_number"}]'
    assert _post(rpc, body) == [{"jsonrpc": "2.0", "result": None, "id": 1}]
    _envelope, calls = _logged()
    assert [c.result for c in calls] == [None, None]


def _built_rows(body):
    """The LogRows the recorder builds for ``body`` (answered by the default registry)."""
    from jsonrpc_app import dispatch, protocol, service
    from jsonrpc_app.context import CallContext
    from jsonrpc_app.log.rows import build_rows

    context = CallContext(source="cli")
    envelope = protocol.parse(body, 100, 64)
    response, records = dispatch.execute(envelope, context)
    content = service.encode(response, records)
    return build_rows(context, records, request_body=body, response_body=content, envelope=envelope)


def test_plain_bodies_let_the_recorder_skip_the_value_by_value_escaping_with_the_same_rows():
    import copy

    from jsonrpc_app.log import escaping

    body = json.dumps([
        {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
        {"jsonrpc": "2.0", "method": "echo", "params": {"value": {"k": ["plain", 1.5, 2**70]}}, "id": "x"},
        {"jsonrpc": "2.0", "method": "nope", "id": 3},
        {"jsonrpc": "2.0", "method": 5, "id": 4},
    ]).encode()
    rows = _built_rows(body)
    assert rows.calls_storable is True
    for call in rows.calls:
        checked = copy.copy(call)
        checked.__dict__ = dict(call.__dict__)
        escaping.make_storable(checked)
        assert checked.__dict__ == call.__dict__
    # A backslash anywhere in the request body: value by value again.
    assert _built_rows(body.replace(b'"plain"', b'"pl\\u0000ain"')).calls_storable is False


def test_nul_in_an_object_key_is_stored_escaped(rpc):
    body = b'{"jsonrpc":"2.0","method":"echo","params":{"value":{"k\\u0000":1}},"id":2}'
    assert _post(rpc, body)["result"] == {"k\x00": 1}
    _envelope, (call,) = _logged()
    assert call.params == {"value": {"k\\u0000": 1}}
    assert unescape_json(call.params) == {"value": {"k\x00": 1}}


def test_raw_nul_byte_in_the_body_is_a_parse_error_and_the_body_is_stored(rpc):
    body = b'{"jsonrpc":"2.0","method":"echo","params":["a\x00b"],"id":1}'
    assert _post(rpc, body)["error"]["code"] == -32700
    envelope = Envelope.objects.get()
    assert envelope.request_body == '{"jsonrpc":"2.0","method":"echo","params":["a\\x00b"],"id":1}'
    assert unescape_body(envelope.request_body) == body


def test_lone_surrogate_in_params_is_stored_escaped(rpc):
    body = _echo('"\\ud800x"').encode()
    assert _post(rpc, body)["result"] == "\ud800x"
    envelope, (call,) = _logged()
    assert call.params == ["\\ud800x"]
    assert call.result == "\\ud800x"
    assert unescape_json(call.result) == "\ud800x"
    assert unescape_body(envelope.request_body) == body


def test_lone_surrogate_as_id_and_method_name_is_stored_escaped(rpc):
    body = b'{"jsonrpc":"2.0","method":"no\\udfffsuch","id":"\\udfff"}'
    answer = _post(rpc, body)
    assert answer["error"]["code"] == -32601
    assert answer["id"] == "\udfff"
    _envelope, (call,) = _logged()
    assert call.request_id == "\\udfff"
    assert call.method == "no\\udfffsuch"
    assert unescape_text(call.method) == "no\udfffsuch"


def test_invalid_utf8_in_the_body_is_stored_as_hex_escapes(rpc):
    body = b'{"jsonrpc":"2.0","method":"echo","params":["\xff\xfe\xed\xa0\x80"],"id":1}'
    assert _post(rpc, body)["error"]["code"] == -32700
    envelope = Envelope.objects.get()
    assert envelope.request_body == (
        '{"jsonrpc":"2.0","method":"echo","params":["\\xff\\xfe\\xed\\xa0\\x80"],"id":1}'
    )
    assert unescape_body(envelope.request_body) == body


def test_literal_backslash_x_in_a_body_stays_unambiguous(rpc):
    body = b'not json \\x41 \xff'
    assert _post(rpc, body)["error"]["code"] == -32700
    envelope = Envelope.objects.get()
    assert envelope.request_body == "not json \\x5cx41 \\xff"
    assert unescape_body(envelope.request_body) == body


def test_literal_backslash_u_text_stays_unambiguous(rpc):
    body = _echo('"\\\\u0041 and \\\\ud800"').encode()
    assert _post(rpc, body)["result"] == "\\u0041 and \\ud800"
    _envelope, (call,) = _logged()
    assert call.params == ["\\u005cu0041 and \\u005cud800"]
    assert unescape_json(call.params) == ["\\u0041 and \\ud800"]


def test_integers_of_2_to_the_64_are_stored_exactly_as_params_result_and_id(rpc):
    body = _echo(str(2**64), id=str(2**64 + 1)).encode()
    assert _post(rpc, body) == {"jsonrpc": "2.0", "result": 2**64, "id": 2**64 + 1}
    _envelope, (call,) = _logged()
    assert call.params == [2**64]
    assert call.result == 2**64
    assert call.request_id == 2**64 + 1
    assert type(call.request_id) is int


def test_huge_negative_integer_is_stored_exactly(rpc):
    value = -(2**100)
    assert _post(rpc, _echo(str(value)).encode())["result"] == value
    _envelope, (call,) = _logged()
    assert call.params == [value]


# The most digits Python turns an int into text by default (sys.int_info): a
# method can compute a result past it from params that parse.
DIGITS = sys.int_info.default_max_str_digits
BIG = int("9" * DIGITS)  # parses; 2 * BIG has one digit more
TWICE_BIG = "1" + "9" * (DIGITS - 1) + "8"  # the digits of 2 * BIG, written without str()


def _subtract_big(id=None):
    tail = "" if id is None else ',"id":%d' % id
    return '{"jsonrpc":"2.0","method":"subtract","params":[%d,-%d]%s}' % (BIG, BIG, tail)


def test_a_notification_whose_result_has_too_many_digits_for_str_is_not_answered_and_logged(rpc):
    response = rpc(_subtract_big().encode())
    assert (response.status_code, response.content) == (204, b"")
    envelope, (call,) = _logged()
    assert call.method == "subtract"
    assert call.error_code is None
    # Stored as its JSON text in the marker of values JSON readers refuse.
    assert call.result["__unserializable__"].startswith("1999")


def test_a_result_with_too_many_digits_for_str_is_answered_with_all_its_digits_and_logged(rpc):
    response = rpc(_subtract_big(id=7).encode())
    assert response.status_code == 200
    assert response.content == b'{"jsonrpc":"2.0","result":%s,"id":7}' % TWICE_BIG.encode()
    envelope, (call,) = _logged()
    assert call.request_id == 7
    assert call.error_code is None
    assert envelope.response_body == response.content.decode()
    assert call.result["__unserializable__"].startswith("1999")


def test_a_batch_mixing_a_too_long_result_and_its_notification_answers_only_the_request(rpc):
    body = "[%s,%s]" % (_subtract_big(), _subtract_big(id=1))
    response = rpc(body.encode())
    assert response.content == b'[{"jsonrpc":"2.0","result":%s,"id":1}]' % TWICE_BIG.encode()
    _envelope, calls = _logged()
    assert [c.request_id for c in calls] == [None, 1]


def test_the_failure_report_of_rows_with_too_many_digits_never_raises(caplog):
    from jsonrpc_app.log.rows import report_failure

    class Rows:
        def as_dict(self):
            return {"result": 2 * BIG, "odd": object()}

    report_failure(Rows())
    assert "Could not write the JSON-RPC call log" in caplog.text


@pytest.mark.parametrize("value", [1e308, -1e308, 1.7976931348623157e308, 1.5e16, 5e-324])
def test_extreme_floats_are_stored_as_the_same_float(rpc, value):
    assert _post(rpc, _echo(repr(value), id=repr(value)).encode())["result"] == value
    _envelope, (call,) = _logged()
    assert call.params == [value]
    assert type(call.params[0]) is float
    assert call.result == value
    assert type(call.result) is float
    assert call.request_id == value


def test_number_beyond_a_double_is_stored_as_null_like_the_answer_with_digits_in_the_body(rpc):
    body = _echo("1e400").encode()
    assert _post(rpc, body) == {"jsonrpc": "2.0", "result": None, "id": 1}
    envelope, (call,) = _logged()
    assert call.params == [None]
    assert unescape_body(envelope.request_body) == body


def test_a_number_beyond_a_double_in_params_is_stored_as_null_when_the_answer_holds_no_null(rpc):
    # The answer (an error) holds no null, so the bodies alone cannot tell
    # that a param was read as infinity: the parse says so (ParsedBody.finite).
    body = b'{"jsonrpc":"2.0","method":"testapp.big","params":[1e400],"id":1}'
    answer = _post(rpc, body)
    assert answer["error"]["code"] == -32603 and b"null" not in json.dumps(answer).encode()
    _envelope, (call,) = _logged()
    assert call.params == [None]


def test_batch_mixing_every_hostile_value_is_one_envelope_with_all_its_calls(rpc):
    body = (
        "["
        + ",".join(
            [
                _echo('"\\u0000"', 1),
                _echo('"\\ud800"', 2),
                _echo(str(2**64), 3),
                _echo("1e308", 4),
                _echo("-1e400", 5),
                '{"jsonrpc":"2.0","method":"echo","params":["\\u0000"]}',
            ]
        )
        + "]"
    ).encode()
    answers = _post(rpc, body)
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5]
    assert answers[4]["result"] is None
    _envelope, calls = _logged()
    assert [c.params for c in calls] == [
        ["\\u0000"],
        ["\\ud800"],
        [2**64],
        [1e308],
        [None],
        ["\\u0000"],
    ]
    assert calls[-1].is_notification


# The escaping rules themselves, for any input.

_any_char = st.characters(codec=None, categories=None)


@given(st.text(alphabet=_any_char))
def test_escape_text_round_trips_and_leaves_no_nul_or_surrogate(value):
    escaped = escape_text(value)
    assert unescape_text(escaped) == value
    assert "\x00" not in escaped
    escaped.encode("utf-8")  # no lone surrogate left


@given(st.binary())
def test_escape_body_round_trips_and_leaves_no_nul(value):
    escaped = escape_body(value)
    assert unescape_body(escaped) == value
    assert "\x00" not in escaped
    escaped.encode("utf-8")


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(alphabet=_any_char),
        lambda children: st.lists(children) | st.dictionaries(st.text(alphabet=_any_char), children),
        max_leaves=10,
    )
)
def test_escape_json_round_trips_finite_values(value):
    assert unescape_json(escape_json(value)) == value


def test_escape_json_writes_non_finite_floats_as_null():
    assert escape_json([math.inf, -math.inf, math.nan]) == [None, None, None]


def test_valid_json_bodies_are_stored_unchanged():
    body = b'{"jsonrpc":"2.0","method":"echo","params":["caf\xc3\xa9 \\\\ \\u00e9"],"id":1}'
    assert escape_body(body) == body.decode()


def test_a_project_that_lowers_the_digit_limit_still_gets_its_long_results_logged(rpc):
    # sys.set_int_max_str_digits() accepts limits down to 640 digits.
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        big = int("9" * 640)
        body = '{"jsonrpc":"2.0","method":"subtract","params":[%d,-%d],"id":3}' % (big, big)
        response = rpc(body.encode())
        assert response.content == b'{"jsonrpc":"2.0","result":1%s8,"id":3}' % (b"9" * 639)
    finally:
        sys.set_int_max_str_digits(before)
    _envelope, (call,) = _logged()
    assert call.result["__unserializable__"].startswith("1999")
