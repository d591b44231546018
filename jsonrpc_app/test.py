"""
Testing helpers for projects that serve JSON-RPC methods with jsonrpc_app.

``RpcClient`` wraps Django's test ``Client`` (or ``AsyncClient``) and speaks
JSON-RPC 2.0 to an endpoint, so that a test reads as the call it makes::

    from jsonrpc_app.test import RpcClient

    def test_subtract(client, db):
        rpc = RpcClient(client)
        assert rpc.call("subtract", 42, 23) == 19

    def test_reserve_out_of_stock(rpc):            # the pytest fixture
        with pytest.raises(OutOfStock) as raised:  # declared with errors=[OutOfStock]
            rpc.call("shop.reserve", sku="X1")
        assert raised.value.data == {"sku": "X1", "available": 0}

Every request goes over the whole HTTP path of the endpoint (URL routing,
middleware, authentication, throttling, the call log), as a client's does.

- ``call(method, *args, **kwargs)`` returns the result, or raises the
  ``JsonRpcError`` the endpoint answered (see ``RpcClient.error_class``).
  Positional arguments are sent as by-position params, keyword arguments as
  by-name params (JSON-RPC allows one or the other, not both).
- ``notify(...)`` sends a notification; it returns None.
- ``batch()`` is a context manager that collects calls and sends them as one
  batch when the block ends; each ``batch.call()`` gives a ``BatchCall``
  whose ``result`` and ``error`` are filled in then.
- ``raw(body)`` posts any body (bytes, str, or a JSON-able value) and returns
  the decoded answer (None when the endpoint answered 204 No Content).

``last_response`` is the Django test response of the last request.

With an ``AsyncClient``, use the ``a``-prefixed coroutines ``acall()``,
``anotify()`` and ``araw()``, and ``async with rpc.batch() as batch:``; the
plain methods refuse an ``AsyncClient`` and the ``a``-methods a ``Client``
(TypeError), so a test never forgets an ``await`` silently.

The pytest plugin (``jsonrpc_app.pytest_plugin``, loaded by the ``pytest11``
entry point when the package is installed) gives the fixtures ``rpc`` and
``async_rpc`` over pytest-django's ``client`` and ``async_client``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from . import protocol
from .encoding import json_default
from .exceptions import (
    AuthenticationRequired,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    MethodDisabled,
    MethodNotFound,
    ParseError,
    PermissionDenied,
    Throttled,
)

__all__ = ["BUILTIN_ERRORS", "Batch", "BatchCall", "RpcClient", "UnexpectedResponse"]

#: The error classes of jsonrpc_app by code: an answer with one of these codes
#: is raised as that class (unless the method declares its own class for it).
BUILTIN_ERRORS: dict[int, type[JsonRpcError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        AuthenticationRequired,
        PermissionDenied,
        MethodDisabled,
        Throttled,
    )
}

_NOT_SENT: Any = object()


class UnexpectedResponse(AssertionError):
    """
    The endpoint did not answer as JSON-RPC 2.0 says (an HTML error page, a
    body that is not JSON, an answer to another id...). An AssertionError, so
    that pytest shows it as a failed expectation with the response.
    """

    def __init__(self, reason: str, status_code: int | None = None, content: bytes = b"") -> None:
        self.reason = reason
        self.status_code = status_code
        self.content = content
        shown = content[:2000].decode("utf-8", "replace")
        super().__init__("%s (HTTP %s): %s" % (reason, status_code, shown))


def _params(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any] | dict[str, Any] | None:
    if args and kwargs:
        raise TypeError(
            "JSON-RPC params are either by position or by name, not both: "
            "pass positional arguments or keyword arguments."
        )
    if kwargs:
        return dict(kwargs)
    if args:
        return list(args)
    return None


def _request(method: str, params: Any, id: Any = _NOT_SENT) -> dict[str, Any]:
    if not isinstance(method, str):
        raise TypeError("The method name must be a str, not %r" % (method,))
    obj: dict[str, Any] = {"jsonrpc": protocol.VERSION, "method": method}
    if params is not None:
        obj["params"] = params
    if id is not _NOT_SENT:
        obj["id"] = id
    return obj


class BatchCall:
    """One call of a ``Batch``: its ``result`` or ``error`` once the batch is sent."""

    def __init__(self, method: str, params: Any, id: int) -> None:
        self.method = method
        self.params = params
        self.id = id
        self.sent = False
        self._result: Any = None
        self._error: JsonRpcError | None = None

    def _check_sent(self) -> None:
        if not self.sent:
            raise RuntimeError("The batch is sent when its `with` block ends; read results after it.")

    @property
    def ok(self) -> bool:
        """True when the call was answered with a result."""
        self._check_sent()
        return self._error is None

    @property
    def error(self) -> JsonRpcError | None:
        """The JsonRpcError answered to this call, or None."""
        self._check_sent()
        return self._error

    @property
    def result(self) -> Any:
        """The result of this call; raises its JsonRpcError when it was answered with one."""
        self._check_sent()
        if self._error is not None:
            raise self._error
        return self._result

    def __repr__(self) -> str:
        state = "pending" if not self.sent else ("error %s" % self._error.code if self._error else "ok")
        return "<BatchCall %s id=%s %s>" % (self.method, self.id, state)


class Batch:
    """
    Calls collected in a ``with`` (or ``async with``) block and sent as one
    batch when it ends without an exception.

    An answer that is one error for the whole batch (authentication failed,
    throttled...) is raised when the block ends. A batch of no calls sends
    nothing; a batch of only notifications expects 204 No Content.
    """

    def __init__(self, client: RpcClient) -> None:
        self.client = client
        self.calls: list[BatchCall] = []
        self.requests: list[dict[str, Any]] = []
        self.answer: Any = None

    def call(self, method: str, /, *args: Any, **kwargs: Any) -> BatchCall:
        """Add a call; return its BatchCall, answered when the batch is sent."""
        params = _params(args, kwargs)
        entry = BatchCall(method, params, self.client._next_id())
        self.requests.append(_request(method, params, entry.id))
        self.calls.append(entry)
        return entry

    def notify(self, method: str, /, *args: Any, **kwargs: Any) -> None:
        """Add a notification (nothing is answered to it)."""
        self.requests.append(_request(method, _params(args, kwargs)))

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and self.requests:
            self._settle(self.client.raw(self.requests))

    async def __aenter__(self) -> Batch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and self.requests:
            self._settle(await self.client.araw(self.requests))

    def _settle(self, answer: Any) -> None:
        self.answer = answer
        response = self.client.last_response
        if answer is None:
            if self.calls:
                raise self.client._unexpected("No answer (204) to a batch with calls", response)
            return
        if isinstance(answer, dict):
            # One error for the whole batch, as an endpoint answers a refused envelope.
            raise self.client._error_from(answer, None, response)
        if not isinstance(answer, list):
            raise self.client._unexpected("A batch answered with neither an array nor an error", response)
        by_id: dict[Any, Any] = {}
        for item in answer:
            if isinstance(item, dict) and "id" in item:
                by_id[_id_key(item["id"])] = item
        missing = [c.id for c in self.calls if _id_key(c.id) not in by_id]
        if missing:
            raise self.client._unexpected("The batch's answer has no response for ids %s" % missing, response)
        for entry in self.calls:
            item = by_id[_id_key(entry.id)]
            entry.sent = True
            if "error" in item:
                entry._error = self.client._error_from(item, entry.method, response)
            else:
                entry._result = item.get("result")

    @property
    def results(self) -> list[Any]:
        """The results of the calls in order; raises the first call's error, if any."""
        return [c.result for c in self.calls]


def _id_key(value: Any) -> tuple[str, Any]:
    # 1 and "1" are different ids, and True is not 1.
    return (type(value).__name__, value)


class RpcClient:
    """
    A JSON-RPC 2.0 client over Django's test ``Client`` or ``AsyncClient``.

    ``path`` is the endpoint's URL path. ``headers`` are sent with every
    request (``{"Authorization": "Token ..."}``). ``error_classes`` are your
    own JsonRpcError subclasses, raised for their codes; see ``error_class``.
    ``registry`` is the MethodRegistry whose methods' declared ``errors``
    are looked up (the default registry when None).
    """

    def __init__(
        self,
        client: Any,
        path: str = "/rpc/",
        *,
        headers: Mapping[str, str] | None = None,
        error_classes: Iterable[type[JsonRpcError]] = (),
        registry: Any = None,
    ) -> None:
        from django.test import AsyncClient, Client

        if not isinstance(client, (Client, AsyncClient)):
            raise TypeError("RpcClient wraps a django.test.Client or AsyncClient, not %r" % (client,))
        self.client = client
        self.is_async = isinstance(client, AsyncClient)
        self.path = path
        self.headers = dict(headers or {})
        self.error_classes = {cls.code: cls for cls in error_classes}
        self.registry = registry
        self.last_response: Any = None
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return "<RpcClient %s%s>" % (self.path, " (async)" if self.is_async else "")

    def _next_id(self) -> int:
        return next(self._ids)

    # -- errors --------------------------------------------------------------

    def error_class(self, code: int, method: str | None = None) -> type[JsonRpcError]:
        """
        Return the class an error answered with ``code`` is raised as: one of
        ``error_classes``, else one the method declares (``@rpc_method(errors=[...])``),
        else jsonrpc_app's own (``BUILTIN_ERRORS``), else JsonRpcError itself.
        """
        if code in self.error_classes:
            return self.error_classes[code]
        if method is not None:
            for declared in self._declared_errors(method):
                if isinstance(declared, type) and issubclass(declared, JsonRpcError) and declared.code == code:
                    return declared
        return BUILTIN_ERRORS.get(code, JsonRpcError)

    def _declared_errors(self, method: str) -> tuple[Any, ...]:
        from .registry import registry as default_registry

        entry = (self.registry if self.registry is not None else default_registry).get(method)
        return entry.errors if entry is not None else ()

    def _error_from(self, response_object: Any, method: str | None, http: Any) -> JsonRpcError:
        error = response_object.get("error") if isinstance(response_object, dict) else None
        if not isinstance(error, dict) or type(error.get("code")) is not int:
            raise self._unexpected("Not a JSON-RPC error object: %r" % (response_object,), http)
        code = error["code"]
        message = error.get("message", "")
        data = error.get("data")
        cls = self.error_class(code, method)
        try:
            exc = cls(message=message, code=code, data=data)
        except TypeError:
            # A subclass whose __init__ takes other arguments.
            exc = JsonRpcError(message=message, code=code, data=data)
        exc.response = response_object  # type: ignore[attr-defined]
        return exc

    def _unexpected(self, reason: str, http: Any) -> UnexpectedResponse:
        return UnexpectedResponse(reason, getattr(http, "status_code", None), getattr(http, "content", b""))

    # -- sending -------------------------------------------------------------

    def _encode(self, body: Any) -> bytes:
        if isinstance(body, bytes):
            return body
        if isinstance(body, str):
            return body.encode("utf-8", "surrogatepass")
        return protocol.dumps(body, json_default)

    def _decode(self, http: Any) -> Any:
        self.last_response = http
        if http.status_code == 204:
            if http.content:
                raise self._unexpected("A 204 answer with a body", http)
            return None
        content_type = http.get("Content-Type", "")
        if not content_type.startswith("application/json"):
            raise self._unexpected("Not a JSON answer (Content-Type %r)" % content_type, http)
        try:
            return protocol.loads(http.content)
        except ValueError as exc:
            raise self._unexpected("The answer is not JSON (%s)" % exc, http) from None

    def _post_args(self, body: Any, content_type: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.path, self._encode(body)), {"content_type": content_type, "headers": self.headers}

    def raw(self, body: Any, *, content_type: str = "application/json") -> Any:
        """POST ``body`` as it is (bytes/str) or as JSON; return the decoded answer, None for 204."""
        if self.is_async:
            raise TypeError("This RpcClient wraps an AsyncClient: use `await rpc.araw(...)`.")
        args, kwargs = self._post_args(body, content_type)
        return self._decode(self.client.post(*args, **kwargs))

    async def araw(self, body: Any, *, content_type: str = "application/json") -> Any:
        """``raw()`` over an AsyncClient."""
        if not self.is_async:
            raise TypeError("This RpcClient wraps a Client: use `rpc.raw(...)`, or wrap an AsyncClient.")
        args, kwargs = self._post_args(body, content_type)
        return self._decode(await self.client.post(*args, **kwargs))

    def _single_result(self, answer: Any, method: str, id: int) -> Any:
        http = self.last_response
        if not isinstance(answer, dict):
            raise self._unexpected("A call answered with %r, not a response object" % (type(answer).__name__,), http)
        if "error" in answer:
            raise self._error_from(answer, method, http)
        if answer.get("id") != id or "result" not in answer:
            raise self._unexpected("Not the response to id %r" % id, http)
        return answer["result"]

    def _notified(self, answer: Any) -> None:
        if answer is not None:
            # A notification is never answered; an envelope refused as a whole is.
            raise self._error_from(answer, None, self.last_response)

    def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``method``; return its result or raise the JsonRpcError answered."""
        id = self._next_id()
        answer = self.raw(_request(method, _params(args, kwargs), id))
        return self._single_result(answer, method, id)

    async def acall(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """``call()`` over an AsyncClient."""
        id = self._next_id()
        answer = await self.araw(_request(method, _params(args, kwargs), id))
        return self._single_result(answer, method, id)

    def notify(self, method: str, /, *args: Any, **kwargs: Any) -> None:
        """Send a notification; raise only if the endpoint refused the request as a whole."""
        self._notified(self.raw(_request(method, _params(args, kwargs))))

    async def anotify(self, method: str, /, *args: Any, **kwargs: Any) -> None:
        """``notify()`` over an AsyncClient."""
        self._notified(await self.araw(_request(method, _params(args, kwargs))))

    def batch(self) -> Batch:
        """Return a Batch: ``with rpc.batch() as batch:`` (``async with`` over an AsyncClient)."""
        return Batch(self)
