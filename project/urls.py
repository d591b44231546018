import os

from django.contrib import admin
from django.urls import include, path

from examples.views import home

# project/asgi.py says when the demo is served by ASGI: then /rpc/ is the async endpoint.
ENDPOINT = "jsonrpc_app.urls_async" if os.environ.get("JSONRPC_DEMO_SERVER") == "asgi" else "jsonrpc_app.urls"

urlpatterns = [
    path("", home, name="home"),
    path("rpc/", include(ENDPOINT)),
    path("admin/", admin.site.urls),
]
