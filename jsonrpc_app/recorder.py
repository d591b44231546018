"""
Writing the call log: the only code that writes ``Envelope`` and ``Call``.

``record()`` is what callers use (the HTTP view, the admin's try-it and
replay, the CLI). It runs two steps, each usable on its own:

- ``build_rows()`` turns what dispatch returned into unsaved model instances
  (a ``LogRows``): it applies the policy (``all`` / ``errors`` / ``none`` and
  ``@rpc_method(log=False)``), redacts sensitive values, stores values that
  JSON cannot hold natively the way the response wrote them, and truncates
  what is larger than ``LOG_MAX_VALUE_BYTES``;
- ``write_rows()`` writes them: one transaction, one INSERT for the envelope
  and one bulk INSERT for its calls, on ``LOG_DATABASE``, never inside the
  caller's transaction where the database allows a second writer;
  ``write_many()`` writes several envelopes in one transaction, for the
  background writer (``LOG_WRITER = "background"``, jsonrpc_app.writer),
  which ``record()`` hands the rows of HTTP envelopes to instead.

Nothing here raises to the caller, and the client's answer stays what it
was: rows the database cannot take go to the spool (``jsonrpc_app.spool``)
and reach the log later; a failure to build the rows, or to write them
anywhere, is reported on the ``jsonrpc_app`` logger at ERROR with the
(redacted) envelope.
"""

import datetime
import ipaddress
import itertools
import json
import logging
import operator
import re
import threading
import weakref

import orjson
from django.core.signals import request_finished
from django.db import connections, models, transaction
from django.db.models.base import ModelState
from django.db.models.sql import InsertQuery
from django.utils import timezone

from . import protocol, spool
from .conf import jsonrpc_settings
from .encoding import json_default
from .escaping import escape_body
from .models import Call, Envelope, Outcome, uuid7

logger = logging.getLogger("jsonrpc_app")

REDACTED = "********"
# The key of the object that stands in for a JSON value too large to store.
TRUNCATED_KEY = "__truncated__"
_SCALARS = (type(None), bool, int, float)
_INT32 = (-(2**31), 2**31 - 1)
# How much of an envelope the ERROR message of a failed write shows.
_FAILURE_DETAIL_CHARS = 16 * 1024


class LogRows:
    """
    The rows of one envelope, built and not yet written.

    ``calls_storable`` is True when build_rows() could tell that no value of
    the calls needs escaping.make_storable() (see _calls_are_storable()).
    """

    __slots__ = ("envelope", "calls", "calls_storable")

    def __init__(self, envelope, calls, calls_storable=False):
        self.envelope = envelope
        self.calls = calls
        self.calls_storable = calls_storable

    def as_dict(self):
        """Return the rows as JSON-able data (for messages and spools)."""
        return {
            "envelope": _row_dict(self.envelope),
            "calls": [_row_dict(c) for c in self.calls],
        }


def _row_dict(obj):
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


# -- the entry point ---------------------------------------------------------


def record(context, records, *, request_body=b"", response_body=b"", http_status=200,
           duration=0.0, envelope=None, remote_addr=None, user_agent=""):
    """
    Log one envelope and its calls as the policy says; return the Envelope.

    Return None when nothing was logged (policy, opt-out), the log could
    not be written, or the envelope was queued for the background writer
    (not saved yet); never raise.
    """
    if records is None or jsonrpc_settings.LOG_POLICY == "none":
        return None
    try:
        rows = build_rows(
            context,
            records,
            request_body=request_body,
            response_body=response_body,
            http_status=http_status,
            duration=duration,
            envelope=envelope,
            remote_addr=remote_addr,
            user_agent=user_agent,
        )
    except Exception:
        # Only what cannot leak a secret: the caller and the method names.
        logger.error(
            "Could not build the JSON-RPC call log for an envelope from %s (methods: %s)",
            getattr(context, "source", "?"),
            ", ".join(str(getattr(r, "method", None)) for r in records[:50]),
            exc_info=True,
        )
        return None
    if rows is None:
        return None
    if jsonrpc_settings.LOG_WRITER == "background" and context.source == "http":
        # Written later by this process's writer thread (jsonrpc_app.writer);
        # not saved yet, so there is no Envelope to return. The admin's try-it
        # and replay, and the CLI, link to the row they wrote: written now.
        from . import writer

        writer.submit(rows)
        return None
    # Written, or spooled when the database cannot take it (jsonrpc_app.spool).
    return spool.store(rows)


def report_failure(rows):
    """Log, at ERROR, that ``rows`` could not be written, with their content."""
    try:
        detail = protocol.dumps(rows.as_dict(), default=str).decode("utf-8", "replace")
    except Exception:  # pragma: no cover -- default=str makes every value writable
        detail = repr(rows.as_dict())
    if len(detail) > _FAILURE_DETAIL_CHARS:
        detail = detail[:_FAILURE_DETAIL_CHARS] + "... [%d characters in total]" % len(detail)
    logger.error(
        "Could not write the JSON-RPC call log to database %r; the envelope was: %s",
        jsonrpc_settings.LOG_DATABASE,
        detail,
        exc_info=True,
    )


# -- building rows -----------------------------------------------------------


def build_rows(context, records, *, request_body=b"", response_body=b"", http_status=200,
               duration=0.0, envelope=None, remote_addr=None, user_agent=""):
    """Return the LogRows of one envelope, or None when the policy logs nothing of it."""
    policy = jsonrpc_settings.LOG_POLICY
    if policy == "none":
        return None
    envelope_error = envelope.error if envelope is not None else None
    logged = [r for r in records if r.log]
    opted_out = len(logged) != len(records)
    if opted_out and not logged and envelope_error is None:
        return None  # every call is of a method that is not logged
    if policy == "errors":
        logged = [r for r in logged if r.error is not None]
        if not logged and envelope_error is None:
            return None

    limit = jsonrpc_settings.LOG_MAX_VALUE_BYTES
    keys = _sensitive_keys()
    request_text = _text(request_body)
    response_text = _text(response_body)
    request_may_hold_keys = _may_hold_keys(request_text, keys)
    # Params are parts of the body: when it is small, so is each of them.
    request_small = limit is None or len(request_text.encode("utf-8", "surrogatepass")) <= limit

    user = context.user
    if getattr(user, "is_authenticated", False):
        user_id = user.pk
        username = user.get_username()[:150]
    else:
        user_id = None
        username = ""
    source = context.source
    received = timezone.now() - datetime.timedelta(seconds=duration)

    calls = []
    redacted_request = {}  # index in the batch -> params as redacted
    specs = {}  # method name -> its _ParamSpec (or None), looked up once per envelope
    ok, failed = Outcome.OK, Outcome.ERROR
    for r in logged:
        params = r.params
        if params is not None:
            params, changed = _redact_params(context, r, params, keys, request_may_hold_keys, specs)
            if changed:
                redacted_request[r.index] = params
            if not request_small:
                params = _cap_json(params, limit)
        error = r.error
        if error is None:
            result = r.result
            if type(result) not in _SCALARS:
                result = _stored_json(result, limit, keys)
            error_code = None
            error_message = ""
            error_data = None
        else:
            result = None
            error_code = _int32(error.get("code"))
            error_message = _cap_text(str(error.get("message", "")), limit)
            error_data = _stored_json(error.get("data"), limit, keys)
        method = r.method
        traceback = r.traceback
        call = _new_instance(Call)
        # Every column of Call, set without Model.__init__ (a test pins that none is missing).
        call.__dict__ = {
            "_state": ModelState(),
            "id": None,
            "envelope_id": None,
            "position": r.index,
            "created_at": received,
            "method": method[:255] if method else "",
            "request_id": r.id,
            "is_notification": r.is_notification,
            "params": params,
            "result": result,
            "outcome": ok if error is None else failed,
            "error_code": error_code,
            "error_message": error_message,
            "error_data": error_data,
            "traceback": _cap_text(traceback, limit) if traceback else "",
            "duration_ms": r.duration * 1000.0,
            "user_id": user_id,
            "username": username,
            "source": source,
        }
        calls.append(call)

    if redacted_request or request_may_hold_keys or opted_out:
        request_text = _redact_request_body(request_text, records, redacted_request, keys)
    if opted_out or _may_hold_keys(response_text, keys):
        response_text = _redact_response_body(response_text, records, keys)

    replay_of = context.replay_of
    env = _new_instance(Envelope)
    # Every column of Envelope, set without Model.__init__ (as for the calls).
    env.__dict__ = {
        "_state": ModelState(),
        "id": None,
        "uid": uuid7(),
        "created_at": received,
        "endpoint": (context.endpoint or "")[:255],
        "source": source,
        "is_batch": bool(envelope is not None and envelope.is_batch),
        "request_body": _cap_text(request_text, limit),
        "response_body": _cap_text(response_text, limit),
        "http_status": http_status,
        "duration_ms": duration * 1000.0,
        "user_id": user_id,
        "username": username,
        "remote_addr": _ip(remote_addr),
        "user_agent": (user_agent or "")[:512],
        "replay_of_id": getattr(replay_of, "pk", replay_of),
        "error_code": _int32(envelope_error.get("code")) if envelope_error else None,
        "error_message": _cap_text(str(envelope_error.get("message", "")), limit) if envelope_error else "",
        "methods": _method_summary(records),
        "call_count": len(records),
        "error_count": sum(1 for r in records if r.error is not None),
    }
    storable = request_small and _calls_are_storable(logged, request_text, response_text, username, source)
    return LogRows(env, calls, storable)


def _plain(text):
    """True for text escaping.escape_text() leaves as it is without looking further."""
    return isinstance(text, str) and text.isascii() and "\x00" not in text and "\\" not in text


def _calls_are_storable(logged, request_text, response_text, username, source):
    """
    Return True when no value of the calls built from ``logged`` needs
    escaping (NUL, lone surrogates, a backslash-u look-alike, a non-finite
    float), told from the bodies instead of value by value: every string of a
    call's method, id and params was read from the request body, and every
    result and error of a call that is answered was written into the response
    body. A body that is plain ASCII without NUL or backslash holds no string
    that needs escaping (JSON writes those characters as backslash escapes),
    and a response without "null" holds no NaN or infinity (written as null).
    Notifications' results and tracebacks are in no body: any makes it False.
    """
    if not (_plain(request_text) and _plain(response_text) and "null" not in response_text):
        return False
    if not (_plain(username) and _plain(source)):
        return False
    for r in logged:
        if r.is_notification or r.traceback:
            return False
    return True


# An instance without Model.__init__, which costs 15-30 µs here (defaults,
# descriptors, pre_init and post_init signals: nothing this log uses), most
# of the cost of building a batch's rows; its columns are set directly.
_new_instance = object.__new__


def _method_summary(records):
    """Return the methods called, in order, each once, within 255 characters."""
    names = dict.fromkeys(
        (r.method if type(r.method) is str else "(invalid)") for r in records if r.log
    )
    text = ", ".join(names)
    if len(text) > 255:
        text = text[:250].rsplit(", ", 1)[0] + ", ..."
    return text


def _text(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        # Bad UTF-8 and NUL as \xHH escapes (see jsonrpc_app.escaping).
        return escape_body(bytes(value))
    return value or ""


def _ip(value):
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _int32(value):
    if type(value) is int and _INT32[0] <= value <= _INT32[1]:
        return value
    return None


def _stored_json(value, limit, keys):
    """
    Return a result (or error data) as it is logged: as the JSON the response
    wrote it as, with sensitive keys redacted, capped at ``limit`` bytes.
    """
    if type(value) in _SCALARS:
        return value
    if type(value) is str:
        return _cap_json(value, limit)
    try:
        data = protocol.dumps(value, json_default)
    except (TypeError, ValueError):
        return {"__unserializable__": _cap_text(repr(value), 1024)}
    value = protocol.loads(data)
    if keys and (type(value) is dict or type(value) is list):
        value, changed = _redact(value, keys)
        if changed:
            data = protocol.dumps(value)
    if limit is not None and len(data) > limit:
        return _truncated(data, limit)
    return value


# -- redaction ---------------------------------------------------------------

_keys_cache = (None, frozenset())


def _sensitive_keys():
    """Return SENSITIVE_KEYS lower-cased, as a frozenset (cached while the setting stands)."""
    global _keys_cache
    configured = jsonrpc_settings.SENSITIVE_KEYS
    if _keys_cache[0] is not configured:
        _keys_cache = (configured, frozenset(str(k).lower() for k in configured or ()))
    return _keys_cache[1]


def _may_hold_keys(text, keys):
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


def _redact(value, keys):
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
                new, changed = _redact(v, keys)
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
            new, changed = _redact(v, keys)
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


def _param_spec(context, name, keys):
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


def _redact_params(context, r, params, keys, may_hold_keys, specs=None):
    """
    Return (params as logged, whether anything was redacted); ``specs`` is a
    dict that caches each method's _ParamSpec for the calls of one envelope.
    """
    changed = False
    t = type(params)
    if r.method is not None and (t is dict or t is list) and (r.sensitive_params or keys):
        name = r.method
        if specs is None:
            spec = _param_spec(context, name, keys)
        elif type(name) is str and name in specs:
            spec = specs[name]
        else:
            spec = _param_spec(context, name, keys)
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
        params, deep = _redact(params, keys)
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


def _redact_request_body(text, records, redacted_params, keys):
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
    value, deep = _redact(value, keys)
    if not (changed or deep):
        return text
    return protocol.dumps(value, json_default).decode("utf-8", "backslashreplace")


def _redact_response_body(text, records, keys):
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
    value, deep = _redact(value, keys)
    if not (changed or deep):
        return text
    return protocol.dumps(value, json_default).decode("utf-8", "backslashreplace")


# -- truncation --------------------------------------------------------------


def _cap_text(text, limit):
    """Return ``text`` cut to ``limit`` UTF-8 bytes, with a marker saying its size."""
    if limit is None or len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", "ignore")
    return "%s\n... [truncated: %d bytes in total, %d kept]" % (head, len(data), limit)


def _cap_json(value, limit, known_small=False):
    """Return ``value`` or, when its JSON is over ``limit`` bytes, a marker object."""
    if limit is None or known_small or type(value) in _SCALARS:
        return value
    if type(value) is str:
        if len(value) * 4 <= limit:
            return value
    try:
        data = protocol.dumps(value, json_default)
    except (TypeError, ValueError):
        return value
    if len(data) <= limit:
        return value
    return _truncated(data, limit)


def _truncated(data, limit):
    """Return the marker stored for the JSON ``data`` over ``limit`` bytes."""
    return {
        TRUNCATED_KEY: True,
        "original_bytes": len(data),
        "preview": data[:limit].decode("utf-8", "ignore"),
    }


# -- writing rows ------------------------------------------------------------

_ENVELOPE_FIELDS = [f for f in Envelope._meta.concrete_fields if not f.primary_key]
_CALL_FIELDS = [f for f in Call._meta.concrete_fields if not f.primary_key]
_side = threading.local()


def write_rows(rows, using=None):
    """
    Write ``rows`` in one transaction on ``using`` (default: LOG_DATABASE).

    When the caller is inside a transaction of its own on that database (a
    project with ATOMIC_REQUESTS, a view wrapped in atomic()), the rows go
    through a second connection so that they are committed whatever becomes
    of the caller's transaction. SQLite allows one writer at a time, and the
    caller's transaction may hold it: there the rows are written in a
    savepoint of the caller's transaction and, if that transaction does not
    commit them, written again when the request has finished.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    conn = connections[using]
    if not _in_caller_transaction(conn):
        if conn.vendor == "postgresql" and not conn.in_atomic_block and _insert_at_once(conn, rows):
            pass  # one statement in autocommit: a transaction of its own, one round trip
        else:
            with transaction.atomic(using=using):
                _insert(conn, rows)
    elif conn.vendor != "sqlite":
        _write_on_side_connection(using, rows)
    else:
        _write_in_caller_transaction(conn, using, rows)
    rows.envelope._state.adding = False
    rows.envelope._state.db = using
    return rows.envelope


_uncommitted = threading.local()


def _write_in_caller_transaction(conn, using, rows):
    pending = getattr(_uncommitted, "rows", None)
    if pending is None:
        pending = _uncommitted.rows = {}
    key = id(rows)
    if conn.needs_rollback:
        # The caller's transaction is doomed (set_rollback, a caught error):
        # nothing can be written in it; write when the request has finished.
        pending[key] = (using, rows)
        return
    with transaction.atomic(using=using):
        _insert(conn, rows)
    pending[key] = (using, rows)
    # Not called if the caller's transaction (or a savepoint around this
    # write) is rolled back: the rows then stay pending.
    transaction.on_commit(lambda: pending.pop(key, None), using=using)


def write_uncommitted(**kwargs):
    """
    Write again the rows of this thread that were written inside a caller's
    transaction which then did not commit them (request_finished receiver).
    """
    pending = getattr(_uncommitted, "rows", None)
    if not pending:
        return
    items = list(pending.values())
    pending.clear()
    for using, rows in items:
        rows.envelope.pk = None
        rows.envelope._state.adding = True
        try:
            write_rows(rows, using)
        except Exception:
            report_failure(rows)


request_finished.connect(write_uncommitted, dispatch_uid="jsonrpc_app.recorder.write_uncommitted")


def _in_caller_transaction(conn):
    if not conn.get_autocommit() and not conn.in_atomic_block:
        return True  # managed by hand with set_autocommit(False)
    # Django's TestCase wraps each test in atomic blocks it marks as its own;
    # they stand for autocommit, as they do for atomic(durable=True).
    return any(not getattr(block, "_from_testcase", False) for block in conn.atomic_blocks)


def _write_on_side_connection(using, rows):
    conns = getattr(_side, "connections", None)
    if conns is None:
        conns = _side.connections = {}
    conn = conns.get(using)
    if conn is None:
        conn = conns[using] = connections.create_connection(using)
    conn.close_if_unusable_or_obsolete()
    conn.ensure_connection()
    conn.set_autocommit(False)
    try:
        _insert(conn, rows)
        conn.commit()
    except Exception:
        try:
            conn.rollback()
        except Exception:
            conn.close()
        raise
    finally:
        if conn.connection is not None:
            conn.set_autocommit(True)
        # Keep it only as long as CONN_MAX_AGE keeps the request's connections.
        conn.close_if_unusable_or_obsolete()


def write_many(rows_list, using=None):
    """
    Write the rows of several envelopes in one transaction on ``using``
    (default: LOG_DATABASE): one INSERT per envelope, then the calls of all
    of them in one INSERT (on PostgreSQL, as many as its parameter limit needs).

    For the background writer (jsonrpc_app.writer), whose connection is its
    own: raise TransactionManagementError inside a transaction of the
    caller's, where write_rows() is the way to write each envelope.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    conn = connections[using]
    if _in_caller_transaction(conn):
        raise transaction.TransactionManagementError(
            "write_many() writes a transaction of its own; use write_rows() inside one."
        )
    with transaction.atomic(using=using):
        calls = []
        for rows in rows_list:
            env = rows.envelope
            if conn.vendor == "postgresql" and _insert_at_once(conn, rows):
                continue
            # The envelope alone, the way _insert() writes it.
            _insert(conn, LogRows(env, ()))
            _link(rows.calls, env.pk)
            calls.extend(rows.calls)
        _insert_calls(conn, calls)
    for rows in rows_list:
        rows.envelope._state.adding = False
        rows.envelope._state.db = using
    return [rows.envelope for rows in rows_list]


def _max_rows(conn, fields):
    """How many rows one INSERT statement may carry on ``conn``."""
    if conn.vendor == "sqlite":
        try:
            import sqlite3

            conn.ensure_connection()
            params = conn.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except (AttributeError, TypeError):
            params = conn.features.max_query_params
        return max(1, params // len(fields))
    if conn.vendor == "postgresql":
        return 65535 // len(fields)
    return conn.ops.bulk_batch_size(fields, [None]) or 1


def _insert(conn, rows):
    env = rows.envelope
    if conn.vendor == "postgresql" and _insert_at_once(conn, rows):
        return
    if not _insert_returning(conn, env):
        query = InsertQuery(Envelope)
        query.insert_values(_ENVELOPE_FIELDS, [env])
        returned = query.get_compiler(connection=conn).execute_sql([Envelope._meta.pk])
        env.pk = returned[0][0]
    calls = rows.calls
    if not calls:
        return
    _link(calls, env.pk)
    _insert_calls(conn, calls)


def _link(calls, pk):
    for c in calls:
        # Straight into the instance: the attribute's descriptor would look
        # for a cached related object on every call of the batch.
        c.__dict__["envelope_id"] = pk


def _insert_calls(conn, calls):
    """INSERT ``calls`` (their envelope_id set): one statement, or chunks within the parameter limit."""
    if not calls:
        return
    # One statement for all of them, unless the database's parameter limit needs chunks.
    step = _max_rows(conn, _CALL_FIELDS)
    for start in range(0, len(calls), step):
        chunk = calls[start:start + step]
        if not _insert_plain(conn, Call, _CALL_FIELDS, chunk):
            query = InsertQuery(Call)
            query.insert_values(_CALL_FIELDS, chunk)
            query.get_compiler(connection=conn).execute_sql(None)
    for c in calls:
        c._state.adding = False
        c._state.db = conn.alias


# How a value of each column reaches the database, worked out per field once:
# the ORM's insert compiler does this for every value of every row, which is
# most of the cost of logging a batch.
_PLAIN_TYPES = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.IntegerField: (int,),
    models.PositiveIntegerField: (int,),
    models.PositiveSmallIntegerField: (int,),
    models.BigIntegerField: (int,),
    models.FloatField: (float, int),
    models.BooleanField: (bool,),
    models.ForeignKey: (int,),
}


_adapter_cache = weakref.WeakKeyDictionary()


def _adapters(conn, fields):
    """Return the adapters of ``fields`` (a module-level list) on ``conn``, built once per connection."""
    per_conn = _adapter_cache.get(conn)
    if per_conn is None:
        per_conn = _adapter_cache[conn] = {}
    adapters = per_conn.get(id(fields))
    if adapters is None:
        adapters = per_conn[id(fields)] = _build_adapters(conn, fields)
    return adapters


def _build_adapters(conn, fields):
    ops = conn.ops
    adapters = []
    for field in fields:
        plain = _PLAIN_TYPES.get(type(field), ())
        # The types a column takes as they are, None included, as a set (see _columns).
        plain = frozenset(plain + (type(None),)) if plain else frozenset()
        if isinstance(field, models.JSONField):
            encoder = field.encoder
            if conn.vendor == "sqlite" and encoder is None:
                adapters.append((field.attname, frozenset(), _sqlite_json))
            else:
                adapters.append((field.attname, (), lambda v, e=encoder: ops.adapt_json_value(v, e)))
        elif type(field) is models.DateTimeField:
            adapters.append((field.attname, (), ops.adapt_datetimefield_value))
        else:
            adapters.append(
                (field.attname, plain, lambda v, f=field: f.get_db_prep_save(v, conn))
            )
    return adapters


def _sqlite_json(value):
    """
    The JSON text of ``value`` for a JSONField column on SQLite: orjson's
    compact text where it writes the value (the same value when read back,
    in a fraction of json.dumps's time), else what the ORM would write
    (SQLite's adapt_json_value is json.dumps whatever the connection).
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def _insert_head(conn, model, fields):
    """Return "INSERT INTO table (columns)" for ``fields`` (a module-level list) on ``conn``, built once."""
    per_conn = _adapter_cache.get(conn)
    if per_conn is None:
        per_conn = _adapter_cache[conn] = {}
    key = ("head", id(fields))
    head = per_conn.get(key)
    if head is None:
        quote = conn.ops.quote_name
        head = per_conn[key] = "INSERT INTO %s (%s)" % (
            quote(model._meta.db_table),
            ", ".join(quote(f.column) for f in fields),
        )
    return head


def _envelope_params(conn, env):
    """The envelope's values for _ENVELOPE_FIELDS, adapted; None if one is an expression."""
    params = []
    values = env.__dict__
    for attname, plain, adapt in _adapters(conn, _ENVELOPE_FIELDS):
        value = values[attname]
        if value is None or type(value) in plain:
            params.append(value)
        elif hasattr(value, "resolve_expression"):
            return None
        else:
            params.append(adapt(value))
    return params


# The columns of a call row as PostgreSQL reads them from JSON (jsonb_to_recordset):
# every column but the id and the envelope's, which the statement supplies.
_RECORD_FIELDS = [f for f in _CALL_FIELDS if f.attname != "envelope_id"]
_RECORD_NAMES = [f.attname for f in _RECORD_FIELDS]
_RECORD_TYPES = frozenset({str, int, float, bool, dict, list, datetime.datetime, Outcome})
_AT_ONCE_CALL_FIELDS = _RECORD_FIELDS + [Call._meta.get_field("envelope")]


def _insert_at_once(conn, rows):
    """
    PostgreSQL: INSERT the envelope and all its calls in ONE statement, the
    calls handed over as one JSON array (jsonb_to_recordset) and linked to
    the envelope's new id inside the statement. One round trip instead of
    four (BEGIN, two INSERTs, COMMIT) and no array per column for the driver
    to build: a logged single call went from ~1,850 to ~800 µs of wall time,
    a 100-call batch from ~6,100 to ~2,500 µs.

    Return False (having run nothing) when a value is an expression or
    cannot go through JSON as it is (an integer beyond 64 bits): the
    statements of _insert() write those.
    """
    env = rows.envelope
    env_params = _envelope_params(conn, env)
    if env_params is None:
        return False
    records = []
    for call in rows.calls:
        values = call.__dict__
        record = {}
        for name in _RECORD_NAMES:
            value = values[name]
            if value is None:
                continue  # a key left out is SQL NULL (a JSON null would be jsonb 'null')
            if type(value) not in _RECORD_TYPES:
                return False
            record[name] = value
        records.append(record)
    try:
        data = orjson.dumps(records).decode()
    except TypeError:
        return False
    with conn.cursor() as cursor:
        cursor.execute(_at_once_sql(conn), env_params + [data])
        pk = cursor.fetchone()[0]
    env.pk = pk
    _link(rows.calls, pk)
    for c in rows.calls:
        c._state.adding = False
        c._state.db = conn.alias
    return True


def _at_once_sql(conn):
    per_conn = _adapter_cache.get(conn)
    if per_conn is None:
        per_conn = _adapter_cache[conn] = {}
    sql = per_conn.get("at once")
    if sql is None:
        quote = conn.ops.quote_name
        pk = quote(Envelope._meta.pk.column)
        record = ", ".join(
            "%s %s" % (quote(f.attname), f.db_type(conn).split("(")[0]) for f in _RECORD_FIELDS
        )
        sql = per_conn["at once"] = (
            "WITH env AS (%s VALUES (%s) RETURNING %s), "
            "calls AS (%s SELECT %s, env.%s FROM env, jsonb_to_recordset(%%s::jsonb) AS r(%s)) "
            "SELECT %s FROM env"
        ) % (
            _insert_head(conn, Envelope, _ENVELOPE_FIELDS),
            ", ".join(["%s"] * len(_ENVELOPE_FIELDS)),
            pk,
            _insert_head(conn, Call, _AT_ONCE_CALL_FIELDS),
            ", ".join("r.%s" % quote(f.attname) for f in _RECORD_FIELDS),
            pk,
            record,
            pk,
        )
    return sql


def _insert_returning(conn, env):
    """
    INSERT the envelope row with INSERT ... RETURNING and set its pk, each
    value adapted as the ORM would; return False (having run nothing) where
    the database cannot return the pk or a value is an expression. The
    ORM's compiler costs more than the rest of logging a single call.
    """
    if not conn.features.can_return_columns_from_insert:
        return False
    params = _envelope_params(conn, env)
    if params is None:
        return False
    sql = "%s VALUES (%s) RETURNING %s" % (
        _insert_head(conn, Envelope, _ENVELOPE_FIELDS),
        ", ".join(["%s"] * len(_ENVELOPE_FIELDS)),
        conn.ops.quote_name(Envelope._meta.pk.column),
    )
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        env.pk = cursor.fetchone()[0]
    return True


def _columns(conn, fields, objs):
    """
    Return the values of ``objs`` for ``fields``, column by column, each
    adapted as the ORM would, or None if a value is an expression (which
    only the ORM's compiler can write).

    Column by column rather than value by value: a column of a type the
    database takes as it is (text, numbers, booleans) is checked with one
    set of the types it holds, and a value shared by every call of an
    envelope (its time) is adapted once.
    """
    adapters = _adapters(conn, fields)
    getter = _getters.get(id(fields))
    if getter is None:
        getter = _getters[id(fields)] = operator.itemgetter(*(a[0] for a in adapters))
    if len(adapters) == 1:
        rows = [(getter(o.__dict__),) for o in objs]
    else:
        rows = [getter(o.__dict__) for o in objs]
    out = []
    for (_attname, plain, adapt), column in zip(adapters, zip(*rows)):
        if plain and set(map(type, column)) <= plain:
            out.append(column)
            continue
        if adapt is _sqlite_json and set(map(type, column)) <= _JSON_OR_NONE:
            try:
                out.append([None if v is None else _dumps(v).decode() for v in column])
                continue
            except TypeError:
                pass  # a value orjson cannot write: one by one, as the ORM would
        values = []
        last_in = last_out = None
        for value in column:
            t = type(value)
            if value is None or t in plain:
                values.append(value)
            elif value is last_in:
                values.append(last_out)
            elif t not in _JSON_TYPES and hasattr(value, "resolve_expression"):
                return None
            else:
                last_in, last_out = value, adapt(value)
                values.append(last_out)
        out.append(values)
    return out


_getters = {}
_JSON_TYPES = frozenset({dict, list, str, int, float, bool})
_JSON_OR_NONE = _JSON_TYPES | {type(None)}
_dumps = orjson.dumps


def _insert_plain(conn, model, fields, objs):
    """
    INSERT ``objs`` in one statement, each value adapted as the ORM would;
    return False (having run nothing) if a value is an expression, which
    only the ORM's compiler can write.

    PostgreSQL gets one array per column through UNNEST, as Django's own
    bulk_create does there: a statement of a thousand rows has 17 parameters,
    not 17,000 for the driver to splice in.
    """
    columns = _columns(conn, fields, objs)
    if columns is None:
        return False
    head = _insert_head(conn, model, fields)
    if conn.vendor == "postgresql":
        # varchar[] rather than varchar(255)[]: no silent truncation.
        types = [f.db_type(conn).split("(")[0] for f in fields]
        sql = "%s SELECT * FROM UNNEST(%s)" % (head, ", ".join("(%%s)::%s[]" % t for t in types))
        params = [list(c) for c in columns]
    else:
        row = "(%s)" % ", ".join(["%s"] * len(fields))
        sql = "%s VALUES %s" % (head, ", ".join([row] * len(objs)))
        params = list(itertools.chain.from_iterable(zip(*columns)))
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
    return True
