"""
The fast paths of the endpoint (issue 6) give exactly the answers of the
general ones: the depth limit of a batch checked from bracket counts, the
long-digit test that routes big integers to the exact decoder, DRF
authentication skipped when it cannot find anyone, and no reference cycle
left per request for the garbage collector. No timing here: the benchmark
(``make bench``) measures speed; these pin behaviour.
"""

import gc
import json
import re
from typing import Optional

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.test import RequestFactory
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.authentication import SessionAuthentication

from jsonrpc_app import CallContext, InvalidParams, MethodRegistry, protocol
from jsonrpc_app.params import Binder
from jsonrpc_app.views import JsonRpcView

# --- the depth limit of a batch -----------------------------------------------------


def depth(value):
    """The nesting of containers in ``value``, counted the plain recursive way."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def too_deep(envelope):
    return envelope.error is not None and "nested deeper" in str(envelope.error.get("data"))


def batch(*params_list, **extra):
    return [
        dict({"jsonrpc": "2.0", "method": "m", "params": params, "id": i}, **extra)
        for i, params in enumerate(params_list)
    ]


def test_batch_with_params_nested_deeper_than_max_depth_is_refused():
    body = json.dumps(batch([1, 2], [[["x"]]])).encode()  # batch, request, params, [, [ = 5 levels
    assert too_deep(protocol.parse(body, max_depth=4))
    assert not too_deep(protocol.parse(body, max_depth=5))


def test_batch_with_deep_value_in_an_extra_member_is_refused():
    body = json.dumps(batch([1], [2], extra=[[[[1]]]])).encode()
    assert too_deep(protocol.parse(body, max_depth=5))
    assert not too_deep(protocol.parse(body, max_depth=6))


def test_batch_of_invalid_elements_nested_too_deep_is_refused():
    body = json.dumps([[[[[[1]]]]], {"jsonrpc": "2.0", "method": "m", "id": 1}]).encode()
    assert too_deep(protocol.parse(body, max_depth=5))


def test_brackets_inside_strings_are_not_nesting_in_a_batch():
    body = json.dumps(batch(*[["[[[[{{{{"]] * 10)).encode()
    envelope = protocol.parse(body, max_depth=3)
    assert envelope.error is None
    assert [item.params for item in envelope.items] == [["[[[[{{{{"]] * 10


def test_batch_of_notifications_and_calls_without_params_at_the_limit_is_read():
    body = json.dumps(
        [{"jsonrpc": "2.0", "method": "m"}, {"jsonrpc": "2.0", "method": "m", "params": {"a": [1]}}]
    ).encode()
    assert not too_deep(protocol.parse(body, max_depth=4))
    assert too_deep(protocol.parse(body, max_depth=3))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="ab[]{}\"\\"),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("xyz"), children, max_size=3),
    max_leaves=12,
)
elements = st.one_of(
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": st.just("m")},
        optional={"params": st.lists(json_values, max_size=3) | st.dictionaries(st.sampled_from("pq"), json_values), "id": st.integers(), "extra": json_values},
    ),
    json_values,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(elements, min_size=1, max_size=6), st.integers(min_value=1, max_value=8))
def test_batch_depth_decision_matches_the_recursive_count(value, max_depth):
    envelope = protocol.parse(json.dumps(value).encode(), max_depth=max_depth)
    assert too_deep(envelope) == (depth(value) > max_depth)
    if not too_deep(envelope):
        assert len(envelope.items) == len(value)


# --- the usual element of a batch, read by subscripts -----------------------------------


def read_as_the_spec_says(index, value):
    """What one element of an envelope is, read member by member (protocol._checked's general path)."""
    if type(value) is not dict:
        return ("invalid", index, None)
    absent = object()
    id = value.get("id", absent)
    if id is not absent and not (type(id) in (str, int, float) or id is None):
        return ("invalid", index, None)
    id = None if id is absent else id
    params = value.get("params", absent)
    if (
        value.get("jsonrpc") != "2.0"
        or type(value.get("method")) is not str
        or not (params is absent or type(params) in (list, dict))
    ):
        return ("invalid", index, id)
    return ("request", index, value["method"], None if params is absent else params, id, "id" not in value)


def read_by_parse(item):
    if isinstance(item, protocol.InvalidItem):
        return ("invalid", item.index, item.id)
    return ("request", item.index, item.method, item.params, item.id, item.is_notification)


member_values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    ["2.0", "2", "m", ""]
) | st.lists(st.integers(), max_size=2) | st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=2)
# Mostly what a client sends, now and then anything else in one member or another.
usually = {
    "jsonrpc": st.just("2.0"),
    "method": st.just("m"),
    "params": st.lists(st.integers(), max_size=2) | st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=2),
    "id": st.integers() | st.text(max_size=2),
}
one_member_off = st.sampled_from(sorted(usually)).flatmap(
    lambda off: st.fixed_dictionaries({key: member_values if key == off else value for key, value in usually.items()})
)
four_members = (
    st.fixed_dictionaries(usually)
    | one_member_off
    | st.dictionaries(st.sampled_from(["jsonrpc", "method", "params", "id", "extra"]), member_values, min_size=4, max_size=4)
)


@settings(max_examples=500, deadline=None)
@given(st.lists(four_members | elements, min_size=1, max_size=6))
def test_elements_of_four_members_are_read_as_the_spec_says(value):
    envelope = protocol.parse(json.dumps(value).encode(), max_depth=64)
    assert [read_by_parse(item) for item in envelope.items] == [
        read_as_the_spec_says(i, element) for i, element in enumerate(value)
    ]


def test_a_true_id_in_a_usual_element_is_an_invalid_request_without_an_id():
    envelope = protocol.parse(b'[{"jsonrpc": "2.0", "method": "m", "params": [], "id": true}]')
    assert read_by_parse(envelope.items[0]) == ("invalid", 0, None)


# --- the binder's common case, written out ----------------------------------------------


def two_ints(minuend: int, subtrahend: int):
    pass


def mixed(a: str, b: float, c: bool, d: Optional[int] = None, e=None):
    pass


def unannotated(a, b):
    pass


def no_params():
    pass


def outcome(bind, params):
    try:
        args, kwargs = bind(params)
    except InvalidParams as exc:
        return ("invalid params", exc.data)
    return (list(args), dict(kwargs))


# Values of every JSON type, the params' own among them.
param_values = st.sampled_from([0, 7, -1, 2.5, 5.0, "x", "", True, False, None]) | member_values
# Params that fit each signature, which the tests below change in one place at most.
FITTING = {
    two_ints: {"minuend": 42, "subtrahend": 23},
    mixed: {"a": "x", "b": 1.5, "c": True, "d": 3, "e": [1]},
    unannotated: {"a": 1, "b": None},
    no_params: {},
}


@st.composite
def params_for(draw, func):
    fitting = dict(FITTING[func])
    names = list(fitting)
    off = draw(st.sampled_from([None, *names]))
    if off is not None:
        fitting[off] = draw(param_values)
    change = draw(st.sampled_from(["none", "drop last", "add one", "one for another"]))
    if change == "drop last" and names:
        fitting.pop(names[-1])
    elif change == "add one":
        fitting["z"] = draw(param_values)
    elif change == "one for another" and names:
        fitting.pop(draw(st.sampled_from(names)))
        fitting["z"] = draw(param_values)
    shape = draw(st.sampled_from(["list", "dict", "none"]))
    if shape == "none":
        return None
    return list(fitting.values()) if shape == "list" else fitting


@pytest.mark.parametrize("func", list(FITTING))
@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_written_out_bind_answers_as_the_general_bind(func, data):
    params = data.draw(params_for(func))
    binder = Binder(func)
    assert binder.bind is not Binder.bind.__get__(binder)  # the written-out one
    assert outcome(binder.bind, params) == outcome(Binder.bind.__get__(binder), params)


@pytest.mark.parametrize(
    "params",
    [
        {"a": "x", "b": 1.5, "c": True, "e": [1], "z": 0},  # "d" (may be null) left out, "z" in its place
        ["x", True, True, 3, None],  # a bool is no JSON number
        ["x", 1, 1, None, None],  # nor a JSON boolean an integer
        ["x", 1.5, True, 3],  # "e" left out: the general bind's default
        {"a": "x", "b": 1, "c": False, "d": None, "e": None},
    ],
)
def test_written_out_bind_answers_as_the_general_bind_at_the_edges(params):
    binder = Binder(mixed)
    assert outcome(binder.bind, params) == outcome(Binder.bind.__get__(binder), params)


def test_written_out_bind_hands_the_params_over_as_they_came():
    binder = Binder(two_ints)
    params, named = [42, 23], {"minuend": 42, "subtrahend": 23}
    assert binder.bind(params)[0] is params
    assert binder.bind(named)[1] is named
    with pytest.raises(InvalidParams):
        binder.bind([True, 1])  # a bool is no JSON integer


def test_a_binder_off_the_fast_path_has_no_written_out_bind():
    binder = Binder(two_ints)
    binder.converters["minuend"] = lambda value, path: value * 2
    binder._refresh()
    assert "bind" not in vars(binder)
    assert binder.bind([1, 2]) == ([], {"minuend": 2, "subtrahend": 2})


# --- big integers go to the exact decoder -----------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60) | st.text(alphabet="0123456789 .-e[],", max_size=60).map(str.encode))
def test_long_digit_run_test_agrees_with_the_regular_expression(body):
    assert protocol.has_long_digit_run(body) == bool(re.search(rb"[0-9]{19}", body))


def test_integers_beyond_64_bits_in_a_batch_are_read_exactly():
    big = 123456789012345678901234567890
    body = json.dumps(batch([big, -(2**70)], [2**63 - 1])).encode()
    envelope = protocol.parse(body, max_depth=64)
    assert [item.params for item in envelope.items] == [[big, -(2**70)], [2**63 - 1]]
    assert type(envelope.items[0].params[0]) is int


# --- authentication that cannot find anyone ------------------------------------------------

registry = MethodRegistry("hot-path-tests")


@registry.register
def whoami(context: CallContext) -> dict:
    request = context.request
    return {
        "user": getattr(context.user, "username", None) or type(context.user).__name__,
        "drf_user": type(request.user).__name__,
        "auth": request.auth,
        "authenticator": type(request.successful_authenticator).__name__,
    }


WHOAMI = b'{"jsonrpc":"2.0","method":"whoami","id":1}'


def call_view(request, **options):
    response = JsonRpcView.as_view(registry=registry, **options)(request)
    return json.loads(response.content)


class EveryoneIsAlice(SessionAuthentication):
    """A subclass of a class the endpoint knows: it must be run, not assumed."""

    def authenticate(self, request):
        return User.objects.get(username="alice"), "alice-token"

    def enforce_csrf(self, request):
        return None


@pytest.mark.django_db
def test_a_subclass_of_session_authentication_is_run_not_assumed():
    User.objects.create_user("alice", password="pw")
    request = RequestFactory().post("/rpc/", WHOAMI, content_type="application/json")
    answer = call_view(request, authentication_classes=[EveryoneIsAlice])
    assert answer["result"] == {
        "user": "alice",
        "drf_user": "User",
        "auth": "alice-token",
        "authenticator": "EveryoneIsAlice",
    }


@pytest.mark.django_db
def test_an_inactive_session_user_calls_as_anonymous_without_a_csrf_check():
    request = RequestFactory().post("/rpc/", WHOAMI, content_type="application/json")
    request.user = User.objects.create_user("carol", password="pw", is_active=False)
    answer = call_view(request)
    assert answer["result"] == {
        "user": "AnonymousUser",
        "drf_user": "AnonymousUser",
        "auth": None,
        "authenticator": "NoneType",
    }
    # As DRF's own conclusion does, the Django request now carries DRF's anonymous user.
    assert isinstance(request.user, AnonymousUser)


def test_no_credentials_give_drf_unauthenticated_user_setting(settings):
    settings.REST_FRAMEWORK = dict(settings.REST_FRAMEWORK, UNAUTHENTICATED_USER=None)
    request = RequestFactory().post("/rpc/", WHOAMI, content_type="application/json")
    answer = call_view(request)
    assert answer["result"]["drf_user"] == "NoneType"


def test_the_view_function_is_csrf_exempt_for_the_middleware():
    # The endpoint's SessionAuthentication enforces CSRF itself, as DRF's APIView does.
    assert JsonRpcView.as_view(registry=registry).csrf_exempt is True


# --- nothing left for the garbage collector ----------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}',
        json.dumps([{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(20)]).encode(),
    ],
    ids=["single", "batch"],
)
def test_a_request_leaves_no_reference_cycle_behind(settings, body):
    # Cyclic garbage is freed only by the collector, whose runs a busy
    # endpoint then pays for; everything of a request must go by refcount.
    settings.JSONRPC = {"LOG_POLICY": "none"}
    view = JsonRpcView.as_view()
    factory = RequestFactory()
    for _ in range(3):
        view(factory.post("/rpc/", body, content_type="application/json"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            response = view(factory.post("/rpc/", body, content_type="application/json"))
            assert response.status_code == 200
            del response
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert unreachable == 0
