"""
Binding JSON-RPC params (an array by position, an object by name) to a
method's Python signature, before the method runs.

Everything is worked out once, when the method is registered; a call whose
params do not fit gets ``-32602 Invalid params`` with ``data`` naming each
offending parameter, and the method never runs. The method itself is never
called to find out (a TypeError raised inside it is its own error).
"""

import inspect

from .exceptions import InvalidParams

_EMPTY = {}
P = inspect.Parameter


def _signature(func):
    try:
        return inspect.signature(func, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        # Annotations naming what the module cannot import at run time.
        return inspect.signature(func)


def param_error(path, message):
    return {"path": path, "message": message}


class Binder:
    """Fit params to one callable's signature."""

    def __init__(self, func, context_type=None):
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
        # name -> callable(value, path) returning the converted value or
        # raising ParamsInvalid; filled by validation from annotations.
        self.converters = {}
        self._refresh()

    def _refresh(self):
        # The fast path: a plain signature (no posonly/kwonly/varargs/context)
        # and nothing to convert: params are handed over as they came.
        self.simple = (
            self.context_name is None
            and not self.converters
            and not self.var_positional
            and not self.var_keyword
            and all(p.kind is P.POSITIONAL_OR_KEYWORD for p in self.params)
        )
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
                n = len(params)
                if self.required_positional <= n <= self.max_positional:
                    return params, _EMPTY
            elif params.keys() <= self.names and self.required_set <= params.keys():
                return (), params
        return self._bind_slow(params, context)

    def _missing(self, names):
        return InvalidParams(
            data=[param_error(name, "missing required parameter") for name in names]
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
                errors.append(
                    param_error(
                        "[%d]" % n,
                        "too many positional params: takes at most %d, got %d" % (n, len(params)),
                    )
                )
            else:
                missing = [
                    p.name for p in positional[len(params):] if p.default is P.empty
                ] + self.required_keyword_only
                if missing:
                    raise self._missing(missing)
                by_keyword = not self.var_positional
                for p, value in zip(positional, params):
                    value = self._convert(p.name, value, errors)
                    if by_keyword and p.kind is P.POSITIONAL_OR_KEYWORD:
                        kwargs[p.name] = value
                    else:
                        args.append(value)
                if self.var_positional:
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
                for key, value in params.items():
                    kwargs[key] = self._convert(key, value, errors)
        if errors:
            raise InvalidParams(data=errors)
        if self.context_name is not None:
            kwargs[self.context_name] = context
        return args, kwargs

    def _kind(self, name):
        for p in self.params:
            if p.name == name:
                return p.kind
        return None

    def _convert(self, name, value, errors):
        converter = self.converters.get(name)
        if converter is None:
            return value
        try:
            return converter(value, name)
        except InvalidParams as exc:
            errors.extend(exc.data or [])
            return value
