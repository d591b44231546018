"""jsonrpc_prune: what it deletes, in chunks, and what it prints."""

import datetime
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jsonrpc_app.management.commands.jsonrpc_prune import parse_age
from jsonrpc_app.models import Call, Envelope

pytestmark = pytest.mark.django_db


@pytest.fixture
def log():
    """Envelopes received 0, 10, 20, ... 90 days ago, each with 3 calls."""
    now = timezone.now()
    envelopes = Envelope.objects.bulk_create(
        [Envelope(created_at=now - datetime.timedelta(days=10 * i), call_count=3) for i in range(10)]
    )
    envelopes = list(Envelope.objects.order_by("-created_at"))
    Call.objects.bulk_create(
        [Call(envelope=e, position=p, method="m", created_at=e.created_at) for e in envelopes for p in range(3)]
    )
    return envelopes


def prune(*args):
    out = StringIO()
    call_command("jsonrpc_prune", *args, stdout=out)
    return out.getvalue()


def ages(now=None):
    now = timezone.now()
    return sorted(round((now - e.created_at).total_seconds() / 86400) for e in Envelope.objects.all())


def test_older_than_deletes_old_envelopes_with_their_calls_and_says_so(log):
    out = prune("--older-than", "30d")
    assert ages() == [0, 10, 20]
    assert Call.objects.count() == 9
    assert "Deleted 7 envelopes and 21 calls" in out


def test_keep_keeps_the_newest_n(log):
    out = prune("--keep", "4")
    assert ages() == [0, 10, 20, 30]
    assert Call.objects.count() == 12
    assert "Deleted 6 envelopes and 18 calls" in out


def test_older_than_and_keep_together_delete_only_what_both_allow(log):
    prune("--older-than", "15d", "--keep", "5")
    assert ages() == [0, 10, 20, 30, 40]
    prune("--older-than", "35d", "--keep", "2")
    assert ages() == [0, 10, 20, 30]


def test_keep_more_than_there_are_deletes_nothing(log):
    assert "Deleted 0 envelopes and 0 calls" in prune("--keep", "50")
    assert Envelope.objects.count() == 10


def test_dry_run_prints_what_it_would_delete_and_deletes_nothing(log):
    out = prune("--older-than", "30d", "--dry-run")
    assert "Would delete 7 envelopes and 21 calls" in out
    assert Envelope.objects.count() == 10 and Call.objects.count() == 30


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL deletes by ranges (below)")
def test_deletes_in_chunks_each_no_bigger_than_the_chunk_size(log):
    with CaptureQueriesContext(connection) as queries:
        out = prune("--older-than", "30d", "--chunk-size", "2")
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    q = connection.ops.quote_name  # "name" on SQLite and PostgreSQL, `name` on MySQL
    envelope_deletes = [sql for sql in deletes if "FROM %s" % q("jsonrpc_app_envelope") in sql]
    call_deletes = [sql for sql in deletes
                    if "FROM {0} WHERE {0}.{1} IN".format(q("jsonrpc_app_call"), q("id")) in sql]
    assert len(envelope_deletes) == 4  # 7 envelopes, 2 at a time
    assert len(call_deletes) == 11  # 21 calls, 2 at a time
    for sql in envelope_deletes + call_deletes:
        (in_list,) = re.findall(r"IN \(([^)]*)\)", sql)
        assert len(in_list.split(",")) <= 2, sql
    assert ages() == [0, 10, 20]
    assert "Deleted 7 envelopes and 21 calls" in out


def _statements(queries, verb, table):
    q = connection.ops.quote_name
    head = "%s FROM %s" % (verb, q(table)) if verb == "DELETE" else "%s %s" % (verb, q(table))
    return [x for x in queries.captured_queries if x["sql"].startswith(head)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the range delete is PostgreSQL's")
def test_postgresql_deletes_ranges_of_envelopes_with_their_calls_in_one_transaction_each(log):
    with CaptureQueriesContext(connection) as queries:
        out = prune("--older-than", "30d", "--chunk-size", "2")
    envelope_deletes = _statements(queries, "DELETE", "jsonrpc_app_envelope")
    call_deletes = _statements(queries, "DELETE", "jsonrpc_app_call")
    # 7 envelopes, 2 a range: 4 ranges, each one DELETE of calls and one of envelopes.
    assert len(envelope_deletes) == len(call_deletes) == 4
    # The fixture's ids run against time (the oldest has the highest id), but each
    # range of 2 holds only doomed ids: deleted as id ranges.
    assert all(" BETWEEN " in x["sql"] for x in envelope_deletes + call_deletes)
    sql = [x["sql"] for x in queries.captured_queries]
    # Each range: its calls, the replays found in its id range, then its envelopes, in a
    # transaction that does not wait for the WAL to reach the disk.
    start = 0
    for delete in envelope_deletes:
        at = sql.index(delete["sql"], start)
        in_range = sql[start:at]
        assert sum(x.startswith('DELETE FROM "jsonrpc_app_call"') for x in in_range) == 1
        assert in_range.index("SET LOCAL synchronous_commit = off") < [
            i for i, x in enumerate(in_range) if x.startswith('DELETE FROM "jsonrpc_app_call"')][0]
        start = at + 1
    assert ages() == [0, 10, 20]
    assert Call.objects.count() == 9
    assert "Deleted 7 envelopes and 21 calls (received before" in out and "in 4 chunks" in out


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the range delete is PostgreSQL's")
def test_postgresql_ranges_start_after_the_last_one_not_at_the_oldest_left(log):
    with CaptureQueriesContext(connection) as queries:
        prune("--older-than", "30d", "--chunk-size", "3")
    q = connection.ops.quote_name
    selects = [x["sql"] for x in queries.captured_queries
               if x["sql"].startswith("SELECT") and "FROM %s" % q("jsonrpc_app_envelope") in x["sql"]
               and "LIMIT 3" in x["sql"]]
    assert len(selects) == 4  # 7 envelopes: 3, 3, 1, then none
    assert "%s >" % q("created_at") not in selects[0].replace(q("jsonrpc_app_envelope") + ".", "")
    for sql in selects[1:]:
        assert "%s >" % q("created_at") in sql.replace(q("jsonrpc_app_envelope") + ".", ""), sql


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the range delete is PostgreSQL's")
def test_postgresql_deletes_by_ids_where_a_range_of_ids_holds_an_envelope_to_keep():
    now = timezone.now()
    # Ids alternate old, new, old, new...: the range of two old ids holds a new one.
    Envelope.objects.bulk_create([
        Envelope(created_at=now - datetime.timedelta(days=40 if i % 2 == 0 else 1), call_count=1) for i in range(8)
    ])
    Call.objects.bulk_create([Call(envelope=e, method="m", created_at=e.created_at) for e in Envelope.objects.all()])
    new = sorted(Envelope.objects.filter(created_at__gte=now - datetime.timedelta(days=2)).values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        out = prune("--older-than", "30d", "--chunk-size", "2")
    assert sorted(Envelope.objects.values_list("pk", flat=True)) == new
    assert sorted(Call.objects.values_list("envelope_id", flat=True)) == new
    deletes = _statements(queries, "DELETE", "jsonrpc_app_envelope")
    assert deletes and all("= ANY(" in x["sql"] for x in deletes)
    assert "Deleted 4 envelopes and 4 calls" in out


def test_envelopes_received_at_the_same_instant_are_all_deleted_across_chunk_boundaries():
    at = timezone.now() - datetime.timedelta(days=40)
    Envelope.objects.bulk_create([Envelope(created_at=at, call_count=1) for _ in range(7)])
    Call.objects.bulk_create([Call(envelope=e, method="m", created_at=at) for e in Envelope.objects.all()])
    kept = Envelope.objects.create(call_count=0)
    out = prune("--older-than", "30d", "--chunk-size", "2")
    assert list(Envelope.objects.all()) == [kept]
    assert Call.objects.count() == 0
    assert "Deleted 7 envelopes and 7 calls" in out


def test_keep_across_chunk_boundaries_keeps_exactly_the_newest_n():
    at = timezone.now() - datetime.timedelta(days=1)
    Envelope.objects.bulk_create([Envelope(created_at=at, call_count=0) for _ in range(9)])
    newest = list(Envelope.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)[:4])
    out = prune("--keep", "4", "--chunk-size", "2")
    assert sorted(Envelope.objects.values_list("pk", flat=True)) == sorted(newest)
    assert "Deleted 5 envelopes" in out


def test_a_kept_replay_loses_the_link_to_a_deleted_original(log):
    original = log[-1]
    replay = Envelope.objects.create(replay_of=original, source="replay")
    prune("--older-than", "30d")
    replay.refresh_from_db()
    assert replay.replay_of_id is None


def test_a_replay_deleted_with_its_original_in_the_same_chunk_goes_too(log):
    original = log[-1]  # 90 days old
    Envelope.objects.create(replay_of=original, source="replay", created_at=original.created_at)
    out = prune("--older-than", "30d", "--chunk-size", "100")
    assert ages() == [0, 10, 20]
    assert "Deleted 8 envelopes" in out


@pytest.mark.parametrize("args", [[], ["--older-than", "30"], ["--older-than", "soon"], ["--keep", "-1"]])
def test_bad_arguments_are_refused(log, args):
    with pytest.raises(CommandError):
        prune(*args)
    assert Envelope.objects.count() == 10


def test_ages_in_every_unit():
    assert parse_age("45s") == datetime.timedelta(seconds=45)
    assert parse_age("90m") == datetime.timedelta(minutes=90)
    assert parse_age("12h") == datetime.timedelta(hours=12)
    assert parse_age("30D") == datetime.timedelta(days=30)
    assert parse_age("2w") == datetime.timedelta(weeks=2)


@pytest.mark.parametrize("model, column", [(Call, "envelope_id"), (Envelope, "replay_of_id")])
def test_the_log_foreign_keys_have_no_database_constraint_to_check_on_each_deleted_row(model, column):
    # Migration 0009: the constraints' triggers checked every deleted envelope
    # (about 10 s instead of 3 s for a month of a 10M-call log on PostgreSQL).
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    assert [name for name, c in constraints.items() if c["foreign_key"] and c["columns"] == [column]] == []
    assert model._meta.get_field(column[:-3]).remote_field.on_delete.__name__ in ("CASCADE", "SET_NULL")


def test_deleting_an_envelope_through_the_orm_still_deletes_its_calls_and_unlinks_its_replays(log):
    original = log[0]
    replay = Envelope.objects.create(replay_of=original, source="replay")
    original.delete()
    assert not Call.objects.filter(envelope_id=original.pk).exists()
    replay.refresh_from_db()
    assert replay.replay_of_id is None


@pytest.mark.django_db(transaction=True)
def test_migration_0009_keeps_an_existing_log_and_drops_only_the_constraints():
    from django.db.migrations.executor import MigrationExecutor

    before = [("jsonrpc_app", "0008_usage_rollups")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        OldEnvelope, OldCall = old.get_model("jsonrpc_app", "Envelope"), old.get_model("jsonrpc_app", "Call")
        original = OldEnvelope.objects.create(call_count=1, methods="m")
        OldEnvelope.objects.create(replay_of=original, source="replay")
        OldCall.objects.create(envelope=original, method="m")
        with connection.cursor() as cursor:
            fks = [c for c in connection.introspection.get_constraints(cursor, "jsonrpc_app_call").values()
                   if c["foreign_key"]]
        assert fks  # there was one to drop
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("jsonrpc_app"))
        assert Envelope.objects.count() == 2 and Call.objects.get().envelope_id == original.pk
        assert Envelope.objects.get(source="replay").replay_of_id == original.pk
        with connection.cursor() as cursor:
            for table in ("jsonrpc_app_call", "jsonrpc_app_envelope"):
                assert not [c for c in connection.introspection.get_constraints(cursor, table).values()
                            if c["foreign_key"]]
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        Call.objects.all().delete()
        Envelope.objects.all().delete()
