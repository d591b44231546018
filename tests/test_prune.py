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


def test_a_kept_replay_loses_the_link_to_a_deleted_original(log):
    original = log[-1]
    replay = Envelope.objects.create(replay_of=original, source="replay")
    prune("--older-than", "30d")
    replay.refresh_from_db()
    assert replay.replay_of_id is None


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
