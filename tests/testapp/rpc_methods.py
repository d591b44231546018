"""Methods found by autodiscovery, used by the tests."""

from django.db import transaction

from jsonrpc_app import CallContext, JsonRpcError, rpc_method


@rpc_method(name="testapp.boom")
def boom():
    """Raise an exception that is not a JsonRpcError."""
    raise RuntimeError("secret internals: /etc/passwd")


@rpc_method(name="testapp.type_error_inside")
def type_error_inside(a):
    """Raise TypeError from inside the method (not a params problem)."""
    return len(a) + "x"


@rpc_method(name="testapp.app_error")
def app_error():
    raise JsonRpcError(code=-32001, message="Out of stock", data={"sku": "X1"})


@rpc_method(name="testapp.none")
def returns_none():
    return None


@rpc_method(name="testapp.whoami")
def whoami(context: CallContext):
    return {"user": str(context.user), "source": context.source}


@rpc_method(name="testapp.kwonly")
def kwonly(a, *, b, c=3):
    return [a, b, c]


@rpc_method(name="testapp.rollback")
def rollback():
    from django.contrib.auth.models import Group

    with transaction.atomic():
        Group.objects.create(name="rolled-back")
        raise JsonRpcError(code=-32050, message="rolled back")
