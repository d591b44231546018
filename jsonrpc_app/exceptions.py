"""
The errors of JSON-RPC 2.0 and of the registry, and ``to_error()``: the one
translator from any exception to the error a client is answered with.

Raise ``JsonRpcError`` (or a subclass) from a method to answer with exactly
that code, message and data. Subclasses set ``code`` and ``message`` as
class attributes, which is how a method declares the errors it can raise::

    class OutOfStock(JsonRpcError):
        code = -32010
        message = "Out of stock"

Importing this module imports nothing from Django (``import jsonrpc_app``
stays free of it); ``to_error()`` reads DRF's and Django's exception classes
when it runs.
"""

from __future__ import annotations

import logging
import traceback as tb_module
from typing import Any

from .protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MESSAGES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)

logger = logging.getLogger("jsonrpc_app")

_UNSET: Any = object()


class JsonRpcError(Exception):
    """An error answered to the client as a JSON-RPC error object."""

    code: int = -32000
    message: str = "Server error"
    data: Any = None
    # The status of an answer that is only this error outside a JSON-RPC
    # response (GET openrpc.json); a JSON-RPC response is 200 whatever its errors.
    http_status: int = 403
    # The traceback text of an internal error, for the call log (see to_error()).
    traceback: str | None = None

    def __init__(self, message: str | None = None, code: int | None = None, data: Any = _UNSET) -> None:
        if code is not None:
            self.code = code
        if message is not None:
            self.message = message
        if data is not _UNSET:
            self.data = data
        if not isinstance(self.code, int) or isinstance(self.code, bool):
            raise TypeError("JsonRpcError.code must be an int, not %r" % (self.code,))
        self.message = str(self.message)
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        """Return the error object as the specification shapes it."""
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return "%s(code=%r, message=%r, data=%r)" % (
            type(self).__name__,
            self.code,
            self.message,
            self.data,
        )


class ParseError(JsonRpcError):
    code = PARSE_ERROR
    message = MESSAGES[PARSE_ERROR]


class InvalidRequest(JsonRpcError):
    code = INVALID_REQUEST
    message = MESSAGES[INVALID_REQUEST]


class MethodNotFound(JsonRpcError):
    code = METHOD_NOT_FOUND
    message = MESSAGES[METHOD_NOT_FOUND]


class InvalidParams(JsonRpcError):
    code = INVALID_PARAMS
    message = MESSAGES[INVALID_PARAMS]


class InternalError(JsonRpcError):
    code = INTERNAL_ERROR
    message = MESSAGES[INTERNAL_ERROR]


# Codes of the implementation-defined server error range (-32000..-32099).


class AuthenticationRequired(JsonRpcError):
    code = -32001
    message = "Authentication required"
    http_status = 401


class PermissionDenied(JsonRpcError):
    code = -32003
    message = "Permission denied"
    http_status = 403


class MethodDisabled(JsonRpcError):
    code = -32004
    message = "Method disabled"


class CallTimedOut(JsonRpcError):
    """An async method ran past its timeout (``timeout=``, or METHOD_TIMEOUT) and was cancelled."""

    code = -32008
    message = "Call timed out"


class CallCancelled(JsonRpcError):
    """What the log records for a call of an async batch cancelled because the client went away."""

    code = -32007
    message = "Call cancelled"


class CallLogFull(JsonRpcError):
    """The call log's journal holds more than LOG_JOURNAL_MAX_BYTES (LOG_JOURNAL_FULL = "refuse")."""

    code = -32050
    message = "Call log full"
    http_status = 503


class Throttled(JsonRpcError):
    """``data`` is ``{"wait": seconds}``, the wait rounded up (None: unknown)."""

    code = -32029
    message = "Request was throttled"
    http_status = 429

    @property
    def wait(self) -> int | None:
        return (self.data or {}).get("wait")


def to_error(exc: BaseException, method_name: str | None = None) -> JsonRpcError:
    """
    Return the JsonRpcError that answers ``exc``, as DRF's exception_handler
    is for REST: ``.as_dict()`` is the error object, ``.http_status`` the
    status outside a JSON-RPC response.

    A JsonRpcError is returned as it is; DRF's ValidationError, authentication,
    permission and throttle errors and Django's PermissionDenied and
    SuspiciousOperation map to their codes; anything else is an internal
    error, logged with its traceback (set as ``.traceback`` for the call
    log), whose text reaches the client only if EXPOSE_EXCEPTIONS is on.
    """
    if isinstance(exc, JsonRpcError):
        return exc
    # Imported here, not at the top, so that importing jsonrpc_app needs no
    # Django (an import cost, not a cycle: none of these imports this module).
    from django.core import exceptions as django_exceptions
    from django.utils.encoding import force_str
    from rest_framework import exceptions as drf_exceptions

    from .conf import jsonrpc_settings

    if isinstance(exc, drf_exceptions.ValidationError):
        return InvalidParams(data=exc.get_full_details())
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return AuthenticationRequired(message=force_str(exc.detail))
    if isinstance(exc, drf_exceptions.PermissionDenied):
        return PermissionDenied(message=force_str(exc.detail))
    if isinstance(exc, drf_exceptions.Throttled):
        return Throttled(data={"wait": exc.wait})
    if isinstance(exc, django_exceptions.PermissionDenied):
        # Its text is the raiser's, possibly internal: answer the plain message.
        return PermissionDenied()
    if isinstance(exc, django_exceptions.SuspiciousOperation):
        # Django answers these with 400 Bad Request; its text stays in the log.
        return InvalidRequest()
    text = "".join(tb_module.format_exception(exc))
    logger.error("Internal error in JSON-RPC method %s", method_name or "?", exc_info=exc)
    error = InternalError()
    if jsonrpc_settings.EXPOSE_EXCEPTIONS:
        error.data = {"type": type(exc).__name__, "message": str(exc), "traceback": text}
    error.traceback = text
    return error


class AlreadyRegistered(Exception):
    """A method name is already taken in a registry."""


class NotRegistered(Exception):
    """A method name is not in a registry."""
