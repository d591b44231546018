"""
Redaction: what the call log never stores. The values of the keys named by
``SENSITIVE_KEYS`` (in any case, at any depth) and of the params a method
declares sensitive (``@rpc_method(sensitive_params=...)``, or named like a
sensitive key) are stored as ``REDACTED``, in the calls' params, results and
error data and in the stored bodies. Every writer of the log redacts through
here before anything leaves the request (jsonrpc_app.log.rows, and the
journal's split lines, jsonrpc_app.log.split).
"""

import re
import threading
import weakref

from .. import protocol
from ..conf import jsonrpc_settings
from ..encoding import json_default

REDACTED = "********"

_keys_cache = (None, frozenset())


def sensitive_keys():
    """Return SENSITIVE_KEYS lower-cased, as a frozenset (cached while the setting stands)."""
    global _keys_cache
    configured = jsonrpc_settings.SENSITIVE_KEYS
    if _keys_cache[0] is not configured:
        _keys_cache = (configured, frozenset(str(k).lower() for k in configured or ()))
    return _keys_cache[1]


def may_hold_keys(text, keys):
    """
    Return False only if no key of ``keys`` can occur in the JSON ``text``.

    A key is spelled in the text either literally (in any case) or with a
    \\u escape, so a text with neither needs no walk.
    """
    if not keys or not text:
        return False
    if "\\u" in text:
        return True
    low = text.lower()
    return any(k in low for k in keys)


def redact(value, keys):
    """Return (redacted value, whether anything was redacted); copy only what changes."""
    t = type(value)
    if t is dict:
        out = None
        for k, v in value.items():
            if type(k) is str and k.lower() in keys:
                new = REDACTED
            else:
                t2 = type(v)
                if t2 is not dict and t2 is not list:
                    continue
                new, changed = redact(v, keys)
                if not changed:
                    continue
            if out is None:
                out = dict(value)
            out[k] = new
        return (value, False) if out is None else (out, True)
    if t is list:
        out = None
        for i, v in enumerate(value):
            t2 = type(v)
            if t2 is not dict and t2 is not list:
                continue
            new, changed = redact(v, keys)
            if changed:
                if out is None:
                    out = list(value)
                out[i] = new
        return (value, False) if out is None else (out, True)
    return value, False


class _ParamSpec:
    """Which params of one method are sensitive: by name and by position."""

    __slots__ = ("names", "positions", "rest_from")

    def __init__(self, method, keys):
        names = {n.lower() for n in method.sensitive_params}
        binder = method.binder
        for p in binder.params:
            if p.name.lower() in keys:
                names.add(p.name.lower())
        self.names = frozenset(names)
        self.positions = frozenset(
            i for i, p in enumerate(binder.positional) if p.name.lower() in names
        )
        # *args named as sensitive: every position past the named ones.
        self.rest_from = None
        for p in binder.params:
            if p.kind is p.VAR_POSITIONAL and p.name.lower() in names:
                self.rest_from = len(binder.positional)


_spec_cache = weakref.WeakKeyDictionary()
_spec_lock = threading.Lock()


def param_spec(context, name, keys):
    registry = getattr(context, "registry", None)
    method = registry.get(name) if registry is not None and type(name) is str else None
    if method is None:
        return None
    cached = _spec_cache.get(method)
    if cached is None or cached[0] is not keys:
        spec = _ParamSpec(method, keys)
        with _spec_lock:
            _spec_cache[method] = (keys, spec)
        return spec
    return cached[1]


def redact_params(context, r, params, keys, may_hold_keys, specs=None):
    """
    Return (params as logged, whether anything was redacted); ``specs`` is a
    dict that caches each method's _ParamSpec for the calls of one envelope.
    """
    changed = False
    t = type(params)
    if r.method is not None and (t is dict or t is list) and (r.sensitive_params or keys):
        name = r.method
        if specs is None:
            spec = param_spec(context, name, keys)
        elif type(name) is str and name in specs:
            spec = specs[name]
        else:
            spec = param_spec(context, name, keys)
            if type(name) is str:
                specs[name] = spec
        if spec is not None and spec.names:
            if t is dict:
                hit = [k for k in params if type(k) is str and k.lower() in spec.names]
                if hit:
                    params = dict(params)
                    for k in hit:
                        params[k] = REDACTED
                    changed = True
            elif spec.positions or spec.rest_from is not None:
                rest = spec.rest_from
                hit = [
                    i for i in range(len(params))
                    if i in spec.positions or (rest is not None and i >= rest)
                ]
                if hit:
                    params = list(params)
                    for i in hit:
                        params[i] = REDACTED
                    changed = True
    if may_hold_keys:
        params, deep = redact(params, keys)
        changed = changed or deep
    return params, changed


# Redacts string values of sensitive keys in a body that is not JSON.
_KEY_VALUE_RE_CACHE = {}


def _regex_redact(text, keys):
    key = tuple(sorted(keys))
    pattern = _KEY_VALUE_RE_CACHE.get(key)
    if pattern is None:
        alternatives = "|".join(re.escape(k) for k in key)
        pattern = re.compile(
            r'("(?:%s)"\s*:\s*)"(?:[^"\\]|\\.)*"' % alternatives, re.IGNORECASE
        )
        _KEY_VALUE_RE_CACHE[key] = pattern
    return pattern.sub(lambda m: m.group(1) + '"%s"' % REDACTED, text)


def redact_request_body(text, records, redacted_params, keys):
    """
    Return the request body as it may be stored: sensitive values redacted,
    elements of methods that are not logged left out, re-serialised when
    anything changed.
    """
    try:
        value = protocol.loads(text)
    except (TypeError, ValueError):
        return _regex_redact(text, keys) if keys else text
    changed = False
    skipped = {r.index for r in records if not r.log}
    if type(value) is list:
        kept = []
        for i, element in enumerate(value):
            if i in skipped:
                changed = True
                continue
            if i in redacted_params and type(element) is dict and "params" in element:
                element = dict(element, params=redacted_params[i])
                changed = True
            kept.append(element)
        value = kept
    elif type(value) is dict and 0 in redacted_params and "params" in value:
        value = dict(value, params=redacted_params[0])
        changed = True
    value, deep = redact(value, keys)
    if not (changed or deep):
        return text
    return protocol.dumps(value, json_default).decode("utf-8", "backslashreplace")


def redact_response_body(text, records, keys):
    """Return the response body without the answers of unlogged methods, redacted."""
    if not text:
        return text
    try:
        value = protocol.loads(text)
    except (TypeError, ValueError):
        return _regex_redact(text, keys) if keys else text
    changed = False
    if type(value) is list:
        # Answers come in the order of the elements that get one.
        answering = [r for r in records if not r.is_notification]
        if len(answering) == len(value):
            kept = [resp for r, resp in zip(answering, value) if r.log]
            changed = len(kept) != len(value)
            value = kept
    value, deep = redact(value, keys)
    if not (changed or deep):
        return text
    return protocol.dumps(value, json_default).decode("utf-8", "backslashreplace")
