from django.shortcuts import render
from django.urls import reverse

from jsonrpc_app.registry import registry


def home(request):
    endpoint = request.build_absolute_uri(reverse("jsonrpc_app:endpoint"))
    return render(
        request,
        "home.html",
        {"endpoint": endpoint, "methods": list(registry), "admin_url": reverse("admin:index")},
    )
