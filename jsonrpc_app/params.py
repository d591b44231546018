"""
Binding JSON-RPC params (an array by position, an object by name) to a
method's Python signature, and checking them against its annotations,
before the method runs.

Everything is worked out once, when the method is registered: the binder
and one converter per annotated parameter. A call whose params do not fit
gets ``-32602 Invalid params`` with ``data`` listing each offending value as
``{"path": "items[2].qty", "message": "...", "expected": "integer"}``, and
the method never runs. The method itself is never called to find out (a
TypeError raised inside it is its own error).

Annotations understood: ``int``, ``float``, ``str``, ``bool``, ``None``,
``list[T]``, ``tuple[...]``, ``set[T]``, ``dict[str, T]``, ``T | None``
and other unions, ``Literal[...]``, ``Enum`` subclasses (by value),
``datetime``/``date``/``time``/``timedelta``/``Decimal``/``UUID`` (from
their JSON string forms, as Django's JSON encoder writes them),
``TypedDict`` and dataclasses (nested to any depth), ``Annotated[T, ...]``
and ``NewType``. Unannotated parameters, ``Any``, ``object`` and classes it
cannot build from JSON accept any value as it came.
"""

import dataclasses
import datetime
import decimal
import enum
import inspect
import re
import types
import typing
import uuid
from collections import abc

from .exceptions import InvalidParams

_EMPTY = {}
P = inspect.Parameter
NoneType = type(None)

# Errors reported for one call at most; past this the rest are summed up.
MAX_ERRORS = 100


def _signature(func):
    try:
        return inspect.signature(func, eval_str=True)
    except Exception:
        pass
    # Some string annotation names what the module cannot resolve at run time
    # (an import under TYPE_CHECKING): resolve the others one by one; the
    # unresolved ones stay strings and are not checked.
    sig = inspect.signature(func)
    namespace = getattr(inspect.unwrap(func), "__globals__", {})
    params = []
    for p in sig.parameters.values():
        if isinstance(p.annotation, str):
            try:
                p = p.replace(annotation=eval(p.annotation, namespace))  # noqa: S307
            except Exception:
                pass
        params.append(p)
    return sig.replace(parameters=params)


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


def _fail(path, expected, value):
    message = "expected %s, got %s" % (expected, _got(value))
    return InvalidParams(data=[param_error(path, message, expected)])


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_path(path, key):
    """The path of ``key`` inside the object at ``path``: ``a.b``, or ``a["x y"]``."""
    if _IDENTIFIER.match(key):
        return "%s.%s" % (path, key) if path else key
    import json

    return "%s[%s]" % (path, json.dumps(key))


def _merge(errors, exc):
    data = exc.data if isinstance(exc.data, list) else [param_error("", exc.message)]
    if errors is None:
        return list(data)
    errors.extend(data)
    return errors


# -- converters ---------------------------------------------------------------
#
# A converter is ``f(value, path) -> value`` that returns the value the method
# gets (the JSON value itself, or what it converts to) or raises InvalidParams
# whose data lists every error found. A converter whose only work is a type
# test carries ``fast_types``, the exact types it passes through unchanged:
# the binder tests those inline and calls nothing.


def _fast(types_, expected):
    def check(value, path):
        if type(value) in types_:
            return value
        raise _fail(path, expected, value)

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
    raise _fail(path, "integer", value)


_check_int.fast_types = (int,)
_check_int.expected = "integer"

# float accepts any JSON number; an integer stays an int (7, not 7.0).
_check_float = _fast((float, int), "number")
_check_str = _fast((str,), "string")
_check_bool = _fast((bool,), "boolean")
_check_none = _fast((NoneType,), "null")
_check_list = _fast((list,), "array")
_check_dict = _fast((dict,), "object")

_SIMPLE = {
    int: _check_int,
    float: _check_float,
    str: _check_str,
    bool: _check_bool,
    NoneType: _check_none,
    None: _check_none,
    list: _check_list,
    dict: _check_dict,
}


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
        raise _fail(path, expected, value)

    convert.expected = expected
    return convert


def _parse_duration(text):
    from django.utils.dateparse import parse_duration

    return parse_duration(text)


_DECIMAL = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def _parse_decimal(text):
    if not _DECIMAL.match(text):
        return None
    return decimal.Decimal(text)


def _check_decimal(value, path):
    t = type(value)
    if t is str:
        return _decimal_from_string(value, path)
    if t is int:
        return decimal.Decimal(value)
    if t is float:
        # The shortest repr round-trips: 0.1 -> Decimal("0.1"), not 0.1000000000000000055...
        return decimal.Decimal(repr(value))
    raise _fail(path, "decimal", value)


_decimal_from_string = _string_parser(_parse_decimal, "decimal", "a decimal number as a string")
_check_decimal.expected = "decimal"

_PARSERS = {
    datetime.datetime: _string_parser(
        datetime.datetime.fromisoformat, "date-time", "an ISO 8601 date-time string"
    ),
    datetime.date: _string_parser(datetime.date.fromisoformat, "date", "an ISO 8601 date string"),
    datetime.time: _string_parser(datetime.time.fromisoformat, "time", "an ISO 8601 time string"),
    datetime.timedelta: _string_parser(_parse_duration, "duration", "an ISO 8601 duration string"),
    uuid.UUID: _string_parser(uuid.UUID, "uuid", "a UUID string"),
    decimal.Decimal: _check_decimal,
}

_LIST_ORIGINS = {list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection}
_SET_ORIGINS = {set, frozenset, abc.Set, abc.MutableSet}
_DICT_ORIGINS = {dict, abc.Mapping, abc.MutableMapping}

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
        return _build(annotation)
    conv = _build(annotation)
    _cache.setdefault(annotation, conv)
    return _cache[annotation]


def unwrap(annotation):
    """Strip Annotated[...] and NewType down to the type that is checked."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = annotation.__origin__
        elif hasattr(annotation, "__supertype__"):
            annotation = annotation.__supertype__
        else:
            return annotation


def _build(annotation):
    annotation = unwrap(annotation)
    if annotation is P.empty or annotation is typing.Any or annotation is object:
        return None
    if isinstance(annotation, (str, typing.ForwardRef, typing.TypeVar)):
        # Not resolvable here: accept anything rather than guess.
        return None
    try:
        simple = _SIMPLE.get(annotation)
    except TypeError:
        simple = None
    if simple is not None:
        return simple
    if annotation in _PARSERS:
        return _PARSERS[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return _union(args)
    if origin is typing.Literal:
        return _literal(args)
    if origin in _LIST_ORIGINS or annotation in (abc.Sequence, typing.Sequence):
        return _sequence(args[0] if args else None, list)
    if origin is tuple or annotation is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return _sequence(args[0] if args else None, tuple)
        if args == ((),):  # tuple[()]
            return _fixed_tuple(())
        return _fixed_tuple(args)
    if origin in _SET_ORIGINS or annotation in (set, frozenset):
        return _sequence(args[0] if args else None, frozenset if (origin or annotation) is frozenset else set)
    if origin in _DICT_ORIGINS:
        return _mapping(args[0] if args else None, args[1] if len(args) > 1 else None)
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _enum(annotation)
        if typing.is_typeddict(annotation):
            return _recursive(annotation, _typeddict)
        if dataclasses.is_dataclass(annotation):
            return _recursive(annotation, _dataclass)
        if annotation in _DICT_ORIGINS:
            return _check_dict
        if annotation in _LIST_ORIGINS:
            return _check_list
    # A class that JSON cannot hold (a model, a custom class): not checked.
    return None


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


def _union(args):
    members = [converter_for(a) for a in args]
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
        raise _fail(path, expected, value)

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
    expected = "one of %s" % ", ".join(_json_repr(v) for v in shown)

    def literal(value, path):
        try:
            return allowed[(type(value), value)]
        except (KeyError, TypeError):
            raise InvalidParams(
                data=[param_error(path, "expected %s, got %s" % (expected, _got(value)), expected)]
            ) from None

    literal.expected = expected
    literal.choices = shown
    return literal


def _json_repr(value):
    import json

    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _got(value):
    # Numbers, booleans and null are shown; strings are not (they may be secrets).
    t = type(value)
    if t is int and not -(10**15) < value < 10**15:
        return "integer"
    if t is int or t is float or t is bool or value is None:
        return "%s %s" % (json_kind(value), _json_repr(value)) if value is not None else "null"
    return json_kind(value)


def _enum(cls):
    members = {(type(m.value), m.value): m for m in cls}
    expected = "one of %s" % ", ".join(_json_repr(m.value) for m in cls)

    def convert(value, path):
        try:
            return members[(type(value), value)]
        except (KeyError, TypeError):
            raise InvalidParams(
                data=[
                    param_error(
                        path,
                        "expected %s (%s), got %s" % (expected, cls.__name__, _got(value)),
                        expected,
                    )
                ]
            ) from None

    convert.expected = expected
    return convert


def _sequence(item_annotation, result_type):
    item = converter_for(item_annotation) if item_annotation is not None else None
    expected = "array"
    fast = getattr(item, "fast_types", None)

    def convert(value, path):
        if type(value) is not list:
            raise _fail(path, expected, value)
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
                errors = _merge(errors, exc)
                if len(errors) >= MAX_ERRORS:
                    break
        if errors:
            raise InvalidParams(data=errors)
        if result_type is list:
            return out
        try:
            return result_type(out)
        except TypeError:  # set of unhashable items
            raise _fail(path, "array of distinct hashable values", value) from None

    convert.expected = expected
    return convert


def _fixed_tuple(annotations):
    items = [converter_for(a) for a in annotations]
    n = len(items)
    expected = "array of %d items" % n

    def convert(value, path):
        if type(value) is not list or len(value) != n:
            got = "array of %d items" % len(value) if type(value) is list else json_kind(value)
            raise InvalidParams(
                data=[param_error(path, "expected %s, got %s" % (expected, got), expected)]
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
                errors = _merge(errors, exc)
        if errors:
            raise InvalidParams(data=errors)
        return tuple(out)

    convert.expected = expected
    return convert


def _key_converter(annotation):
    annotation = unwrap(annotation) if annotation is not None else None
    if annotation in (None, str, typing.Any, object):
        return None
    if annotation is int:
        # JSON object keys are strings: "3" is the key 3.
        def int_key(key, path):
            if re.fullmatch(r"-?[0-9]+", key):
                return int(key)
            raise InvalidParams(
                data=[param_error(path, "expected an integer key, got %s" % _json_repr(key), "integer")]
            )

        return int_key
    return converter_for(annotation)


def _mapping(key_annotation, value_annotation):
    key_conv = _key_converter(key_annotation)
    value_conv = converter_for(value_annotation) if value_annotation is not None else None
    fast = getattr(value_conv, "fast_types", None)

    def convert(value, path):
        if type(value) is not dict:
            raise _fail(path, "object", value)
        if key_conv is None:
            if value_conv is None:
                return value
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
                errors = _merge(errors, exc)
                if len(errors) >= MAX_ERRORS:
                    break
        if errors:
            raise InvalidParams(data=errors)
        return out

    convert.expected = "object"
    return convert


def _hints(cls):
    try:
        return typing.get_type_hints(cls)
    except Exception:  # names the module cannot resolve: leave them unchecked
        return dict(getattr(cls, "__annotations__", {}))


def _object_converter(cls, fields, required, make):
    """fields: {name: converter or None}; make(dict) builds the result."""
    expected = "object (%s)" % cls.__name__
    known = frozenset(fields)

    def convert(value, path):
        if type(value) is not dict:
            raise _fail(path, expected, value)
        errors = None
        out = {}
        for k, v in value.items():
            if k not in known:
                errors = _merge(
                    errors, InvalidParams(data=[param_error(key_path(path, k), "unexpected key")])
                )
                continue
            conv = fields[k]
            if conv is None:
                out[k] = v
                continue
            try:
                out[k] = conv(v, key_path(path, k))
            except InvalidParams as exc:
                errors = _merge(errors, exc)
        for k in required:
            if k not in value:
                errors = _merge(
                    errors,
                    InvalidParams(data=[param_error(key_path(path, k), "missing required key")]),
                )
        if errors:
            raise InvalidParams(data=errors[:MAX_ERRORS])
        return make(out, path)

    convert.expected = expected
    return convert


def _typeddict(cls):
    hints = _hints(cls)
    fields = {name: converter_for(hint) for name, hint in hints.items()}
    required = [k for k in hints if k in cls.__required_keys__]
    return _object_converter(cls, fields, required, lambda out, path: out)


def dataclass_init_fields(cls):
    """The fields of dataclass ``cls`` that its __init__ takes, with resolved types."""
    hints = _hints(cls)
    return [(f, hints.get(f.name, f.type)) for f in dataclasses.fields(cls) if f.init]


def _dataclass(cls):
    fields = {}
    required = []
    for f, hint in dataclass_init_fields(cls):
        fields[f.name] = converter_for(hint)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)

    def make(out, path):
        try:
            return cls(**out)
        except ValueError as exc:
            # A __post_init__ that validates: its message is the error.
            raise InvalidParams(data=[param_error(path, str(exc) or "invalid value")]) from None

    return _object_converter(cls, fields, required, make)


def _with_default_none(conv):
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


# -- binding -------------------------------------------------------------------


class Binder:
    """Fit params to one callable's signature and check them against its annotations."""

    def __init__(self, func, context_type=None, params_serializer=None):
        self.signature = sig = _signature(func)
        self.context_name = None
        params = []
        for p in sig.parameters.values():
            if context_type is not None and p.annotation is context_type:
                if p.kind is P.POSITIONAL_ONLY:
                    raise TypeError(
                        "%s: the CallContext parameter %r cannot be positional-only"
                        % (func.__qualname__, p.name)
                    )
                self.context_name = p.name
                continue
            params.append(p)
        self.params = params
        self.positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        self.var_positional = any(p.kind is P.VAR_POSITIONAL for p in params)
        self.var_keyword = any(p.kind is P.VAR_KEYWORD for p in params)
        self.var_positional_name = next((p.name for p in params if p.kind is P.VAR_POSITIONAL), None)
        self.var_keyword_name = next((p.name for p in params if p.kind is P.VAR_KEYWORD), None)
        if self.var_positional and self.context_name is not None:
            if sig.parameters[self.context_name].kind is not P.KEYWORD_ONLY:
                raise TypeError(
                    "%s: with *args, the CallContext parameter %r must be keyword-only"
                    % (func.__qualname__, self.context_name)
                )
        self.named = {p.name: p for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
        self.required = [
            p.name
            for p in params
            if p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
        ]
        self.required_positional = sum(1 for p in self.positional if p.default is P.empty)
        self.required_keyword_only = [
            p.name for p in params if p.kind is P.KEYWORD_ONLY and p.default is P.empty
        ]
        # With a DRF serializer, the serializer validates (and defaults) the
        # params; the binder only maps them onto names.
        self.params_serializer = params_serializer
        # name -> callable(value, path) returning the converted value or
        # raising InvalidParams; for *args and **kwargs, applied to each item.
        self.converters = {}
        if params_serializer is None:
            for p in params:
                conv = converter_for(p.annotation)
                if p.default is None:
                    conv = _with_default_none(conv)
                if conv is not None:
                    self.converters[p.name] = conv
        self._refresh()

    def _refresh(self):
        # The fast path: a plain signature (no posonly/kwonly/varargs/context)
        # whose converters, if any, are only type tests: params are handed
        # over as they came once every value has the type asked for.
        plain = (
            self.context_name is None
            and self.params_serializer is None
            and not self.var_positional
            and not self.var_keyword
            and all(p.kind is P.POSITIONAL_OR_KEYWORD for p in self.params)
        )
        fast = all(hasattr(c, "fast_types") for c in self.converters.values())
        self.simple = plain and fast
        if self.converters and self.simple:
            self.checks = {name: c.fast_types for name, c in self.converters.items()}
            self.check_list = [self.checks.get(p.name) for p in self.positional]
        else:
            self.checks = None
            self.check_list = None
        self.max_positional = len(self.positional)
        self.names = frozenset(self.named)
        self.required_set = frozenset(self.required)

    def bind(self, params, context=None):
        """Return (args, kwargs) for the call, or raise InvalidParams."""
        if self.simple:
            if params is None:
                if self.required_positional:
                    raise self._missing(self.required)
                return (), _EMPTY
            if type(params) is list:
                if self.required_positional <= len(params) <= self.max_positional:
                    checks = self.check_list
                    if checks is None:
                        return params, _EMPTY
                    for value, ok in zip(params, checks):
                        if ok is not None and type(value) not in ok:
                            break
                    else:
                        return params, _EMPTY
            elif params.keys() <= self.names and self.required_set <= params.keys():
                checks = self.checks
                if checks is None:
                    return (), params
                for name, value in params.items():
                    ok = checks.get(name)
                    if ok is not None and type(value) not in ok:
                        break
                else:
                    return (), params
        if self.params_serializer is not None:
            return self._bind_for_serializer(params, context)
        return self._bind_slow(params, context)

    def _missing(self, names):
        return InvalidParams(
            data=[param_error(name, "missing required parameter") for name in names]
        )

    def _too_many(self, got):
        n = len(self.positional)
        return param_error(
            "[%d]" % n, "too many positional params: takes at most %d, got %d" % (n, got)
        )

    def _bind_slow(self, params, context):
        errors = []
        args = []
        kwargs = {}
        if params is None:
            params = []
        if type(params) is list:
            positional = self.positional
            n = len(positional)
            if len(params) > n and not self.var_positional:
                errors.append(self._too_many(len(params)))
            else:
                missing = [
                    p.name for p in positional[len(params):] if p.default is P.empty
                ] + self.required_keyword_only
                if missing:
                    raise self._missing(missing)
                by_keyword = not self.var_positional
                for p, value in zip(positional, params):
                    value = self._convert(p.name, value, p.name, errors)
                    if by_keyword and p.kind is P.POSITIONAL_OR_KEYWORD:
                        kwargs[p.name] = value
                    else:
                        args.append(value)
                if self.var_positional:
                    name = self.var_positional_name
                    if name in self.converters:
                        for i, value in enumerate(params[n:]):
                            args.append(self._convert(name, value, "%s[%d]" % (name, i), errors))
                    else:
                        args.extend(params[n:])
        else:
            unknown = [k for k in params if k not in self.named]
            if unknown and not self.var_keyword:
                errors.extend(param_error(k, "unexpected parameter") for k in unknown)
            missing = [
                name
                for name in self.required
                if name not in params
                # positional-only params cannot be named
                or self._kind(name) is P.POSITIONAL_ONLY
            ]
            if missing:
                errors.extend(param_error(name, "missing required parameter") for name in missing)
            if not errors:
                named = self.named
                var_keyword = self.var_keyword_name
                for key, value in params.items():
                    kwargs[key] = self._convert(key if key in named else var_keyword, value, key, errors)
        if errors:
            if len(errors) > MAX_ERRORS:
                hidden = len(errors) - MAX_ERRORS
                errors = errors[:MAX_ERRORS] + [param_error("", "%d more errors not shown" % hidden)]
            raise InvalidParams(data=errors)
        if self.context_name is not None:
            kwargs[self.context_name] = context
        return args, kwargs

    def _bind_for_serializer(self, params, context):
        """Map params onto names for the params serializer, which validates them."""
        kwargs = {}
        if type(params) is list:
            if len(params) > len(self.positional):
                raise InvalidParams(data=[self._too_many(len(params))])
            for p, value in zip(self.positional, params):
                kwargs[p.name] = value
        elif params is not None:
            if not self.var_keyword:
                unknown = [k for k in params if k not in self.named]
                if unknown:
                    raise InvalidParams(data=[param_error(k, "unexpected parameter") for k in unknown])
            kwargs.update(params)
        if self.context_name is not None:
            kwargs[self.context_name] = context
        return (), kwargs

    def _kind(self, name):
        for p in self.params:
            if p.name == name:
                return p.kind
        return None

    def _convert(self, name, value, path, errors):
        converter = self.converters.get(name)
        if converter is None:
            return value
        try:
            return converter(value, path)
        except InvalidParams as exc:
            _merge(errors, exc)
            return value
