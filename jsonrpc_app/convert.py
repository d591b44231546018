"""
Converters: one function per normalised annotation (``jsonrpc_app.types``)
that checks a JSON value and turns it into what the annotation asks for, or
raises ``InvalidParams`` naming each offending value by its path
(``items[2].qty``). The leaves bring their own converter; the structure
(unions, literals, enums, sequences, tuples, mappings, TypedDicts,
dataclasses) is built here, once per annotation. ``jsonrpc_app.params``
binds a call's params to a signature with them.
"""

import enum
import json
import re

from . import types
from .exceptions import InvalidParams
from .types import NoneType, fail, got, json_kind, json_repr, param_error, type_check

# Errors reported for one call at most; past this the rest are summed up.
MAX_ERRORS = 100

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_path(path, key):
    """The path of ``key`` inside the object at ``path``: ``a.b``, or ``a["x y"]``."""
    if _IDENTIFIER.match(key):
        return "%s.%s" % (path, key) if path else key
    return "%s[%s]" % (path, json.dumps(key))


def merge_errors(errors, exc):
    data = exc.data if isinstance(exc.data, list) else [param_error("", exc.message)]
    if errors is None:
        return list(data)
    errors.extend(data)
    return errors


#
# One converter per normalised annotation (see jsonrpc_app.types for what a
# converter is): the leaves bring their own, the structure is built here.

_check_none = types.normalise(None).leaf.convert
_check_list = type_check((list,), "array")
_check_dict = type_check((dict,), "object")

_cache = {}


def converter_for(annotation):
    """
    Return the converter for ``annotation``, or None when any value will do.

    Converters are cached by annotation; recursive dataclasses and TypedDicts
    are supported.
    """
    try:
        return _cache[annotation]
    except KeyError:
        pass
    except TypeError:  # unhashable annotation: build it, do not cache it
        return _build(types.normalise(annotation))
    conv = _build(types.normalise(annotation))
    _cache.setdefault(annotation, conv)
    return _cache[annotation]


def _node_converter(node):
    # Class nodes are cached by class (recursion); the rest are small to build.
    if node.kind in (types.TYPEDDICT, types.DATACLASS):
        return converter_for(node.cls)
    return _build(node)


def _build(node):
    kind = node.kind
    if kind == types.LEAF:
        return node.leaf.convert
    if kind == types.UNION:
        return _union(node.args)
    if kind == types.LITERAL:
        return _literal(node.values)
    if kind == types.LIST:
        return _sequence(node.args[0], node.cls)
    if kind == types.TUPLE:
        return _fixed_tuple(node.args)
    if kind == types.DICT:
        return _mapping(*node.args)
    if kind == types.ENUM:
        return _enum(node.cls)
    if kind == types.TYPEDDICT:
        return _recursive(node.cls, _typeddict)
    if kind == types.DATACLASS:
        return _recursive(node.cls, _dataclass)
    return None  # ANY, QUERYSET: not checked


def _recursive(cls, build):
    # Put a stand-in in the cache first, so a field referring back to the
    # class (a tree of nodes) finds it instead of recursing forever.
    cell = []

    def forward(value, path):
        return cell[0](value, path)

    forward.expected = cls.__name__
    _cache[cls] = forward
    try:
        real = build(cls)
    except BaseException:
        del _cache[cls]
        raise
    cell.append(real)
    _cache[cls] = real
    return real


def _describe(conv):
    return getattr(conv, "expected", None) or "value"


def _union(nodes):
    members = [_node_converter(n) for n in nodes]
    if any(m is None for m in members):
        return None  # Any in a union accepts anything
    if len(members) == 1:
        return members[0]
    expected = " or ".join(dict.fromkeys(_describe(m) for m in members))
    non_null = [m for m in members if m is not _check_none]
    allows_null = len(non_null) < len(members)
    if allows_null and len(non_null) == 1:
        inner = non_null[0]

        def optional(value, path):
            if value is None:
                return None
            return inner(value, path)

        optional.expected = expected
        if hasattr(inner, "fast_types"):
            optional.fast_types = inner.fast_types + (NoneType,)
        return optional

    def union(value, path):
        first = None
        for member in members:
            try:
                return member(value, path)
            except InvalidParams as exc:
                # Report the member whose own type matched, if one did: its
                # nested errors say more than "expected A or B".
                if first is None and not _is_top_level_mismatch(exc, path):
                    first = exc
        if first is not None:
            raise first
        raise fail(path, expected, value)

    union.expected = expected
    if all(hasattr(m, "fast_types") for m in members):
        union.fast_types = tuple(t for m in members for t in m.fast_types)
    return union


def _is_top_level_mismatch(exc, path):
    data = exc.data
    return (
        isinstance(data, list)
        and len(data) == 1
        and data[0].get("path") == path
        and str(data[0].get("message", "")).startswith("expected ")
    )


def _literal(args):
    allowed = {}
    for arg in args:
        if isinstance(arg, enum.Enum):
            allowed[(type(arg.value), arg.value)] = arg
        else:
            allowed[(type(arg), arg)] = arg
    shown = [a.value if isinstance(a, enum.Enum) else a for a in args]
    expected = "one of %s" % ", ".join(json_repr(v) for v in shown)

    def literal(value, path):
        try:
            return allowed[(type(value), value)]
        except (KeyError, TypeError):
            raise InvalidParams(
                data=[param_error(path, "expected %s, got %s" % (expected, got(value)), expected)]
            ) from None

    literal.expected = expected
    literal.choices = shown
    return literal


def _enum(cls):
    members = {(type(m.value), m.value): m for m in cls}
    expected = "one of %s" % ", ".join(json_repr(m.value) for m in cls)

    def convert(value, path):
        try:
            return members[(type(value), value)]
        except (KeyError, TypeError):
            raise InvalidParams(
                data=[
                    param_error(
                        path,
                        "expected %s (%s), got %s" % (expected, cls.__name__, got(value)),
                        expected,
                    )
                ]
            ) from None

    convert.expected = expected
    return convert


def _sequence(item_node, result_type):
    item = _node_converter(item_node)
    if item is None and result_type is list:
        return _check_list
    expected = "array"
    fast = getattr(item, "fast_types", None)

    def convert(value, path):
        if type(value) is not list:
            raise fail(path, expected, value)
        if item is None:
            return value if result_type is list else result_type(value)
        if fast is not None:
            for v in value:
                if type(v) not in fast:
                    break
            else:
                return value if result_type is list else result_type(value)
        out = []
        errors = None
        for i, v in enumerate(value):
            try:
                out.append(item(v, "%s[%d]" % (path, i)))
            except InvalidParams as exc:
                errors = merge_errors(errors, exc)
                if len(errors) >= MAX_ERRORS:
                    break
        if errors:
            raise InvalidParams(data=errors)
        if result_type is list:
            return out
        try:
            return result_type(out)
        except TypeError:  # set of unhashable items
            raise fail(path, "array of distinct hashable values", value) from None

    convert.expected = expected
    return convert


def _fixed_tuple(nodes):
    items = [_node_converter(n) for n in nodes]
    n = len(items)
    expected = "array of %d items" % n

    def convert(value, path):
        if type(value) is not list or len(value) != n:
            shown = "array of %d items" % len(value) if type(value) is list else json_kind(value)
            raise InvalidParams(
                data=[param_error(path, "expected %s, got %s" % (expected, shown), expected)]
            )
        out = []
        errors = None
        for i, (conv, v) in enumerate(zip(items, value)):
            if conv is None:
                out.append(v)
                continue
            try:
                out.append(conv(v, "%s[%d]" % (path, i)))
            except InvalidParams as exc:
                errors = merge_errors(errors, exc)
        if errors:
            raise InvalidParams(data=errors)
        return tuple(out)

    convert.expected = expected
    return convert


def _key_converter(node):
    if node.kind == types.ANY or node is _STR:
        return None
    if node.kind == types.LEAF and node.leaf.convert_key is not None:
        return node.leaf.convert_key
    return _node_converter(node)


_STR = types.normalise(str)


def _mapping(key_node, value_node):
    key_conv = _key_converter(key_node)
    value_conv = _node_converter(value_node)
    if key_conv is None and value_conv is None:
        return _check_dict
    fast = getattr(value_conv, "fast_types", None)

    def convert(value, path):
        if type(value) is not dict:
            raise fail(path, "object", value)
        if key_conv is None:
            if fast is not None:
                for v in value.values():
                    if type(v) not in fast:
                        break
                else:
                    return value
        out = {}
        errors = None
        for k, v in value.items():
            p = key_path(path, k)
            try:
                if key_conv is not None:
                    k = key_conv(k, p)
                out[k] = v if value_conv is None else value_conv(v, p)
            except InvalidParams as exc:
                errors = merge_errors(errors, exc)
                if len(errors) >= MAX_ERRORS:
                    break
        if errors:
            raise InvalidParams(data=errors)
        return out

    convert.expected = "object"
    return convert


def _object_converter(cls, fields, make):
    """fields: [types.Field]; make(dict, path) builds the result."""
    expected = "object (%s)" % cls.__name__
    converters = {f.name: converter_for(f.annotation) for f in fields}
    required = [f.name for f in fields if f.required]

    def convert(value, path):
        if type(value) is not dict:
            raise fail(path, expected, value)
        errors = None
        out = {}
        for k, v in value.items():
            if k not in converters:
                errors = merge_errors(
                    errors, InvalidParams(data=[param_error(key_path(path, k), "unexpected key")])
                )
                continue
            conv = converters[k]
            if conv is None:
                out[k] = v
                continue
            try:
                out[k] = conv(v, key_path(path, k))
            except InvalidParams as exc:
                errors = merge_errors(errors, exc)
        for k in required:
            if k not in value:
                errors = merge_errors(
                    errors,
                    InvalidParams(data=[param_error(key_path(path, k), "missing required key")]),
                )
        if errors:
            raise InvalidParams(data=errors[:MAX_ERRORS])
        return make(out, path)

    convert.expected = expected
    return convert


def _typeddict(cls):
    return _object_converter(cls, types.typeddict_fields(cls), lambda out, path: out)


def _dataclass(cls):
    def make(out, path):
        try:
            return cls(**out)
        except ValueError as exc:
            # A __post_init__ that validates: its message is the error.
            raise InvalidParams(data=[param_error(path, str(exc) or "invalid value")]) from None

    return _object_converter(cls, types.dataclass_fields(cls), make)


def with_default_none(conv):
    """A parameter defaulting to None also takes an explicit null."""
    if conv is None or conv is _check_none or hasattr(conv, "fast_types") and NoneType in conv.fast_types:
        return conv

    def convert(value, path):
        if value is None:
            return None
        return conv(value, path)

    convert.expected = "%s or null" % _describe(conv)
    if hasattr(conv, "fast_types"):
        convert.fast_types = conv.fast_types + (NoneType,)
    return convert
