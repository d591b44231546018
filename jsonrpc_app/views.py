"""
The HTTP layer of an endpoint and nothing more: POST only, the body size
limit, DRF authentication/permissions/throttling of the endpoint, status
codes (200 with a JSON body, 204 when there is nothing to say).

The body is read as bytes and handed to ``protocol.parse``; DRF's parsers
never see it, so bad JSON is answered as JSON-RPC says, not as DRF does.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, ClassVar

from django.conf import settings as django_settings
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.settings import api_settings

from . import aio, log, openrpc, protocol, service
from .conf import jsonrpc_settings
from .context import CallContext
from .encoding import json_default
from .exceptions import CallLogFull, InvalidRequest, JsonRpcError, Throttled, to_error
from .permissions import check_throttles
from .registry import MethodRegistry
from .registry import registry as default_registry

_perf = time.perf_counter


class _BodyIgnored(BaseParser):
    """Stands in for DRF's parsers: the endpoint reads the raw body itself."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


_PARSERS = (_BodyIgnored(),)

def body_limit():
    """
    Return the largest body the endpoint reads, in bytes, or None for no limit.

    The smaller of JSONRPC["MAX_BODY_SIZE"] and Django's
    DATA_UPLOAD_MAX_MEMORY_SIZE: the endpoint reads the body itself, so it
    applies Django's limit too rather than bypass it.
    """
    ours = jsonrpc_settings.MAX_BODY_SIZE
    djangos = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if ours is None:
        return djangos
    return ours if djangos is None or ours <= djangos else djangos


def read_body(request, limit):
    """
    Return (body, error): the request body as bytes, or the JsonRpcError to answer.

    A Content-Length over ``limit`` is answered without reading a byte. The
    read itself stops after ``limit + 1`` bytes whatever the headers say, so
    a missing or lying Content-Length, or a chunked body (which a WSGI server
    that terminates its input, such as gunicorn, hands over without a
    length), never makes the process hold more than the limit.
    """
    meta = request.META
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if limit is not None and length > limit:
        return b"", service.body_too_large(limit, length)
    stream = request
    environ = getattr(request, "environ", None)
    if (
        environ is not None
        and not meta.get("CONTENT_LENGTH")
        and environ.get("wsgi.input_terminated")
    ):
        # Django reads nothing without a Content-Length; a server that marks
        # its input as terminated (end of body = end of stream) lets us read
        # a chunked body safely, as long as the read is bounded.
        stream = environ["wsgi.input"]
        request._read_started = True
    try:
        if limit is None:
            body = stream.read()
        else:
            chunks = []
            size = 0
            while size <= limit:
                chunk = stream.read(limit + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                return b"", service.body_too_large(limit)
            body = b"".join(chunks)
    except RequestDataTooBig:
        return b"", service.body_too_large(limit)
    except OSError:
        # The client went away mid-body (UnreadablePostError is an OSError).
        return b"", InvalidRequest(data="request body could not be read")
    # What request.body would have done, so that anything reading it later
    # (CSRF checks of form posts, the call log) sees the same bytes.
    request._body = body
    return body, None


def wrap_request(request, authenticators):
    """
    Return the DRF Request over ``request``, its body left to the endpoint.

    DRF's Request keeps itself in its parser_context, a reference cycle that
    only the garbage collector frees, with the whole HttpRequest hanging on
    it: on a busy endpoint that is a collection every few dozen requests.
    The only parser here ignores its context, so the cycle is cut at once.
    """
    wrapped = Request(request, parsers=_PARSERS, authenticators=authenticators)
    wrapped.parser_context.pop("request", None)
    return wrapped


def _finds_no_one(request, *, on_event_loop=False):
    """
    Return True when DRF's authentication of ``request`` (a DRF Request) is
    sure to find no user, without running it.

    Only DRF's own SessionAuthentication and BasicAuthentication are known
    here, by what their authenticate() returns None for: no active user on
    the request (so no CSRF check either), no Authorization header. Any other
    class (a subclass too) goes through DRF. ``on_event_loop``: a request
    with a session cookie is not looked at (its user is read in a thread).
    """
    django_request = request._request
    for authenticator in request.authenticators:
        cls = type(authenticator)
        if cls is BasicAuthentication:
            if "HTTP_AUTHORIZATION" in django_request.META:
                return False
        elif cls is SessionAuthentication:
            if on_event_loop and django_settings.SESSION_COOKIE_NAME in django_request.COOKIES:
                # Reading the session's user may query the database: not on the event loop.
                return False
            user = getattr(django_request, "user", None)
            if user and user.is_active:
                return False
        else:
            return False
    return True


def _configured(classes, setting, drf_setting):
    """
    Return the classes an endpoint uses for one concern: ``classes`` (the
    view's attribute) unless None, else the JSONRPC setting ``setting``
    unless None, else DRF's ``drf_setting``.
    """
    if classes is None:
        classes = getattr(jsonrpc_settings, setting)
        if classes is None:
            classes = getattr(api_settings, drf_setting)
    return classes


class JsonRpcView(View):
    """
    A JSON-RPC 2.0 endpoint serving the methods of ``registry``.

    Configure per endpoint with ``JsonRpcView.as_view(registry=...,
    authentication_classes=[...], permission_classes=[...],
    throttle_classes=[...])``; left as None, each takes the JSONRPC setting
    of the same name, then DRF's default.
    """

    http_method_names: ClassVar[list[str]] = ["post"]
    registry: MethodRegistry | None = None
    authentication_classes: list[type] | tuple[type, ...] | None = None
    permission_classes: list[type] | tuple[type, ...] | None = None
    throttle_classes: list[type] | tuple[type, ...] | None = None
    source: str = "http"

    @classmethod
    def as_view(cls, **initkwargs: Any):
        # Exempt the view function, as DRF's APIView does (the endpoint's own
        # SessionAuthentication enforces CSRF); a method_decorator on dispatch
        # would wrap it again on every request.
        return csrf_exempt(super().as_view(**initkwargs))

    def get_registry(self) -> MethodRegistry:
        if self.registry is None:
            return default_registry
        return self.registry

    def get_authenticators(self) -> list[Any]:
        classes = _configured(
            self.authentication_classes, "AUTHENTICATION_CLASSES", "DEFAULT_AUTHENTICATION_CLASSES"
        )
        return [auth() for auth in classes]

    def get_permissions(self) -> list[Any]:
        classes = _configured(
            self.permission_classes, "PERMISSION_CLASSES", "DEFAULT_PERMISSION_CLASSES"
        )
        return [permission() for permission in classes if permission is not AllowAny]

    def get_throttles(self) -> list[Any]:
        classes = _configured(self.throttle_classes, "THROTTLE_CLASSES", "DEFAULT_THROTTLE_CLASSES")
        return [throttle() for throttle in classes]

    def check_endpoint(self, request: Request) -> None:
        """Authenticate, then apply the endpoint's permissions and throttles (as DRF's initial())."""
        # Authenticate now, as DRF's perform_authentication() does: bad
        # credentials (or a session without its CSRF token) fail the envelope.
        if _finds_no_one(request):
            # What DRF concludes after trying each authenticator (the anonymous
            # user of UNAUTHENTICATED_USER), without building request.headers.
            request._not_authenticated()
        else:
            request.user  # noqa: B018
        for permission in self.get_permissions():
            if not permission.has_permission(request, self):
                if request.authenticators and not request.successful_authenticator:
                    raise drf_exceptions.NotAuthenticated()
                raise drf_exceptions.PermissionDenied(getattr(permission, "message", None))
        throttles = self.get_throttles()
        if throttles:
            check_throttles(throttles, request, self)

    def endpoint_error(self, request: Request) -> JsonRpcError | None:
        """Return the JsonRpcError that refuses ``request`` (a DRF Request) at the endpoint, or None."""
        try:
            self.check_endpoint(request)
        except Exception as exc:
            return to_error(exc)
        return None

    def _begin(self, request: HttpRequest) -> tuple[bytes, Request, CallContext, JsonRpcError | None]:
        """Read the body and wrap the request; return (body, DRF request, context, error so far)."""
        body, error = read_body(request, body_limit())
        drf_request = wrap_request(request, self.get_authenticators())
        context = CallContext(
            request=drf_request,
            source=self.source,
            registry=self.get_registry(),
            endpoint=request.path,
            log=log.is_on(),
        )
        return body, drf_request, context, error

    def _refused(self, drf_request: Request, context: CallContext, error: JsonRpcError | None) -> JsonRpcError | None:
        """After the endpoint's checks: the call log's back-pressure, and who to log for a refused body."""
        if error is None and context.log and not log.accepting():
            # The journal is full (LOG_JOURNAL_FULL = "refuse"): refused, and not logged.
            error, context.log = CallLogFull(), False
        if error is not None:
            # Log whoever authentication established (a throttled user), else
            # anonymous; never authenticate again just to write the log.
            context.user = drf_request.__dict__.get("_user") or AnonymousUser()
        return error

    def _answer_kwargs(self, request: HttpRequest, error: JsonRpcError | None, start: float) -> dict[str, Any]:
        return {
            "error": error,
            "size_limit": None,  # applied by read_body() as it read
            "started": start,
            "remote_addr": request.META.get("REMOTE_ADDR"),
            "user_agent": request.META.get("HTTP_USER_AGENT", ""),
        }

    def _respond(self, answer: service.Answer, error: JsonRpcError | None) -> HttpResponse:
        if answer.status == 204:
            return HttpResponse(status=204)
        http = HttpResponse(answer.content, content_type="application/json")
        if isinstance(error, Throttled) and error.wait is not None:
            # The endpoint's throttle refused the whole request: say when to retry, as DRF does.
            http["Retry-After"] = "%d" % error.wait
        return http

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        start = _perf()
        body, drf_request, context, error = self._begin(request)
        if error is None:
            error = self.endpoint_error(drf_request)
        error = self._refused(drf_request, context, error)
        answer = service.answer(body, context, **self._answer_kwargs(request, error, start))
        return self._respond(answer, error)

    def last_resort(self, exc: Exception) -> HttpResponse:
        """A bug in this layer (or in a setting it imports) still answers JSON-RPC, logged, with no exception text."""
        body = protocol.dumps(protocol.response(None, error=to_error(exc).as_dict()))
        return HttpResponse(body, content_type="application/json")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().dispatch(request, *args, **kwargs)
        except Exception as exc:
            return self.last_resort(exc)

    def http_method_not_allowed(self, request, *args, **kwargs):
        response = super().http_method_not_allowed(request, *args, **kwargs)
        response["Allow"] = "POST"
        return response


class _AllDatabases(frozenset):
    """What Django's make_view_atomic() reads as the databases a view is exempt from ATOMIC_REQUESTS on: all."""

    def __contains__(self, alias: object) -> bool:
        return True


class AsyncJsonRpcView(JsonRpcView):
    """
    The JSON-RPC endpoint as an async view, for ASGI servers (uvicorn, daphne,
    hypercorn): the same options and answers as JsonRpcView, with ``async
    def`` methods awaited on the event loop, sync methods and DRF's policies
    run in Django's sync thread (the one ``sync_to_async`` uses), and the calls of a batch
    run concurrently (at most ASYNC_CONCURRENCY at once).

    Mount it where the project is served by ASGI (``jsonrpc_app.urls_async``);
    under WSGI, JsonRpcView serves async methods too.
    """

    @classmethod
    def as_view(cls, **initkwargs: Any):
        view = super().as_view(**initkwargs)
        # Django refuses ATOMIC_REQUESTS for an async view (a RuntimeError, so an
        # HTTP 500, on every request): this one runs outside a request transaction.
        view._non_atomic_requests = _AllDatabases()
        return view

    async def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        start = _perf()
        body, drf_request, context, error = self._begin(request)
        if error is None:
            if self.get_permissions() or self.get_throttles() or not _finds_no_one(drf_request, on_event_loop=True):
                # Authentication may read the session and the user, throttles the cache: not on the loop.
                error = await aio.in_sync_thread(self.endpoint_error, drf_request)
            else:
                drf_request._not_authenticated()
        error = self._refused(drf_request, context, error)
        answer = await service.aanswer(body, context, **self._answer_kwargs(request, error, start))
        return self._respond(answer, error)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            handled = View.dispatch(self, request, *args, **kwargs)
        except Exception as exc:
            handled = self.last_resort(exc)
        return self._guarded(handled)

    def http_method_not_allowed(self, request, *args, **kwargs):
        # Django's own answers with a coroutine here (an async view), which
        # JsonRpcView's cannot set a header on.
        response = View.http_method_not_allowed.__get__(self)(request, *args, **kwargs)

        async def with_allow():
            answer = await response
            answer["Allow"] = "POST"
            return answer

        return with_allow()

    async def _guarded(self, handled: Any) -> HttpResponse:
        if not inspect.isawaitable(handled):
            return handled
        try:
            return await handled
        except Exception as exc:
            return self.last_resort(exc)


class OpenRpcDocumentView(JsonRpcView):
    """
    ``GET <endpoint>openrpc.json``: the endpoint's OpenRPC document, the same
    one ``rpc.discover`` answers, behind the endpoint's authentication.
    """

    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        drf_request = wrap_request(request, self.get_authenticators())
        error = self.endpoint_error(drf_request)
        if error is not None:
            return HttpResponse(
                protocol.dumps({"error": error.as_dict()}),
                content_type="application/json",
                status=error.http_status,
            )
        path = request.path
        endpoint = path[: -len("openrpc.json")] if path.endswith("openrpc.json") else path
        doc = openrpc.document(self.get_registry(), request=request, endpoint=endpoint)
        response = HttpResponse(protocol.dumps(doc, json_default), content_type="application/json")
        # The OpenRPC playground and client generators fetch it from other origins.
        response["Access-Control-Allow-Origin"] = "*"
        return response

    def http_method_not_allowed(self, request, *args, **kwargs):
        response = View.http_method_not_allowed(self, request, *args, **kwargs)
        response["Allow"] = "GET, HEAD"
        return response
