"""
Endpoints and methods for the security, permission and throttling tests.

The methods live in a registry of their own (``secure``), served by several
endpoints that differ only in their DRF policies, next to the demo project's
URLs (``/rpc/``, ``/admin/``).
"""

from django.urls import path
from rest_framework.authentication import (
    BasicAuthentication,
    SessionAuthentication,
    TokenAuthentication,
)
from rest_framework.permissions import BasePermission, IsAdminUser, IsAuthenticated
from rest_framework.throttling import AnonRateThrottle, ScopedRateThrottle, UserRateThrottle

from jsonrpc_app import CallContext, MethodRegistry, rpc_method
from jsonrpc_app.views import JsonRpcView
from tests.urls import urlpatterns as project_urlpatterns

secure = MethodRegistry("secure")

# How many times secure.count really ran (the limits tests check it stays 0).
RUNS = {"count": 0}


class OnlyAlice(BasePermission):
    message = "Only alice may do this."

    def has_permission(self, request, view):
        # The view of a per-method check names the method being called.
        assert view.method_name == "secure.alice"
        return request.user.is_authenticated and request.user.username == "alice"


class TwoPerMinute(AnonRateThrottle):
    scope = "two-per-minute"
    rate = "2/min"


class OnePerMinuteUser(UserRateThrottle):
    scope = "one-per-minute-user"
    rate = "1/min"


class EndpointOnePerMinute(AnonRateThrottle):
    scope = "endpoint-one-per-minute"
    rate = "1/min"


class Scoped(ScopedRateThrottle):
    THROTTLE_RATES = {"uploads": "1/min"}


class Exploding(BasePermission):
    def has_permission(self, request, view):
        raise RuntimeError("permission backend down: dsn=postgres://admin:hunter2@db")


class ExplodingAuthentication(BasicAuthentication):
    def authenticate(self, request):
        raise RuntimeError("auth backend down: secret=hunter2")


@rpc_method(name="public.echo", registry=secure)
def echo(value=None):
    return value


@rpc_method(name="secure.count", registry=secure)
def count(*args):
    RUNS["count"] += 1
    return RUNS["count"]


@rpc_method(name="secure.count_one", registry=secure)
def count_one(x):
    RUNS["count"] += 1
    return x


@rpc_method(name="secure.whoami", registry=secure)
def whoami(context: CallContext):
    user = context.user
    return {
        "user": user.get_username() if user.is_authenticated else None,
        "source": context.source,
        "auth": type(context.request.successful_authenticator).__name__
        if getattr(context.request, "successful_authenticator", None)
        else None,
    }


@rpc_method(name="secure.echo_context", registry=secure)
def echo_context(value, context: CallContext, **extra):
    return {"value": value, "extra": sorted(extra), "context_is_real": type(context) is CallContext}


@rpc_method(name="secure.login", login_required=True, registry=secure)
def login_only(context: CallContext):
    return context.user.get_username()


@rpc_method(name="secure.view_users", permissions=["auth.view_user"], registry=secure)
def view_users():
    return "users"


@rpc_method(name="secure.staff", permission_classes=[IsAdminUser], registry=secure)
def staff_only():
    return "staff"


@rpc_method(name="secure.alice", permission_classes=[OnlyAlice], registry=secure)
def alice_only():
    return "alice"


@rpc_method(name="secure.exploding_permission", permission_classes=[Exploding], registry=secure)
def exploding_permission():
    return "never"


@rpc_method(name="secure.throttled", throttle_classes=[TwoPerMinute], registry=secure)
def throttled():
    return "ok"


@rpc_method(name="secure.user_throttled", throttle_classes=[OnePerMinuteUser], registry=secure)
def user_throttled():
    return "ok"


@rpc_method(
    name="secure.scoped", throttle_classes=[Scoped], throttle_scope="uploads", registry=secure
)
def scoped():
    return "ok"


@rpc_method(name="secure.hidden", hidden=True, registry=secure)
def hidden():
    return "still callable"


@rpc_method(name="secure.disabled", enabled=False, registry=secure)
def disabled():
    RUNS["count"] += 1
    return "never"


@rpc_method(name="secure.set_password", sensitive_params=["password"], registry=secure)
def set_password(username, password):
    return "ok"


@rpc_method(name="secure.boom", registry=secure)
def boom():
    raise RuntimeError("secret internals: /etc/passwd SELECT * FROM auth_user")


@rpc_method(name="secure.bad_sql", registry=secure)
def bad_sql():
    from django.db import connection, transaction

    # In its own savepoint, as ORM code in a method would be: on PostgreSQL a
    # failed statement otherwise spoils the rest of the surrounding transaction.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT secret_column FROM no_such_table_xyz")


def endpoints(View):
    """The secure endpoints, served by ``View`` (JsonRpcView, or AsyncJsonRpcView: tests/security_urls_async.py)."""
    return [
        *project_urlpatterns,
        # The project's REST_FRAMEWORK authentication (session + basic), AllowAny.
        path("secure/", View.as_view(registry=secure), name="secure"),
        # Token only, and only authenticated callers reach any method.
        path(
            "secure/token/",
            View.as_view(
                registry=secure,
                authentication_classes=[TokenAuthentication],
                permission_classes=[IsAuthenticated],
            ),
            name="secure-token",
        ),
        # Session + basic, authenticated callers only.
        path(
            "secure/closed/",
            View.as_view(registry=secure, permission_classes=[IsAuthenticated]),
            name="secure-closed",
        ),
        # Session only: for the CSRF tests.
        path(
            "secure/session/",
            View.as_view(registry=secure, authentication_classes=[SessionAuthentication]),
            name="secure-session",
        ),
        # No authentication at all: every caller is anonymous, even with a session.
        path(
            "secure/anonymous/",
            View.as_view(registry=secure, authentication_classes=[]),
            name="secure-anonymous",
        ),
        # One envelope per minute per client address.
        path(
            "secure/throttled/",
            View.as_view(registry=secure, throttle_classes=[EndpointOnePerMinute]),
            name="secure-throttled",
        ),
        path(
            "secure/exploding-auth/",
            View.as_view(registry=secure, authentication_classes=[ExplodingAuthentication]),
            name="secure-exploding-auth",
        ),
    ]


urlpatterns = endpoints(JsonRpcView)
