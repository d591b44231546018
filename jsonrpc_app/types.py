"""
The one normaliser of type annotations.

``normalise(annotation)`` turns an annotation into a small tree of ``Node``
values that the binder (``params``), the OpenRPC schema (``openrpc``) and the
admin's Try-it placeholders read; none of them looks at ``typing`` itself.

Two families of kinds:

- leaves (``LEAF``): one Python type each (``int``, ``str``, ``datetime``,
  ``Decimal``, ``UUID``, ...). Everything about a leaf lives in its ``Leaf``
  entry of ``LEAVES`` here: how a JSON value is checked and converted into
  it, its JSON Schema (input and output), the example the admin prefills and
  how it reads as an object key. Supporting one more such type is one more
  ``Leaf`` in this module and nothing else.
- structure: ``ANY`` (not checked), ``UNION``, ``LITERAL``, ``ENUM``,
  ``LIST`` (also sets and ``tuple[T, ...]``; ``container`` says which),
  ``TUPLE`` (fixed length), ``DICT``, ``TYPEDDICT``, ``DATACLASS``,
  ``QUERYSET`` (a result only). A class node carries the class; its fields
  come from ``typeddict_fields`` / ``dataclass_fields`` when a consumer walks
  into it, so a class that refers to itself is no trouble here.

Annotations understood: ``int``, ``float``, ``str``, ``bool``, ``None``,
``list[T]``, ``tuple[...]``, ``set[T]``, ``dict[K, T]`` (and the ``abc``
collections), ``T | None`` and other unions, ``Literal[...]``, ``Enum``
subclasses (by value), the leaves below, ``TypedDict`` and dataclasses,
``Annotated[T, ...]`` and ``NewType``. Unannotated parameters, ``Any``,
``object``, unresolved names and classes JSON cannot hold are ``ANY``.
"""

import dataclasses
import datetime
import decimal
import enum
import inspect
import ipaddress
import json
import re
import types
import typing
import uuid
from collections import abc

from .exceptions import InvalidParams

NoneType = type(None)

ANY = "any"
LEAF = "leaf"
UNION = "union"
LITERAL = "literal"
ENUM = "enum"
LIST = "list"
TUPLE = "tuple"
DICT = "dict"
TYPEDDICT = "typeddict"
DATACLASS = "dataclass"
QUERYSET = "queryset"


@dataclasses.dataclass(frozen=True)
class Node:
    """One normalised annotation.

    ``args``: the member nodes (UNION), the item node (LIST: one), the item
    nodes (TUPLE), the key and value nodes (DICT). ``cls``: the class (ENUM,
    TYPEDDICT, DATACLASS) or the container type (LIST: list, tuple, set or
    frozenset). ``values``: the Literal's values. ``leaf``: the Leaf.
    """

    kind: str
    args: tuple = ()
    cls: object = None
    values: tuple = ()
    leaf: object = None


ANY_NODE = Node(ANY)


# -- errors in params ---------------------------------------------------------------


def param_error(path, message, expected=None):
    error = {"path": path, "message": message}
    if expected is not None:
        error["expected"] = expected
    return error


_JSON_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    NoneType: "null",
}


def json_kind(value):
    """Name the JSON type of a decoded value: "integer", "string", "null", ..."""
    return _JSON_KINDS.get(type(value), type(value).__name__)


def json_repr(value):
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def got(value):
    """How a refused value is named: numbers, booleans and null shown; strings not (secrets)."""
    t = type(value)
    if t is int and not -(10**15) < value < 10**15:
        return "integer"
    if t is int or t is float or t is bool or value is None:
        return "%s %s" % (json_kind(value), json_repr(value)) if value is not None else "null"
    return json_kind(value)


def fail(path, expected, value):
    message = "expected %s, got %s" % (expected, got(value))
    return InvalidParams(data=[param_error(path, message, expected)])


# -- leaves -----------------------------------------------------------------------
#
# A converter is ``f(value, path) -> value`` that returns the value the method
# gets or raises InvalidParams whose data lists every error found. One whose
# only work is a type test carries ``fast_types``, the exact types it passes
# through unchanged (the binder tests those inline and calls nothing), and
# every converter carries ``expected``, how its type is named in errors.


@dataclasses.dataclass(frozen=True)
class Leaf:
    """Everything about one leaf type."""

    types: tuple  # the annotations that are this leaf
    convert: object  # converter of a JSON value (see above)
    schema: dict  # JSON Schema of the accepted values (params)
    output_schema: dict = None  # JSON Schema of results, when it differs
    example: object = None  # the value the admin prefills
    format: str = None  # the JSON Schema "format" whose example ``example`` is
    convert_key: object = None  # converter of an object key (a string), when not ``convert``
    key_pattern: str = None  # JSON Schema pattern of such keys


def type_check(types_, expected):
    """A converter that passes values of exactly ``types_`` and refuses the rest."""

    def check(value, path):
        if type(value) in types_:
            return value
        raise fail(path, expected, value)

    check.fast_types = types_
    check.expected = expected
    return check


def _check_int(value, path):
    t = type(value)
    if t is int:
        return value
    # 2.0 is an integer in JSON terms; 1.5 is not, and is never truncated.
    if t is float and value.is_integer():
        return int(value)
    raise fail(path, "integer", value)


_check_int.fast_types = (int,)
_check_int.expected = "integer"

_INT_KEY = r"^-?[0-9]+$"


def _int_key(key, path):
    # JSON object keys are strings: "3" is the key 3.
    if re.fullmatch(_INT_KEY[1:-1], key):
        return int(key)
    raise InvalidParams(data=[param_error(path, "expected an integer key, got %s" % json_repr(key), "integer")])


def _string_parser(parse, expected, detail):
    def convert(value, path):
        if type(value) is str:
            try:
                result = parse(value)
            except (ValueError, TypeError, OverflowError, decimal.InvalidOperation):
                result = None
            if result is not None:
                return result
            # The text itself is not echoed: it may be a secret.
            raise InvalidParams(data=[param_error(path, "expected %s" % detail, expected)])
        raise fail(path, expected, value)

    convert.expected = expected
    return convert


def _parse_duration(text):
    from django.utils.dateparse import parse_duration

    return parse_duration(text)


_DECIMAL_PATTERN = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"
_DECIMAL = re.compile(_DECIMAL_PATTERN)


def _parse_decimal(text):
    if not _DECIMAL.match(text):
        return None
    return decimal.Decimal(text)


_decimal_from_string = _string_parser(_parse_decimal, "decimal", "a decimal number as a string")


def _check_decimal(value, path):
    t = type(value)
    if t is str:
        return _decimal_from_string(value, path)
    if t is int:
        return decimal.Decimal(value)
    if t is float:
        # The shortest repr round-trips: 0.1 -> Decimal("0.1"), not 0.1000000000000000055...
        return decimal.Decimal(repr(value))
    raise fail(path, "decimal", value)


_check_decimal.expected = "decimal"


def _string_leaf(cls, parse, fmt, detail, example):
    return Leaf(
        (cls,),
        _string_parser(parse, fmt, detail),
        {"type": "string", "format": fmt},
        example=example,
        format=fmt,
    )


_check_none = type_check((NoneType,), "null")

LEAVES = [
    Leaf((int,), _check_int, {"type": "integer"}, example=0, convert_key=_int_key, key_pattern=_INT_KEY),
    # float accepts any JSON number; an integer stays an int (7, not 7.0).
    Leaf((float,), type_check((float, int), "number"), {"type": "number"}, example=0),
    Leaf((str,), type_check((str,), "string"), {"type": "string"}, example=""),
    Leaf((bool,), type_check((bool,), "boolean"), {"type": "boolean"}, example=False),
    Leaf((NoneType, None), _check_none, {"type": "null"}, example=None),
    _string_leaf(
        datetime.datetime, datetime.datetime.fromisoformat, "date-time", "an ISO 8601 date-time string",
        "2024-01-01T00:00:00Z",
    ),
    _string_leaf(datetime.date, datetime.date.fromisoformat, "date", "an ISO 8601 date string", "2024-01-01"),
    _string_leaf(datetime.time, datetime.time.fromisoformat, "time", "an ISO 8601 time string", "00:00:00"),
    _string_leaf(datetime.timedelta, _parse_duration, "duration", "an ISO 8601 duration string", "P1D"),
    _string_leaf(uuid.UUID, uuid.UUID, "uuid", "a UUID string", "00000000-0000-0000-0000-000000000000"),
    _string_leaf(ipaddress.IPv4Address, ipaddress.IPv4Address, "ipv4", "an IPv4 address string", "192.0.2.1"),
    Leaf(
        (decimal.Decimal,),
        _check_decimal,
        {"anyOf": [{"type": "string", "format": "decimal", "pattern": _DECIMAL_PATTERN}, {"type": "number"}]},
        output_schema={"type": "string", "format": "decimal"},
        example="0",
        format="decimal",
    ),
]

_LEAF_NODES = {t: Node(LEAF, leaf=leaf) for leaf in LEAVES for t in leaf.types}

# The example of each leaf's string format ("date-time": "2024-01-01T00:00:00Z").
FORMAT_EXAMPLES = {leaf.format: leaf.example for leaf in LEAVES if leaf.format}

# The leaf types whose values JSON encodes as text (as Django's encoder writes them).
TEXT_TYPES = tuple(t for leaf in LEAVES if leaf.format for t in leaf.types)


# -- the normaliser -------------------------------------------------------------------

LIST_ORIGINS = {list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection}
SET_ORIGINS = {set, frozenset, abc.Set, abc.MutableSet}
DICT_ORIGINS = {dict, abc.Mapping, abc.MutableMapping}

_cache = {}


def unwrap(annotation):
    """Strip Annotated[...] and NewType down to the type that is checked."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = annotation.__origin__
        elif hasattr(annotation, "__supertype__"):
            annotation = annotation.__supertype__
        else:
            return annotation


def normalise(annotation):
    """Return the Node of ``annotation`` (cached when the annotation is hashable)."""
    try:
        return _cache[annotation]
    except KeyError:
        node = _cache[annotation] = _normalise(annotation)
        return node
    except TypeError:  # unhashable annotation
        return _normalise(annotation)


def _normalise(annotation):
    annotation = unwrap(annotation)
    if annotation is inspect.Parameter.empty or annotation is typing.Any or annotation is object:
        return ANY_NODE
    if isinstance(annotation, (str, typing.ForwardRef, typing.TypeVar)):
        # Not resolvable here: accept anything rather than guess.
        return ANY_NODE
    try:
        leaf = _LEAF_NODES.get(annotation)
    except TypeError:
        leaf = None
    if leaf is not None:
        return leaf
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return Node(UNION, tuple(normalise(a) for a in args))
    if origin is typing.Literal:
        return Node(LITERAL, values=args)
    if origin in LIST_ORIGINS or annotation in LIST_ORIGINS:
        return _items(args, list)
    if origin is tuple or annotation is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return _items(args, tuple)
        if args == ((),):  # tuple[()]
            return Node(TUPLE)
        return Node(TUPLE, tuple(normalise(a) for a in args))
    if origin in SET_ORIGINS or annotation in (set, frozenset):
        return _items(args, frozenset if (origin or annotation) is frozenset else set)
    if origin in DICT_ORIGINS or annotation in DICT_ORIGINS:
        key = normalise(args[0]) if args else ANY_NODE
        value = normalise(args[1]) if len(args) > 1 else ANY_NODE
        return Node(DICT, (key, value))
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return Node(ENUM, cls=annotation)
        if typing.is_typeddict(annotation):
            return Node(TYPEDDICT, cls=annotation)
        if dataclasses.is_dataclass(annotation):
            return Node(DATACLASS, cls=annotation)
        if _is_queryset(annotation):
            return Node(QUERYSET)
    # A class that JSON cannot hold (a model, a custom class): not checked.
    return ANY_NODE


def _items(args, container):
    return Node(LIST, (normalise(args[0]) if args else ANY_NODE,), cls=container)


def _is_queryset(cls):
    try:
        from django.db.models import QuerySet
    except ImportError:  # pragma: no cover
        return False
    return issubclass(cls, QuerySet)


# -- the fields of classes ---------------------------------------------------------------


def hints(cls):
    """The resolved annotations of a class; the raw ones if some name cannot be resolved."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # names the module cannot resolve: leave them unchecked
        return dict(getattr(cls, "__annotations__", {}))


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    annotation: object
    required: bool
    default: object  # a plain default (not a factory), or dataclasses.MISSING


def typeddict_fields(cls):
    found = hints(cls)
    return [Field(name, hint, name in cls.__required_keys__, dataclasses.MISSING) for name, hint in found.items()]


def dataclass_fields(cls, init_only=True):
    """The fields of a dataclass: those its __init__ takes, or (``init_only=False``) all."""
    found = hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        if init_only and not f.init:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields.append(Field(f.name, found.get(f.name, f.type), required, f.default))
    return fields


# -- values as JSON ----------------------------------------------------------------------


def jsonable(value):
    """Return ``value`` as JSON if it has a plain JSON form, else raise TypeError."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError("not finite")
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, TEXT_TYPES):
        from .encoding import json_default

        return json_default(value)
    raise TypeError("no JSON form")


def common_type(values):
    """The JSON type all ``values`` share ("number" for ints and floats), or None."""
    kinds = set()
    for v in values:
        if v is None:
            kinds.add("null")
        elif isinstance(v, bool):
            kinds.add("boolean")
        elif isinstance(v, int):
            kinds.add("integer")
        elif isinstance(v, float):
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("string")
        else:
            return None
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else None
