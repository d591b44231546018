"""
The admin's method browser, Try it, and replay with its comparison page, at
the test-client level (the same pages in a real Chromium: tests/browser/).
"""

import json
import shutil
import subprocess
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.utils import timezone

from jsonrpc_app import JsonRpcError, MethodRegistry
from jsonrpc_app.admin.methods import params_skeleton
from jsonrpc_app.admin.replay import Comparison
from jsonrpc_app.admin.usage import usage_stats
from jsonrpc_app.log import rollup
from jsonrpc_app.models import Call, Envelope, MethodEntry
from jsonrpc_app.registry import registry

pytestmark = pytest.mark.django_db

BROWSER = "/admin/jsonrpc_app/methodentry/"


def method_url(name):
    return "%s%s/" % (BROWSER, name)


def envelope_url(envelope, view="change"):
    return "/admin/jsonrpc_app/envelope/%s/%s/" % (envelope.pk, view)


@pytest.fixture
def staff(django_user_model):
    """Return a factory of staff users holding the given jsonrpc_app permissions."""

    def make(*codenames, username="staff"):
        user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="jsonrpc_app", codename__in=codenames)
        )
        return user

    return make


@pytest.fixture
def client_for():
    def make(user, **kwargs):
        client = Client(**kwargs)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def viewer(staff, client_for):
    """A staff client that can read the log and browse, but not try or replay."""
    return client_for(staff("view_envelope", "view_call", "view_methodentry"))


def log_call(method, duration_ms, outcome="ok", created_at=None, envelope=None, **fields):
    """A Call row written by the ORM, added to the usage rollups as the log's writers add theirs."""
    created_at = created_at or timezone.now()
    if envelope is None:
        envelope = Envelope.objects.create(created_at=created_at, call_count=1)
    call = Call.objects.create(
        envelope=envelope,
        method=method,
        duration_ms=duration_ms,
        outcome=outcome,
        created_at=created_at,
        error_code=-32603 if outcome == "error" else None,
        **fields,
    )
    rollup.record(connection, [call])
    return call


def post_rpc(client, body):
    response = client.generic("POST", "/rpc/", json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    return Envelope.objects.latest("pk"), json.loads(response.content)


# -- the browser ------------------------------------------------------------------


def test_method_browser_is_listed_under_the_json_rpc_app_on_the_admin_index(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert 'href="%s"' % BROWSER in page
    app_page = admin_client.get("/admin/jsonrpc_app/").content.decode()
    assert "Methods" in app_page and BROWSER in app_page


def test_browser_lists_every_method_grouped_by_app_with_signature_summary_and_access(admin_client):
    response = admin_client.get(BROWSER)
    assert response.status_code == 200
    page = response.content.decode()
    groups = [g["label"] for g in response.context["groups"]]
    assert groups == ["examples", "jsonrpc_app", "testapp"]  # by app name: Examples, JSON-RPC, Testapp
    by_name = {m["name"]: m for g in response.context["groups"] for m in g["methods"]}
    assert set(by_name) == {m.name for m in registry}
    assert by_name["subtract"]["signature"] == "(minuend: int, subtrahend: int) -> int"
    assert by_name["subtract"]["summary"] == "Return minuend minus subtrahend."
    # The CallContext parameter is not a param a client can send.
    assert by_name["testapp.whoami"]["signature"] == "()"
    assert "subtract(minuend: int, subtrahend: int) -&gt; int" in page
    assert 'id="app-examples"' in page and 'id="app-testapp"' in page
    assert "Return minuend minus subtrahend." in page


def test_browser_shows_what_a_method_needs_to_be_called(admin_client, monkeypatch):
    reg = MethodRegistry("access")

    def secret():
        """Only for some."""

    def open_door():
        """For anyone."""

    reg.register(secret, permissions=["auth.view_user"], login_required=True)
    reg.register(open_door)
    monkeypatch.setattr(admin.site._registry[MethodEntry], "registry", reg)
    methods = {m["name"]: m for g in admin_client.get(BROWSER).context["groups"] for m in g["methods"]}
    assert methods["secret"]["access"] == ["login required", "permission auth.view_user"]
    assert methods["open_door"]["access"] == []
    page = admin_client.get(method_url("secret")).content.decode()
    assert "permission auth.view_user" in page and "login required" in page


def test_browser_search_matches_name_and_description(admin_client):
    names = lambda r: [m["name"] for g in r.context["groups"] for m in g["methods"]]  # noqa: E731
    assert names(admin_client.get(BROWSER, {"q": "subtr"})) == ["subtract"]
    assert names(admin_client.get(BROWSER, {"q": "SPECIFICATION'S EXAMPLE DATA"})) == ["get_data"]
    response = admin_client.get(BROWSER, {"q": "no such thing"})
    assert names(response) == []
    assert "No method matches." in response.content.decode()


def test_browser_app_filter_shows_only_that_app_and_keeps_the_search(admin_client):
    response = admin_client.get(BROWSER, {"app": "testapp"})
    names = [m["name"] for g in response.context["groups"] for m in g["methods"]]
    assert names and all(n.startswith("testapp.") for n in names)
    choices = {c["label"]: c for c in response.context["app_choices"]}
    assert choices["testapp"]["selected"] and not choices["examples"]["selected"]
    response = admin_client.get(BROWSER, {"q": "boom"})
    choices = {c["label"]: c for c in response.context["app_choices"]}
    assert choices["testapp"]["url"] == "?q=boom&app=testapp"


def test_usage_counts_error_rate_and_median_over_24_hours_and_all_time(admin_client):
    now = timezone.now()
    old = now - timedelta(days=3)
    for ms in (1.0, 2.0, 30.0):
        log_call("subtract", ms, created_at=now - timedelta(minutes=5))
    log_call("subtract", 50.0, outcome="error", created_at=now - timedelta(hours=1))
    log_call("subtract", 1000.0, outcome="error", created_at=old)
    log_call("echo", 4.0, created_at=old)
    stats = usage_stats()
    sub = stats["subtract"]
    assert (sub["count"], sub["errors"], sub["error_rate"]) == (5, 2, 0.4)
    # Medians are estimated from the rollups' histogram: inside the bucket of
    # the true median (30 ms of 1, 2, 30, 50, 1000: the bucket 25-50 ms).
    assert 25.0 <= sub["median_ms"] <= 50.0
    # Four in the last day (1, 2, 30, 50): the true median, 16, is between the 2.5-5 and 25-50 buckets.
    assert (sub["count_24h"], sub["errors_24h"], sub["error_rate_24h"]) == (4, 1, 0.25)
    assert 2.0 <= sub["median_ms_24h"] <= 30.0
    echo = stats["echo"]
    # One call: its bucket is clamped to the shortest and longest call, exactly 4 ms.
    assert (echo["count"], echo["median_ms"], echo["count_24h"], echo["median_ms_24h"]) == (1, 4.0, 0, None)
    assert usage_stats("echo").keys() == {"echo"}
    row = next(m for g in admin_client.get(BROWSER).context["groups"] for m in g["methods"] if m["name"] == "subtract")
    assert row["stats"]["count"] == 5
    page = admin_client.get(method_url("subtract")).content.decode()
    assert "2 (40.0&nbsp;%)" in page and "1 (25.0&nbsp;%)" in page


def test_browser_needs_a_view_permission(staff, client_for, viewer):
    nobody = client_for(staff(username="nobody"))
    assert nobody.get(BROWSER).status_code == 403
    assert nobody.get(method_url("subtract")).status_code == 403
    assert viewer.get(BROWSER).status_code == 200
    assert viewer.get(method_url("subtract")).status_code == 200
    assert Client().get(BROWSER).status_code == 302  # to the login page


# -- a method's page ------------------------------------------------------------------


def test_method_page_shows_full_doc_params_return_type_and_declared_errors(admin_client):
    response = admin_client.get(method_url("shop.reserve"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Reserve <code>quantity</code> items of <code>sku</code>." in page
    assert "Raises OutOfStock (-32010)" in page
    params = response.context["params"]
    assert [(p["name"], p["type"], p["default"], p["required"]) for p in params] == [
        ("sku", "str", "", True),
        ("quantity", "int", "1", False),
    ]
    assert response.context["returns"] == "dict"
    assert response.context["errors"] == [
        {"code": -32010, "message": "Out of stock", "name": "OutOfStock", "doc": "The SKU asked for has no stock left."}
    ]
    assert '<code id="method-returns">dict</code>' in page
    assert "breadcrumbs" in page and 'href="%s"' % BROWSER in page


def test_unknown_method_page_is_404(admin_client):
    assert admin_client.get(method_url("no.such.method")).status_code == 404


def test_method_page_lists_recent_calls_linked_to_the_log(admin_client):
    calls = [log_call("subtract", 1.0, created_at=timezone.now() - timedelta(seconds=i)) for i in range(12)]
    log_call("echo", 1.0)
    response = admin_client.get(method_url("subtract"))
    recent = response.context["recent_calls"]
    assert [c.pk for c in recent] == [c.pk for c in calls[:10]]
    page = response.content.decode()
    assert 'href="/admin/jsonrpc_app/call/%d/change/"' % calls[0].pk in page
    assert 'href="/admin/jsonrpc_app/call/?method=subtract"' in page


def test_params_skeleton_is_built_from_the_signature():
    assert params_skeleton(registry.get("subtract")) == {"minuend": 0, "subtrahend": 0}
    assert params_skeleton(registry.get("shop.reserve")) == {"sku": "", "quantity": 1}
    assert params_skeleton(registry.get("sum")) == [0]
    assert params_skeleton(registry.get("get_data")) is None
    assert params_skeleton(registry.get("testapp.whoami")) is None


def test_try_it_form_is_prefilled_with_the_skeleton(admin_client):
    form = admin_client.get(method_url("subtract")).context["form"]
    assert json.loads(form["params"]) == {"minuend": 0, "subtrahend": 0}
    assert form["id"] == "1"


# -- Try it ------------------------------------------------------------------------------


def test_try_it_runs_the_call_and_shows_request_response_and_curl(admin_client, admin_user):
    response = admin_client.post(method_url("subtract"), {"params": "[42, 23]", "id": "7"})
    assert response.status_code == 200
    tryit = response.context["tryit"]
    assert json.loads(tryit["request"]) == {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 7}
    assert json.loads(tryit["response"]) == {"jsonrpc": "2.0", "result": 19, "id": 7}
    assert tryit["response"].startswith("{\n  ")  # pretty-printed
    envelope = Envelope.objects.get()
    assert (envelope.source, envelope.user, envelope.replay_of) == ("admin", admin_user, None)
    assert envelope.endpoint == "/rpc/"
    call = Call.objects.get()
    assert (call.method, call.source, call.user, call.result, call.params) == (
        "subtract", "admin", admin_user, 19, [42, 23]
    )
    page = response.content.decode()
    assert 'href="/admin/jsonrpc_app/envelope/%d/change/"' % envelope.pk in page
    assert "&quot;result&quot;: 19" in page
    assert "curl -s -X POST" in tryit["curl"] and "http://testserver/rpc/" in tryit["curl"]


def test_try_it_runs_as_the_logged_in_admin(admin_client):
    response = admin_client.post(method_url("testapp.whoami"), {"params": "", "id": "1"})
    assert json.loads(response.context["tryit"]["response"])["result"] == {"user": "admin", "source": "admin"}


def test_try_it_reports_method_errors_as_the_endpoint_would(admin_client):
    response = admin_client.post(method_url("shop.reserve"), {"params": '{"sku": "X1"}', "id": '"r-1"'})
    answer = json.loads(response.context["tryit"]["response"])
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": -32010, "message": "Out of stock", "data": {"sku": "X1", "available": 0}},
        "id": "r-1",
    }
    assert Call.objects.get().outcome == "error"


def test_try_it_with_an_empty_id_sends_a_notification(admin_client):
    response = admin_client.post(method_url("subtract"), {"params": "[1, 2]", "id": ""})
    tryit = response.context["tryit"]
    assert tryit["response"] == "" and tryit["status"] == 204
    assert "id" not in json.loads(tryit["request"])
    assert "No response: a notification is never answered" in response.content.decode()
    assert Call.objects.get().is_notification


def test_try_it_takes_a_bare_word_id_as_a_string(admin_client):
    response = admin_client.post(method_url("echo"), {"params": '["x"]', "id": "abc"})
    assert json.loads(response.context["tryit"]["response"])["id"] == "abc"


@pytest.mark.parametrize(
    "params, id, message",
    [
        ("[42, 23", "1", "Params are not valid JSON"),
        ("42", "1", "Params must be a JSON array or object"),
        ("[1, 2]", "[1]", "The id must be a string, a number or null."),
        ("[1, 2]", "true", "The id must be a string, a number or null."),
    ],
)
def test_try_it_with_bad_input_shows_a_form_error_and_runs_nothing(admin_client, params, id, message):
    response = admin_client.post(method_url("subtract"), {"params": params, "id": id})
    assert response.status_code == 200
    assert response.context["tryit"] is None
    assert any(message in e for e in response.context["form"]["errors"])
    assert message in response.content.decode()
    assert response.context["form"]["params"] == params  # kept for correcting
    assert not Envelope.objects.exists()


def test_staff_without_the_replay_permission_sees_no_try_it_form_and_a_forged_post_is_403(viewer):
    page = viewer.get(method_url("subtract")).content.decode()
    assert 'id="try-it-form"' not in page and 'id="try-it-forbidden"' in page
    assert viewer.post(method_url("subtract"), {"params": "[1, 2]", "id": "1"}).status_code == 403
    assert not Envelope.objects.exists()


def test_try_it_without_a_csrf_token_is_403(admin_user, client_for):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(method_url("subtract"), {"params": "[1, 2]", "id": "1"}).status_code == 403
    assert not Envelope.objects.exists()


def test_staff_with_only_the_replay_permission_can_browse_and_try(staff, client_for):
    client = client_for(staff("replay_envelope"))
    response = client.post(method_url("subtract"), {"params": "[5, 3]", "id": "1"})
    assert json.loads(response.context["tryit"]["response"])["result"] == 2


def test_try_it_with_the_log_off_still_answers(admin_client, settings):
    settings.JSONRPC = {"LOG_POLICY": "none"}
    response = admin_client.post(method_url("subtract"), {"params": "[5, 3]", "id": "1"})
    assert json.loads(response.context["tryit"]["response"])["result"] == 2
    assert response.context["tryit"]["envelope_url"] is None
    assert not Envelope.objects.exists()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed: the copied command cannot be run")
@pytest.mark.django_db(transaction=True)
def test_copy_as_curl_reproduces_the_call_from_a_shell(live_server, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    # The page is rendered for the live server's host, as a browser there would see it.
    client = Client(HTTP_HOST=live_server.url.split("://", 1)[1])
    client.force_login(user)
    params = {"sku": "it's \"quoted\" $HOME `x`", "quantity": 1}
    response = client.post(method_url("shop.reserve"), {"params": json.dumps(params), "id": "1"})
    tryit = response.context["tryit"]
    assert live_server.url + "/rpc/" in tryit["curl"]
    shell = subprocess.run(["bash", "-c", tryit["curl"]], capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(shell.stdout) == json.loads(tryit["response"]) == {
        "jsonrpc": "2.0",
        "error": {"code": -32010, "message": "Out of stock", "data": {"sku": params["sku"], "available": 0}},
        "id": 1,
    }
    # The same call, once from the admin and once from the shell over HTTP.
    assert list(Envelope.objects.order_by("pk").values_list("source", flat=True)) == ["admin", "http"]


def test_copy_as_curl_asks_for_a_password_when_the_method_needs_a_login(admin_client, monkeypatch):
    reg = MethodRegistry("login")

    def private():
        return 1

    reg.register(private, login_required=True)
    monkeypatch.setattr(admin.site._registry[MethodEntry], "registry", reg)
    response = admin_client.post(method_url("private"), {"params": "", "id": "1"})
    assert json.loads(response.context["tryit"]["response"])["result"] == 1
    assert "-u admin " in response.context["tryit"]["curl"]


# -- comparing answers -------------------------------------------------------------------


def r(id, result=None, error=None):
    body = {"jsonrpc": "2.0", "id": id}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return body


def compare(original, replay):
    return Comparison("", json.dumps(original), "", json.dumps(replay))


def test_comparison_of_identical_answers_is_all_same():
    answers = [r(1, 19), r(2, -19), r("x", error={"code": -32601, "message": "Method not found"})]
    comparison = compare(answers, list(reversed(answers)))
    assert comparison.summary == "3 calls: all same"
    assert [row["status"] for row in comparison.rows] == ["same"] * 3
    assert compare(r(1, 19), r(1, 19)).summary == "1 call: all same"


def test_comparison_pairs_calls_by_id_and_names_each_difference():
    error = {"code": -32602, "message": "Invalid params"}
    original = [r(1, 19), r(2, 5), r(3, error=error), r(4, 1), r("4", 1), r(5, 0)]
    replay = [r(1, 19), r(2, 6), r(3, error=dict(error, data=["x"])), r(4, error=error), r(6, 1), r("4", 1)]
    comparison = compare(original, replay)
    statuses = {row["id_text"]: row["status"] for row in comparison.rows}
    assert statuses == {
        "1": "same",
        "2": "changed-result",
        "3": "changed-error",
        "4": "now-error",
        '"4"': "same",
        "5": "missing",
        "6": "new",
    }
    assert comparison.summary == "7 calls: 2 same, 3 changed, 1 missing, 1 new"
    changed = next(row for row in comparison.rows if row["id_text"] == "2")
    assert '<span class="jsonrpc-diff-changed">  &quot;result&quot;: 5</span>' in changed["original"]
    assert '<span class="jsonrpc-diff-changed">  &quot;result&quot;: 6</span>' in changed["replay"]
    assert '<span class="jsonrpc-diff-line">  &quot;id&quot;: 2,</span>' in changed["replay"]


def test_comparison_pairs_null_ids_in_order():
    invalid = {"code": -32600, "message": "Invalid Request"}
    comparison = compare([r(None, error=invalid), r(None, error=invalid)], [r(None, error=invalid)])
    assert [row["status"] for row in comparison.rows] == ["same", "missing"]


def test_comparison_of_unreadable_bodies_says_so():
    comparison = Comparison("", '{"jsonrpc": "2.0", "result": [1, 2', "", json.dumps(r(1, 1)))
    assert not comparison.readable and not comparison.all_same
    assert "could not be read" in comparison.summary


def test_comparison_of_notifications_only_has_nothing_to_compare():
    assert Comparison("", "", "", "").summary.startswith("No responses to compare")


# -- replay ------------------------------------------------------------------------------

BATCH = [
    {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
    {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 10, "subtrahend": 4}, "id": 2},
    {"jsonrpc": "2.0", "method": "testapp.whoami", "id": 3},
    {"jsonrpc": "2.0", "method": "update", "params": [1]},
]


@pytest.fixture
def batch(client, django_user_model):
    """A batch sent over HTTP by an ordinary logged-in user."""
    caller = django_user_model.objects.create_user("caller", password="pw")
    client.force_login(caller)
    envelope, answer = post_rpc(client, BATCH)
    client.logout()
    assert [a["id"] for a in answer] == [1, 2, 3]
    return envelope


def test_envelope_page_has_a_replay_button_for_staff_with_the_permission(admin_client, batch, viewer):
    page = admin_client.get(envelope_url(batch)).content.decode()
    assert 'href="%s"' % envelope_url(batch, "replay") in page
    page = viewer.get(envelope_url(batch)).content.decode()
    assert viewer.get(envelope_url(batch)).status_code == 200
    assert envelope_url(batch, "replay") not in page


def test_replay_page_shows_the_original_request_in_an_editable_textarea(admin_client, batch):
    response = admin_client.get(envelope_url(batch, "replay"))
    assert response.status_code == 200
    assert json.loads(response.context["body"]) == BATCH
    page = response.content.decode()
    assert '<textarea name="body"' in page and "csrfmiddlewaretoken" in page


def test_replay_runs_as_the_admin_logs_source_replay_and_links_the_original(admin_client, admin_user, batch):
    response = admin_client.post(envelope_url(batch, "replay"), {"body": batch.request_body})
    replay = Envelope.objects.exclude(pk=batch.pk).get()
    assert response.status_code == 302
    assert response["Location"] == envelope_url(replay, "comparison")
    assert (replay.source, replay.user, replay.replay_of, replay.is_batch) == ("replay", admin_user, batch, True)
    assert set(replay.calls.values_list("source", "user__username")) == {("replay", "admin")}
    # Never the original caller: whoami now answers the admin.
    answer = json.loads(replay.response_body)
    assert answer[2]["result"] == {"user": "admin", "source": "replay"}
    page = admin_client.get(response["Location"]).content.decode()
    assert "3 calls: 2 same, 1 changed" in page  # whoami names another caller


def test_replay_unchanged_compares_all_same(admin_client, batch):
    body = [c for c in BATCH if c["method"] != "testapp.whoami"]
    envelope, _answer = post_rpc(Client(), body)
    response = admin_client.post(envelope_url(envelope, "replay"), {"body": envelope.request_body}, follow=True)
    assert response.context["comparison"].summary == "2 calls: all same"
    page = response.content.decode()
    assert 'id="comparison-summary"' in page and "2 calls: all same" in page


def test_edited_replay_marks_exactly_the_edited_call_changed(admin_client, batch):
    edited = json.loads(batch.request_body)
    edited[0]["params"] = [42, 20]
    response = admin_client.post(envelope_url(batch, "replay"), {"body": json.dumps(edited)}, follow=True)
    rows = {row["id_text"]: row["status"] for row in response.context["comparison"].rows}
    assert rows == {"1": "changed-result", "2": "same", "3": "changed-result"}
    edits = {row["id_text"]: (row["params_edited"], row["params_replay"]) for row in response.context["comparison"].rows}
    assert edits == {"1": (True, "[42, 20]"), "2": (False, '{"minuend": 10, "subtrahend": 4}'), "3": (False, "null")}
    replay = Envelope.objects.get(source="replay")
    assert json.loads(replay.request_body)[0]["params"] == [42, 20]
    assert replay.replay_of == batch


def test_replay_that_drops_a_call_marks_it_missing(admin_client):
    envelope, _ = post_rpc(Client(), BATCH[:2])
    edited = [BATCH[0]]
    response = admin_client.post(envelope_url(envelope, "replay"), {"body": json.dumps(edited)}, follow=True)
    assert response.context["comparison"].summary == "2 calls: 1 same, 1 missing"


def test_replay_of_a_body_that_is_not_json_is_answered_and_compared(admin_client, batch):
    response = admin_client.post(envelope_url(batch, "replay"), {"body": "[{oops"}, follow=True)
    replay = Envelope.objects.get(source="replay")
    assert json.loads(replay.response_body)["error"]["code"] == -32700
    assert response.context["comparison"].summary == "4 calls: 3 missing, 1 new"


def test_replay_without_the_permission_is_403_and_shows_no_button(viewer, batch):
    assert viewer.get(envelope_url(batch, "replay")).status_code == 403
    assert viewer.post(envelope_url(batch, "replay"), {"body": batch.request_body}).status_code == 403
    assert not Envelope.objects.filter(source="replay").exists()


def test_replay_without_a_csrf_token_is_403(admin_user, client_for, batch):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(envelope_url(batch, "replay"), {"body": batch.request_body}).status_code == 403
    assert not Envelope.objects.filter(source="replay").exists()


def test_replay_of_an_unknown_envelope_is_404(admin_client):
    assert admin_client.get("/admin/jsonrpc_app/envelope/999999/replay/").status_code == 404


def test_replay_action_replays_the_selected_envelopes(admin_client, batch):
    other, _ = post_rpc(Client(), BATCH[0])
    response = admin_client.post(
        "/admin/jsonrpc_app/envelope/",
        {"action": "replay_selected", "_selected_action": [batch.pk, other.pk]},
        follow=True,
    )
    assert response.status_code == 200
    replays = Envelope.objects.filter(source="replay")
    assert {e.replay_of_id for e in replays} == {batch.pk, other.pk}
    page = response.content.decode()
    assert "1 call: all same" in page and "3 calls: 2 same, 1 changed" in page


def test_replay_action_on_one_envelope_opens_its_comparison(admin_client):
    envelope, _ = post_rpc(Client(), BATCH[0])
    response = admin_client.post(
        "/admin/jsonrpc_app/envelope/", {"action": "replay_selected", "_selected_action": [envelope.pk]}
    )
    replay = Envelope.objects.get(source="replay")
    assert response["Location"] == envelope_url(replay, "comparison")


def test_replay_action_is_not_offered_without_the_permission(viewer, batch):
    response = viewer.get("/admin/jsonrpc_app/envelope/")
    assert "replay_selected" not in response.content.decode()
    response = viewer.post(
        "/admin/jsonrpc_app/envelope/", {"action": "replay_selected", "_selected_action": [batch.pk]}
    )
    assert not Envelope.objects.filter(source="replay").exists()


def test_comparison_of_an_envelope_that_is_not_a_replay_redirects_to_it(admin_client, batch):
    response = admin_client.get(envelope_url(batch, "comparison"))
    assert response.status_code == 302 and response["Location"] == envelope_url(batch)


def test_replay_warns_when_the_log_redacted_values(admin_client):
    envelope = Envelope.objects.create(
        request_body='{"jsonrpc": "2.0", "method": "echo", "params": {"value": {"password": "********"}}, "id": 1}',
        response_body='{"jsonrpc": "2.0", "result": {"password": "********"}, "id": 1}',
    )
    page = admin_client.get(envelope_url(envelope, "replay")).content.decode()
    assert 'id="replay-redacted"' in page


def test_replay_with_the_log_off_still_shows_the_comparison(admin_client, batch, settings):
    settings.JSONRPC = {"LOG_POLICY": "none"}
    response = admin_client.post(envelope_url(batch, "replay"), {"body": batch.request_body})
    assert response.status_code == 200
    assert response.context["comparison"].summary == "3 calls: 2 same, 1 changed"
    assert not Envelope.objects.filter(source="replay").exists()


def test_replayed_envelope_page_links_to_its_comparison(admin_client, batch):
    admin_client.post(envelope_url(batch, "replay"), {"body": batch.request_body})
    replay = Envelope.objects.get(source="replay")
    page = admin_client.get(envelope_url(replay)).content.decode()
    assert 'href="%s"' % envelope_url(replay, "comparison") in page


# -- bounded queries ---------------------------------------------------------------------


@pytest.fixture
def big_log(monkeypatch):
    """A registry of 200 methods and a log of 10,000 calls of them."""
    reg = MethodRegistry("big")
    modules = ["examples.rpc_methods", "tests.testapp.rpc_methods", "elsewhere"]
    for i in range(200):

        def func(a: int, b: int = 2) -> int:
            """Add, quickly."""
            return a + b

        func.__name__ = func.__qualname__ = "m%03d" % i
        func.__module__ = modules[i % 3]
        reg.register(func, name="big.m%03d" % i, errors=[JsonRpcError] if i % 2 else ())
    monkeypatch.setattr(admin.site._registry[MethodEntry], "registry", reg)
    monkeypatch.setattr(admin.site._registry[Envelope], "registry", reg)
    now = timezone.now()
    envelopes = Envelope.objects.bulk_create(
        [Envelope(created_at=now - timedelta(hours=i), call_count=100) for i in range(100)]
    )
    Call.objects.bulk_create(
        [
            Call(
                envelope=envelope,
                position=j,
                method="big.m%03d" % ((i * 100 + j) % 200),
                created_at=envelope.created_at,
                duration_ms=float(j),
                outcome="error" if j % 10 == 0 else "ok",
            )
            for i, envelope in enumerate(envelopes)
            for j in range(100)
        ],
        batch_size=1000,
    )
    assert Call.objects.count() == 10_000
    rollup.rebuild()  # rows written outside the log are rolled up by a rebuild
    return reg


def test_browser_of_200_methods_and_10000_calls_renders_in_bounded_queries(
    admin_client, big_log, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        response = admin_client.get(BROWSER)
    assert response.status_code == 200
    rows = [m for g in response.context["groups"] for m in g["methods"]]
    assert len(rows) == len(big_log) >= 200
    assert sum(m["stats"]["count"] for m in rows) == 10_000
    assert sum(m["stats"]["errors"] for m in rows) == 1_000


def test_method_page_with_10000_calls_in_the_log_renders_in_bounded_queries(
    admin_client, big_log, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        response = admin_client.get(method_url("big.m007"))
    assert response.context["stats"]["count"] == 50
    assert len(response.context["recent_calls"]) == 10


def test_try_it_and_comparison_with_10000_calls_in_the_log_run_in_bounded_queries(
    admin_client, big_log, django_assert_max_num_queries
):
    with django_assert_max_num_queries(16):
        response = admin_client.post(method_url("big.m001"), {"params": "[1]", "id": "1"})
    assert json.loads(response.context["tryit"]["response"])["result"] == 3
    envelope = Envelope.objects.get(source="admin")
    admin_client.post(envelope_url(envelope, "replay"), {"body": envelope.request_body})
    replay = Envelope.objects.get(source="replay")
    with django_assert_max_num_queries(8):
        response = admin_client.get(envelope_url(replay, "comparison"))
    assert response.context["comparison"].summary == "1 call: all same"


def test_hidden_methods_are_shown_to_superusers_only(admin_client, staff, client_for, monkeypatch):
    reg = MethodRegistry("hidden")

    def internal():
        """For the team."""

    reg.register(internal, hidden=True)
    monkeypatch.setattr(admin.site._registry[MethodEntry], "registry", reg)
    names = [m["name"] for g in admin_client.get(BROWSER).context["groups"] for m in g["methods"]]
    assert "internal" in names
    assert admin_client.get(method_url("internal")).status_code == 200
    replayer = client_for(staff("replay_envelope"))
    names = [m["name"] for g in replayer.get(BROWSER).context["groups"] for m in g["methods"]]
    assert "internal" not in names
    assert replayer.get(method_url("internal")).status_code == 404
    assert replayer.post(method_url("internal"), {"params": "", "id": "1"}).status_code == 404


def test_method_page_shows_each_params_json_schema(admin_client):
    params = admin_client.get(method_url("shop.reserve")).context["params"]
    assert json.loads(params[0]["schema"]) == {"type": "string"}
    assert json.loads(params[1]["schema"])["type"] == "integer"


def test_replay_takes_reading_the_log_as_well_as_the_replay_permission(staff, client_for, batch):
    client = client_for(staff("replay_envelope"))
    assert client.get(envelope_url(batch, "replay")).status_code == 403
    assert client.post(envelope_url(batch, "replay"), {"body": batch.request_body}).status_code == 403
    assert not Envelope.objects.filter(source="replay").exists()


def test_recent_calls_are_shown_only_to_those_who_may_read_the_log(staff, client_for):
    log_call("subtract", 1.0)
    client = client_for(staff("replay_envelope"))
    response = client.get(method_url("subtract"))
    assert response.context["recent_calls"] == []
    assert response.context["stats"]["count"] == 1
    assert "Reading the calls takes the permission" in response.content.decode()


def test_method_and_replay_pages_allow_only_get_and_post(admin_client, batch):
    for url in (method_url("subtract"), envelope_url(batch, "replay")):
        response = admin_client.put(url)
        assert response.status_code == 405 and response["Allow"] == "GET, POST"


def test_every_typed_method_has_a_page_and_its_skeleton_passes_validation(admin_client, monkeypatch):
    from tests.typed_methods import registry as typed

    monkeypatch.setattr(admin.site._registry[MethodEntry], "registry", typed)
    index = admin_client.get(BROWSER)
    assert index.status_code == 200
    assert {m["name"] for g in index.context["groups"] for m in g["methods"]} == {m.name for m in typed}
    for method in typed:
        page = admin_client.get(method_url(method.name))
        assert page.status_code == 200, method.name
        if not method.enabled:
            continue
        form = page.context["form"]
        answer = json.loads(
            admin_client.post(method_url(method.name), {"params": form["params"], "id": "1"}).context["tryit"]["response"]
        )
        assert answer.get("error", {}).get("code") != -32602, (method.name, form["params"], answer)


# -- the proxy model's rename (migration 0007) ----------------------------------------


def test_migration_0007_keeps_a_grant_of_the_renamed_view_permission(django_user_model):
    import importlib
    from types import SimpleNamespace

    from django.apps import apps as global_apps
    from django.db import connection

    migration = importlib.import_module("jsonrpc_app.migrations.0007_rename_rpcmethod_methodentry")
    editor = SimpleNamespace(connection=connection)
    perm = Permission.objects.get(content_type__app_label="jsonrpc_app", codename="view_methodentry")
    # The row as it stood before: the codename of the RpcMethod proxy, granted to a user.
    perm.codename = "view_rpcmethod"
    perm.save()
    user = django_user_model.objects.create_user("grantee", password="x", is_staff=True)
    user.user_permissions.add(perm)

    migration.forwards(global_apps, editor)
    perm.refresh_from_db()
    assert perm.codename == "view_methodentry"
    assert django_user_model.objects.get(pk=user.pk).has_perm("jsonrpc_app.view_methodentry")

    migration.backwards(global_apps, editor)
    perm.refresh_from_db()
    assert perm.codename == "view_rpcmethod"
    assert django_user_model.objects.get(pk=user.pk).has_perm("jsonrpc_app.view_rpcmethod")
    migration.forwards(global_apps, editor)
    assert Permission.objects.filter(codename="view_methodentry", content_type__app_label="jsonrpc_app").count() == 1


def test_the_try_it_placeholder_of_an_ipv4_address_is_a_sample_address():
    import ipaddress

    reg = MethodRegistry("ip")

    def ping(host: ipaddress.IPv4Address, hops: list[ipaddress.IPv4Address]) -> bool:
        return True

    reg.register(ping)
    assert params_skeleton(reg.get("ping")) == {"host": "192.0.2.1", "hops": []}
    assert reg.get("ping").binder.bind(params_skeleton(reg.get("ping")))[1]["host"] == ipaddress.IPv4Address("192.0.2.1")
