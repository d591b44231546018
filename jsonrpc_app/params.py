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

The annotations understood are those ``jsonrpc_app.types`` normalises: the
converters are built from its nodes (a leaf type brings its own converter).
Unannotated parameters, ``Any``, ``object`` and classes it cannot build from
JSON accept any value as it came.
"""

import enum
import inspect
import json
import re

from . import types
from .exceptions import InvalidParams
from .types import NoneType, fail, got, json_kind, json_repr, param_error, type_check

_EMPTY = {}
P = inspect.Parameter

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


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_path(path, key):
    """The path of ``key`` inside the object at ``path``: ``a.b``, or ``a["x y"]``."""
    if _IDENTIFIER.match(key):
        return "%s.%s" % (path, key) if path else key
    return "%s[%s]" % (path, json.dumps(key))


def _merge(errors, exc):
    data = exc.data if isinstance(exc.data, list) else [param_error("", exc.message)]
    if errors is None:
        return list(data)
    errors.extend(data)
    return errors


# -- converters ---------------------------------------------------------------
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
                errors = _merge(errors, exc)
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
                errors = _merge(errors, exc)
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
                errors = _merge(
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
    return _object_converter(cls, types.typeddict_fields(cls), lambda out, path: out)


def _dataclass(cls):
    def make(out, path):
        try:
            return cls(**out)
        except ValueError as exc:
            # A __post_init__ that validates: its message is the error.
            raise InvalidParams(data=[param_error(path, str(exc) or "invalid value")]) from None

    return _object_converter(cls, types.dataclass_fields(cls), make)


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
