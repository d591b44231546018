"""
Split lines: the journal line of an envelope whose calls the loader can
split from its bodies, so that the request builds no call row at all.

The request path (``line()``) writes the envelope's columns, which hold the
request and response bodies as they are stored, plus one duration per call (seconds),
and for the few calls the bodies do not tell all of (a notification's result
or error, a traceback) their columns. The loader (``decode()``, through
jsonrpc_app.log.lines) reads the calls back out of the bodies: element ``i``
of the request is call ``i``, and the answers of the response are those of
the elements that are not notifications, in the batch's order (as
jsonrpc_app.dispatch answers them). The rows it gives are the rows
jsonrpc_app.log.rows builds for the same envelope (tests/test_journal.py
holds them equal).

A split line is written only when that is sure to hold and nothing needs
work on the request, which is told from the bodies, in C, without walking a
value: the policy is "all"; every element is a valid request of a method
that is logged and has no sensitive params; both bodies are plain ASCII
without a backslash or NUL (so no string needs escaping and no key is
spelled with an escape), without "null" in the response (a NaN or an
infinity is written as null), with no run of digits a JSON reader may refuse,
and within LOG_MAX_VALUE_BYTES (so nothing is truncated); no sensitive key
occurs in either body (so nothing is redacted). Anything else takes
jsonrpc_app.log.rows' way: the rows built on the request.
"""

import operator
import sys
from itertools import repeat
from operator import getitem, mul

from django.db.models.base import ModelState

from .. import protocol
from ..conf import jsonrpc_settings
from ..models import Call, Envelope, Outcome
from .escaping import escape_json
from .redaction import param_spec, sensitive_keys
from .rows import (
    LogRows,
    cap_text,
    caller,
    envelope_row,
    error_columns,
    method_summary,
    notification_result,
    plain,
    received_at,
)

# A split line's format: a line of format 1 is rows.LogRows' columns as they are.
FORMAT_VERSION = 2
_UNSEEN = object()
# What the response writes as a JSON scalar (None is written null: never split).
_SCALARS = frozenset((int, float, str, bool, type(None)))
# A notification that returned None: nothing of it in the line.
_NOTHING = (False, None, None, "", None)
# Plain str, as a row read back holds: the SQLite driver binds a str subclass
# (the enum member) the slow way, looking for adapters (jsonrpc_app.log.multirow).
_OK, _ERROR = Outcome.OK.value, Outcome.ERROR.value
# The envelope columns the loader counts from the calls.
COUNTED = ("methods", "call_count", "error_count")

_keys_cache = [None, ()]


def _key_bytes(keys):
    """SENSITIVE_KEYS (lower-cased) as ASCII bytes to look for in a plain body; cached."""
    if _keys_cache[0] is not keys:
        _keys_cache[:] = [keys, tuple(k.encode("ascii") for k in keys if k.isascii())]
    return _keys_cache[1]


def line(context, records, request_body, response_body, http_status, duration, envelope,
         remote_addr, user_agent):
    """
    Return (the envelope's row, the split line's other fields, whether its
    bodies go after the line's JSON as they are) of one envelope, for
    lines.encode_split(); or None when the envelope must take rows.build_rows().
    """
    settings = jsonrpc_settings
    if (
        not records
        or settings.LOG_POLICY != "all"
        or envelope is None
        or envelope.error is not None
        or (http_status != 200 and http_status != 204)
        or type(request_body) is not bytes
        or type(response_body) is not bytes
    ):
        return None
    limit = settings.LOG_MAX_VALUE_BYTES
    if limit is not None and (len(request_body) > limit or len(response_body) > limit):
        return None
    if not (
        request_body.isascii() and response_body.isascii()
        and b"\\" not in request_body and b"\\" not in response_body
        and b"\x00" not in request_body and b"\x00" not in response_body
        and b"null" not in response_body
    ):
        return None
    max_digits = sys.get_int_max_str_digits()
    if max_digits and len(response_body) > max_digits and protocol.has_long_digit_run(response_body):
        return None  # a result with more digits than a JSON reader reads back
    user_id, username = caller(context)
    if not (plain(username) and plain(context.source)):
        return None

    keys = sensitive_keys()
    durations = []
    add = durations.append
    unanswered = None  # position -> [failed, result, error code, message, data] of a notification
    tracebacks = None  # position -> traceback text
    answered = with_params = failed = error_members = 0
    named = nested = False  # dict params; a result or error data that is not a scalar
    name = _UNSEEN
    # One plain loop: attribute reads of a __slots__ record are what Python
    # does fastest (map() over attrgetters, column by column, was slower).
    for r in records:
        if r.method != name:
            # The calls of one method share its log and sensitive_params (dispatch sets them).
            name = r.method
            if type(name) is not str or not r.log or r.sensitive_params:
                return None  # an invalid element (its row holds what the element was), or not logged as it came
            spec = param_spec(context, name, keys)
            if spec is not None and spec.names:
                return None
        params = r.params
        if params is not None:
            with_params += 1
            if type(params) is dict:
                named = True  # its keys are names a sensitive key may be
        if r.is_notification:
            if r.result is not None or r.error is not None:
                if unanswered is None:
                    unanswered = {}
                unanswered[str(r.index)] = notification_result(r, limit, keys)
                if r.traceback:
                    tracebacks = tracebacks or {}
                    tracebacks[str(r.index)] = cap_text(r.traceback, limit)
        else:
            answered += 1
            error = r.error
            if error is None:
                if type(r.result) not in _SCALARS:
                    nested = True  # a container, or what json_default writes (perhaps an object)
            else:
                failed += 1
                error_members += 2 + ("data" in error)
                if type(error.get("data")) not in _SCALARS:
                    nested = True
                if r.traceback:
                    tracebacks = tracebacks or {}
                    tracebacks[str(r.index)] = cap_text(r.traceback, limit)
        add(r.duration)
    n = len(records)
    if (http_status == 204) != (answered == 0) or (not envelope.is_batch and n != 1):
        return None
    if keys and not (
        # No object but the envelope's own and no member but theirs: no key to
        # redact. The request: as parse() saw it (shallow, and no params by
        # name), else told by counting (a colon or a brace inside a string only
        # sends it to the scan). The response: no result or error data that
        # holds a container, else counted alike.
        (
            (envelope.shallow and not named)
            or (request_body.count(b"{") == n and request_body.count(b":") == 2 * n + answered + with_params)
        )
        and (
            not nested
            or (response_body.count(b"{") == answered + failed
                and response_body.count(b":") == 3 * answered + error_members)
        )
    ):
        low_request, low_response = request_body.lower(), response_body.lower()
        for key in _key_bytes(keys):
            if key in low_request or key in low_response:
                return None
    # Bodies without a newline go after the line's JSON as they are (no escaping).
    raw = b"\n" not in request_body
    received = received_at(duration)
    env = envelope_row(
        context, received, "" if raw else request_body.decode("ascii"), "" if raw else response_body.decode("ascii"),
        http_status, duration, envelope, remote_addr, user_agent, user_id, username, limit,
        methods="", call_count=n, error_count=0,  # counted by the loader
    )
    fields = {"v": FORMAT_VERSION, "s": durations}
    if unanswered:
        fields["n"] = unanswered
    if tracebacks:
        fields["t"] = tracebacks
    if not envelope.finite:
        fields["x"] = 1  # a number beyond a double, read as infinity: the loader escapes the calls
    return env, fields, raw


class SplitCalls:
    """
    The calls of a split line column by column, as decode() reads them: one
    list for each column that differs from call to call, one value for each
    column they share (``constants``). The loader writes them as they are
    (jsonrpc_app.log.loader, on SQLite); ``materialize()`` makes the Call
    instances anything else asks for (rows.LogRows.calls), the same values.
    Columns of str, int and float hold no object the garbage collector
    tracks, where a chunk of Call instances, their dicts and states did.
    """

    __slots__ = ("count", "columns", "constants", "typed")

    def __init__(self, count, columns, constants, typed):
        self.count = count
        self.columns = columns
        self.constants = constants
        # The columns whose values are of their field's plain type (for a JSON
        # field: read from JSON) by the way decode() made them, whatever the
        # line holds: their types need no look (jsonrpc_app.log.adapt).
        self.typed = typed

    def column(self, attname):
        """The values of column ``attname``, one per call."""
        values = self.columns.get(attname)
        if values is None:
            return [self.constants[attname]] * self.count
        return values

    def materialize(self):
        names = list(self.columns)
        template = dict(self.constants, id=None, envelope_id=None)
        copy, new_call, calls = template.copy, object.__new__, []
        for row in zip(*(self.columns[n] for n in names)):
            values = copy()
            values.update(zip(names, row))
            values["_state"] = ModelState()
            call = new_call(Call)
            call.__dict__ = values
            calls.append(call)
        return calls


# What every call of a split line shares unless told otherwise: a call that returned.
_CONSTANTS = {
    "outcome": _OK, "error_code": None, "error_message": "", "error_data": None, "traceback": "",
    "is_notification": False,
}
# Typed whatever the line holds (see SplitCalls.typed): made by decode() (the
# position, the flags, the outcome), read from JSON for a JSON column, or
# multiplied by a float. The method is not (a corrupt line may hold a list
# there), nor, read from the line, a notification's error or a traceback.
_TYPED = frozenset({"position", "params", "duration_ms", "request_id", "result", "is_notification", "outcome",
                    "error_data"})
_TYPED_ALL_RETURNED = _TYPED | {"error_code", "error_message", "traceback"}  # the constants of _CONSTANTS
_get_method = operator.itemgetter("method")
_METHOD_CAP = slice(None, 255)
_get_id = operator.itemgetter("id")
_get_result = operator.itemgetter("result")


def decode(record, env, shared, bodies=None):
    """
    Return the rows.LogRows of a split line (``record``), its envelope's
    columns ``env`` read already and ``shared`` the columns each call copies
    from it, ``bodies`` the request and response bodies as the line holds
    them after its JSON (bytes), if it does; raise ValueError when the bodies
    do not hold the calls the line says they do.
    """
    durations = record.get("s")
    unanswered = record.get("n") or {}
    tracebacks = record.get("t") or {}
    if type(durations) is not list or type(unanswered) is not dict or type(tracebacks) is not dict:
        raise ValueError("a split call log journal line without its durations")
    request, response = bodies if bodies is not None else (env["request_body"], env["response_body"])
    requests = protocol.loads(request)
    elements = requests if env["is_batch"] else [requests]
    answers = (protocol.loads(response) if env["is_batch"] else [protocol.loads(response)]) if response else []
    n = len(durations)
    if type(elements) is not list or len(elements) != n or type(answers) is not list:
        raise ValueError("a split call log journal line whose bodies do not hold its calls")
    # A number beyond a double was read as infinity: stored as null, as the
    # answer writes it (escaping.make_storable leaves lists of numbers alone).
    finite = not record.get("x")
    params = list(map(dict.get, elements, repeat("params", n)))
    columns = {
        "position": list(range(n)),
        "method": list(map(getitem, map(_get_method, elements), repeat(_METHOD_CAP, n))),  # [:255], in C
        "params": params if finite else list(map(escape_json, params)),
        "duration_ms": list(map(mul, durations, repeat(1000.0, n))),
    }
    constants = dict(_CONSTANTS, **shared)
    if (
        len(answers) == n and not unanswered and not tracebacks
        and not any(map(dict.__contains__, answers, repeat("error", n)))
    ):
        # Every element a call that returned (the usual batch): whole columns at once.
        columns["request_id"] = list(map(_get_id, elements))
        columns["result"] = list(map(_get_result, answers))
        errors, typed = 0, _TYPED_ALL_RETURNED
    else:
        errors, typed = _by_call(columns, constants, elements, answers, unanswered, tracebacks, n), _TYPED
    env["methods"] = method_summary(columns["method"])
    env["call_count"] = n
    env["error_count"] = errors
    envelope = object.__new__(Envelope)
    env["_state"] = ModelState()
    env["id"] = None
    envelope.__dict__ = env
    storable = not unanswered and not tracebacks and not record.get("x")
    return LogRows(envelope, None, calls_storable=storable, split=SplitCalls(n, columns, constants, typed))


def _by_call(columns, constants, elements, answers, unanswered, tracebacks, n):
    """Fill the columns a call at a time (notifications, errors, tracebacks); return the errors."""
    request_id, notification, result = [None] * n, [False] * n, [None] * n
    outcome, code, message, data, trace = [_OK] * n, [None] * n, [""] * n, [None] * n, [""] * n
    next_answer = iter(answers).__next__
    errors = answered = 0
    for i, element in enumerate(elements):
        if "id" in element:
            request_id[i] = element["id"]
            try:
                answer = next_answer()
            except StopIteration:
                raise ValueError("a split call log journal line with fewer answers than calls") from None
            answered += 1
            error = answer.get("error")
            if error is None:
                result[i] = answer["result"]
            else:
                errors += 1
                outcome[i] = _ERROR
                result[i], code[i], message[i], data[i] = error_columns(error, None, ())
        else:
            notification[i] = True
            failed, result[i], code_i, message_i, data_i = unanswered.get(str(i)) or _NOTHING
            if failed:
                errors += 1
                outcome[i] = _ERROR
                code[i], message[i], data[i] = code_i, message_i, data_i
        if tracebacks:
            trace[i] = tracebacks.get(str(i), "")
    if answered != len(answers):
        raise ValueError("a split call log journal line with more answers than calls")
    columns.update(
        request_id=request_id, is_notification=notification, result=result, outcome=outcome,
        error_code=code, error_message=message, error_data=data, traceback=trace,
    )
    for name in ("is_notification", "outcome", "error_code", "error_message", "error_data", "traceback"):
        del constants[name]
    return errors
