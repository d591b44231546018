"""Methods found by autodiscovery, used by the tests."""

import asyncio
import threading
import time

from django.db import transaction
from rest_framework.throttling import AnonRateThrottle

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


# -- used by the call log's tests (tests/test_recorder.py) --


@rpc_method(name="testapp.login")
def login(username, password):
    """Take a password by position or name; answer with a token (both redacted in the log)."""
    return {"user": username, "session": {"Token": "t-123", "ttl": 60}}


@rpc_method(name="testapp.set_pin", sensitive_params=["pin"])
def set_pin(account, pin):
    return {"account": account}


@rpc_method(name="testapp.heartbeat", log=False)
def heartbeat(value=None):
    """Never logged (log=False)."""
    return "alive"


@rpc_method(name="testapp.types")
def types():
    """Return values JSON cannot hold natively."""
    import datetime
    import decimal
    import uuid

    return {
        "decimal": decimal.Decimal("1.10"),
        "when": datetime.datetime(2026, 12, 2, 14, 55, 1, 123456, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 12, 2),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "pair": (1, 2),
    }


@rpc_method(name="testapp.big")
def big(size):
    return "x" * size


@rpc_method(name="testapp.abort_request")
def abort_request():
    """Write, then mark the caller's (request's) transaction for rollback."""
    from django.contrib.auth.models import Group

    Group.objects.create(name="aborted")
    transaction.set_rollback(True)
    return "aborted"


@rpc_method(name="testapp.nul_text")
def nul_text():
    """A string with NUL in it, from params that hold none."""
    return "a\x00b"


@rpc_method(name="testapp.not_a_number")
def not_a_number():
    return float("nan")


@rpc_method(name="testapp.private", login_required=True)
def private(context: CallContext, note=""):
    """Answer the caller's username; anonymous callers are refused (login_required)."""
    return {"user": context.user.get_username(), "note": note}


# -- async def methods, and sync ones to run beside them (tests/test_async.py) --------
# Each records (tag, start, end, thread name) in TIMELINE, so that tests see
# which calls overlapped from timestamps rather than from elapsed time alone.

TIMELINE = []


def _mark(tag, start):
    TIMELINE.append((tag, start, time.monotonic(), threading.current_thread().name))


@rpc_method(name="testapp.async_sleep")
async def async_sleep(seconds: float, tag: str = "") -> str:
    start = time.monotonic()
    try:
        await asyncio.sleep(seconds)
    finally:
        _mark(tag, start)
    return tag


@rpc_method(name="testapp.sync_sleep")
def sync_sleep(seconds: float, tag: str = "") -> str:
    """Sleep in Django's sync thread (thread-sensitive, the default)."""
    start = time.monotonic()
    time.sleep(seconds)
    _mark(tag, start)
    return tag


@rpc_method(name="testapp.sync_sleep_safe", thread_sensitive=False)
def sync_sleep_safe(seconds: float, tag: str = "") -> str:
    """Sleep in the thread pool: thread-safe, so the async endpoint runs several at once."""
    start = time.monotonic()
    time.sleep(seconds)
    _mark(tag, start)
    return tag


@rpc_method(name="testapp.async_boom")
async def async_boom():
    await asyncio.sleep(0)
    raise ValueError("async boom")


@rpc_method(name="testapp.async_slow", timeout=0.05)
async def async_slow(seconds: float = 5.0) -> str:
    await asyncio.sleep(seconds)
    return "finished"


@rpc_method(name="testapp.async_own_timeout")
async def async_own_timeout():
    """Raise TimeoutError itself: an internal error, not a timeout of the call."""
    raise TimeoutError("the method's own")


@rpc_method(name="testapp.async_private", login_required=True)
async def async_private(context: CallContext) -> str:
    return context.user.username


@rpc_method(name="testapp.async_users")
async def async_users() -> int:
    """Count users with the async ORM."""
    from django.contrib.auth.models import User

    return await User.objects.acount()


@rpc_method(name="testapp.sync_users")
def sync_users() -> int:
    """Count users with the sync ORM: run in Django's sync thread on the async endpoint."""
    from django.contrib.auth.models import User

    return User.objects.count()


class _TwoPerMinute(AnonRateThrottle):
    rate = "2/min"
    scope = "testapp-async"


@rpc_method(name="testapp.throttled_async", throttle_classes=[_TwoPerMinute])
async def throttled_async() -> str:
    return "ok"


@rpc_method(name="testapp.quick_thread", blocking=False)
def quick_thread() -> str:
    """blocking=False: the async endpoint calls it on the event loop."""
    return threading.current_thread().name


@rpc_method(name="testapp.async_thread")
async def async_thread() -> str:
    return threading.current_thread().name


@rpc_method(name="testapp.quick_orm", blocking=False)
def quick_orm() -> int:
    """Wrongly marked blocking=False: it uses the ORM."""
    from django.contrib.auth.models import User

    return User.objects.count()


@rpc_method(name="testapp.whoami_thread")
def whoami_thread() -> str:
    """A (blocking) sync method: Django's sync thread on the async endpoint."""
    return threading.current_thread().name
