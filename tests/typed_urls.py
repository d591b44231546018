"""The demo's URLs plus an endpoint serving tests.typed_methods.registry at /typed-rpc/."""

from django.urls import path

from jsonrpc_app.views import JsonRpcView, OpenRpcDocumentView
from project.urls import urlpatterns as project_urlpatterns
from tests.typed_methods import registry

urlpatterns = [
    path("typed-rpc/", JsonRpcView.as_view(registry=registry), name="typed-endpoint"),
    path("typed-rpc/openrpc.json", OpenRpcDocumentView.as_view(registry=registry), name="typed-openrpc"),
    *project_urlpatterns,
]
