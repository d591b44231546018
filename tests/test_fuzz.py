"""
Property-based: whatever bytes or JSON values are posted, the answer is a valid
JSON-RPC response (or 204 with nothing), never an HTTP 500.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsonrpc_app.registry import registry

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

# Safe to call with anything: no method of the test project has lasting effects.
method_names = st.sampled_from(sorted(m.name for m in registry) + ["nope", "rpc.discover", "__class__", ""])
ids = st.none() | st.integers() | st.text(max_size=5) | st.floats(allow_nan=False, allow_infinity=False) | st.booleans() | st.lists(st.integers(), max_size=2)
params = st.none() | st.lists(json_values, max_size=4) | st.dictionaries(st.text(max_size=10), json_values, max_size=4) | json_values


@st.composite
def request_objects(draw):
    obj = {}
    if draw(st.booleans()) or draw(st.booleans()):
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]))
    if draw(st.integers(0, 9)):
        obj["method"] = draw(method_names | json_values)
    if draw(st.booleans()):
        obj["params"] = draw(params)
    if draw(st.booleans()):
        obj["id"] = draw(ids)
    return obj


envelopes = request_objects() | st.lists(request_objects() | json_values, max_size=6) | json_values


def assert_valid_answer(response):
    assert response.status_code in (200, 204), response.status_code
    if response.status_code == 204:
        assert response.content == b""
        return
    assert response["Content-Type"] == "application/json"
    answer = json.loads(response.content)
    answers = answer if isinstance(answer, list) else [answer]
    if isinstance(answer, list):
        assert answers, "an empty array must never be returned"
    for item in answers:
        assert item["jsonrpc"] == "2.0"
        assert "id" in item
        assert ("result" in item) != ("error" in item)
        if "error" in item:
            assert type(item["error"]["code"]) is int
            assert type(item["error"]["message"]) is str
            assert set(item["error"]) <= {"code", "message", "data"}


@FUZZ
@given(body=st.binary(max_size=300))
def test_arbitrary_bytes_get_a_valid_answer(rpc, body):
    assert_valid_answer(rpc(body))


@FUZZ
@given(value=envelopes)
def test_arbitrary_json_values_get_a_valid_answer(rpc, value):
    response = rpc(json.dumps(value))
    assert_valid_answer(response)
    # Responses answer exactly the non-notification elements.
    if isinstance(value, list) and value and response.status_code == 200:
        assert len(json.loads(response.content)) <= len(value)


@FUZZ
@given(value=envelopes)
def test_arbitrary_text_bodies_with_mangled_bytes_get_a_valid_answer(rpc, value):
    body = json.dumps(value).encode()
    assert_valid_answer(rpc(body[: len(body) // 2]))
    assert_valid_answer(rpc(body + b"\xff"))
