"""The demo's home page lists the methods as a client sees them: no hidden method, no injected param."""

import re

import pytest

from jsonrpc_app import CallContext
from jsonrpc_app.registry import registry

pytestmark = pytest.mark.django_db


def listed(client):
    page = client.get("/")
    assert page.status_code == 200
    text = page.content.decode()
    return text, dict(re.findall(r'<li class="method" data-method="([^"]+)"><code>([^<]+)</code>', text))


def test_methods_are_listed_with_the_signature_a_client_sees(client):
    text, methods = listed(client)
    assert methods["subtract"] == "subtract(minuend: int, subtrahend: int) -&gt; int"
    assert methods["shop.reserve"] == "shop.reserve(sku: str, quantity: int = 1) -&gt; dict"
    assert "Return minuend minus subtrahend." in text


def test_injected_call_context_params_are_not_shown(client):
    text, methods = listed(client)
    assert methods["testapp.whoami"] == "testapp.whoami()"
    assert methods["testapp.private"] == "testapp.private(note=&#x27;&#x27;)"
    assert "CallContext" not in text and "context" not in "".join(methods.values())


def test_hidden_and_disabled_methods_and_rpc_discover_are_not_listed(client):
    def secret(context: CallContext) -> str:
        return "x"

    def retired() -> None:
        pass

    registry.register(secret, "demo.secret", hidden=True)
    registry.register(retired, "demo.retired", enabled=False)
    try:
        text, methods = listed(client)
    finally:
        registry.unregister("demo.secret")
        registry.unregister("demo.retired")
    assert "rpc.discover" in registry and registry.get("rpc.discover").hidden
    assert "rpc.discover" not in text
    assert "demo.secret" not in text and "demo.retired" not in text
    assert "subtract" in methods
