"""The endpoint, to include at the path of your choice: ``path("rpc/", include("jsonrpc_app.urls"))``."""

from django.urls import path

from .views import JsonRpcView, OpenRpcDocumentView

app_name = "jsonrpc_app"

urlpatterns = [
    path("", JsonRpcView.as_view(), name="endpoint"),
    path("openrpc.json", OpenRpcDocumentView.as_view(), name="openrpc"),
]
