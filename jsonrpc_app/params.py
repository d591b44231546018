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

The annotations understood are those ``jsonrpc_app.types`` normalises; the
converter of each is built by ``jsonrpc_app.convert`` from its node.
Unannotated parameters, ``Any``, ``object`` and classes it cannot build from
JSON accept any value as it came.
"""

import inspect

from .convert import MAX_ERRORS, converter_for, merge_errors, with_default_none
from .exceptions import InvalidParams
from .types import param_error

_EMPTY = {}
P = inspect.Parameter


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


# -- binding -------------------------------------------------------------------


_ABSENT = object()


def _written_out(binder):
    """
    Return ``binder.bind`` (a simple Binder's) with its common case written
    out for its signature: every parameter given, by position or by name,
    each value of a type its check passes exactly (``fast_types``), is
    handed over as it came, in one expression of the form

        type(params) is list and len(params) == 2
        and type(params[0]) is t0 and type(params[1]) is t1

    and anything else goes to ``Binder.bind``, which answers those the same
    way (callgrind, two ``int`` params: about 1,650 machine instructions
    instead of 4,300, and dispatch.run() of such a call 8,200 -> 5,850). The
    source holds no name of the signature: the types and names are the
    factory's arguments, read as closure variables.
    """
    checks = binder.checks or {}
    names = [p.name for p in binder.positional]
    by_position, by_name, values = [], [], {}
    for i, name in enumerate(names):
        ok = checks.get(name)
        values["k%d" % i] = name
        if ok is None:
            by_name.append("k%d in params" % i)
            continue
        values["t%d" % i] = ok[0] if len(ok) == 1 else ok
        test = "is t%d" % i if len(ok) == 1 else "in t%d" % i
        by_position.append("type(params[%d]) %s" % (i, test))
        by_name.append("type(params.get(k%d, _ABSENT)) %s" % (i, test))
    arguments = ", ".join(sorted(values) + ["_EMPTY", "_ABSENT", "full"])
    source = "\n".join([
        "def factory(%s):" % arguments,
        "    def bind(params, context=None):",
        "        if type(params) is list:",
        "            if %s:" % " and ".join(["len(params) == %d" % len(names), *by_position]),
        "                return params, _EMPTY",
        "        elif type(params) is dict:",
        "            if %s:" % " and ".join(["len(params) == %d" % len(names), *by_name]),
        "                return (), params",
        "        return full(params, context)",
        "    return bind",
    ])
    namespace = {}
    exec(compile(source, "<jsonrpc_app.params written-out bind>", "exec"), namespace)  # noqa: S102
    return namespace["factory"](**values, _EMPTY=_EMPTY, _ABSENT=_ABSENT, full=Binder.bind.__get__(binder))


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
                    conv = with_default_none(conv)
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
        # bind() itself, or, for a simple signature, its common case written out.
        self.__dict__.pop("bind", None)
        if self.simple:
            self.bind = _written_out(self)

    def bind(self, params, context=None):
        """
        Return (args, kwargs) for the call, or raise InvalidParams.

        A simple binder's instances answer through ``_written_out()`` first.
        """
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
            merge_errors(errors, exc)
            return value
