"""
JSON-RPC 2.0 itself: bytes in, request objects (or the errors to answer) out;
response objects in, bytes out.

``parse()`` never raises: invalid JSON, an invalid request object, an empty
or oversize batch all become the error responses the specification
prescribes. This module imports nothing from Django.
"""

import decimal
import json
import re

import orjson

VERSION = "2.0"

# The error codes the specification reserves, and the message it gives each
# (jsonrpc_app.exceptions builds its error classes from these).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}

PARSE_ERROR_OBJECT = {"code": PARSE_ERROR, "message": MESSAGES[PARSE_ERROR]}
INVALID_REQUEST_OBJECT = {"code": INVALID_REQUEST, "message": MESSAGES[INVALID_REQUEST]}

# orjson reads integers beyond 64 bits as floats, losing digits; any run of 19
# digits sends the body through the standard library, which keeps them exact.
# Found by mapping every digit to "0" and every other byte to " " and looking
# for 19 zeros: a tenth of what the regular expression [0-9]{19} costs.
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def has_long_digit_run(body):
    if type(body) is not bytes:
        body = bytes(body)
    return _LONG_RUN in body.translate(_DIGITS_AS_ZEROS)


class Request:
    """One valid request object of an envelope."""

    __slots__ = ("index", "method", "params", "id", "is_notification")

    def __init__(self, index, method, params, id, is_notification):
        self.index = index
        self.method = method
        self.params = params
        self.id = id
        self.is_notification = is_notification

    def __repr__(self):
        return "<Request %s %r id=%r>" % (self.index, self.method, self.id)


class InvalidItem:
    """One element of an envelope that is not a valid request object."""

    __slots__ = ("index", "id", "error", "value")

    is_notification = False
    method = None
    params = None

    def __init__(self, index, id, error, value):
        self.index = index
        self.id = id
        self.error = error
        self.value = value

    def response(self):
        return response(self.id, error=self.error)


class ParsedBody:
    """
    What ``parse()`` read from one body: its ``items`` (Request or InvalidItem).

    ``error`` is set when the body as a whole is answered by one error object
    (parse error, empty batch, batch over the limit); ``items`` then is empty.
    """

    __slots__ = ("is_batch", "items", "error", "finite", "shallow")

    def __init__(self, is_batch, items, error=None, finite=True, shallow=False):
        self.is_batch = is_batch
        self.items = items
        self.error = error
        # False when the body may hold a number beyond a double (see read()).
        self.finite = finite
        # True when parse() saw that every element is a valid request with no
        # member but the protocol's and no container but its params (_checked).
        self.shallow = shallow

    def error_response(self):
        return response(None, error=self.error)


def _reject_constant(name):
    raise ValueError("%s is not valid JSON" % name)


_strict_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def loads(body):
    """
    Decode strict RFC 8259 JSON from bytes (or str).

    Raise ValueError for anything else: invalid UTF-8, a byte order mark,
    NaN/Infinity, trailing commas, nesting too deep to read.
    """
    return read(body)[0]


def read(body):
    """
    ``loads()``, and whether every number read is finite: False only when
    the text may hold a number beyond a double (read as infinity by the
    standard library, which reads what orjson refuses), which the call log
    must escape.
    """
    if isinstance(body, str):
        try:
            body = body.encode("utf-8")
        except UnicodeEncodeError as exc:
            # A str holding lone surrogates cannot be sent as UTF-8; read it as is.
            return _loads_stdlib(body, exc), _MAY_OVERFLOW.search(body) is None
    if not has_long_digit_run(body):
        try:
            return orjson.loads(body), True
        except orjson.JSONDecodeError as exc:
            error = exc
    else:
        error = None
    # orjson refuses lone surrogate escapes ("\ud800") and numbers that
    # overflow a double, both valid JSON text; the standard library reads them.
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("invalid UTF-8: %s" % exc) from None
    if text.startswith("\ufeff"):
        raise ValueError("a byte order mark is not JSON text")
    return _loads_stdlib(text, error), _MAY_OVERFLOW.search(text) is None


# A number a double cannot hold: an exponent of three digits or more, or 309
# digits before a point or an exponent (conservative: 1e100 is finite).
_MAY_OVERFLOW = re.compile(r"[0-9][eE]\+?0*[0-9]{3}|[0-9]{309}[.eE]")


def _loads_stdlib(text, error):
    try:
        value, end = _strict_decoder.raw_decode(text, _skip_ws(text, 0))
    except RecursionError:
        raise ValueError("nesting too deep") from None
    except ValueError as exc:
        raise ValueError(str(error or exc)) from None
    if _skip_ws(text, end) != len(text):
        raise ValueError("extra data after the JSON value")
    return value


_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(text, pos):
    return _WS.match(text, pos).end()


def _too_deep(value, limit):
    """Return True if containers nest deeper than ``limit`` levels (without recursing)."""
    stack = [(value, 1)]
    pop = stack.pop
    push = stack.append
    while stack:
        container, depth = pop()
        if depth > limit:
            return True
        for item in container.values() if type(container) is dict else container:
            if type(item) is dict or type(item) is list:
                push((item, depth + 1))
    return False


_ABSENT = object()


def _checked(elements):
    """
    Return (a Request for each valid request object of ``elements``, else an
    InvalidItem; the number of containers the body holds if every element
    is a valid request with no member but the protocol's and no container
    but its params, else None). One loop for both: a batch's elements are
    read once (see parse()).
    """
    items = []
    append = items.append
    known = 1  # the batch's own brackets
    plain = True
    for index, value in enumerate(elements):
        if type(value) is dict and len(value) == 4:
            # The usual element, {"jsonrpc", "method", "params", "id"}: read by
            # subscripts (a dict.get() call each costs three times as much).
            try:
                id = value["id"]
                params = value["params"]
                method = value["method"]
                jsonrpc = value["jsonrpc"]
            except KeyError:
                pass  # four members, not these: read below
            else:
                t = type(params)
                i = type(id)
                # A str equal to "2.0" is the only JSON value equal to it.
                if (
                    jsonrpc == VERSION
                    and type(method) is str
                    and (t is list or t is dict)
                    and (i is int or i is str or i is float or id is None)
                ):
                    known += 2
                    append(Request(index, method, params, id, False))
                    continue
        if type(value) is not dict:
            append(InvalidItem(index, None, INVALID_REQUEST_OBJECT, value))
            plain = False
            continue
        id = value.get("id", _ABSENT)
        if id is _ABSENT:
            id = None
            is_notification = True
            members = 2
        else:
            # str, number or null; bool is an int in Python but not a JSON number.
            t = type(id)
            if not (t is str or t is int or t is float or id is None):
                append(InvalidItem(index, None, INVALID_REQUEST_OBJECT, value))
                plain = False
                continue
            is_notification = False
            members = 3
        jsonrpc = value.get("jsonrpc")
        method = value.get("method")
        params = value.get("params", _ABSENT)
        if params is _ABSENT:
            params = None
            known += 1
        elif type(params) is list or type(params) is dict:
            members += 1
            known += 2
        else:
            # An explicit null is not a structured value either.
            params = _ABSENT
        if type(jsonrpc) is not str or jsonrpc != VERSION or type(method) is not str or params is _ABSENT:
            # The id is echoed when it could be read; otherwise it is null.
            append(InvalidItem(index, id, INVALID_REQUEST_OBJECT, value))
            plain = False
            continue
        if plain and len(value) != members:
            plain = False
        append(Request(index, method, params, id, is_notification))
    return items, (known if plain else None)


def _too_deep_error(max_depth):
    return dict(INVALID_REQUEST_OBJECT, data="JSON nested deeper than %d levels" % max_depth)


def parse(body, max_batch=None, max_depth=None):
    """Read one HTTP body into a ParsedBody; never raise."""
    try:
        value, finite = read(body)
    except (ValueError, TypeError):
        return ParsedBody(False, [], PARSE_ERROR_OBJECT)
    is_batch = type(value) is list
    items = None
    shallow = False
    if max_depth is not None and (is_batch or type(value) is dict):
        # Fewer brackets than the limit cannot nest deeper than it.
        brackets = body.count(b"[") + body.count(b"{") if isinstance(body, bytes) else None
        if brackets is None or brackets > max_depth:
            deep = None
            if is_batch and max_depth >= 3 and value and (max_batch is None or len(value) <= max_batch):
                # Shallow: when every element is a valid request with no other
                # members, and its params (if any) the only container inside it,
                # the body holds one container per batch, element and params; if
                # that is all the brackets there are (each container's own and
                # any inside strings), nothing nests deeper than 3. Anything
                # else is left to _too_deep().
                items, containers = _checked(value)
                if containers == brackets:
                    deep = False
                    shallow = True
            if deep is None and _too_deep(value, max_depth):
                return ParsedBody(is_batch, [], _too_deep_error(max_depth))
    if is_batch:
        if not value:
            return ParsedBody(True, [], INVALID_REQUEST_OBJECT)
        if max_batch is not None and len(value) > max_batch:
            return ParsedBody(
                True,
                [],
                dict(
                    INVALID_REQUEST_OBJECT,
                    data="batch of %d calls is over the limit of %d" % (len(value), max_batch),
                ),
            )
        if items is None:
            items = _checked(value)[0]
        return ParsedBody(True, items, None, finite, shallow)
    return ParsedBody(False, _checked((value,))[0], None, finite)


def response(id, result=None, error=None):
    """The response object to one call: its ``error`` object when given, else its ``result``."""
    if error is not None:
        return {"jsonrpc": VERSION, "error": error, "id": id}
    return {"jsonrpc": VERSION, "result": result, "id": id}


_DUMP_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def dumps(value, default=None):
    """
    Encode a response (or list of responses) as compact UTF-8 JSON bytes.

    ``default`` turns values JSON cannot hold into ones it can, as
    ``json.dumps(default=...)`` does. Non-finite floats become null.
    """
    try:
        return orjson.dumps(value, default=default, option=_DUMP_OPTIONS)
    except TypeError as exc:
        if "64-bit" not in str(exc) and "surrogates" not in str(exc):
            raise
    # Integers beyond 64 bits and lone surrogates: the standard library
    # writes both (the latter as \\u escapes).
    try:
        return _std_dumps(value, default)
    except ValueError:
        # A non-finite float next to them (null, as orjson writes it), or an
        # integer with more digits than str() writes (sys.int_info).
        return _std_dumps(_finite(value), default, many_digits=True)


_MANY_DIGITS_MARKED = re.compile(r'"\\u0000int\\u0000(\d+)"')


def _std_dumps(value, default, many_digits=False):
    ints = []
    if many_digits:
        value = _mark_long_ints(value, ints)
    text = json.dumps(value, default=default, separators=(",", ":"), allow_nan=False, ensure_ascii=True)
    if ints:
        text = _MANY_DIGITS_MARKED.sub(lambda m: ints[int(m.group(1))], text)
    return text.encode()


def _mark_long_ints(value, ints):
    """
    Return ``value`` with each integer that str() refuses (more digits than
    sys.get_int_max_str_digits()) replaced by a marker string, its digits
    (written by decimal, which has no such limit) appended to ``ints``.
    """
    t = type(value)
    if t is int:
        try:
            str(value)
        except ValueError:
            ints.append(str(decimal.Decimal(value)))
            return "\x00int\x00%d" % (len(ints) - 1)
        return value
    if t is list or t is tuple:
        return [_mark_long_ints(v, ints) for v in value]
    if t is dict:
        return {k: _mark_long_ints(v, ints) for k, v in value.items()}
    return value


def _finite(value):
    """Return ``value`` with every non-finite float replaced by None."""
    t = type(value)
    if t is float:
        return value if value - value == 0.0 else None
    if t is list or t is tuple:
        return [_finite(v) for v in value]
    if t is dict:
        return {k: _finite(v) for k, v in value.items()}
    return value
