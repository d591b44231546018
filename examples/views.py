"""The demo's home page: the endpoint, a curl line, and the methods as a client sees them."""

from django.shortcuts import render
from django.urls import reverse

from jsonrpc_app.registry import registry


def public_methods(methods):
    """
    Return the methods a client is shown: neither hidden nor disabled (the ones
    rpc.discover describes), by name.
    """
    return [m for m in methods if not m.hidden and m.enabled]


def home(request):
    endpoint = request.build_absolute_uri(reverse("jsonrpc_app:endpoint"))
    return render(
        request,
        "home.html",
        {"endpoint": endpoint, "methods": public_methods(registry), "admin_url": reverse("admin:index")},
    )
