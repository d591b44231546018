"""
Who may call what: per-method checks (login, Django model permissions, DRF
permission and throttle classes) and the mapping of DRF/Django errors to
JSON-RPC error objects.
"""

from django.core import exceptions as django_exceptions
from rest_framework import exceptions as drf_exceptions

from .exceptions import (
    AuthenticationRequired,
    InvalidParams,
    MethodDisabled,
    PermissionDenied,
    Throttled,
)


def check_method_permissions(method, context):
    """Raise a JsonRpcError if the caller of ``context`` may not call ``method``."""
    if not method.enabled:
        raise MethodDisabled()
    user = context.user
    if (method.login_required or method.permissions) and not user.is_authenticated:
        raise AuthenticationRequired()
    if method.permissions and not user.has_perms(method.permissions):
        raise PermissionDenied()
    if method.permission_classes:
        request = context.request
        for permission_class in method.permission_classes:
            permission = permission_class()
            if not permission.has_permission(request, None):
                if not user.is_authenticated:
                    raise AuthenticationRequired()
                raise PermissionDenied(
                    data=getattr(permission, "message", None)
                    if isinstance(getattr(permission, "message", None), str)
                    else None
                )
    for throttle_class in method.throttle_classes:
        throttle = throttle_class()
        if not throttle.allow_request(context.request, None):
            wait = throttle.wait()
            raise Throttled(data={"wait": wait})


def map_exception(exc):
    """Return the JsonRpcError for a DRF or Django exception, or None."""
    if isinstance(exc, drf_exceptions.ValidationError):
        return InvalidParams(data=exc.get_full_details())
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return AuthenticationRequired(message=str(exc.detail))
    if isinstance(exc, drf_exceptions.PermissionDenied):
        return PermissionDenied(message=str(exc.detail))
    if isinstance(exc, drf_exceptions.Throttled):
        return Throttled(data={"wait": exc.wait})
    if isinstance(exc, django_exceptions.PermissionDenied):
        return PermissionDenied()
    return None
