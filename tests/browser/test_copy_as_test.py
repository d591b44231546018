"""
"Copy as test" in a real headless Chromium: on a call logged over HTTP, the
Copy button puts the test on the clipboard, and the copied text is a test
that passes.
"""

import pytest
from django.test import Client

from jsonrpc_app.models import Call
from jsonrpc_app.test import RpcClient

from .test_admin_pages import post_over_http

pytestmark = pytest.mark.django_db(transaction=True)


def test_copy_as_test_puts_a_passing_test_on_the_clipboard(new_page, superuser, live_server):
    post_over_http(live_server, {"jsonrpc": "2.0", "method": "shop.reserve", "params": {"sku": "X2"}, "id": 7})
    call = Call.objects.get(method="shop.reserve")
    page = new_page(user=superuser)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.goto("/admin/jsonrpc_app/call/%s/change/" % call.pk)

    shown = page.locator("#copy-as-test-source")
    assert shown.is_visible()
    assert "rpc.call('shop.reserve', sku='X2')" in shown.input_value()
    page.click("#copy-as-test-button")
    page.wait_for_selector("#copy-as-test-button:text('Copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == shown.input_value()

    namespace = {}
    exec(compile(copied, "<clipboard>", "exec"), namespace)
    (test,) = [f for name, f in namespace.items() if name.startswith("test_")]
    test(rpc=RpcClient(Client()))
