"""
Usage rollups (jsonrpc_app.log.rollup): after a mixed load -- OK calls,
errors of several codes, notifications, batches with an invalid element,
admin try-it and replay -- written by each of the log's writers (the
request, the background writer, the journal's loader), the UsageRollup rows
equal a recomputation from Call made here with SQL of its own (GROUP BY,
TruncMinute/TruncHour, a COUNT per histogram bucket); a rebuild from Call
gives the same rows as the incremental upkeep.

Runs on the database of DATABASE_URL (SQLite, PostgreSQL, MariaDB).
"""

import datetime
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count, Max, Min, Q, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.urls import reverse
from django.utils import timezone

from jsonrpc_app.admin.usage import percentile
from jsonrpc_app.log import loader, rollup, writer
from jsonrpc_app.log.rollup import EPOCH
from jsonrpc_app.models import (
    HISTOGRAM_BOUNDS_MS,
    HISTOGRAM_FIELDS,
    Call,
    Envelope,
    UsageRollup,
    Width,
)

pytestmark = pytest.mark.django_db(transaction=True)

UTC = datetime.timezone.utc


def _bucket_filters():
    """Q per histogram bucket: (previous bound, bound], the first from -inf, the last to +inf."""
    filters, low = [], None
    for bound in HISTOGRAM_BOUNDS_MS:
        q = Q(duration_ms__lte=bound)
        if low is not None:
            q &= Q(duration_ms__gt=low)
        filters.append(q)
        low = bound
    filters.append(Q(duration_ms__gt=low))
    return filters


def recomputed():
    """{key: sums} of every width, computed from Call by SQL alone."""
    aggregates = {
        "calls": Count("id"),
        "notifications": Count("id", filter=Q(is_notification=True)),
        "duration_sum": Sum("duration_ms"),
        "duration_min": Min("duration_ms"),
        "duration_max": Max("duration_ms"),
    }
    for name, q in zip(HISTOGRAM_FIELDS, _bucket_filters()):
        aggregates[name] = Count("id", filter=q)
    out = {}
    for width, trunc in ((Width.MINUTE, TruncMinute), (Width.HOUR, TruncHour), (Width.TOTAL, None)):
        calls = Call.objects.order_by()
        group = ["method", "source", "outcome", "error_code"]
        if trunc is not None:
            calls = calls.annotate(bucket=trunc("created_at", tzinfo=UTC))
            group.append("bucket")
        for row in calls.values(*group).annotate(**aggregates):
            error = row["outcome"] == "error"
            start = row["bucket"] if trunc is not None else EPOCH
            key = (int(width), start.astimezone(UTC), row["method"], row["source"], error, (row["error_code"] or 0) if error else 0)
            out[key] = _sums(row)
    return out


def _sums(row):
    return {
        "calls": row["calls"],
        "notifications": row["notifications"],
        "duration_sum": round(row["duration_sum"], 6),
        "duration_min": round(row["duration_min"], 6),
        "duration_max": round(row["duration_max"], 6),
        **{name: row[name] for name in HISTOGRAM_FIELDS},
    }


def rolled_up():
    out = {}
    for row in UsageRollup.objects.values():
        key = (row["width"], row["start"].astimezone(UTC), row["method"], row["source"], row["is_error"], row["error_code"])
        assert key not in out
        out[key] = _sums(row)
    return out


def assert_rollups_match_call():
    expected = recomputed()
    assert Call.objects.exists()
    got = rolled_up()
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == expected[key], key


BATCH = [
    {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
    {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
    {"jsonrpc": "2.0", "method": "no.such.method", "id": 2},
    {"foo": "boo"},
    {"jsonrpc": "2.0", "method": "subtract", "params": ["a"], "id": 3},
]


def mixed_load(client):
    """Singles, errors of four codes, notifications and batches over HTTP."""
    bodies = []
    for i in range(6):
        bodies.append({"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i})
    bodies += [
        {"jsonrpc": "2.0", "method": "testapp.boom", "id": "b"},  # -32603
        {"jsonrpc": "2.0", "method": "testapp.app_error", "id": "c"},  # the method's own code
        {"jsonrpc": "2.0", "method": "subtract", "params": {"x": 1}, "id": "d"},  # -32602
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [1]},  # a notification
        {"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 3]},  # a notification
        BATCH,
        BATCH,
    ]
    for body in bodies:
        response = client.generic("POST", "/rpc/", json.dumps(body), content_type="application/json")
        assert response.status_code in (200, 204)


def admin_load(admin_client):
    """A try-it (source "admin") and a replay (source "replay") of the last batch."""
    writer.flush()  # what the background writer holds, if it is the writer
    url = reverse("admin:jsonrpc_app_methodentry_detail", args=["subtract"])
    response = admin_client.post(url, {"params": "[10, 4]", "id": "1"})
    assert response.status_code == 200
    batch = Envelope.objects.filter(is_batch=True, source="http").latest("pk")
    response = admin_client.post(
        reverse("admin:jsonrpc_app_envelope_replay", args=[batch.pk]), {"body": batch.request_body}
    )
    assert response.status_code == 302


@pytest.mark.parametrize("log_writer", ["request", "background"])
def test_rollups_equal_a_recomputation_from_call_after_a_mixed_load_over_http(
    log_writer, client, admin_client, settings
):
    settings.JSONRPC = {**settings.JSONRPC, "LOG_WRITER": log_writer}
    mixed_load(client)
    admin_load(admin_client)
    writer.flush()
    assert set(Call.objects.values_list("source", flat=True)) == {"http", "admin", "replay"}
    assert Call.objects.filter(is_notification=True).count() == 4 + 1  # the replay's notification too
    assert Call.objects.filter(method="").exists()  # the invalid request objects
    assert_rollups_match_call()
    subtract = UsageRollup.objects.filter(width=Width.TOTAL, method="subtract")
    assert sum(r.calls for r in subtract) == Call.objects.filter(method="subtract").count()


def test_rollups_equal_a_recomputation_from_call_after_a_mixed_load_through_the_journal_loader(
    client, admin_client, settings, tmp_path
):
    settings.JSONRPC = {
        **settings.JSONRPC,
        "LOG_WRITER": "journal",
        "LOG_JOURNAL_DIR": str(tmp_path / "journal"),
        "LOG_LOADER": "command",
        "LOG_LOADER_CHUNK": 3,  # several chunks, several transactions
    }
    mixed_load(client)
    assert not Call.objects.exists() and not UsageRollup.objects.exists()
    result = loader.load_pending()
    assert result.error is None and result.written == 13
    admin_load(admin_client)  # try-it and replay write at once, beside the loaded rows
    assert_rollups_match_call()


def test_a_chunk_loaded_twice_is_counted_once(client, settings, tmp_path):
    settings.JSONRPC = {**settings.JSONRPC, "LOG_WRITER": "journal", "LOG_JOURNAL_DIR": str(tmp_path / "j")}
    mixed_load(client)
    items = [(line, rows) for line, rows in _decode_journal(tmp_path / "j")]
    written, present, rejected = loader.write_chunk(items, "default")
    assert (written, present, rejected) == (13, 0, [])
    again = [(line, rows) for line, rows in _decode_journal(tmp_path / "j")]
    assert loader.write_chunk(again, "default") == (0, 13, [])
    assert_rollups_match_call()


def _decode_journal(directory):
    from jsonrpc_app.log import journal, lines

    for path in journal.journals(directory):
        for raw in path.read_bytes().splitlines():
            if raw:
                yield raw, lines.decode(raw)


def test_a_rebuild_from_call_equals_the_incremental_rollups(client, admin_client):
    mixed_load(client)
    admin_load(admin_client)
    incremental = rolled_up()
    out = io.StringIO()
    call_command("jsonrpc_rollup", rebuild=True, chunk_size=4, stdout=out)
    assert "from %d calls" % Call.objects.count() in out.getvalue()
    assert rolled_up() == incremental


def test_a_rebuild_counts_calls_written_outside_the_log_and_drops_rows_without_calls():
    at = timezone.now().replace(microsecond=0)
    env = Envelope.objects.create(created_at=at)
    Call.objects.bulk_create(
        [Call(envelope=env, method="m", created_at=at, duration_ms=ms) for ms in (0.05, 3.0, 70.0)]
    )
    UsageRollup.objects.create(width=Width.TOTAL, start=EPOCH, method="gone", calls=5)
    call_command("jsonrpc_rollup", rebuild=True, stdout=io.StringIO())
    assert not UsageRollup.objects.filter(method="gone").exists()
    assert_rollups_match_call()


def test_rebuild_writes_minute_rows_only_for_the_kept_days_and_trim_deletes_older_ones(settings):
    settings.JSONRPC = {**settings.JSONRPC, "USAGE_MINUTE_DAYS": 2}
    now = timezone.now()
    env = Envelope.objects.create()
    Call.objects.bulk_create(
        [Call(envelope=env, method="m", created_at=now - datetime.timedelta(days=d)) for d in (0, 1, 5)]
    )
    call_command("jsonrpc_rollup", rebuild=True, stdout=io.StringIO())
    minutes = UsageRollup.objects.filter(width=Width.MINUTE)
    assert minutes.count() == 2
    assert UsageRollup.objects.get(width=Width.TOTAL).calls == 3
    assert UsageRollup.objects.filter(width=Width.HOUR).count() == 3
    old = now - datetime.timedelta(days=4)
    UsageRollup.objects.create(width=Width.MINUTE, start=old.replace(second=0, microsecond=0), method="m", calls=1)
    out = io.StringIO()
    call_command("jsonrpc_rollup", trim=True, stdout=out)
    assert "Deleted 1 minute rows" in out.getvalue()
    assert minutes.count() == 2 and UsageRollup.objects.filter(width=Width.HOUR).count() == 3


def test_the_rollup_command_says_what_is_wrong_with_its_arguments():
    with pytest.raises(CommandError, match="--rebuild, --trim"):
        call_command("jsonrpc_rollup")
    with pytest.raises(CommandError, match="positive"):
        call_command("jsonrpc_rollup", rebuild=True, chunk_size=0)
    with pytest.raises(CommandError, match="No database"):
        call_command("jsonrpc_rollup", rebuild=True, database="nope")


def test_rollups_turned_off_are_not_written(client, settings):
    settings.JSONRPC = {**settings.JSONRPC, "USAGE_ROLLUPS": False}
    mixed_load(client)
    assert Call.objects.exists() and not UsageRollup.objects.exists()


def test_a_call_counts_in_its_minute_its_hour_and_all_time(client):
    body = {"jsonrpc": "2.0", "method": "subtract", "params": [3, 1], "id": 1}
    client.generic("POST", "/rpc/", json.dumps(body), content_type="application/json")
    call = Call.objects.get()
    rows = {r.width: r for r in UsageRollup.objects.all()}
    assert set(rows) == {Width.MINUTE, Width.HOUR, Width.TOTAL}
    at = call.created_at.astimezone(UTC)
    assert rows[Width.MINUTE].start == at.replace(second=0, microsecond=0)
    assert rows[Width.HOUR].start == at.replace(minute=0, second=0, microsecond=0)
    assert rows[Width.TOTAL].start == EPOCH
    for r in rows.values():
        assert (r.calls, r.is_error, r.error_code, r.source) == (1, False, 0, "http")
        assert r.duration_min == r.duration_max == pytest.approx(call.duration_ms)


def test_percentiles_are_estimated_inside_the_right_histogram_bucket():
    durations = [0.3] * 50 + [4.0] * 45 + [800.0] * 4 + [20000.0]
    rows = rollup.aggregate(
        [{"created_at": EPOCH, "method": "m", "source": "http", "outcome": "ok", "error_code": None,
          "duration_ms": ms, "is_notification": False} for ms in durations]
    )
    total = next(v for k, v in rows.items() if k[0] == Width.TOTAL)
    row = dict(zip(rollup.SUMS + ("duration_min", "duration_max"), total))
    assert row["calls"] == 100 and row["duration_min"] == 0.3 and row["duration_max"] == 20000.0
    assert 0.25 <= percentile(row, 0.50) <= 0.5
    assert 2.5 <= percentile(row, 0.95) <= 5
    assert 500 <= percentile(row, 0.99) <= 1000
    assert percentile(row, 1.0) == 20000.0
    assert percentile({"calls": 0}, 0.5) is None
    one = {"calls": 1, "duration_min": 7.0, "duration_max": 7.0, "h06": 1}
    assert percentile(one, 0.5) == percentile(one, 0.99) == 7.0


def test_rollups_equal_a_recomputation_from_call_after_the_spool_is_replayed(client, settings, tmp_path):
    """Envelopes spooled while the log database was down are rolled up when the spool is replayed, once."""
    from django.db import connections
    from django.db.utils import load_backend

    from jsonrpc_app.log import store
    from tests.test_spool import UNREACHABLE, unreachable_settings

    settings_dict = unreachable_settings()
    connections[UNREACHABLE] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, UNREACHABLE)
    try:
        base = {**settings.JSONRPC, "SPOOL_DIR": str(tmp_path / "spool"), "SPOOL_FLUSH_INTERVAL": None,
                "SPOOL_RETRY_DELAY": 0}
        settings.JSONRPC = {**base, "LOG_DATABASE": UNREACHABLE}
        mixed_load(client)
        assert not Call.objects.using("default").exists()
        settings.JSONRPC = {**base, "LOG_DATABASE": "default"}
        assert store.flush().written == 13
        assert store.flush().written == 0
    finally:
        connections[UNREACHABLE].close()
        del connections[UNREACHABLE]
    assert_rollups_match_call()


def _call_by_call(durations):
    """The histogram, count, sum, min and max of ``durations`` folded one call at a time."""
    import bisect

    buckets = [0] * len(HISTOGRAM_FIELDS)
    total = 0.0
    for ms in durations:
        ms = ms or 0.0
        buckets[bisect.bisect_left(HISTOGRAM_BOUNDS_MS, ms)] += 1
        total += ms
    values = [ms or 0.0 for ms in durations]
    return [len(durations), 0, total] + buckets + [min(values), max(values)]


@pytest.mark.parametrize("run", [1, 3, 20])
def test_runs_of_calls_fold_as_call_by_call_durations_on_every_bucket_bound_included(run):
    bounds = list(HISTOGRAM_BOUNDS_MS)
    durations = [0.0, 0.05, *bounds, *(b + 1e-9 for b in bounds), *(b - 1e-9 for b in bounds), 20000.0]
    durations.append(None)
    at = datetime.datetime(2026, 12, 4, 4, 5, 6, 789, tzinfo=datetime.timezone.utc)
    # Two methods interleaved in runs of ``run`` calls (short runs and long are folded apart;
    # a method's runs add up in one row); the last call is a's.
    n = len(durations)
    methods = [("a", "b")[(n - 1 - i) // run % 2] for i in range(n)]
    columns = {
        "created_at": [at] * n, "method": methods, "source": ["http"] * n, "outcome": ["ok"] * n,
        "error_code": [None] * n, "duration_ms": durations, "is_notification": [False] * (n - 1) + [True],
    }
    rows = rollup.aggregate_columns(columns)
    minute = at.replace(second=0, microsecond=0)
    for method in ("a", "b"):
        mine = [d for d, m in zip(durations, methods) if m == method]
        expected = _call_by_call(mine)
        expected[1] = 1 if method == "a" else 0  # the last call, a notification, is a's
        for width, start in ((int(Width.MINUTE), minute), (int(Width.HOUR), minute.replace(minute=0)), (int(Width.TOTAL), EPOCH)):
            assert rows[(width, start, method, "http", False, 0)] == expected, (method, width)
