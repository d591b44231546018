"""
Building the call log's rows: what dispatch returned, made into the unsaved
``Envelope`` and ``Call`` instances of one envelope (a ``LogRows``). No
database work happens here; jsonrpc_app.log.sql writes the rows.

``build_rows()`` applies the policy (``all`` / ``errors`` / ``none`` and
``@rpc_method(log=False)``), redacts sensitive values (as ``REDACTED``),
stores values that JSON cannot hold natively the way the response wrote
them, and truncates what is larger than ``LOG_MAX_VALUE_BYTES`` (as an
object with ``TRUNCATED_KEY``). ``report_failure()`` says, on the
``jsonrpc_app`` logger at ERROR, that rows could not be written anywhere.
"""

import datetime
import functools
import ipaddress
import logging
import sys
import time

from django.conf import settings
from django.db.models.base import ModelState

from .. import protocol
from ..conf import jsonrpc_settings
from ..encoding import json_default
from ..models import Call, Envelope, Outcome, uuid7
from .escaping import escape_body
from .redaction import (
    may_hold_keys,
    param_spec,
    redact,
    redact_params,
    redact_request_body,
    redact_response_body,
    sensitive_keys,
)

logger = logging.getLogger("jsonrpc_app")

# The key of the object that stands in for a JSON value too large to store.
TRUNCATED_KEY = "__truncated__"
_SCALARS = (type(None), bool, int, float)
_UNSEEN = object()
_INT32 = (-(2**31), 2**31 - 1)
# How much of an envelope the ERROR message of a failed write shows.
_FAILURE_DETAIL_CHARS = 16 * 1024


class LogRows:
    """
    The rows of one envelope, built and not yet written.

    ``calls_storable`` is True when build_rows() could tell that no value of
    the calls needs escaping.make_storable() (see _calls_are_storable()).
    """

    __slots__ = ("envelope", "_calls", "calls_storable", "split")

    def __init__(self, envelope, calls, calls_storable=False, split=None):
        self.envelope = envelope
        self._calls = calls
        self.calls_storable = calls_storable
        # A split line's calls as columns (jsonrpc_app.log.split.SplitCalls), until asked for as rows.
        self.split = split

    @property
    def calls(self):
        """The Call instances (a split line's made from its columns when first asked for)."""
        calls = self._calls
        if calls is None:
            calls = self._calls = self.split.materialize()
        return calls

    @calls.setter
    def calls(self, calls):
        self._calls = calls

    def call_count(self):
        return len(self._calls) if self._calls is not None else self.split.count

    def columns(self):
        """The split calls' columns while no Call instance was made (None once one was)."""
        return self.split if self._calls is None else None

    def as_dict(self):
        """Return the rows as JSON-able data (for messages and spools)."""
        return {
            "envelope": _row_dict(self.envelope),
            "calls": [_row_dict(c) for c in self.calls],
        }


def _row_dict(obj):
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def _too_many_digits(n):
    """Cheap: False when str(n) surely works (an int of 3 bits a digit or fewer)."""
    digits = sys.get_int_max_str_digits()
    if digits == 0 or n.bit_length() <= 3 * digits:
        return False
    try:
        str(n)
    except ValueError:
        return True
    return False


def _safe_repr(value):
    """repr(value), or a description when repr itself fails (an int str() refuses)."""
    try:
        return repr(value)
    except Exception:
        return "<%s that cannot be written as text>" % type(value).__name__


def report_failure(rows):
    """Log, at ERROR, that ``rows`` could not be written, with their content; never raise."""
    try:
        detail = protocol.dumps(rows.as_dict(), default=_safe_repr).decode("utf-8", "replace")
    except Exception:
        detail = _safe_repr(rows.as_dict())
    if len(detail) > _FAILURE_DETAIL_CHARS:
        detail = detail[:_FAILURE_DETAIL_CHARS] + "... [%d characters in total]" % len(detail)
    logger.error(
        "Could not write the JSON-RPC call log to database %r; the envelope was: %s",
        jsonrpc_settings.LOG_DATABASE,
        detail,
        exc_info=True,
    )


# -- building rows -----------------------------------------------------------


def is_on():
    """Whether the call log records anything: the one place that reads LOG_POLICY "none"."""
    return jsonrpc_settings.LOG_POLICY != "none"


def build_rows(context, records, *, request_body=b"", response_body=b"", http_status=200,
               duration=0.0, envelope=None, remote_addr=None, user_agent=""):
    """Return the LogRows of one envelope, or None when the policy logs nothing of it."""
    if not is_on():
        return None
    policy = jsonrpc_settings.LOG_POLICY
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
    keys = sensitive_keys()
    request_text = _text(request_body)
    response_text = _text(response_body)
    request_may_hold_keys = may_hold_keys(request_text, keys)
    # Params are parts of the body: when it is small, so is each of them.
    request_small = limit is None or len(request_text.encode("utf-8", "surrogatepass")) <= limit

    user_id, username = caller(context)
    source = context.source
    received = received_at(duration)

    calls = []
    redacted_request = {}  # index in the batch -> params as redacted
    specs = {}  # method name -> its _ParamSpec (or None), looked up once per envelope
    ok, failed = Outcome.OK.value, Outcome.ERROR.value  # plain str (see split._OK)
    # An int result whose str() may be refused (see _too_many_digits), told per call by its bits.
    max_digits = sys.get_int_max_str_digits()
    max_bits = 3 * max_digits if max_digits else None
    for r in logged:
        params = r.params
        if params is not None:
            # The params are walked only when something in them may be
            # sensitive: a key in the body, or a sensitive param of the method.
            name = r.method
            spec = specs.get(name, _UNSEEN) if type(name) is str else None
            if spec is _UNSEEN:
                spec = specs[name] = param_spec(context, name, keys)
            if request_may_hold_keys or r.sensitive_params or (spec is not None and spec.names):
                params, changed = redact_params(context, r, params, keys, request_may_hold_keys, specs)
                if changed:
                    redacted_request[r.index] = params
            if not request_small:
                params = _cap_json(params, limit)
        error = r.error
        if error is None:
            result = r.result
            t = type(result)
            if t not in _SCALARS or (t is int and max_bits is not None and result.bit_length() > max_bits):
                result = _stored_json(result, limit, keys)
            error_code = None
            error_message = ""
            error_data = None
        else:
            result, error_code, error_message, error_data = error_columns(error, limit, keys)
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
            "traceback": cap_text(traceback, limit) if traceback else "",
            "duration_ms": r.duration * 1000.0,
            "user_id": user_id,
            "username": username,
            "source": source,
        }
        calls.append(call)

    if redacted_request or request_may_hold_keys or opted_out:
        request_text = redact_request_body(request_text, records, redacted_request, keys)
    if opted_out or may_hold_keys(response_text, keys):
        response_text = redact_response_body(response_text, records, keys)

    env = envelope_row(
        context, received, request_text, response_text, http_status, duration, envelope,
        remote_addr, user_agent, user_id, username, limit,
        methods=_method_summary(records),
        call_count=len(records),
        error_count=sum(1 for r in records if r.error is not None),
    )
    # A number beyond a double is read as infinity: it needs escaping.
    storable = (
        request_small
        and getattr(envelope, "finite", True)
        and _calls_are_storable(logged, request_text, response_text, username, source)
    )
    return LogRows(env, calls, storable)


def received_at(duration):
    """When the envelope that took ``duration`` seconds until now came in (aware in UTC with USE_TZ, as timezone.now())."""
    if settings.USE_TZ:
        return _fromtimestamp(time.time() - duration, _UTC)
    return _fromtimestamp(time.time() - duration)


_fromtimestamp = datetime.datetime.fromtimestamp
_UTC = datetime.timezone.utc


def caller(context):
    """Return (user_id, username) of the caller of ``context`` as the log stores them."""
    user = context.user
    if getattr(user, "is_authenticated", False):
        return user.pk, user.get_username()[:150]
    return None, ""


def notification_result(r, limit, keys):
    """
    Return [whether it failed, result, error_code, error_message, error_data]
    of the notification record ``r``, as its row stores them: what no body
    holds (a notification is not answered).
    """
    error = r.error
    if error is not None:
        return [True, *error_columns(error, limit, keys)]
    result = r.result
    if type(result) not in _SCALARS or (type(result) is int and _too_many_digits(result)):
        result = _stored_json(result, limit, keys)
    return [False, result, None, "", None]


def error_columns(error, limit, keys):
    """Return (result, error_code, error_message, error_data) of a call answered by the error object ``error``."""
    return (
        None,
        _int32(error.get("code")),
        cap_text(str(error.get("message", "")), limit),
        _stored_json(error.get("data"), limit, keys),
    )


def envelope_row(context, received, request_text, response_text, http_status, duration, envelope,
                 remote_addr, user_agent, user_id, username, limit, **counts):
    """
    Return the unsaved Envelope of one envelope; ``counts`` holds its
    ``methods``, ``call_count`` and ``error_count`` (a journal's split line
    leaves them to the loader: jsonrpc_app.log.split).
    """
    envelope_error = envelope.error if envelope is not None else None
    replay_of = context.replay_of
    env = _new_instance(Envelope)
    # Every column of Envelope, set without Model.__init__ (as for the calls).
    env.__dict__ = {
        "_state": ModelState(),
        "id": None,
        "uid": uuid7(),
        "created_at": received,
        "endpoint": (context.endpoint or "")[:255],
        "source": context.source,
        "is_batch": bool(envelope is not None and envelope.is_batch),
        "request_body": cap_text(request_text, limit),
        "response_body": cap_text(response_text, limit),
        "http_status": http_status,
        "duration_ms": duration * 1000.0,
        "user_id": user_id,
        "username": username,
        "remote_addr": _ip(remote_addr),
        "user_agent": (user_agent or "")[:512],
        "replay_of_id": getattr(replay_of, "pk", replay_of),
        "error_code": _int32(envelope_error.get("code")) if envelope_error else None,
        "error_message": cap_text(str(envelope_error.get("message", "")), limit) if envelope_error else "",
        **counts,
    }
    return env


def plain(text):
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
    if not (plain(request_text) and plain(response_text) and "null" not in response_text):
        return False
    if not (plain(username) and plain(source)):
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
    return method_summary((r.method if type(r.method) is str else "(invalid)") for r in records if r.log)


def method_summary(names):
    """``_method_summary()`` of the method names of the calls logged, in order."""
    text = ", ".join(dict.fromkeys(names))
    if len(text) > 255:
        text = text[:250].rsplit(", ", 1)[0] + ", ..."
    return text


def _text(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        # Bad UTF-8 and NUL as \xHH escapes (see jsonrpc_app.log.escaping).
        return escape_body(bytes(value))
    return value or ""


@functools.lru_cache(maxsize=4096)  # REMOTE_ADDR: a few clients send most requests
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
    if type(value) in _SCALARS and not (type(value) is int and _too_many_digits(value)):
        return value
    if type(value) is str:
        return _cap_json(value, limit)
    try:
        data = protocol.dumps(value, json_default)
    except (TypeError, ValueError):
        return {"__unserializable__": cap_text(_safe_repr(value), 1024)}
    try:
        value = protocol.loads(data)
    except ValueError:
        # JSON that JSON readers refuse (an integer with more digits than
        # int() reads, sys.int_info): kept as its text, or the log could not
        # be read back.
        return {"__unserializable__": cap_text(data.decode("utf-8", "replace"), 1024)}
    if keys and (type(value) is dict or type(value) is list):
        value, changed = redact(value, keys)
        if changed:
            data = protocol.dumps(value)
    if limit is not None and len(data) > limit:
        return _truncated(data, limit)
    return value


# -- truncation --------------------------------------------------------------


def cap_text(text, limit):
    """Return ``text`` cut to ``limit`` UTF-8 bytes, with a marker saying its size."""
    if limit is None or len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", "ignore")
    return "%s\n... [truncated: %d bytes in total, %d kept]" % (head, len(data), limit)


def _cap_json(value, limit):
    """Return ``value`` or, when its JSON is over ``limit`` bytes, a marker object."""
    if limit is None or type(value) in _SCALARS:
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
