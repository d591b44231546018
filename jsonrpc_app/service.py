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

from . import aio, dispatch, log, protocol
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


def _parsed(body, context, error, size_limit):
    """Return (body as bytes, ParsedBody): what answer() and aanswer() run."""
    settings = jsonrpc_settings
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if size_limit is _SETTING:
        size_limit = settings.MAX_BODY_SIZE
    if error is None and size_limit is not None and len(body) > size_limit:
        error = body_too_large(size_limit, len(body))
    if error is None:
        return body, protocol.parse(body, settings.MAX_BATCH_SIZE, settings.MAX_DEPTH)
    return body, protocol.ParsedBody(False, [], error.as_dict())


def _answered(context, parsed, response, records, body):
    """Return (content, status, the keyword arguments of log.record or None when the log is off)."""
    if response is None:
        content, status = b"", 204
    else:
        content, status = encode(response, records), 200
    if not context.log:
        return content, status, None
    return content, status, {"request_body": body, "response_body": content, "http_status": status, "envelope": parsed}


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
    body, parsed = _parsed(body, context, error, size_limit)
    response, records = dispatch.execute(parsed, context)
    content, status, logged = _answered(context, parsed, response, records, body)
    row = None
    if logged is not None:
        row = log.record(
            context, records, duration=_perf() - started, remote_addr=remote_addr, user_agent=user_agent, **logged
        )
    return Answer(response, content, status, records, row)


# What the log records as the HTTP status of an envelope whose client went
# away before the answer (nginx's "client closed request"): nothing was sent.
CLIENT_GONE = 499


async def aanswer(
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
    ``answer()`` awaited, for the async endpoint: the calls run concurrently
    (``dispatch.aexecute``), the log is written without blocking the event
    loop (``log.arecord``).

    Cancelled (the client went away), it logs the envelope with what ran
    (status 499, the unfinished calls as -32007 Call cancelled) and goes on
    being cancelled.
    """
    if started is None:
        started = _perf()
    body, parsed = _parsed(body, context, error, size_limit)
    try:
        response, records = await dispatch.aexecute(parsed, context)
    except aio.Cancelled as cancelled:
        if context.log and cancelled.records is not None:
            await log.arecord(
                context,
                cancelled.records,
                request_body=body,
                http_status=CLIENT_GONE,
                duration=_perf() - started,
                envelope=parsed,
                remote_addr=remote_addr,
                user_agent=user_agent,
            )
        raise
    content, status, logged = _answered(context, parsed, response, records, body)
    row = None
    if logged is not None:
        row = await log.arecord(
            context, records, duration=_perf() - started, remote_addr=remote_addr, user_agent=user_agent, **logged
        )
    return Answer(response, content, status, records, row)
