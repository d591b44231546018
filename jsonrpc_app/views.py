"""
The HTTP layer of an endpoint and nothing more: POST only, the body size
limit, DRF authentication/permissions/throttling of the endpoint, status
codes (200 with a JSON body, 204 when there is nothing to say).

The body is read as bytes and handed to ``protocol.parse``; DRF's parsers
never see it, so bad JSON is answered as JSON-RPC says, not as DRF does.
"""

import time

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.settings import api_settings

from . import dispatch, protocol, service
from .conf import jsonrpc_settings
from .context import CallContext
from .exceptions import INTERNAL_ERROR, INVALID_REQUEST, JsonRpcError

_perf = time.perf_counter


class _BodyIgnored(BaseParser):
    """Stands in for DRF's parsers: the endpoint reads the raw body itself."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


_PARSERS = (_BodyIgnored(),)

# Kept importable from here: the HTTP layer encodes through the shared service.
encode = service.encode


def _error_body(error):
    return protocol.dumps(protocol.error_response(None, error))


@method_decorator(csrf_exempt, name="dispatch")
class JsonRpcView(View):
    """
    A JSON-RPC 2.0 endpoint serving the methods of ``registry``.

    Configure per endpoint with ``JsonRpcView.as_view(registry=...,
    authentication_classes=[...], permission_classes=[...],
    throttle_classes=[...])``; left as None, each takes the JSONRPC setting
    of the same name, then DRF's default.
    """

    http_method_names = ["post"]
    registry = None
    authentication_classes = None
    permission_classes = None
    throttle_classes = None
    source = "http"

    def get_registry(self):
        if self.registry is None:
            from .registry import registry

            return registry
        return self.registry

    def get_authenticators(self):
        classes = self.authentication_classes
        if classes is None:
            classes = jsonrpc_settings.AUTHENTICATION_CLASSES
        if classes is None:
            classes = api_settings.DEFAULT_AUTHENTICATION_CLASSES
        return [auth() for auth in classes]

    def get_permissions(self):
        classes = self.permission_classes
        if classes is None:
            classes = jsonrpc_settings.PERMISSION_CLASSES
        if classes is None:
            classes = api_settings.DEFAULT_PERMISSION_CLASSES
        return [permission() for permission in classes if permission is not AllowAny]

    def get_throttles(self):
        classes = self.throttle_classes
        if classes is None:
            classes = jsonrpc_settings.THROTTLE_CLASSES
        if classes is None:
            classes = api_settings.DEFAULT_THROTTLE_CLASSES
        return [throttle() for throttle in classes]

    def check_endpoint(self, request):
        """Authenticate, then apply the endpoint's permissions and throttles (as DRF's initial())."""
        request.user  # noqa: B018 -- authenticate now: bad credentials fail the envelope
        for permission in self.get_permissions():
            if not permission.has_permission(request, self):
                from rest_framework import exceptions

                if request.authenticators and not request.successful_authenticator:
                    raise exceptions.NotAuthenticated()
                raise exceptions.PermissionDenied(getattr(permission, "message", None))
        waits = [t.wait() for t in self.get_throttles() if not t.allow_request(request, self)]
        if waits:
            from rest_framework import exceptions

            raise exceptions.Throttled(max((w for w in waits if w is not None), default=None))

    def post(self, request, *args, **kwargs):
        start = _perf()
        settings = jsonrpc_settings
        max_body = settings.MAX_BODY_SIZE
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        envelope = None
        if max_body is not None and length > max_body:
            body = b""
            error = dict(
                protocol.INVALID_REQUEST_OBJECT,
                data="request body of %d bytes is over the limit of %d" % (length, max_body),
            )
        else:
            try:
                body = request.body
            except RequestDataTooBig:
                body = b""
                error = dict(protocol.INVALID_REQUEST_OBJECT, data="request body is too large")
            else:
                error = None
                if max_body is not None and len(body) > max_body:
                    error = dict(
                        protocol.INVALID_REQUEST_OBJECT,
                        data="request body of %d bytes is over the limit of %d" % (len(body), max_body),
                    )
        drf_request = Request(request, parsers=_PARSERS, authenticators=self.get_authenticators())
        context = CallContext(
            request=drf_request,
            source=self.source,
            registry=self.get_registry(),
            endpoint=request.path,
            log=settings.LOG_POLICY != "none",
        )
        if error is None:
            try:
                self.check_endpoint(drf_request)
            except Exception as exc:
                error, _tb = dispatch.handle_exception(exc, None, context)
                # The caller could not be established: log it as anonymous.
                context.user = _anonymous()
        answer = service.answer(
            body,
            context,
            error=error,
            started=start,
            remote_addr=request.META.get("REMOTE_ADDR"),
            user_agent=request.META.get("HTTP_USER_AGENT", ""),
        )
        if answer.status == 204:
            http = HttpResponse(status=204)
        else:
            http = HttpResponse(answer.content, content_type="application/json")
        return http

    def http_method_not_allowed(self, request, *args, **kwargs):
        response = super().http_method_not_allowed(request, *args, **kwargs)
        response["Allow"] = "POST"
        return response


def _anonymous():
    from django.contrib.auth.models import AnonymousUser

    return AnonymousUser()
