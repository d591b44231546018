"""
The log lists' pages (jsonrpc_app.admin.listing.EstimatedCountPaginator): a
page nearer the end than the start is read from the end, so that the last
page of a long log is a small OFFSET, and it shows the same rows, in the same
newest-first order, as reading from the start would; with an estimated count
(PostgreSQL, a large list) the last page is the oldest rows.
"""

import datetime
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jsonrpc_app.models import Call, Envelope

pytestmark = pytest.mark.django_db

LISTS = {Call: "admin:jsonrpc_app_call_changelist", Envelope: "admin:jsonrpc_app_envelope_changelist"}
PER_PAGE = 50


@pytest.fixture
def rows():
    """1,234 envelopes of one call each, one a minute; some share a time (the id then orders them)."""
    now = timezone.now().replace(microsecond=0)
    Envelope.objects.bulk_create(
        [Envelope(created_at=now - datetime.timedelta(minutes=i // 2), methods="m%d" % (i % 7), call_count=1)
         for i in range(1234)],
        batch_size=500,
    )
    envelopes = list(Envelope.objects.order_by("id"))
    Call.objects.bulk_create(
        [Call(envelope=e, position=0, created_at=e.created_at, method=e.methods, request_id=e.pk, params=[e.pk])
         for e in envelopes],
        batch_size=500,
    )
    return envelopes


def _page_ids(admin_client, model, params):
    response = admin_client.get(reverse(LISTS[model]), params)
    assert response.status_code == 200, params
    return [obj.pk for obj in response.context["cl"].result_list], response


def _offsets(captured, model):
    """The OFFSETs of the queries that read rows of ``model``'s table."""
    table = model._meta.db_table
    return [int(m) for q in captured if table in q["sql"] for m in re.findall(r"OFFSET (\d+)", q["sql"])]


@pytest.mark.parametrize("model", [Call, Envelope], ids=["calls", "envelopes"])
def test_every_page_shows_the_rows_of_the_newest_first_list_and_the_last_page_reads_from_the_end(
    model, rows, admin_client
):
    newest_first = list(model.objects.order_by("-created_at", "-id").values_list("pk", flat=True))
    pages = -(-len(newest_first) // PER_PAGE)
    for page in (1, 2, pages // 2, pages // 2 + 1, pages - 1, pages):
        with CaptureQueriesContext(connection) as captured:
            ids, response = _page_ids(admin_client, model, {"p": page})
        assert ids == newest_first[(page - 1) * PER_PAGE : page * PER_PAGE], page
        if page > pages // 2 + 1:
            # Read from the end: an OFFSET smaller than the rows before the page.
            assert max(_offsets(captured, model) or [0]) < (page - 1) * PER_PAGE, captured.captured_queries
    last, _ = _page_ids(admin_client, model, {"p": pages})
    assert last[-1] == newest_first[-1] and len(last) == len(newest_first) - (pages - 1) * PER_PAGE
    # The list ascending (?o=1: "received at", after the action checkbox): the last page is the newest rows.
    oldest_first = newest_first[::-1]
    ids, _ = _page_ids(admin_client, model, {"p": pages, "o": "1"})
    assert ids == oldest_first[(pages - 1) * PER_PAGE :]


def test_a_filtered_list_pages_from_the_end_too(rows, admin_client):
    expected = list(Call.objects.filter(method="m3").order_by("-created_at", "-id").values_list("pk", flat=True))
    pages = -(-len(expected) // PER_PAGE)
    assert pages >= 3
    for page in range(1, pages + 1):
        ids, _ = _page_ids(admin_client, Call, {"method": "m3", "p": page})
        assert ids == expected[(page - 1) * PER_PAGE : page * PER_PAGE], page


@pytest.mark.parametrize("model", [Call, Envelope], ids=["calls", "envelopes"])
def test_with_an_estimated_count_the_last_page_is_the_oldest_rows_and_a_page_past_it_is_empty(
    model, rows, admin_client, monkeypatch
):
    from jsonrpc_app.admin import listing

    if connection.vendor != "postgresql":
        pytest.skip("the estimate is PostgreSQL's (reltuples, EXPLAIN)")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE %s, %s" % (Envelope._meta.db_table, Call._meta.db_table))
    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100)
    newest_first = list(model.objects.order_by("-created_at", "-id").values_list("pk", flat=True))
    for params in ({}, {"method": "m3"}):
        expected = newest_first if not params else list(
            model.objects.filter(**({"method": "m3"} if model is Call else {"calls__method": "m3"}))
            .order_by("-created_at", "-id").values_list("pk", flat=True)
        )
        ids, response = _page_ids(admin_client, model, params)
        paginator = response.context["cl"].paginator
        assert paginator.estimated, params
        assert ids == expected[:PER_PAGE]
        with CaptureQueriesContext(connection) as captured:
            last, _ = _page_ids(admin_client, model, dict(params, p=paginator.num_pages))
        assert last == expected[-PER_PAGE:], params
        assert max(_offsets(captured, model) or [0]) == 0, captured.captured_queries
        past, _ = _page_ids(admin_client, model, dict(params, p=paginator.num_pages + 3))
        assert past == []


# -- a search on a large PostgreSQL table: its page and one row more, not a count -----


@pytest.mark.parametrize("model", [Call, Envelope], ids=["calls", "envelopes"])
def test_a_search_finds_the_same_rows_page_by_page_reading_only_its_page_and_one_row_more(
    model, rows, admin_client, monkeypatch
):
    from jsonrpc_app.admin import listing

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE %s, %s" % (Envelope._meta.db_table, Call._meta.db_table))
    # The fixture's 1,234 rows count as large (PostgreSQL's estimate; elsewhere the highest id).
    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100)
    field = "method" if model is Call else "methods"
    expected = list(model.objects.filter(**{field: "m3"}).order_by("-created_at", "-id").values_list("pk", flat=True))
    pages = -(-len(expected) // PER_PAGE)
    assert pages >= 3
    for page in range(1, pages + 1):
        with CaptureQueriesContext(connection) as captured:
            ids, response = _page_ids(admin_client, model, {"q": "m3", "p": page})
        assert ids == expected[(page - 1) * PER_PAGE : page * PER_PAGE], page
        cl = response.context["cl"]
        content = response.content.decode()
        counts = [q["sql"] for q in captured if "COUNT(" in q["sql"].upper() and model._meta.db_table in q["sql"]]
        # One read of the table that searches: the page and one row more; no COUNT(*);
        # the date hierarchy's bounds are the whole log's.
        reads = [q["sql"] for q in captured if "LIKE" in q["sql"]]
        assert not counts and len(reads) == 1, reads
        assert re.search(r"LIMIT %d( OFFSET %d)?$" % (PER_PAGE + 1, (page - 1) * PER_PAGE), reads[0]), reads
        if page < pages:
            assert cl.paginator.at_least == page * PER_PAGE
            assert "more than %d" % (page * PER_PAGE) in content
            assert "?p=%d&amp;q=m3" % (page + 1) in content or "?q=m3&amp;p=%d" % (page + 1) in content, content
            assert not cl.can_show_all and 'class="showall"' not in content
        else:  # the last page: the list ends here, so the count is exact
            assert cl.paginator.at_least is None and cl.result_count == len(expected)
    # ?all= on a search counted up to a page shows that page, not every match.
    ids, _ = _page_ids(admin_client, model, {"q": "m3", "all": ""})
    assert ids == expected[:PER_PAGE]


def test_a_search_of_a_small_table_is_counted(rows, admin_client):
    expected = Call.objects.filter(method="m3").count()
    ids, response = _page_ids(admin_client, Call, {"q": "m3"})
    cl = response.context["cl"]
    assert cl.result_count == expected and not cl.paginator.at_least and len(ids) == PER_PAGE


def test_a_search_that_matches_nothing_says_so(rows, admin_client, monkeypatch):
    from jsonrpc_app.admin import listing

    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100)
    with CaptureQueriesContext(connection) as captured:
        ids, response = _page_ids(admin_client, Call, {"q": "no-such-text"})
    assert ids == [] and response.context["cl"].result_count == 0
    assert "0 calls" in response.content.decode()
    # Read once: the page and one row more.
    searches = [q["sql"] for q in captured if "LIKE" in q["sql"]]
    assert len(searches) == 1, searches
    assert not response.context["cl"].paginator.at_least


def test_a_small_list_whose_count_the_planner_costs_high_shows_the_estimate(rows, admin_client, monkeypatch):
    from jsonrpc_app.admin import listing

    if connection.vendor != "postgresql":
        pytest.skip("the planner's cost is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE %s, %s" % (Envelope._meta.db_table, Call._meta.db_table))
    params = {"method": "m3"}  # the envelopes holding m3's calls: a join to count
    exact = Envelope.objects.filter(calls__method="m3").distinct().count()
    cost = listing.count_cost(Envelope.objects.filter(pk__in=Call.objects.filter(method="m3").values("envelope_id")))
    assert cost > 0
    monkeypatch.setattr(listing, "COST_CHECK_FROM", 10)  # the fixture's ~180 envelopes are worth the question
    monkeypatch.setattr(listing, "COUNT_COST_FROM", cost * 2)
    response = admin_client.get(reverse(LISTS[Envelope]), params)
    assert not response.context["cl"].paginator.estimated and response.context["cl"].result_count == exact
    monkeypatch.setattr(listing, "COUNT_COST_FROM", cost / 2)
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse(LISTS[Envelope]), params)
    assert response.context["cl"].paginator.estimated
    assert "about %d" % response.context["cl"].result_count in response.content.decode()
    assert not [q for q in captured if q["sql"].startswith("SELECT COUNT(")], captured.captured_queries
    # The rows shown are the same either way.
    ids, _ = _page_ids(admin_client, Envelope, params)
    assert ids == list(Envelope.objects.filter(calls__method="m3").order_by("-created_at", "-id")
                       .values_list("pk", flat=True)[:PER_PAGE])
