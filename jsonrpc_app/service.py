"""
Answering one JSON-RPC body: parse it, run it through the dispatcher, encode
the answer and write the call log, the same way for every caller.

The HTTP endpoint calls ``answer()`` after its own checks (method, size,
authentication); the admin's "try it" and replay, and any other caller that
is not an HTTP request, call it directly with a ``CallContext`` saying who
calls and from where (and ``answer()`` applies MAX_BODY_SIZE for them). Nothing here knows about HTTP beyond the status code
the endpoint would have answered with (200, or 204 for nothing to say),
which is what the log records.
"""

import time

from . import dispatch, log, protocol
from .conf import jsonrpc_settings
from .encoding import json_default
from .exceptions import InvalidRequest, JsonRpcError

_perf = time.perf_counter


class Answer:
    """What ``answer()`` did with one body."""

    __slots__ = ("response", "content", "status", "records", "envelope")

    def __init__(self, response, content, status, records, envelope):
        # The response object(s) as Python values, None for nothing to say.
        self.response = response
        # The bytes to send (b"" when there is nothing to say).
        self.content = content
        # 200, or 204 when there is nothing to say.
        self.status = status
        # The dispatcher's CallRecords, or None when the log is off.
        self.records = records
        # The models.Envelope row written to the log, or None (log off, not written,
        # or queued for the background writer: LOG_WRITER = "background").
        self.envelope = envelope


def encode(response, records=None):
    """
    Return the bytes of ``response`` (a dict or a list of dicts).

    A result that cannot be written as JSON turns that one response into an
    internal error (and its call record with it); the others are kept.
    """
    try:
        return protocol.dumps(response, json_default)
    except (TypeError, ValueError):
        pass
    responses = response if isinstance(response, list) else [response]
    by_id = {}
    if records:
        for r in records:
            if r.error is None and not r.is_notification:
                by_id.setdefault(repr(r.id), r)
    fixed = []
    for item in responses:
        try:
            protocol.dumps(item, json_default)
        except (TypeError, ValueError) as exc:
            error, tb = dispatch.error_of(exc)
            record = by_id.get(repr(item.get("id")))
            if record is not None:
                record.result = None
                record.error = error
                record.traceback = tb
            item = protocol.response(item.get("id"), error=error)
        fixed.append(item)
    return protocol.dumps(fixed if isinstance(response, list) else fixed[0], json_default)


def body_too_large(limit, size=None) -> InvalidRequest:
    """The one answer to a body over the size limit ``limit``; ``size`` when it is known."""
    if size is None:
        message = "request body is over the limit of %d bytes" % limit
    else:
        message = "request body of %d bytes is over the limit of %d bytes" % (size, limit)
    return InvalidRequest(data=message)


_SETTING = object()


def answer(
    body,
    context,
    *,
    error: JsonRpcError | None = None,
    size_limit=_SETTING,
    started=None,
    remote_addr=None,
    user_agent="",
) -> Answer:
    """
    Answer ``body`` (bytes or str) for the caller of ``context``; return an Answer.

    ``error``, when given, is a JsonRpcError that answers the whole body
    without parsing it (the endpoint's failed authentication or throttle).
    ``size_limit`` is the largest body answered, in bytes (None: any),
    MAX_BODY_SIZE unless given; the endpoint, which applies its limit while
    it reads the body, passes None. ``started`` is the
    ``time.perf_counter()`` value the logged duration counts from (now, if
    not given).
    """
    if started is None:
        started = _perf()
    settings = jsonrpc_settings
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if size_limit is _SETTING:
        size_limit = settings.MAX_BODY_SIZE
    if error is None and size_limit is not None and len(body) > size_limit:
        error = body_too_large(size_limit, len(body))
    if error is None:
        parsed = protocol.parse(body, settings.MAX_BATCH_SIZE, settings.MAX_DEPTH)
        response, records = dispatch.execute(parsed, context)
    else:
        parsed = protocol.ParsedBody(False, [], error.as_dict())
        response, records = parsed.error_response(), ([] if context.log else None)
    if response is None:
        content, status = b"", 204
    else:
        content, status = encode(response, records), 200
    row = None
    if context.log:
        row = log.record(
            context,
            records,
            request_body=body,
            response_body=content,
            http_status=status,
            duration=_perf() - started,
            envelope=parsed,
            remote_addr=remote_addr,
            user_agent=user_agent,
        )
    return Answer(response, content, status, records, row)
