"""
jsonrpc_app: JSON-RPC 2.0 endpoints for Django, with a call log and an admin browser.

    from jsonrpc_app import rpc_method, JsonRpcError

    @rpc_method
    def subtract(minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend
"""

from .context import CallContext
from .exceptions import (
    AlreadyRegistered,
    AuthenticationRequired,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    MethodNotFound,
    NotRegistered,
    ParseError,
    PermissionDenied,
    Throttled,
)
from .registry import Method, MethodRegistry, registry, rpc_method

__all__ = [
    "AlreadyRegistered",
    "AuthenticationRequired",
    "CallContext",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcError",
    "Method",
    "MethodNotFound",
    "MethodRegistry",
    "NotRegistered",
    "ParseError",
    "PermissionDenied",
    "Throttled",
    "autodiscover",
    "registry",
    "rpc_method",
]


def autodiscover() -> None:
    """Import the ``rpc_methods`` module of every installed app."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("rpc_methods", register_to=registry)
