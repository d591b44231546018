"""
Writing the call log: the only code that writes ``Envelope`` and ``Call``.

One envelope is one transaction on the log database with one bulk insert of
its calls. A failure to write never reaches the caller: it is reported on the
``jsonrpc_app`` logger at ERROR with the envelope's content.
"""

import logging

from django.db import transaction

from . import protocol
from .conf import jsonrpc_settings
from .encoding import json_default
from .models import Call, Envelope

logger = logging.getLogger("jsonrpc_app")


def _jsonable(value):
    """Return ``value`` as the JSON it was (or would be) answered as."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    return protocol.loads(protocol.dumps(value, json_default))


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value or ""


def record(context, records, *, request_body=b"", response_body=b"", http_status=200,
           duration=0.0, envelope=None, remote_addr=None, user_agent=""):
    """Write one envelope and its calls; return the Envelope, or None on failure."""
    try:
        return _record(context, records, request_body, response_body, http_status,
                       duration, envelope, remote_addr, user_agent)
    except Exception:
        logger.error(
            "Could not write the JSON-RPC call log for an envelope from %s: %r",
            context.source,
            _text(request_body)[:2000],
            exc_info=True,
        )
        return None


def _record(context, records, request_body, response_body, http_status, duration,
            envelope, remote_addr, user_agent):
    user = context.user
    user_id = user.pk if getattr(user, "is_authenticated", False) else None
    calls = [r for r in records if r.log]
    env = Envelope(
        endpoint=context.endpoint[:255],
        source=context.source,
        is_batch=bool(envelope is not None and envelope.is_batch),
        request_body=_text(request_body),
        response_body=_text(response_body),
        http_status=http_status,
        duration_ms=duration * 1000.0,
        user_id=user_id,
        remote_addr=remote_addr or None,
        user_agent=(user_agent or "")[:512],
        replay_of_id=getattr(context.replay_of, "pk", context.replay_of),
        error_code=envelope.error["code"] if envelope is not None and envelope.error else None,
        call_count=len(records),
        error_count=sum(1 for r in records if r.error is not None),
    )
    using = jsonrpc_settings.LOG_DATABASE
    with transaction.atomic(using=using):
        env.save(using=using)
        Call.objects.using(using).bulk_create(
            [
                Call(
                    envelope=env,
                    position=r.index,
                    created_at=env.created_at,
                    method=(r.method or "")[:255],
                    request_id=r.id,
                    is_notification=r.is_notification,
                    params=_jsonable(r.params),
                    result=_jsonable(r.result),
                    outcome="ok" if r.error is None else "error",
                    error_code=r.error["code"] if r.error else None,
                    error_message=r.error["message"] if r.error else "",
                    error_data=_jsonable(r.error.get("data")) if r.error else None,
                    traceback=r.traceback or "",
                    duration_ms=r.duration * 1000.0,
                    user_id=user_id,
                    source=context.source,
                )
                for r in calls
            ]
        )
    return env
