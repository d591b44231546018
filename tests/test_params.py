"""Params checked against annotations before the method runs: -32602 with a path per offending value."""

import dataclasses
import datetime
import decimal
import enum
import ipaddress
import json
import uuid
from typing import Annotated, Any, Literal, NewType, Optional, TypedDict, Union

import pytest

from jsonrpc_app import CallContext, InvalidParams, MethodRegistry
from jsonrpc_app.dispatch import execute
from jsonrpc_app.params import MAX_ERRORS, Binder
from jsonrpc_app.protocol import parse


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Item:
    sku: str
    qty: int
    price: decimal.Decimal = decimal.Decimal("0")


@dataclasses.dataclass
class Order:
    items: list[Item]
    note: Optional[str] = None


class Address(TypedDict, total=False):
    city: str
    zip: int


class Person(TypedDict):
    name: str
    address: Address


@dataclasses.dataclass
class Node:
    value: int
    children: "list[Node]" = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Range:
    low: int
    high: int

    def __post_init__(self):
        if self.low > self.high:
            raise ValueError("low must not exceed high")


UserId = NewType("UserId", int)


class Opaque:
    """A class JSON cannot hold: not checked."""


_NO_DEFAULT = object()


def bind_one(annotation, value, default=_NO_DEFAULT):
    """Bind ``value`` to a one-parameter function annotated with ``annotation``; return the value the method gets."""
    if default is _NO_DEFAULT:

        def f(x):
            return x

    else:

        def f(x=default):
            return x

    f.__annotations__ = {"x": annotation}
    args, kwargs = Binder(f).bind({"x": value})
    return kwargs["x"]


def errors_of(annotation, value):
    with pytest.raises(InvalidParams) as info:
        bind_one(annotation, value)
    return info.value.data


CONVERTED = [
    (int, 5, 5),
    (int, -(10**30), -(10**30)),
    (int, 2.0, 2),
    (float, 1.5, 1.5),
    (float, 7, 7),
    (str, "x", "x"),
    (bool, False, False),
    (None, None, None),
    (list[int], [1, 2], [1, 2]),
    (list[float], [1, 2.5], [1, 2.5]),
    (list, [1, "a", None], [1, "a", None]),
    (tuple[int, str], [1, "a"], (1, "a")),
    (tuple[int, ...], [1, 2], (1, 2)),
    (set[str], ["a", "b", "a"], {"a", "b"}),
    (dict[str, int], {"a": 1}, {"a": 1}),
    (dict[int, str], {"1": "a", "-2": "b"}, {1: "a", -2: "b"}),
    (dict, {"a": [1]}, {"a": [1]}),
    (Optional[int], None, None),
    (Optional[int], 3, 3),
    (int | None, None, None),
    (Union[int, str], "a", "a"),
    (Union[int, str], 4, 4),
    (Literal["a", "b"], "b", "b"),
    (Literal[1, 2], 2, 2),
    (Color, "blue", Color.BLUE),
    (Level, 2, Level.HIGH),
    (Literal[Color.RED], "red", Color.RED),
    (datetime.datetime, "2024-05-01T10:20:30Z", datetime.datetime(2024, 5, 1, 10, 20, 30, tzinfo=datetime.timezone.utc)),
    (datetime.datetime, "2024-05-01T10:20:30.123", datetime.datetime(2024, 5, 1, 10, 20, 30, 123000)),
    (datetime.date, "2024-05-01", datetime.date(2024, 5, 1)),
    (datetime.time, "10:20:30", datetime.time(10, 20, 30)),
    (datetime.timedelta, "P1DT2H", datetime.timedelta(days=1, hours=2)),
    (decimal.Decimal, "1.10", decimal.Decimal("1.10")),
    (decimal.Decimal, "-1e3", decimal.Decimal("-1e3")),
    (decimal.Decimal, 0.1, decimal.Decimal("0.1")),
    (decimal.Decimal, 3, decimal.Decimal(3)),
    (uuid.UUID, "12345678-1234-5678-1234-567812345678", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    (ipaddress.IPv4Address, "192.0.2.1", ipaddress.IPv4Address("192.0.2.1")),
    (Item, {"sku": "A", "qty": 2}, Item("A", 2)),
    (Item, {"sku": "A", "qty": 2, "price": "9.99"}, Item("A", 2, decimal.Decimal("9.99"))),
    (Order, {"items": [{"sku": "A", "qty": 1}]}, Order([Item("A", 1)])),
    (Person, {"name": "Ann", "address": {}}, {"name": "Ann", "address": {}}),
    (Person, {"name": "Ann", "address": {"zip": 1}}, {"name": "Ann", "address": {"zip": 1}}),
    (Node, {"value": 1, "children": [{"value": 2}]}, Node(1, [Node(2)])),
    (Annotated[int, "meta"], 3, 3),
    (UserId, 3, 3),
    (Any, {"anything": [1]}, {"anything": [1]}),
    (object, "x", "x"),
    (Opaque, [1], [1]),
]


@pytest.mark.parametrize("annotation, value, expected", CONVERTED)
def test_valid_and_convertible_values_reach_the_method_converted(annotation, value, expected):
    result = bind_one(annotation, value)
    assert result == expected
    assert type(result) is type(expected)


REJECTED = [
    (int, True, "x", "integer"),
    (int, 1.5, "x", "integer"),
    (int, "5", "x", "integer"),
    (int, None, "x", "integer"),
    (float, True, "x", "number"),
    (float, "1.5", "x", "number"),
    (str, 1, "x", "string"),
    (bool, 1, "x", "boolean"),
    (bool, "true", "x", "boolean"),
    (list[int], {"a": 1}, "x", "array"),
    (list[int], [1, "2"], "x[1]", "integer"),
    (list[list[int]], [[1], [2, True]], "x[1][1]", "integer"),
    (tuple[int, str], [1], "x", "array of 2 items"),
    (tuple[int, str], [1, 2], "x[1]", "string"),
    (set[int], [1, "a"], "x[1]", "integer"),
    (dict[str, int], {"a": "1"}, "x.a", "integer"),
    (dict[str, int], {"two words": "1"}, 'x["two words"]', "integer"),
    (dict[str, int], [1], "x", "object"),
    (dict[int, str], {"one": "a"}, "x.one", "integer"),
    (Optional[int], "a", "x", "integer"),
    (Union[int, str], 1.5, "x", "integer or string"),
    (Literal["a", "b"], "c", "x", 'one of "a", "b"'),
    (Literal[1], True, "x", "one of 1"),
    (Color, "RED", "x", 'one of "red", "blue"'),
    (Color, ["red"], "x", 'one of "red", "blue"'),
    (Level, True, "x", "one of 1, 2"),
    (Level, 1.0, "x", "one of 1, 2"),
    (datetime.datetime, "yesterday", "x", "date-time"),
    (datetime.datetime, 1700000000, "x", "date-time"),
    (datetime.date, "2024-05-01T10:00:00", "x", "date"),
    (datetime.date, "2024-02-30", "x", "date"),
    (datetime.timedelta, "soon", "x", "duration"),
    (decimal.Decimal, "1_000", "x", "decimal"),
    (decimal.Decimal, "NaN", "x", "decimal"),
    (decimal.Decimal, "Infinity", "x", "decimal"),
    (decimal.Decimal, " 1", "x", "decimal"),
    (decimal.Decimal, True, "x", "decimal"),
    (uuid.UUID, "not-a-uuid", "x", "uuid"),
    (uuid.UUID, 5, "x", "uuid"),
    (ipaddress.IPv4Address, "192.0.2.256", "x", "ipv4"),
    (ipaddress.IPv4Address, "2001:db8::1", "x", "ipv4"),
    (ipaddress.IPv4Address, 3221225985, "x", "ipv4"),
    (Item, "A", "x", "object (Item)"),
    (Item, {"sku": "A", "qty": "2"}, "x.qty", "integer"),
    (Person, {"name": "Ann", "address": {"zip": "x"}}, "x.address.zip", "integer"),
    (Node, {"value": 1, "children": [{"value": 2, "children": [{"value": "3"}]}]}, "x.children[0].children[0].value", "integer"),
    (UserId, "u1", "x", "integer"),
]


@pytest.mark.parametrize("annotation, value, path, expected", REJECTED)
def test_invalid_values_are_refused_with_path_and_expected_type(annotation, value, path, expected):
    data = errors_of(annotation, value)
    assert [e["path"] for e in data] == [path]
    assert data[0]["expected"] == expected
    assert data[0]["message"].startswith("expected ")


def test_a_value_an_annotation_cannot_convert_is_never_truncated():
    data = errors_of(int, 1.5)
    assert data == [{"path": "x", "message": "expected integer, got number 1.5", "expected": "integer"}]


def test_bool_is_not_an_integer_even_nested():
    data = errors_of(dict[str, list[int]], {"a": [1, False]})
    assert data[0]["path"] == "x.a[1]"
    assert "boolean" in data[0]["message"]


def test_nested_dataclass_paths_name_each_bad_item():
    def place(order: Order):
        return order

    with pytest.raises(InvalidParams) as info:
        Binder(place).bind(
            {"order": {"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 1}, {"sku": "C", "qty": 1.5}, {"qty": 2}]}}
        )
    assert info.value.data == [
        {"path": "order.items[2].qty", "message": "expected integer, got number 1.5", "expected": "integer"},
        {"path": "order.items[3].sku", "message": "missing required key"},
    ]


def test_unknown_keys_of_a_dataclass_or_typeddict_are_refused():
    assert errors_of(Item, {"sku": "A", "qty": 1, "colour": "red"}) == [
        {"path": "x.colour", "message": "unexpected key"}
    ]
    assert errors_of(Person, {"name": "A", "address": {}, "age": 3}) == [
        {"path": "x.age", "message": "unexpected key"}
    ]


def test_missing_required_typeddict_key():
    assert errors_of(Person, {"name": "A"}) == [{"path": "x.address", "message": "missing required key"}]


def test_dataclass_post_init_value_error_is_an_invalid_params_error():
    assert bind_one(Range, {"low": 1, "high": 2}) == Range(1, 2)
    assert errors_of(Range, {"low": 3, "high": 2}) == [{"path": "x", "message": "low must not exceed high"}]


def test_every_offending_param_is_listed_in_one_error():
    def f(a: int, b: str, c: list[int]):
        pass

    with pytest.raises(InvalidParams) as info:
        Binder(f).bind([True, 2, [1, "x", None]])
    assert [(e["path"], e["expected"]) for e in info.value.data] == [
        ("a", "integer"),
        ("b", "string"),
        ("c[1]", "integer"),
        ("c[2]", "integer"),
    ]


def test_string_values_are_not_echoed_in_messages():
    data = errors_of(int, "hunter2-secret")
    assert "hunter2" not in repr(data)
    data = errors_of(datetime.date, "hunter2-secret")
    assert "hunter2" not in repr(data)


def test_errors_are_capped():
    data = errors_of(list[int], ["x"] * 5000)
    assert len(data) <= MAX_ERRORS + 1


def test_unannotated_params_accept_any_json_value():
    def f(a, b=None):
        return a

    binder = Binder(f)
    assert binder.converters == {}
    for value in (1, "x", None, True, [1, {"a": None}], {"k": 1.5}):
        assert binder.bind([value]) == ([value], {})
        assert binder.bind({"a": value}) == ((), {"a": value})


def test_default_none_also_accepts_null():
    assert bind_one(int, None, default=None) is None
    assert bind_one(int, 4, default=None) == 4
    with pytest.raises(InvalidParams):
        bind_one(int, "4", default=None)


def test_varargs_annotation_checks_each_extra_positional_param():
    def total(first: int, *numbers: float):
        return first

    binder = Binder(total)
    assert binder.bind([1, 2, 3.5]) == ([1, 2, 3.5], {})
    with pytest.raises(InvalidParams) as info:
        binder.bind([1, 2, "3", True])
    assert [e["path"] for e in info.value.data] == ["numbers[1]", "numbers[2]"]


def test_var_keyword_annotation_checks_each_extra_named_param():
    def tag(name: str, **counts: int):
        return counts

    binder = Binder(tag)
    assert binder.bind({"name": "a", "x": 1}) == ([], {"name": "a", "x": 1})
    with pytest.raises(InvalidParams) as info:
        binder.bind({"name": "a", "x": "1", "y": 2})
    assert info.value.data == [{"path": "x", "message": "expected integer, got string", "expected": "integer"}]


def test_call_context_parameter_is_not_a_param_and_not_checked():
    def whoami(a: int, context: CallContext):
        return context

    binder = Binder(whoami, context_type=CallContext)
    ctx = object()
    assert binder.bind([1], ctx) == ([], {"a": 1, "context": ctx})
    with pytest.raises(InvalidParams):
        binder.bind({"a": "1"}, ctx)


def test_int_str_float_annotations_stay_on_the_fast_path():
    def subtract(minuend: int, subtrahend: int):
        return minuend - subtrahend

    binder = Binder(subtract)
    assert binder.simple
    params = [42, 23]
    args, kwargs = binder.bind(params)
    assert args is params  # handed over as it came: nothing copied or converted
    named = {"minuend": 42, "subtrahend": 23}
    assert binder.bind(named)[1] is named

    def mixed(a: str, b: float, c: bool, d: Optional[int] = None, e=None):
        pass

    assert Binder(mixed).simple


def test_converting_annotations_leave_the_fast_path():
    def when(at: datetime.datetime):
        pass

    assert not Binder(when).simple


def test_unannotated_signature_keeps_the_fast_path_without_checks():
    def f(a, b):
        pass

    binder = Binder(f)
    assert binder.simple and binder.checks is None


def test_integral_float_for_int_is_converted_through_the_slow_path():
    def subtract(minuend: int, subtrahend: int):
        pass

    assert Binder(subtract).bind([5.0, 1]) == ([], {"minuend": 5, "subtrahend": 1})


def test_converters_hook_takes_custom_converters():
    def f(code):
        pass

    binder = Binder(f)

    def upper(value, path):
        if type(value) is not str:
            raise InvalidParams(data=[{"path": path, "message": "expected a code"}])
        return value.upper()

    binder.converters["code"] = upper
    binder._refresh()
    assert not binder.simple
    assert binder.bind(["ab"]) == ([], {"code": "AB"})
    with pytest.raises(InvalidParams) as info:
        binder.bind({"code": 1})
    assert info.value.data == [{"path": "code", "message": "expected a code"}]


def test_unresolvable_string_annotation_accepts_anything():
    def f(x: "NoSuchType"):  # noqa: F821
        return x

    assert Binder(f).bind(["anything"]) == (["anything"], {})


# -- through the dispatcher ----------------------------------------------------------

reg = MethodRegistry("typed-params-tests")
calls = []


@reg.register
def reserve(items: list[Item], when: datetime.date, level: Level = Level.LOW) -> dict:
    calls.append((items, when, level))
    return {"count": len(items), "when": when, "level": level.value}


def run(body):
    import json

    envelope = parse(json.dumps(body).encode())
    response, _records = execute(envelope, CallContext(registry=reg, log=False))
    return response


def test_invalid_params_never_run_the_method_and_answer_32602():
    calls.clear()
    response = run(
        {
            "jsonrpc": "2.0",
            "method": "reserve",
            "params": {"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": True}], "when": "2024-13-01"},
            "id": 1,
        }
    )
    assert calls == []
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Invalid params"
    assert [e["path"] for e in response["error"]["data"]] == ["items[1].qty", "when"]


def test_valid_params_reach_the_method_as_python_values():
    calls.clear()
    response = run(
        {"jsonrpc": "2.0", "method": "reserve", "params": [[{"sku": "A", "qty": 1}], "2024-05-01", 2], "id": 1}
    )
    assert response == {
        "jsonrpc": "2.0",
        "result": {"count": 1, "when": datetime.date(2024, 5, 1), "level": 2},
        "id": 1,
    }
    assert calls == [([Item("A", 1)], datetime.date(2024, 5, 1), Level.HIGH)]


@pytest.mark.django_db
def test_demo_subtract_refuses_a_bool_and_a_fraction_over_http(call):
    answer = call({"jsonrpc": "2.0", "method": "subtract", "params": [True, 1.5], "id": 7})
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == [
        {"path": "minuend", "message": "expected integer, got boolean true", "expected": "integer"},
        {"path": "subtrahend", "message": "expected integer, got number 1.5", "expected": "integer"},
    ]


@pytest.mark.django_db
def test_demo_sum_checks_each_number_over_http(call):
    answer = call({"jsonrpc": "2.0", "method": "sum", "params": [1, 2, "3"], "id": 1})
    assert answer["error"]["data"] == [
        {"path": "numbers[2]", "message": "expected number, got string", "expected": "number"}
    ]
    assert call({"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 4], "id": 1})["result"] == 7


def test_one_unresolvable_string_annotation_leaves_the_others_checked():
    def f(x: "NoSuchType", n: "int"):  # noqa: F821
        return x

    binder = Binder(f)
    assert list(binder.converters) == ["n"]
    with pytest.raises(InvalidParams):
        binder.bind(["anything", "1"])


def test_a_bad_ipv4_address_is_invalid_params_like_a_bad_uuid_and_not_echoed():
    ip = errors_of(ipaddress.IPv4Address, "999.1.1.1")
    assert ip == [{"path": "x", "message": "expected an IPv4 address string", "expected": "ipv4"}]
    assert len(errors_of(uuid.UUID, "not-a-uuid")) == len(ip) == 1
    assert "999" not in json.dumps(ip)
