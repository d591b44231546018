from django.contrib import admin
from django.urls import include, path

from examples.views import home

urlpatterns = [
    path("", home, name="home"),
    path("rpc/", include("jsonrpc_app.urls")),
    path("admin/", admin.site.urls),
]
