"""One URLconf for every target: each has its own path, all under the same settings."""

from django.urls import path

from jsonrpc_app.views import JsonRpcView

from . import views
from .modern import server

urlpatterns = [
    path("bare/", views.bare),
    path("bare-orjson/", views.bare_orjson),
    path("rpc/", JsonRpcView.as_view()),
    path("modern-rpc/", server.view),
]
