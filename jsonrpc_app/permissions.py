"""
Who may call what: the per-method checks (enabled, login, Django model
permissions, DRF permission and throttle classes), and ``check_throttles``,
which the endpoint's own throttles go through too.

The endpoint's own policies (DRF authentication, permission and throttle
classes) run once per HTTP request in ``views.JsonRpcView.check_endpoint``;
the checks here run once per call, so that inside a batch only the calls the
caller may not make fail, and a batch cannot get round a method's throttle.
Methods with none of these options never come here (``Method.guarded``).
"""

import math

from django.utils.encoding import force_str
from django.utils.functional import Promise

from .exceptions import AuthenticationRequired, MethodDisabled, PermissionDenied, Throttled


class MethodView:
    """
    What DRF permission and throttle classes receive as ``view`` for a method.

    DRF hands them the view being called; here the thing being called is one
    JSON-RPC method, so they get this stand-in: ``rpc_method`` (the Method),
    ``throttle_scope`` (for ``ScopedRateThrottle``), ``request`` and the
    caller's ``context``.
    """

    def __init__(self, method, context, request):
        self.rpc_method = method
        self.method_name = method.name
        self.throttle_scope = getattr(method, "throttle_scope", None)
        self.context = context
        self.request = request
        self.args = ()
        self.kwargs = {}

    def __repr__(self):
        return "<MethodView %s>" % self.method_name


class CallerRequest:
    """
    A stand-in request for calls made without one (the command line): the
    caller's user and auth, POST, no headers. Permission classes that look at
    ``request.user`` work on it; throttles are not applied without a request.
    """

    method = "POST"

    def __init__(self, context):
        self.user = context.user
        self.auth = context.auth
        self.META = {}
        self.authenticators = ()
        self.successful_authenticator = None


def _message(permission):
    message = getattr(permission, "message", None)
    if message is None or isinstance(message, (str, dict)):
        return message
    if isinstance(message, Promise):
        return force_str(message)
    return None


def check_method_permissions(method, context):
    """Raise a JsonRpcError if the caller of ``context`` may not call ``method``."""
    if not method.enabled:
        raise MethodDisabled()
    user = context.user
    if method.login_required or method.permissions:
        if user is None or not user.is_authenticated:
            raise AuthenticationRequired()
        if method.permissions and not user.has_perms(method.permissions):
            raise PermissionDenied()
    if not (method.permission_classes or method.throttle_classes):
        return
    request = context.request
    view = MethodView(method, context, request)
    if method.permission_classes:
        permission_request = request if request is not None else CallerRequest(context)
        for permission_class in method.permission_classes:
            permission = permission_class()
            if not permission.has_permission(permission_request, view):
                if user is None or not user.is_authenticated:
                    raise AuthenticationRequired()
                raise PermissionDenied(data=_message(permission))
    if method.throttle_classes and request is not None:
        check_throttles([throttle_class() for throttle_class in method.throttle_classes], request, view)


def check_throttles(throttles, request, view):
    """
    Raise Throttled if any of ``throttles`` refuses ``request``, as DRF's
    check_throttles(): every throttle is asked (each records the request),
    and the wait is the longest one known, rounded up to whole seconds.
    """
    waits = [throttle.wait() for throttle in throttles if not throttle.allow_request(request, view)]
    if waits:
        waits = [w for w in waits if w is not None]
        raise Throttled(data={"wait": math.ceil(max(waits)) if waits else None})
