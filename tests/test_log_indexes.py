"""
The call log's indexes: every row written pays for each index it enters, so
the log keeps few full indexes and makes the rest partial (an OK call over
HTTP enters none of the partial ones). These tests pin the index set, and
check on the database in use (SQLite or PostgreSQL) that each filter and
ordering of the admin's log pages, the method browser and jsonrpc_prune is
answered through an index, not by reading the whole table: a partial index
serves a query only when the query states its condition.
"""

import datetime
import io
import re

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jsonrpc_app.admin.usage import usage_stats
from jsonrpc_app.log import rollup
from jsonrpc_app.models import Call, Envelope, UsageRollup

pytestmark = pytest.mark.django_db

CALL_TABLE = Call._meta.db_table
JSON_COLUMNS = ["request_id", "params", "result", "error_data"]


# -- the index set ---------------------------------------------------------------


def _indexes(model):
    """Return [(columns, partial?)] for the non-unique indexes of ``model``'s table, sorted."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return sorted(
        (tuple(info["columns"]), _is_partial(model._meta.db_table, name))
        for name, info in constraints.items()
        if info["index"] and not info["unique"] and not info["primary_key"]
    )


def _is_partial(table, name):
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [name])
            sql = cursor.fetchone()[0]
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s", [table, name])
            sql = cursor.fetchone()[0]
        else:
            pytest.skip("index introspection for %s" % connection.vendor)
    return " WHERE " in sql.upper()


def test_a_call_row_maintains_three_full_indexes_and_four_partial_ones():
    assert _indexes(Call) == sorted([
        # Full: the list's date order, the method, an envelope's calls.
        (("created_at", "id"), False),
        (("method", "created_at"), False),
        (("envelope_id",), False),
        # Partial: failed calls, error codes, callers with a user, sources other than HTTP.
        (("created_at",), True),
        (("error_code", "created_at"), True),
        (("user_id", "created_at"), True),
        (("source", "created_at"), True),
    ])


def test_an_envelope_row_maintains_one_full_index_besides_its_unique_id():
    assert _indexes(Envelope) == sorted([
        (("created_at", "id"), False),
        (("created_at",), True),  # with errors
        (("source", "created_at"), True),
        (("user_id", "created_at"), True),
        (("replay_of_id",), True),
        (("error_code", "created_at"), True),  # rejected as a whole
    ])


def test_json_columns_carry_no_json_valid_check_on_sqlite_and_stay_jsonb_on_postgresql():
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [CALL_TABLE])
            assert "JSON_VALID" not in cursor.fetchone()[0].upper()
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s",
                [CALL_TABLE],
            )
            types = dict(cursor.fetchall())
            assert [types[c] for c in JSON_COLUMNS] == ["jsonb"] * 4
        elif connection.vendor == "mysql":
            # MySQL's JSON type; MariaDB's JSON is LONGTEXT, with a
            # JSON_VALID check the server adds itself (not Django's db_check).
            cursor.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = DATABASE() AND table_name = %s",
                [CALL_TABLE],
            )
            types = {name.lower(): t.lower() for name, t in cursor.fetchall()}
            assert [types[c] for c in JSON_COLUMNS] == ["longtext" if connection.mysql_is_mariadb else "json"] * 4
        else:
            pytest.skip(connection.vendor)


# -- the queries use them ----------------------------------------------------------


@pytest.fixture
def log(django_user_model):
    """A log shaped like a real one: mostly OK anonymous calls over HTTP."""
    users = [django_user_model.objects.create_user("user%d" % i) for i in range(3)]
    now = timezone.now()
    envelopes = []
    for i in range(300):
        user = users[i % 3] if i % 5 == 0 else None
        envelopes.append(Envelope(
            created_at=now - datetime.timedelta(minutes=i),
            is_batch=True,
            user_id=user.pk if user else None,
            username=user.username if user else "",
            source="admin" if i % 50 == 1 else "replay" if i % 50 == 2 else "http",
            error_code=-32700 if i % 100 == 3 else None,
            call_count=10,
            error_count=1 if i % 20 == 4 else 0,
        ))
    Envelope.objects.bulk_create(envelopes)
    envelopes = list(Envelope.objects.order_by("id"))
    for env in envelopes[2::50]:
        env.replay_of = envelopes[0]
    Envelope.objects.bulk_update(envelopes[2::50], ["replay_of"])
    calls = []
    for n in range(3000):
        env = envelopes[n // 10]
        error = n % 40 == 0
        calls.append(Call(
            envelope=env,
            position=n % 10,
            created_at=env.created_at,
            method="method.%d" % (n % 25),
            request_id=n,
            params=[n, 1],
            result=None if error else n - 1,
            outcome="error" if error else "ok",
            error_code=-32602 if error else None,
            user_id=env.user_id,
            username=env.username,
            source=env.source,
        ))
    Call.objects.bulk_create(calls)
    rollup.rebuild()  # the usage of rows written outside the log
    with connection.cursor() as cursor:
        # Not on MySQL/MariaDB, whose ANALYZE TABLE commits the test's
        # transaction; the plans are not looked at there (see _plan).
        if connection.vendor in ("sqlite", "postgresql"):
            cursor.execute("ANALYZE")
    return envelopes


def _plan(sql, params=None):
    """Return the plan of ``sql`` as text: SQLite's EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN."""
    if connection.vendor not in ("sqlite", "postgresql"):
        # MySQL/MariaDB create no partial index (Django leaves out indexes
        # with a condition there): the plans these tests expect cannot exist.
        pytest.skip("query plans for %s: no partial indexes" % connection.vendor)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(row[-1] for row in cursor.fetchall())
        # The tables here are small enough that PostgreSQL would rather read them
        # whole; forbid that (where it can), so the plan shows whether an index can serve.
        cursor.execute("SET LOCAL enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")


def plan_of(queryset):
    return _plan(*queryset.query.sql_with_params())


def table_scans(plan):
    """The log tables the plan reads whole, row by row, with no index."""
    if connection.vendor == "sqlite":
        # "SCAN jsonrpc_app_call" (or Django's alias for it, "SCAN U0"), not
        # "SCAN ... USING INDEX ..." nor the scan of a subquery's result ("SCAN qualify").
        return re.findall(r"^\s*SCAN (jsonrpc_app_\w+|[A-Z]\d+)(?: AS \w+)?\s*$", plan, re.MULTILINE)
    return re.findall(r"Seq Scan on (jsonrpc_app_\w+)", plan)


def reads_through(plan, index):
    """Whether the plan reads a table through ``index`` (a name, or a column of a Django FK index)."""
    if connection.vendor == "sqlite":
        return re.search(r"^\s*(SEARCH|SCAN) \w+ USING (COVERING )?INDEX %s\b" % re.escape(index), plan, re.M)
    return re.search(r"(Index Scan|Index Only Scan|Bitmap Index Scan)( Backward)? (using|on) %s\b"
                     % re.escape(index), plan)


def fk_index(model, field):
    """The name Django gave the automatic index of ``model.field`` (a foreign key)."""
    column = model._meta.get_field(field).column
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    (name,) = [n for n, c in constraints.items() if c["index"] and c["columns"] == [column]]
    return name


@pytest.fixture
def admin_rf(rf, admin_user):
    def get(params):
        request = rf.get("/", params)
        request.user = admin_user
        return request

    return get


def changelist_page(admin_rf, model, params):
    """The query of the first page of ``model``'s admin list with ``params``, as the admin builds it."""
    model_admin = admin.site._registry[model]
    request = admin_rf(params)
    changelist = model_admin.get_changelist_instance(request)
    # The changelist's paginator takes the first page of this queryset.
    return changelist.get_queryset(request)[: model_admin.list_per_page]


def _params(template, log):
    """Fill USER / ENVELOPE / TODAY placeholders of a filter with values from the log."""
    today = timezone.localtime(log[0].created_at)
    fills = {
        "USER": str(log[0].user_id),
        "ENVELOPE": str(log[5].pk),
        "YEAR": str(today.year),
        "MONTH": str(today.month),
        "DAY": str(today.day),
    }
    return {key: fills.get(value, value) for key, value in template.items()}


CALL_LIST = [
    ("newest first", {}, "jsonrpc_call_created"),
    ("date hierarchy, one day", {"created_at__year": "YEAR", "created_at__month": "MONTH",
                                 "created_at__day": "DAY"}, "jsonrpc_call_created"),
    ("method", {"method": "method.3"}, "jsonrpc_call_method"),
    ("failed calls", {"outcome__exact": "error"}, "jsonrpc_call_failed"),
    ("error code", {"error_code": "-32602"}, "jsonrpc_call_error_code_set"),
    ("user", {"user": "USER"}, "jsonrpc_call_user_set"),
    ("source admin", {"source__exact": "admin"}, "jsonrpc_call_source_rare"),
    ("source replay", {"source__exact": "replay"}, "jsonrpc_call_source_rare"),
    ("source cli", {"source__exact": "cli"}, "jsonrpc_call_source_rare"),
    ("calls of an envelope", {"envelope__id__exact": "ENVELOPE"}, None),  # the FK's own index
]


@pytest.mark.parametrize("params, index", [c[1:] for c in CALL_LIST], ids=[c[0] for c in CALL_LIST])
def test_each_filter_of_the_call_list_reads_through_its_index(params, index, log, admin_rf):
    plan = plan_of(changelist_page(admin_rf, Call, _params(params, log)))
    assert reads_through(plan, index or fk_index(Call, "envelope")), plan
    assert table_scans(plan) == [], plan


ENVELOPE_LIST = [
    ("newest first", {}, "jsonrpc_env_created"),
    ("date hierarchy, one day", {"created_at__year": "YEAR", "created_at__month": "MONTH",
                                 "created_at__day": "DAY"}, "jsonrpc_env_created"),
    ("with errors", {"outcome": "error"}, "jsonrpc_env_failed"),
    ("rejected as a whole", {"outcome": "invalid"}, "jsonrpc_env_rejected"),
    ("error code", {"error_code": "-32700"}, "jsonrpc_env_rejected"),
    ("method", {"method": "method.3"}, "jsonrpc_call_method"),
    ("user", {"user": "USER"}, "jsonrpc_env_user_set"),
    ("source admin", {"source__exact": "admin"}, "jsonrpc_env_source_rare"),
    ("source replay", {"source__exact": "replay"}, "jsonrpc_env_source_rare"),
]


@pytest.mark.parametrize("params, index", [c[1:] for c in ENVELOPE_LIST], ids=[c[0] for c in ENVELOPE_LIST])
def test_each_filter_of_the_envelope_list_reads_through_its_index(params, index, log, admin_rf):
    plan = plan_of(changelist_page(admin_rf, Envelope, _params(params, log)))
    assert reads_through(plan, index), plan
    assert table_scans(plan) == [], plan


@pytest.mark.parametrize("model", [Call, Envelope], ids=["calls", "envelopes"])
def test_the_newest_first_list_reads_its_index_backwards_without_sorting(model, log, admin_rf):
    # The time indexes run in ascending order (cheaper to write: see models.py)
    # and the lists, newest first, read them backwards: no sort of the rows.
    plan = plan_of(changelist_page(admin_rf, model, {}))
    if connection.vendor == "sqlite":
        assert "USE TEMP B-TREE" not in plan, plan
    else:
        assert "Index Scan Backward" in plan and "Sort" not in plan, plan


def changelist_rows(admin_rf, model, params):
    """The rows ``model``'s admin list shows (all pages) with ``params``."""
    request = admin_rf(params)
    return admin.site._registry[model].get_changelist_instance(request).get_queryset(request)


def test_the_source_filter_adds_the_partial_index_condition_only_for_rare_sources(log, admin_rf):
    for model in (Call, Envelope):
        rare = changelist_rows(admin_rf, model, {"source__exact": "admin"})
        http = changelist_rows(admin_rf, model, {"source__exact": "http"})
        assert set(rare) == set(model.objects.filter(source="admin")) != set()
        assert set(http) == set(model.objects.filter(source="http")) != set()
        assert "NOT" in str(rare.query) and "NOT" not in str(http.query)


def test_the_envelope_outcome_filter_keeps_its_meaning(log, admin_rf):
    def ids(params):
        return {e.pk for e in changelist_rows(admin_rf, Envelope, params)}

    failed = {e.pk for e in Envelope.objects.all() if e.error_count or e.error_code is not None}
    assert failed and ids({"outcome": "error"}) == failed
    assert ids({"outcome": "ok"}) == {e.pk for e in log} - failed
    assert ids({"outcome": "invalid"}) == {e.pk for e in log if e.error_code is not None} != set()


def _log_queries(captured):
    """The SELECT, UPDATE and DELETE statements on the log's tables among captured queries."""
    return [
        q["sql"] for q in captured
        if "jsonrpc_app_" in q["sql"] and q["sql"].lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE"))
    ]


def test_an_envelope_page_reads_its_calls_and_replays_through_indexes(log, admin_client):
    original = log[0]  # replayed by log[2], log[52], ...
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse("admin:jsonrpc_app_envelope_change", args=[original.pk]))
    assert response.status_code == 200
    plans = [_plan(sql) for sql in _log_queries(captured)]
    assert plans
    assert [p for p in plans if table_scans(p)] == []
    assert any(reads_through(p, fk_index(Call, "envelope")) for p in plans), plans
    assert any(reads_through(p, "jsonrpc_env_replay_of") for p in plans), plans


ROLLUP_TABLE = UsageRollup._meta.db_table


def reads_rollups_through_an_index(plan):
    """The rollups' unique key (SQLite names it sqlite_autoindex_...) or their method index."""
    return any(
        reads_through(plan, name)
        for name in ("jsonrpc_usage_key", "jsonrpc_usage_method", "sqlite_autoindex_%s_1" % ROLLUP_TABLE)
    )


def test_a_usage_rollup_row_maintains_one_index_beside_its_unique_key():
    assert _indexes(UsageRollup) == [(("method", "width", "start"), False)]


def test_the_method_page_reads_calls_through_the_method_index_and_usage_from_the_rollups(log, admin_client):
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse("admin:jsonrpc_app_methodentry_detail", args=["subtract"]))
    assert response.status_code == 200
    queries = _log_queries(captured)
    call_plans = [_plan(sql) for sql in queries if ROLLUP_TABLE not in sql]
    rollup_plans = [_plan(sql) for sql in queries if ROLLUP_TABLE in sql]
    assert call_plans and rollup_plans
    assert [p for p in call_plans + rollup_plans if table_scans(p)] == []
    assert all(reads_through(p, "jsonrpc_call_method") for p in call_plans), call_plans
    assert all(reads_rollups_through_an_index(p) for p in rollup_plans), rollup_plans


@pytest.mark.parametrize("method", ["method.3", None], ids=["one method", "every method"])
def test_usage_reads_the_rollups_through_their_index_and_never_call(method, log):
    with CaptureQueriesContext(connection) as captured:
        stats = usage_stats(method)
    assert stats["method.3"]["count"] == 120
    assert sum(s["count"] for s in stats.values()) == (120 if method else 3000)
    queries = _log_queries(captured)
    assert queries and all(ROLLUP_TABLE in sql and CALL_TABLE not in sql for sql in queries), queries
    plans = [_plan(sql) for sql in queries]
    assert all(reads_rollups_through_an_index(p) for p in plans), plans
    assert [p for p in plans if table_scans(p)] == []


@pytest.mark.parametrize("options", [
    {"older_than": "2h"},
    {"keep": 100},
    {"older_than": "1h", "keep": 200},
    {"older_than": "2h", "dry_run": True},
], ids=["older than", "keep", "older than and keep", "dry run"])
def test_prune_reads_and_deletes_through_indexes(options, log):
    with CaptureQueriesContext(connection) as captured:
        call_command("jsonrpc_prune", chunk_size=50, stdout=io.StringIO(), **options)
    plans = [_plan(sql) for sql in _log_queries(captured)]
    assert len(plans) >= 2
    assert [p for p in plans if table_scans(p)] == []
    if not options.get("dry_run"):
        assert Envelope.objects.count() < len(log)
        # Replays of what goes lose their link: found through the partial replay_of index.
        assert any(reads_through(p, "jsonrpc_env_replay_of") for p in plans), plans


# -- the changelists do not scan ---------------------------------------------------

LISTS = {Call: "admin:jsonrpc_app_call_changelist", Envelope: "admin:jsonrpc_app_envelope_changelist"}


def _scans_of_whole_tables(captured):
    """The log queries that read a whole table: a plan with a table scan, DISTINCT over Call/Envelope, COUNT."""
    bad = []
    for sql in _log_queries(captured):
        upper = sql.upper()
        on_log = CALL_TABLE in sql or Envelope._meta.db_table in sql
        if on_log and "DISTINCT" in upper and "RECURSIVE" not in upper:
            bad.append(("distinct", sql))
        plan = _plan(sql)
        if table_scans(plan):
            bad.append((plan, sql))
    return bad


@pytest.mark.parametrize("model", [Call, Envelope], ids=["calls", "envelopes"])
def test_a_log_list_with_its_filters_and_date_hierarchy_reads_no_whole_table(model, log, admin_client):
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse(LISTS[model]))
    assert response.status_code == 200
    assert len(captured) <= 15, [q["sql"] for q in captured]
    assert _scans_of_whole_tables(captured) == []
    # The filters still offer what the log holds: methods and codes from the rollups, users by a skip scan.
    specs = {type(f).__name__: f for f in response.context["cl"].filter_specs}
    assert ("method.3", "method.3") in specs["MethodFilter"].lookup_choices
    assert "-32602" in [c for c, _t in specs["ErrorCodeFilter"].lookup_choices]
    assert sorted(n for _pk, n in specs["UserFilter"].lookup_choices) == ["user0", "user1", "user2"]
    # The date hierarchy: the days between the first and the last row (two index lookups).
    hierarchy = response.context["cl"].calendar_hierarchy
    assert hierarchy["show"] and hierarchy["choices"]


def test_the_date_hierarchy_offers_the_calendar_between_the_first_and_the_last_row(log, admin_rf):
    from jsonrpc_app.admin.listing import calendar_hierarchy

    changelist = admin.site._registry[Call].get_changelist_instance(admin_rf({}))
    first = timezone.localtime(Call.objects.order_by("created_at").first().created_at).date()
    last = timezone.localtime(Call.objects.order_by("created_at").last().created_at).date()
    hierarchy = calendar_hierarchy(changelist)
    if first.year != last.year:
        assert [c["title"] for c in hierarchy["choices"]] == [str(y) for y in range(first.year, last.year + 1)]
    elif first.month != last.month:
        assert len(hierarchy["choices"]) == last.month - first.month + 1
    else:
        assert len(hierarchy["choices"]) == (last - first).days + 1



@pytest.mark.parametrize("params", [
    {"created_at__year": "2026", "created_at__month": "13"},
    {"created_at__year": "x"},
    {"created_at__year": "2026", "created_at__month": "2", "created_at__day": "30"},
])
def test_a_bad_date_drill_down_is_no_500(params, log, admin_client):
    assert admin_client.get(reverse(LISTS[Call]), params).status_code in (200, 302)


def test_only_the_time_order_is_offered_and_an_index_serves_it_both_ways(log, admin_rf):
    for model in (Call, Envelope):
        model_admin = admin.site._registry[model]
        assert list(model_admin.get_sortable_by(admin_rf({}))) == ["received"]
        columns = model_admin.get_changelist_instance(admin_rf({})).list_display
        for sign in ("", "-"):  # received ascending, descending
            params = {"o": sign + str(list(columns).index("received"))}
            assert model_admin.get_changelist_instance(admin_rf(params)).get_ordering(admin_rf(params), model.objects.all())
            plan = plan_of(changelist_page(admin_rf, model, params))
            assert table_scans(plan) == [], plan
            if connection.vendor == "sqlite":
                assert "USE TEMP B-TREE" not in plan, plan
            else:
                assert "Sort" not in plan.replace("Incremental Sort", ""), plan


def test_a_large_unfiltered_list_on_postgresql_shows_the_estimated_count(log, admin_client, monkeypatch):
    from jsonrpc_app.admin import listing

    if connection.vendor != "postgresql":
        pytest.skip("the estimate is PostgreSQL's (reltuples, EXPLAIN)")
    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100)  # the fixture's 3,000 calls count as large
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse(LISTS[Call]))
    cl = response.context["cl"]
    assert cl.paginator.estimated and abs(cl.result_count - 3000) < 300
    assert not [q["sql"] for q in captured if "COUNT(" in q["sql"].upper() and CALL_TABLE in q["sql"]]
    assert "about %d" % cl.result_count in response.content.decode()
    # Filtered: the EXPLAIN estimate, large enough here too.
    response = admin_client.get(reverse(LISTS[Call]), {"method": "method.3"})
    assert response.context["cl"].paginator.estimated
    # A small list is counted exactly.
    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100_000)
    response = admin_client.get(reverse(LISTS[Call]), {"method": "method.3"})
    assert not response.context["cl"].paginator.estimated and response.context["cl"].result_count == 120


def test_a_page_past_the_estimated_end_is_a_page_not_an_error(log, admin_client, monkeypatch):
    from jsonrpc_app.admin import listing

    if connection.vendor != "postgresql":
        pytest.skip("the estimate is PostgreSQL's (reltuples, EXPLAIN)")
    monkeypatch.setattr(listing, "ESTIMATE_FROM", 100)
    # Filtered: the planner's estimate; the real last page and one past any end.
    response = admin_client.get(reverse(LISTS[Call]), {"method": "method.3"})
    cl = response.context["cl"]
    assert cl.paginator.estimated
    real_pages = -(-Call.objects.filter(method="method.3").count() // cl.list_per_page)
    for page, rows in ((real_pages, True), (cl.paginator.num_pages + real_pages + 5, False)):
        response = admin_client.get(reverse(LISTS[Call]), {"method": "method.3", "p": page})
        assert response.status_code == 200, page  # not the redirect to ?e=1 of an invalid page
        assert bool(list(response.context["cl"].result_list)) is rows


@pytest.mark.django_db(transaction=True)
def test_migration_0010_indexes_an_existing_logs_rejected_envelopes_and_keeps_its_rows():
    from django.db.migrations.executor import MigrationExecutor

    before = [("jsonrpc_app", "0009_log_no_fk_constraints")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        OldEnvelope = old.get_model("jsonrpc_app", "Envelope")
        OldEnvelope.objects.create(call_count=1, methods="m")
        rejected = OldEnvelope.objects.create(call_count=0, error_code=-32700, error_message="Parse error")
        planned = connection.vendor in ("sqlite", "postgresql")  # MySQL/MariaDB: no partial index
        if planned:
            assert (("error_code", "created_at"), True) not in _indexes(Envelope)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("jsonrpc_app"))
        assert Envelope.objects.count() == 2
        assert list(Envelope.objects.filter(error_code__isnull=False).values_list("pk", flat=True)) == [rejected.pk]
        if planned:
            assert (("error_code", "created_at"), True) in _indexes(Envelope)
            with transaction.atomic():  # SET LOCAL in _plan
                plan = plan_of(Envelope.objects.filter(error_code=-32700).order_by("-created_at"))
            assert reads_through(plan, "jsonrpc_env_rejected"), plan
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        Envelope.objects.all().delete()
