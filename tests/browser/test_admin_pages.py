"""
The admin's method browser, Try it and replay, driven in a real headless
Chromium against the live server: what a member of staff does, click by click.

Screenshots of the three pages, light and dark, are saved to
test-artifacts/screenshots/ (git-ignored); docs/ holds the copies the README shows.
"""

import json
import urllib.request

import pytest
from django.contrib.auth.models import Permission

from jsonrpc_app.models import Call, Envelope

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = [
    {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
    {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 10, "subtrahend": 4}, "id": 2},
    {"jsonrpc": "2.0", "method": "get_data", "id": 3},
    {"jsonrpc": "2.0", "method": "update", "params": [1, 2]},
]


# Some traffic, so that the browser's usage columns have something to show.
TRAFFIC = [
    {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
    {"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2},
    {"jsonrpc": "2.0", "method": "shop.reserve", "params": {"sku": "X2", "quantity": 2}, "id": 3},
    {"jsonrpc": "2.0", "method": "shop.reserve", "params": {"sku": "X1"}, "id": 4},
    {"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 3.5], "id": 5},
    {"jsonrpc": "2.0", "method": "get_data", "id": 6},
    {"jsonrpc": "2.0", "method": "testapp.boom", "id": 7},
]


def post_over_http(live_server, body):
    request = urllib.request.Request(
        live_server.url + "/rpc/",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read())


def try_subtract(page):
    page.goto("/admin/jsonrpc_app/methodentry/subtract/")
    page.fill("#id_params", "[42, 23]")
    page.click("input[name=_tryit]")
    page.wait_for_selector("#try-it-response")


def test_log_in_find_subtract_try_it_and_see_the_call_in_the_log(new_page, superuser, screenshot, live_server):
    post_over_http(live_server, TRAFFIC)
    page = new_page()
    page.goto("/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("text=Site administration")

    # The method browser is on the admin index, in the JSON-RPC section.
    page.click("#content-main a[href='/admin/jsonrpc_app/methodentry/']")
    page.wait_for_selector(".jsonrpc-method-row")
    subtract = page.locator(".jsonrpc-method-row[data-method=subtract]")
    assert subtract.count() == 1
    assert subtract.locator("td.jsonrpc-num").all_inner_texts()[:2] == ["2", "0.0\xa0%"]
    assert page.locator(".breadcrumbs").inner_text().split() == ["Home", "›", "JSON-RPC", "›", "Methods"]
    screenshot(page, "method-browser-light")

    page.fill("#searchbar", "subtract")
    page.press("#searchbar", "Enter")
    page.wait_for_url("**/methodentry/?q=subtract")
    names = page.locator(".jsonrpc-method-row").evaluate_all("rows => rows.map(r => r.dataset.method)")
    assert names == ["subtract"]
    page.click("a.jsonrpc-method-name:text-is('subtract')")
    page.wait_for_selector("#try-it-form")
    assert json.loads(page.input_value("#id_params")) == {"minuend": 0, "subtrahend": 0}

    page.fill("#id_params", "[42, 23]")
    page.click("input[name=_tryit]")
    response = page.locator("#try-it-response")
    response.wait_for()
    assert json.loads(response.inner_text()) == {"jsonrpc": "2.0", "result": 19, "id": 1}
    assert "19" in response.inner_text()
    assert "\n  " in response.inner_text()  # pretty-printed
    assert json.loads(page.locator("#try-it-request").inner_text())["params"] == [42, 23]
    screenshot(page, "try-it-light")

    # The call is in the log, from the admin, as the admin.
    call = Call.objects.get(source="admin")
    assert (call.method, call.source, call.user, call.result) == ("subtract", "admin", superuser, 19)
    page.click("#try-it-logged")
    page.wait_for_url("**/admin/jsonrpc_app/envelope/%d/change/" % call.envelope_id)
    assert "subtract" in page.locator("#content-main").inner_text()
    page.goto("/admin/jsonrpc_app/methodentry/subtract/")
    assert page.locator("#recent-calls .jsonrpc-call-row").count() == 3
    assert "Admin try-it" in page.locator("#recent-calls .jsonrpc-call-row").first.inner_text()
    page.click("#all-calls-link")
    page.wait_for_selector("#result_list")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 3
    assert all("subtract" in text for text in rows.all_inner_texts())


def test_copy_button_puts_a_working_curl_command_on_the_clipboard(new_page, superuser, live_server):
    page = new_page(user=superuser)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    try_subtract(page)
    page.click("button[data-copy-target=try-it-curl]")
    page.wait_for_selector("button[data-copy-target=try-it-curl]:text('Copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#try-it-curl").inner_text()
    assert copied.startswith("curl -s -X POST") and live_server.url + "/rpc/" in copied


def test_replay_an_http_batch_unchanged_then_with_one_param_edited(new_page, superuser, screenshot, live_server):
    answer = post_over_http(live_server, BATCH)
    assert [a["id"] for a in answer] == [1, 2, 3]
    original = Envelope.objects.get()
    page = new_page(user=superuser)

    # Open its envelope from the log, replay it unchanged.
    page.goto("/admin/jsonrpc_app/envelope/")
    page.click("#result_list a[href='/admin/jsonrpc_app/envelope/%d/change/']" % original.pk)
    page.click("#replay-button")
    assert json.loads(page.input_value("#id_body")) == BATCH
    page.click("#replay-submit")
    summary = page.locator("#comparison-summary")
    summary.wait_for()
    assert summary.inner_text() == "3 calls: all same"
    assert page.locator("tr[data-status=same]").count() == 3

    # Edit one param and replay again: exactly that call has changed.
    page.goto("/admin/jsonrpc_app/envelope/%d/change/" % original.pk)
    page.click("#replay-button")
    edited = json.loads(page.input_value("#id_body"))
    edited[0]["params"] = [42, 20]
    page.fill("#id_body", json.dumps(edited, indent=2))
    page.click("#replay-submit")
    summary.wait_for()
    assert summary.inner_text() == "3 calls: 2 same, 1 changed"
    statuses = page.locator("tr[data-status]").evaluate_all(
        "rows => rows.map(r => [r.dataset.callId, r.dataset.status])"
    )
    assert statuses == [["1", "changed-result"], ["2", "same"], ["3", "same"]]
    changed = page.locator("tr[data-call-id='1'] .jsonrpc-diff-changed")
    assert changed.all_inner_texts() == ['  "result": 19,', '  "result": 22,']
    assert page.locator("tr[data-call-id='2'] .jsonrpc-diff-changed").count() == 0
    assert page.locator("tr[data-call-id='1'] .jsonrpc-params-edited ins").inner_text() == "[42, 20]"
    screenshot(page, "replay-comparison-light")

    replays = Envelope.objects.filter(source="replay").order_by("pk")
    assert [(e.replay_of_id, e.user_id) for e in replays] == [(original.pk, superuser.pk)] * 2

    dark = new_page("dark", user=superuser)
    dark.goto(page.url)
    dark.locator("#comparison-summary").wait_for()
    screenshot(dark, "replay-comparison-dark")


def test_dark_mode_screenshots_of_the_browser_and_try_it(new_page, superuser, screenshot, live_server):
    post_over_http(live_server, TRAFFIC)
    page = new_page("dark", user=superuser)
    page.goto("/admin/jsonrpc_app/methodentry/")
    page.wait_for_selector(".jsonrpc-method-row")
    # The admin's own dark palette is in force, and our pages follow it.
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 18, 18)"
    screenshot(page, "method-browser-dark")
    try_subtract(page)
    assert json.loads(page.locator("#try-it-response").inner_text())["result"] == 19
    code_bg = page.evaluate("getComputedStyle(document.querySelector('#try-it-response')).backgroundColor")
    assert code_bg == "rgb(33, 33, 33)"  # --darkened-bg in dark mode
    screenshot(page, "try-it-dark")


def test_staff_without_the_replay_permission_sees_no_replay_button_and_a_forged_post_is_403(
    new_page, django_user_model, superuser, live_server
):
    post_over_http(live_server, BATCH)
    original = Envelope.objects.get()
    viewer = django_user_model.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_envelope", "view_call", "view_methodentry"])
    )
    page = new_page(user=viewer)
    page.goto("/admin/jsonrpc_app/envelope/%d/change/" % original.pk)
    page.wait_for_selector("#content h1")
    assert page.locator("#replay-button").count() == 0
    assert page.locator("select[name=action] option[value=replay_selected]").count() == 0
    page.goto("/admin/jsonrpc_app/methodentry/subtract/")
    assert page.locator("#try-it-form").count() == 0
    assert page.locator("#try-it-forbidden").is_visible()

    forge = """async ([url, body]) => {
        const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
        const form = new FormData();
        form.append('csrfmiddlewaretoken', token);
        for (const [k, v] of Object.entries(body)) form.append(k, v);
        const response = await fetch(url, {method: 'POST', body: form, credentials: 'same-origin'});
        return response.status;
    }"""
    replay_url = "/admin/jsonrpc_app/envelope/%d/replay/" % original.pk
    assert page.evaluate(forge, [replay_url, {"body": original.request_body}]) == 403
    assert page.evaluate(forge, ["/admin/jsonrpc_app/methodentry/subtract/", {"params": "[1, 2]", "id": "1"}]) == 403
    action = {"action": "replay_selected", "_selected_action": str(original.pk)}
    assert page.evaluate(forge, ["/admin/jsonrpc_app/envelope/", action]) == 200  # "no action selected"
    assert list(Envelope.objects.values_list("source", flat=True)) == ["http"]

    # A cross-site POST (no CSRF token) is refused even for a superuser.
    admin_page = new_page(user=superuser)
    admin_page.goto("/admin/jsonrpc_app/methodentry/subtract/")
    status = admin_page.evaluate(
        """async (url) => (await fetch(url, {method: 'POST', body: new URLSearchParams({body: '[]'}),
                                             credentials: 'same-origin'})).status""",
        replay_url,
    )
    assert status == 403
    assert list(Envelope.objects.values_list("source", flat=True)) == ["http"]
