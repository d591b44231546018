"""
The usage dashboard (admin:jsonrpc_usage), through Django's test client:
its place on the admin index and on each method's page, what it shows for
each range, method and source, its empty state, bad parameters answered on
the page (never a 500), who may see it, and that it reads the rollups only,
in a few queries. tests/browser/test_usage_dashboard.py looks at it in Chromium.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jsonrpc_app.models import Call, UsageRollup

from .helpers import seed_usage

pytestmark = pytest.mark.django_db

USAGE = "/admin/jsonrpc_app/usagerollup/"


def test_the_dashboard_is_named_jsonrpc_usage_and_listed_on_the_json_rpc_app_index(admin_client):
    assert reverse("admin:jsonrpc_usage") == USAGE
    app_page = admin_client.get("/admin/jsonrpc_app/").content.decode()
    assert 'href="%s"' % USAGE in app_page and "Usage" in app_page


def test_each_method_page_links_to_its_usage(admin_client):
    page = admin_client.get(reverse("admin:jsonrpc_app_methodentry_detail", args=["subtract"])).content.decode()
    assert 'href="%s?method=subtract"' % USAGE in page


def test_with_no_calls_the_dashboard_says_so_and_how_to_roll_up_an_older_log(admin_client):
    response = admin_client.get(USAGE)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="usage-empty"' in page and "No call was logged in the last day." in page
    assert "jsonrpc_rollup --rebuild" in page
    assert 'class="jsonrpc-chart"' not in page


def test_calls_over_http_show_on_the_dashboard_for_each_range(admin_client, client):
    body = [
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1},
        {"jsonrpc": "2.0", "method": "subtract", "params": ["x"], "id": 2},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [1]},
    ]
    client.generic("POST", "/rpc/", json.dumps(body), content_type="application/json")
    for range_name in ("hour", "day", "30d"):
        response = admin_client.get(USAGE, {"range": range_name})
        assert response.status_code == 200
        figures = response.context["figures"]
        assert figures["total"]["calls"] == 3 and figures["total"]["errors"] == 1
        assert len(figures["points"]) in {"hour": (60,), "day": (24,), "30d": (120, 121)}[range_name]
        assert sum(p["calls"] for p in figures["points"]) == 3
        assert {m["method"]: m["calls"] for m in figures["methods"]} == {"subtract": 2, "notify_hello": 1}
        page = response.content.decode()
        assert page.count('<svg class="jsonrpc-chart"') == 3 and 'id="usage-total-calls">3<' in page


def test_the_30_day_range_has_a_point_per_six_hours():
    from jsonrpc_app.admin.usage import series

    points = series("30d")["points"]
    assert 120 <= len(points) <= 121
    assert all((b["start"] - a["start"]).total_seconds() == 6 * 3600 for a, b in zip(points, points[1:]))


def test_one_method_and_one_source_narrow_the_figures(admin_client, client, settings):
    body = {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1}
    client.generic("POST", "/rpc/", json.dumps(body), content_type="application/json")
    admin_client.post(reverse("admin:jsonrpc_app_methodentry_detail", args=["sum"]), {"params": "[1, 2]", "id": "1"})
    response = admin_client.get(USAGE, {"method": "subtract"})
    assert response.context["figures"]["total"]["calls"] == 1
    assert "Usage of subtract" in response.content.decode()
    response = admin_client.get(USAGE, {"source": "admin"})
    assert [m["method"] for m in response.context["figures"]["methods"]] == ["sum"]
    response = admin_client.get(USAGE, {"method": "nothing.here"})
    assert "No call of nothing.here was logged" in response.content.decode()


@pytest.mark.parametrize("params, message", [
    ({"range": "week"}, "Unknown range &#x27;week&#x27;"),
    ({"source": "carrier-pigeon"}, "Unknown source &#x27;carrier-pigeon&#x27;"),
    ({"method": "m" * 300}, "at most 255 characters"),
])
def test_bad_parameters_are_told_on_the_page_not_a_500(admin_client, params, message):
    response = admin_client.get(USAGE, params)
    assert response.status_code == 200
    assert message in response.content.decode()


def test_only_staff_who_may_read_the_log_or_the_methods_see_it(client, django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("s", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(USAGE).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_methodentry"))
    assert client.get(USAGE).status_code == 200
    client.logout()
    assert client.get(USAGE).status_code == 302  # to the login page


def test_a_large_log_renders_from_the_rollups_alone_in_few_queries(admin_client):
    seed_usage(days=30, per_hour=6)
    assert Call.objects.count() > 4000 and UsageRollup.objects.exists()
    for params in ({"range": "hour"}, {"range": "day"}, {"range": "30d"}, {"range": "30d", "method": "sum"}):
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(USAGE, params)
        assert response.status_code == 200 and response.context["figures"]["total"]["calls"] > 0
        log_queries = [q["sql"] for q in captured if "jsonrpc_app_" in q["sql"]]
        assert not [q for q in log_queries if Call._meta.db_table in q], log_queries
        assert len(captured) <= 15, [q["sql"] for q in captured]


def test_the_method_browser_and_a_method_page_never_read_call_for_usage(admin_client):
    seed_usage(days=1, per_hour=5)
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse("admin:jsonrpc_app_methodentry_changelist"))
    assert response.status_code == 200
    assert not [q["sql"] for q in captured if Call._meta.db_table in q["sql"]]
    rows = {m["name"]: m["stats"] for g in response.context["groups"] for m in g["methods"]}
    assert rows["subtract"]["count"] == Call.objects.filter(method="subtract").count() > 0
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse("admin:jsonrpc_app_methodentry_detail", args=["subtract"]))
    # Only the recent calls are read from Call, the usage from the rollups.
    call_queries = [q["sql"] for q in captured if Call._meta.db_table in q["sql"]]
    assert len(call_queries) == 1 and "LIMIT" in call_queries[0].upper()
    assert response.context["stats"]["count"] == Call.objects.filter(method="subtract").count()
