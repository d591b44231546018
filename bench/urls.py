"""
One URLconf for every target: each has its own path, all under the same settings.

The path of the target a process measures (BENCH_TARGET, set by bench.inprocess
and bench.over_http) comes first, so that every target is resolved by its first
pattern: none pays for trying the others' patterns before its own.
"""

import os

from django.urls import path

from jsonrpc_app.views import AsyncJsonRpcView, JsonRpcView

from . import rpc_methods, views
from .modern import server
from .workloads import ASGI_TARGETS, TARGETS

urlpatterns = [
    path("bare/", views.bare),
    path("bare-orjson/", views.bare_orjson),
    path("rpc/", JsonRpcView.as_view()),
    path("modern-rpc/", server.view),
    # The async targets (bench.over_asgi, under uvicorn).
    path("bare-async/", views.bare_async),
    path("rpc-async/", AsyncJsonRpcView.as_view()),
    path("rpc-async-inline/", AsyncJsonRpcView.as_view(registry=rpc_methods.inline)),
    path("modern-rpc-async/", server.async_view),
]

_first = {**TARGETS, **ASGI_TARGETS}.get(os.environ.get("BENCH_TARGET", ""), ("",))[0].strip("/") + "/"
urlpatterns.sort(key=lambda p: str(p.pattern) != _first)
