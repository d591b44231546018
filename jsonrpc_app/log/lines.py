"""
The journal's lines: one envelope's rows (a rows.LogRows) as one line of
JSON bytes, and back.

``encode()`` runs on the request (LOG_WRITER = "journal"): the rows are
already built, redacted, truncated and made storable, so it only writes
their columns with orjson. ``decode()`` runs in the loader, off the request,
and gives back unsaved instances with the same column values, which the
loader writes with the same INSERTs (or COPY) as the synchronous log.

A line is ``{"v": 1, "e": {envelope columns}, "k": [call column names],
"c": [[call values], ...]}`` ended by a newline: every concrete column but
the ids (the loader's database gives those), the envelope's keyed by
attname and the calls' in the order ``"k"`` names, so that a line written
before a migration adds a column still loads (the column takes its
default). The columns a call copies from its envelope (its time, user,
username, source) are written once, in the envelope.
"""

import datetime
import operator
import uuid

import orjson
from django.db.models.base import ModelState

from .. import protocol
from ..models import Call, Envelope
from . import split
from .rows import LogRows

FORMAT_VERSION = 1

_ENVELOPE_NAMES = tuple(f.attname for f in Envelope._meta.concrete_fields if not f.primary_key)
# Columns of a call that are its envelope's: not written per call.
_SHARED = ("created_at", "user_id", "username", "source")
_CALL_NAMES = tuple(
    f.attname
    for f in Call._meta.concrete_fields
    if not f.primary_key and f.attname != "envelope_id" and f.attname not in _SHARED
)
_call_values = operator.itemgetter(*_CALL_NAMES)
_NEWLINE = orjson.OPT_APPEND_NEWLINE
_EXACT = b'{"v":%d,"exact":true' % FORMAT_VERSION


def _default(value):
    """What orjson (or the standard library, for integers beyond 64 bits) cannot write natively."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):  # a str subclass (a TextChoices member)
        return str(value)
    raise TypeError("%s cannot go into the call log's journal" % type(value).__name__)


def encode(rows):
    """Return the journal line (bytes, newline included) of ``rows``, made storable already."""
    env = rows.envelope.__dict__
    record = {
        "v": FORMAT_VERSION,
        "e": {name: env[name] for name in _ENVELOPE_NAMES},
        "k": _CALL_NAMES,
        "c": [_call_values(c.__dict__) for c in rows.calls],
    }
    try:
        return orjson.dumps(record, option=_NEWLINE)
    except TypeError:
        # Integers beyond 64 bits: protocol.dumps() writes them with all their
        # digits, and the line says so (decode() must not read them as floats).
        record = {"v": FORMAT_VERSION, "exact": True, **record}
        return protocol.dumps(record, _default) + b"\n"


_SPLIT_ENVELOPE_NAMES = tuple(name for name in _ENVELOPE_NAMES if name not in split.COUNTED)
_SPLIT_RAW_NAMES = tuple(name for name in _SPLIT_ENVELOPE_NAMES if name not in ("request_body", "response_body"))
_split_values = operator.itemgetter(*_SPLIT_ENVELOPE_NAMES)
_ENVELOPE_KEYS = frozenset(_ENVELOPE_NAMES)
_SPLIT_KEYS = frozenset(_SPLIT_ENVELOPE_NAMES)
_shared_values = operator.itemgetter(*_SHARED)
_split_raw_values = operator.itemgetter(*_SPLIT_RAW_NAMES)
_RS = b"\x1e"


def encode_split(envelope, fields, raw, request_body=b"", response_body=b""):
    """
    Return the journal line of a split line (jsonrpc_app.log.split): the
    envelope's columns but those the loader counts from the calls, and
    ``fields`` (the durations, and what the bodies do not hold). With ``raw``,
    the bodies follow the JSON as they are, each after a record separator
    (0x1E, which no JSON text holds outside a string, nor escaped JSON
    inside one), instead of as two of its strings.
    """
    names, values = (_SPLIT_RAW_NAMES, _split_raw_values) if raw else (_SPLIT_ENVELOPE_NAMES, _split_values)
    fields["e"] = dict(zip(names, values(envelope.__dict__)))
    record = fields
    try:
        head = orjson.dumps(record)
    except TypeError:
        # A notification's result with an integer beyond 64 bits (the bodies hold none).
        head = protocol.dumps({"exact": True, **record}, _default)
    if raw:
        return b"".join((head, _RS, request_body, _RS, response_body, b"\n"))
    return head + b"\n"


def _datetime(value):
    if type(value) is str:
        return datetime.datetime.fromisoformat(value)
    return value


def _instance(model, values):
    obj = object.__new__(model)
    values["_state"] = ModelState()
    values["id"] = None
    obj.__dict__ = values
    return obj


_ENVELOPE_DEFAULTS = {
    f.attname: f.get_default() for f in Envelope._meta.concrete_fields if not f.primary_key
}
_CALL_DEFAULTS = {
    f.attname: f.get_default()
    for f in Call._meta.concrete_fields
    if not f.primary_key and f.attname not in _SHARED
}


def decode(line):
    """
    Return the rows.LogRows of a journal line, unsaved; raise ValueError for
    a line that is not one (torn, of an unknown format, not JSON).
    """
    bodies = None
    if _RS in line:
        # A split line with its bodies after it (encode_split, raw).
        line, *bodies = line.split(_RS)
        if bodies and bodies[-1].endswith(b"\n"):
            bodies[-1] = bodies[-1][:-1]
        if len(bodies) != 2:
            raise ValueError("a call log journal line with %d bodies after it" % len(bodies))
    if line.startswith(_EXACT) or line.startswith(b'{"exact":true'):
        record = protocol.loads(line)
    else:
        # Written by orjson: no integer beyond 64 bits, which orjson would read as a float.
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(str(exc)) from None
    version = record.get("v") if type(record) is dict else None
    if version != FORMAT_VERSION and version != split.FORMAT_VERSION:
        raise ValueError("not a call log journal line of format %d or %d" % (FORMAT_VERSION, split.FORMAT_VERSION))
    env = record.get("e")
    if type(env) is not dict:
        raise ValueError("a call log journal line without its envelope")
    if bodies is not None:
        if version != split.FORMAT_VERSION:
            raise ValueError("bodies after a call log journal line of format %d" % version)
        try:
            env["request_body"], env["response_body"] = (body.decode("ascii") for body in bodies)
        except UnicodeDecodeError:
            raise ValueError("a body after a call log journal line that is not ASCII") from None
    if env.keys() != (_SPLIT_KEYS if version == split.FORMAT_VERSION else _ENVELOPE_KEYS):
        # Written before a migration added a column (it takes its default), or after one dropped it.
        env = {**_ENVELOPE_DEFAULTS, **{k: v for k, v in env.items() if k in _ENVELOPE_DEFAULTS}}
    env["uid"] = uuid.UUID(env["uid"])
    env["created_at"] = _datetime(env["created_at"])
    shared = dict(zip(_SHARED, _shared_values(env)))
    if version == split.FORMAT_VERSION:
        try:
            return split.decode(record, env, shared, bodies)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("a split call log journal line that does not read: %r" % exc) from None
    names = record.get("k")
    if type(names) is not list or type(record.get("c")) is not list:
        raise ValueError("a call log journal line without its calls")
    exact = tuple(names) == _CALL_NAMES
    calls = []
    for values in record["c"]:
        if type(values) is not list or len(values) != len(names):
            raise ValueError("a call of a journal line with %d values for %d columns" % (len(values), len(names)))
        if exact:
            columns = dict(zip(_CALL_NAMES, values))
        else:
            columns = {**_CALL_DEFAULTS, **{k: v for k, v in zip(names, values) if k in _CALL_DEFAULTS}}
        columns.update(shared)
        columns["envelope_id"] = None
        calls.append(_instance(Call, columns))
    return LogRows(_instance(Envelope, env), calls, calls_storable=True)
