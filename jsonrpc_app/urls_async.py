"""
The endpoint for a project served by ASGI, with the same names as
``jsonrpc_app.urls``: ``path("rpc/", include("jsonrpc_app.urls_async"))``.
"""

from django.urls import path

from .views import AsyncJsonRpcView, OpenRpcDocumentView

app_name = "jsonrpc_app"

urlpatterns = [
    path("", AsyncJsonRpcView.as_view(), name="endpoint"),
    path("openrpc.json", OpenRpcDocumentView.as_view(), name="openrpc"),
]
