"""
The errors of JSON-RPC 2.0 and of the registry.

Raise ``JsonRpcError`` (or a subclass) from a method to answer with exactly
that code, message and data. Subclasses may set ``code`` and ``message`` as
class attributes, which is how a method declares the errors it can raise::

    class OutOfStock(JsonRpcError):
        code = -32010
        message = "Out of stock"

This module imports nothing from Django.
"""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Codes of the implementation-defined server error range (-32000..-32099).
AUTHENTICATION_REQUIRED = -32001
PERMISSION_DENIED = -32003
THROTTLED = -32029
METHOD_DISABLED = -32004

_UNSET = object()


class JsonRpcError(Exception):
    """An error answered to the client as a JSON-RPC error object."""

    code = -32000
    message = "Server error"
    data = None

    def __init__(self, message=None, code=None, data=_UNSET):
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

    def as_dict(self):
        """Return the error object as the specification shapes it."""
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self):
        return "%s(code=%r, message=%r, data=%r)" % (
            type(self).__name__,
            self.code,
            self.message,
            self.data,
        )


class ParseError(JsonRpcError):
    code = PARSE_ERROR
    message = "Parse error"


class InvalidRequest(JsonRpcError):
    code = INVALID_REQUEST
    message = "Invalid Request"


class MethodNotFound(JsonRpcError):
    code = METHOD_NOT_FOUND
    message = "Method not found"


class InvalidParams(JsonRpcError):
    code = INVALID_PARAMS
    message = "Invalid params"


class InternalError(JsonRpcError):
    code = INTERNAL_ERROR
    message = "Internal error"


class AuthenticationRequired(JsonRpcError):
    code = AUTHENTICATION_REQUIRED
    message = "Authentication required"


class PermissionDenied(JsonRpcError):
    code = PERMISSION_DENIED
    message = "Permission denied"


class MethodDisabled(JsonRpcError):
    code = METHOD_DISABLED
    message = "Method disabled"


class Throttled(JsonRpcError):
    code = THROTTLED
    message = "Request was throttled"


class AlreadyRegistered(Exception):
    """A method name is already taken in a registry."""


class NotRegistered(Exception):
    """A method name is not in a registry."""
