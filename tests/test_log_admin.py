"""
The call log in the Django admin: read-only changelists and pages of
envelopes and calls, their filters and search, links both ways, and a fixed
number of queries with 10,000 logged calls.
"""

import datetime
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from jsonrpc_app.models import Call, Envelope

pytestmark = pytest.mark.django_db

ENVELOPES = reverse("admin:jsonrpc_app_envelope_changelist")
CALLS = reverse("admin:jsonrpc_app_call_changelist")

# Every page below, whatever the number of rows, within this many queries
# (session, user, 3 filter choices, count, page of rows, 2 for the date
# hierarchy; a change page: the row, its inline calls, its replays).
MAX_QUERIES = 10


def _change(obj):
    return reverse("admin:jsonrpc_app_%s_change" % obj._meta.model_name, args=[obj.pk])


@pytest.fixture
def logged(call, django_user_model):
    """A few real envelopes logged through the endpoint."""
    call([
        {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": "1"},
        {"jsonrpc": "2.0", "method": "testapp.boom", "id": 2},
        {"jsonrpc": "2.0", "method": "echo", "params": {"value": {"needle": "haystack-77"}}, "id": "req-abc"},
    ])
    call({"jsonrpc": "2.0", "method": "subtract", "params": [1, 1], "id": 9})
    return Envelope.objects.order_by("created_at", "id")


@pytest.fixture
def big_log(django_user_model):
    """10,000 calls in 1,000 envelopes (and one of 100 calls), over 40 days, 3 users."""
    users = [django_user_model.objects.create_user("user%d" % i) for i in range(3)]
    now = timezone.now()
    envelopes = []
    for i in range(1000):
        user = users[i % 3] if i % 4 else None
        envelopes.append(Envelope(
            created_at=now - datetime.timedelta(hours=i),
            is_batch=True,
            request_body='[{"jsonrpc":"2.0","method":"m%d","id":%d}]' % (i % 7, i),
            response_body="[]",
            user_id=user.pk if user else None,
            username=user.username if user else "",
            source=["http", "admin", "replay", "cli"][i % 4],
            error_code=-32700 if i % 50 == 0 else None,
            call_count=10,
            error_count=i % 3,
        ))
    Envelope.objects.bulk_create(envelopes, batch_size=200)
    envelopes = list(Envelope.objects.order_by("id"))
    calls = []
    for n in range(10000):
        env = envelopes[n // 10]
        error = n % 3 == 0
        calls.append(Call(
            envelope=env,
            position=n % 10,
            created_at=env.created_at,
            method="method.%d" % (n % 25),
            request_id=n if n % 2 else str(n),
            params={"n": n, "text": "value %d" % n},
            result=None if error else {"ok": n},
            outcome="error" if error else "ok",
            error_code=[-32601, -32602, -32603, -32001][n % 4] if error else None,
            error_message="Failed" if error else "",
            duration_ms=n / 100,
            user_id=env.user_id,
            username=env.username,
            source=env.source,
        ))
    Call.objects.bulk_create(calls, batch_size=500)
    big = Envelope.objects.create(is_batch=True, call_count=100, request_body="[]")
    Call.objects.bulk_create(
        [Call(envelope=big, position=i, method="bulk", request_id=i, params=[i]) for i in range(100)]
    )
    return {"users": users, "big": big, "first": envelopes[0]}


# -- rendering with 10,000 calls ----------------------------------------------------


def _filters(big_log):
    user = big_log["users"][1]
    today = timezone.now()
    return [
        "",
        "?method=method.3",
        "?error_code=-32601",
        "?source__exact=admin",
        "?user=%d" % user.pk,
        "?created_at__year=%d&created_at__month=%d" % (today.year, today.month),
        "?q=method.7",
        "?p=3",
        "?o=-3",
    ]


@pytest.mark.slow
def test_log_pages_render_with_10000_calls_in_a_fixed_number_of_queries(
    admin_client, big_log, django_assert_max_num_queries
):
    big = big_log["big"]
    call = Call.objects.filter(envelope=big_log["first"]).first()
    pages = (
        [CALLS + q for q in _filters(big_log)]
        + [CALLS + "?outcome__exact=error", CALLS + "?is_notification__exact=1"]
        + [CALLS + "?envelope__id__exact=%d" % big.pk]
        + [ENVELOPES + q for q in _filters(big_log)]
        + [ENVELOPES + q for q in ["?outcome=error", "?outcome=invalid", "?is_batch__exact=1"]]
        + [_change(big_log["first"]), _change(big), _change(call)]
    )
    for url in pages:
        with django_assert_max_num_queries(MAX_QUERIES):
            response = admin_client.get(url)
        assert response.status_code == 200, url
    # The envelope of 100 calls lists every one of them inline, in one query.
    content = admin_client.get(_change(big)).content.decode()
    assert all(_change(c) in content for c in big.calls.all())

    # The filters narrow the lists to what they say.
    response = admin_client.get(CALLS + "?method=method.3&error_code=-32601")
    assert response.context["cl"].result_count == Call.objects.filter(method="method.3", error_code=-32601).count() > 0
    response = admin_client.get(CALLS + "?user=%d" % big_log["users"][2].pk)
    assert response.context["cl"].result_count == Call.objects.filter(user=big_log["users"][2]).count() > 0
    response = admin_client.get(ENVELOPES + "?method=method.4")
    assert response.context["cl"].result_count == (
        Envelope.objects.filter(calls__method="method.4").distinct().count()
    )


# -- what the pages show ------------------------------------------------------------


def test_call_list_shows_the_columns(admin_client, logged):
    content = admin_client.get(CALLS).content.decode()
    for column in ["received at", "method", "outcome", "error code", "request id", "duration (ms)", "user", "source", "envelope"]:
        assert ">%s<" % column in content.replace('">', ">").lower() or column in content.lower()
    assert "testapp.boom" in content and "-32603" in content
    # ids keep their JSON type
    assert "&quot;1&quot;" in content and ">9<" in content


@pytest.mark.parametrize(
    "query, expected",
    [("subtract", {"subtract"}), ("req-abc", {"echo"}), ("haystack-77", {"echo"}), ("boom", {"testapp.boom"})],
)
def test_call_search_finds_method_request_id_and_params_text(admin_client, logged, query, expected):
    response = admin_client.get(CALLS, {"q": query})
    assert {c.method for c in response.context["cl"].result_list} == expected


def test_envelope_page_shows_its_calls_inline_and_pretty_json(admin_client, logged):
    batch = logged.first()
    content = admin_client.get(_change(batch)).content.decode()
    for c in batch.calls.all():
        assert _change(c) in content  # envelope -> call
    assert "&quot;jsonrpc&quot;: &quot;2.0&quot;" in content  # indented JSON, not the raw body
    assert '<pre class="jsonrpc-json">' in content
    assert "%s?envelope__id__exact=%d" % (CALLS, batch.pk) in content


def test_call_page_links_to_its_envelope_and_shows_the_traceback(admin_client, logged):
    call = Call.objects.get(method="testapp.boom")
    content = admin_client.get(_change(call)).content.decode()
    assert _change(call.envelope) in content  # call -> envelope
    assert "RuntimeError: secret internals" in content
    echo = Call.objects.get(method="echo")
    assert '&quot;needle&quot;: &quot;haystack-77&quot;' in admin_client.get(_change(echo)).content.decode()


# -- read-only ----------------------------------------------------------------------


def test_the_log_cannot_be_added_or_changed_in_the_admin(admin_client, logged):
    envelope = logged.first()
    call = envelope.calls.first()
    for model in ("envelope", "call"):
        assert admin_client.get(reverse("admin:jsonrpc_app_%s_add" % model)).status_code == 403
    for obj in (envelope, call):
        response = admin_client.post(_change(obj), {"method": "changed", "endpoint": "/x/"})
        assert response.status_code == 403
    call.refresh_from_db()
    assert call.method != "changed"
    content = admin_client.get(_change(envelope)).content.decode()
    assert 'name="_save"' not in content


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_user("staff", password="pw-long-enough-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_envelope", "view_call"]))
    client.force_login(user)
    return user


def test_staff_without_delete_permission_can_read_but_not_delete(client, staff, logged):
    envelope = logged.first()
    assert client.get(ENVELOPES).status_code == 200
    assert client.get(_change(envelope)).status_code == 200
    assert client.post(reverse("admin:jsonrpc_app_envelope_delete", args=[envelope.pk]), {"post": "yes"}).status_code == 403
    response = client.post(ENVELOPES, {"action": "delete_selected", "_selected_action": [envelope.pk], "post": "yes"})
    assert Envelope.objects.filter(pk=envelope.pk).exists()
    assert response.status_code in (200, 302)


def test_delete_permission_deletes_an_envelope_with_its_calls(client, staff, logged):
    # Deleting an envelope deletes its calls: the admin asks for both permissions.
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["delete_envelope", "delete_call"]))
    envelope = logged.first()
    response = client.post(reverse("admin:jsonrpc_app_envelope_delete", args=[envelope.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Envelope.objects.filter(pk=envelope.pk).exists()
    assert not Call.objects.filter(envelope_id=envelope.pk).exists()


def test_invalid_filter_values_match_nothing_instead_of_failing(admin_client, logged):
    for query in ["?error_code=xyz", "?error_code=99999999999999999999"]:
        response = admin_client.get(CALLS + query)
        assert response.status_code == 200
        assert response.context["cl"].result_count == 0


def test_envelope_filter_for_whole_body_errors(admin_client, rpc, logged):
    rpc(b"{not json")
    response = admin_client.get(ENVELOPES, {"outcome": "invalid"})
    (row,) = response.context["cl"].result_list
    assert row.error_code == -32700
    response = admin_client.get(ENVELOPES, {"outcome": "ok"})
    assert all(e.error_count == 0 and e.error_code is None for e in response.context["cl"].result_list)
    assert json.loads(response.context["cl"].result_list[0].request_body)["id"] == 9


def test_envelope_list_shows_the_methods_called_and_finds_envelopes_by_method(admin_client, logged):
    assert "subtract, testapp.boom, echo" in admin_client.get(ENVELOPES).content.decode()
    response = admin_client.get(ENVELOPES, {"q": "testapp.boom"})
    assert [e.methods for e in response.context["cl"].result_list] == ["subtract, testapp.boom, echo"]
