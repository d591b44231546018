"""
How the call log stores what a database cannot hold, the same way on every
database (SQLite, PostgreSQL, others), so that no value received makes the
write fail and every escaped value can be read back exactly.

Raw bodies (``Envelope.request_body`` / ``response_body``) are bytes that
need not be UTF-8. They are stored as text where

- each byte that is not part of valid UTF-8 is written ``\\xHH`` (two
  lowercase hex digits), and so is NUL (``\\x00``), which PostgreSQL's text
  type refuses;
- a backslash that is followed by ``x`` is written ``\\x5c``, so that the
  escape above is never ambiguous (JSON text never holds ``\\x``, so a body
  that parsed is stored unchanged unless it held NUL or bad bytes).

``unescape_body()`` gives the bytes back.

Strings inside logged JSON values (params, result, error data, ids, object
keys) and the other text columns (method, error message, traceback...):

- NUL and lone surrogates (``"\\ud800"``, which no UTF-8 text can hold and
  PostgreSQL's jsonb refuses) are written as the six characters ``\\u0000`` /
  ``\\ud800``;
- a backslash that is followed by ``u`` and four hex digits is written
  ``\\u005c``, so that the escape above is never ambiguous.

``unescape_text()`` (and ``unescape_json()`` for a whole value) gives the
strings back.

Numbers: integers of any size are stored as JSON numbers (PostgreSQL's jsonb
keeps them exact). Finite floats are stored as JSON numbers; floats that
jsonb would hand back as integers (1e308 reads back as ``10**308``) are
written with a decimal point, so they read back as the same float. A number
beyond the range of a double (``1e400``) is read as infinity before the log
sees it; like the answer, the log stores it as null, and the request body
keeps the digits as they were sent.
"""

import json
import re

import orjson

from django.db import models
from django.db.models import Value
from django.db.models.functions import Cast

_BAD_TEXT = re.compile(r"[\x00\ud800-\udfff]|\\(?=u[0-9a-fA-F]{4})")
_TEXT_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_BODY_ESCAPE = re.compile(rb"\\x([0-9a-f]{2})")
_BODY_BACKSLASH_X = re.compile(rb"\\(?=x)")


def _escape_char(match):
    return "\\u%04x" % ord(match.group())


def escape_text(value):
    """Return ``value`` with NUL, lone surrogates and ``\\uXXXX`` look-alikes escaped."""
    if value.isascii() and "\x00" not in value and "\\" not in value:
        return value  # the common case, told without the regex: no surrogate in ASCII
    if _BAD_TEXT.search(value) is None:
        return value
    return _BAD_TEXT.sub(_escape_char, value)


def unescape_text(value):
    """Return the string ``escape_text()`` was given."""
    return _TEXT_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), value)


def escape_body(body):
    """Return the bytes ``body`` (or a str) as storable text."""
    if isinstance(body, str):
        if _BAD_TEXT.search(body) is None and "\\x" not in body:
            return body
        body = body.encode("utf-8", "surrogatepass")
    elif not body:
        return ""
    if b"\\x" in body:
        # "\x41" becomes "\x5cx41": the backslash escaped, the rest kept.
        body = _BODY_BACKSLASH_X.sub(b"\\\\x5c", body)
    text = body.decode("utf-8", "backslashreplace")
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    return text


def unescape_body(text):
    """Return the bytes ``escape_body()`` was given."""
    return _BODY_ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), text.encode("utf-8"))


# At and above this magnitude a float's shortest form has an exponent, which
# PostgreSQL's numeric expands to an integer: 1e16 would read back as an int.
_EXPONENT_FORM = 1e16


def escape_json(value):
    """Return a JSON value (from json.loads or the like) made storable."""
    t = type(value)
    if t is str:
        return escape_text(value)
    if t is int or t is bool or value is None:
        return value
    if t is float:
        # Infinity and NaN: null, as the answer writes them.
        return value if value - value == 0.0 else None
    if t is list or t is tuple:
        return [escape_json(v) for v in value]
    if t is dict:
        return {
            (escape_text(k) if type(k) is str else k): escape_json(v) for k, v in value.items()
        }
    if isinstance(value, str):
        return escape_text(str(value))
    return value


def unescape_json(value):
    """Return the strings of a stored JSON value unescaped (numbers as stored)."""
    t = type(value)
    if t is str:
        return unescape_text(value)
    if t is list:
        return [unescape_json(v) for v in value]
    if t is dict:
        return {unescape_text(k): unescape_json(v) for k, v in value.items()}
    return value


def _float_text(value):
    text = repr(float(value))
    if "e" not in text:
        return text
    # 1e+308 -> 1000...000.0: the same decimal value, without an exponent.
    mantissa, _, exponent = text.partition("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    point = len(mantissa.lstrip("-").partition(".")[0]) + int(exponent)
    return "%s%s.0" % (sign, digits.ljust(point, "0"))


def _has_exponent_float(value):
    t = type(value)
    if t is float:
        return abs(value) >= _EXPONENT_FORM
    if t is list:
        return any(_has_exponent_float(v) for v in value)
    if t is dict:
        return any(_has_exponent_float(v) for v in value.values())
    return False


_MARK = "\x00float\x00"
_MARKED = re.compile(r'"\\u0000float\\u0000(\d+)"')


def dumps(value):
    """Return ``value`` as JSON text with no float written in exponent form."""
    floats = []

    def mark(v):
        t = type(v)
        if t is float and abs(v) >= _EXPONENT_FORM:
            floats.append(_float_text(v))
            return "%s%d" % (_MARK, len(floats) - 1)
        if t is list:
            return [mark(i) for i in v]
        if t is dict:
            return {k: mark(i) for k, i in v.items()}
        return v

    text = json.dumps(mark(value), allow_nan=False, separators=(",", ":"))
    return _MARKED.sub(lambda m: floats[int(m.group(1))], text)


def db_json(value, connection):
    """
    Return what to hand a JSONField for ``value`` on ``connection``.

    PostgreSQL's jsonb writes numbers back without an exponent, so a float of
    1e16 or more would be read back as an int; such values are sent as JSON
    text in which those floats carry a decimal point.
    """
    if connection.vendor != "postgresql" or not _has_exponent_float(value):
        return value
    return Cast(Value(dumps(value)), models.JSONField())


# Text columns that hold raw bodies, stored with escape_body()'s rules.
BODY_FIELDS = frozenset({"request_body", "response_body"})
_NUL_OR_SURROGATE = re.compile(r"[\x00\ud800-\udfff]")


_FIELDS = {}


def _fields(model):
    """Return (JSON attnames, body attnames, other text attnames) of ``model``, cached."""
    try:
        return _FIELDS[model]
    except KeyError:
        pass
    json_names, body_names, text_names = [], [], []
    for field in model._meta.concrete_fields:
        if isinstance(field, models.JSONField):
            json_names.append(field.attname)
        elif field.attname in BODY_FIELDS:
            body_names.append(field.attname)
        elif isinstance(field, (models.CharField, models.TextField)):
            text_names.append(field.attname)
    _FIELDS[model] = result = (tuple(json_names), tuple(body_names), tuple(text_names))
    return result


def _storable_as_is(value):
    """
    Return True when escape_json() has nothing to change in the container
    ``value``, found without walking it: its orjson text holds no backslash
    (so no string holds NUL, a control character or a backslash), no null
    (which a non-finite float would have been written as), and orjson wrote
    it at all (it refuses lone surrogates, integers beyond 64 bits and
    non-string keys). Anything else goes through escape_json().
    """
    try:
        data = orjson.dumps(value)
    except TypeError:
        return False
    return b"\\" not in data and b"null" not in data


def make_storable(instance):
    """
    Escape, in place, every text and JSON value of a call-log model instance.

    Body columns are expected to hold ``escape_body()`` text already; one that
    still holds NUL or a surrogate is escaped here with the body rules.
    """
    values = instance.__dict__
    json_names, body_names, text_names = _fields(type(instance))
    for name in json_names:
        value = values.get(name)
        if value is not None and type(value) is not int and type(value) is not bool:
            t = type(value)
            if (t is dict or t is list) and _storable_as_is(value):
                continue
            values[name] = escape_json(value)
    for name in body_names:
        value = values.get(name)
        if type(value) is str and not (value.isascii() and "\x00" not in value):
            if _NUL_OR_SURROGATE.search(value) is not None:
                values[name] = escape_body(value)
    if text_names:
        # The usual row: every text column plain ASCII without NUL or
        # backslash, told with one look at them all.
        try:
            joined = "".join([values.get(name) for name in text_names])
        except TypeError:  # a None or a non-str value: column by column
            joined = None
        if joined is not None and joined.isascii() and "\x00" not in joined and "\\" not in joined:
            return
    for name in text_names:
        value = values.get(name)
        if type(value) is str and value:
            values[name] = escape_text(value)
