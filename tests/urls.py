"""The tests' URLs: the demo's, plus the async endpoint beside the sync one (the protocol tests run against both)."""

from django.urls import include, path

from project.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("rpc-async/", include(("jsonrpc_app.urls_async", "jsonrpc_app"), namespace="jsonrpc_async")),
]
