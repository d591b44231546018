"""
The call log's background writer (JSONRPC["LOG_WRITER"] = "background"):
envelopes of many requests are written by one thread per process, many in
one transaction, each exactly once, and nothing is lost when its queue is
full, when the database is down, in a forked child, or at a graceful exit.

Real threads and real commits: the tests run outside a test transaction,
and what the writer's thread sends to the database is seen on its own
connection.
"""

import io
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, connections
from django.db.backends.signals import connection_created
from django.db.utils import load_backend

from jsonrpc_app.log import spool, store, writer
from jsonrpc_app.checks import check_spool_settings
from jsonrpc_app.models import Call, Envelope

from .test_spool import UNREACHABLE, _spooled_lines, unreachable_settings

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def background(settings, tmp_path):
    """Switch the call log to the background writer (spool in tmp, replayed inline)."""

    def configure(**extra):
        settings.JSONRPC = {
            **getattr(settings, "JSONRPC", {}),
            "LOG_WRITER": "background",
            "SPOOL_DIR": str(tmp_path / "spool"),
            "SPOOL_FLUSH_INTERVAL": None,
            "SPOOL_RETRY_DELAY": 0,
            **extra,
        }

    return configure


class WriterTrace:
    """What the writer thread's connections ran: statements and commits."""

    def __init__(self):
        self.statements = []
        self.commits = 0
        self.threads = set()

    def inserts(self, table):
        return [s for s in self.statements if s.startswith("INSERT INTO") and table in s.split("(")[0]]


@pytest.fixture
def writer_trace():
    """
    Record every statement and commit of the connections the writer's thread
    opens: an execute wrapper and a wrapper of the connection's own commit,
    both on the real connection.
    """
    trace = WriterTrace()
    traced = []

    def on_connect(sender, connection, **kwargs):
        if threading.current_thread().name != "jsonrpc-log-writer" or connection in traced:
            return  # a connection object reconnects (CONN_MAX_AGE): traced once
        traced.append(connection)
        trace.threads.add(threading.get_ident())

        def execute(run, sql, params, many, context):
            trace.statements.append(sql)
            return run(sql, params, many, context)

        connection.execute_wrappers.append(execute)
        commit = connection._commit

        def counted_commit():
            trace.commits += 1
            return commit()

        connection._commit = counted_commit

    connection_created.connect(on_connect, weak=False)
    yield trace
    connection_created.disconnect(on_connect)


def _subtract(i):
    return {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i}


def _transactions_of_envelopes():
    """On PostgreSQL, the number of transactions that inserted the log's rows (by xmin)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(DISTINCT xmin::text) FROM %s" % Envelope._meta.db_table)
        return cursor.fetchone()[0]


# -- grouping ---------------------------------------------------------------------------


def test_envelopes_of_many_requests_are_written_once_each_in_one_transaction(
    call, background, writer_trace
):
    background(LOG_WRITER_MAX_DELAY=30)
    answers = [call(_subtract(i)) for i in range(20)]
    answers.append(call([_subtract(100), _subtract(101), {"jsonrpc": "2.0", "method": "update", "params": [1]}]))
    assert answers[3] == {"jsonrpc": "2.0", "result": 2, "id": 3}
    assert writer.pending() == 21
    assert Envelope.objects.count() == 0  # waiting in memory, not in the request

    assert writer.flush(timeout=30)
    assert writer.pending() == 0
    assert Envelope.objects.count() == 21
    assert Envelope.objects.values("uid").distinct().count() == 21
    assert Call.objects.count() == 23
    assert sorted(Call.objects.filter(method="subtract").values_list("result", flat=True)) == sorted(
        [i - 1 for i in range(20)] + [99, 100]
    )
    batch = Envelope.objects.get(is_batch=True)
    assert batch.calls.count() == 3 and batch.source == "http"
    # One thread, one transaction: one INSERT per envelope, one for all the calls
    # (on PostgreSQL, one statement per envelope inserting it and its calls), and
    # one upsert of the usage rollups of all of them.
    assert len(writer_trace.threads) == 1
    assert writer_trace.commits == 1
    if connection.vendor == "postgresql":
        assert len(writer_trace.statements) == 22
        assert all(s.startswith("WITH env AS (INSERT INTO") for s in writer_trace.statements[:21])
        assert "jsonrpc_app_usagerollup" in writer_trace.statements[21]
        assert _transactions_of_envelopes() == 1
    else:
        assert len(writer_trace.inserts(Envelope._meta.db_table)) == 21
        assert len(writer_trace.inserts(Call._meta.db_table)) == 1


def test_a_group_holds_at_most_max_group_envelopes(call, background, writer_trace, monkeypatch):
    monkeypatch.setattr(writer, "MAX_GROUP", 5)
    background(LOG_WRITER_MAX_DELAY=30)
    for i in range(12):
        call(_subtract(i))
    assert writer.flush(timeout=30)
    assert Envelope.objects.count() == 12
    # Two full groups written as soon as they were full, the rest by flush().
    assert writer_trace.commits == 3
    if connection.vendor == "postgresql":
        assert _transactions_of_envelopes() == 3


def test_an_envelope_is_written_once_its_delay_has_passed_without_a_flush(call, background):
    background(LOG_WRITER_MAX_DELAY=0.05)
    call(_subtract(5))
    deadline = time.monotonic() + 10
    while writer.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.pending() == 0
    assert Envelope.objects.count() == 1


def test_the_request_writer_is_the_default_and_writes_before_answering(call):
    call(_subtract(5))
    assert Envelope.objects.count() == 1
    assert writer.pending() == 0


def test_a_group_the_database_refuses_is_written_envelope_by_envelope(background, writer_trace):
    """One envelope whose row the database refuses costs the others of its group nothing."""
    from django.contrib.auth.models import AnonymousUser

    from jsonrpc_app.context import CallContext
    from jsonrpc_app.dispatch import execute
    from jsonrpc_app.log.rows import build_rows
    from jsonrpc_app.protocol import parse

    background(LOG_WRITER_MAX_DELAY=30)
    context = CallContext(user=AnonymousUser(), endpoint="/rpc/")
    built = []
    for i in range(4):
        body = json.dumps(_subtract(i)).encode()
        envelope = parse(body, 100, 64)
        response, records = execute(envelope, context)
        built.append(build_rows(context, records, request_body=body, envelope=envelope))
    built[2].envelope.call_count = -1  # a positive integer column: refused by a CHECK constraint
    for rows in built:
        assert writer.submit(rows)
    assert writer.flush(timeout=30)
    uids = set(Envelope.objects.values_list("uid", flat=True))
    assert uids == {built[i].envelope.uid for i in (0, 1, 3)}
    # Spooled, and refused again when the spool was replayed: kept for an operator.
    directory = Path(spool.spool_dir())
    assert spool.status(directory).rejected == 1
    (rejected,) = directory.glob("*" + spool.REJECTED)
    assert json.loads(rejected.read_text())["uid"] == str(built[2].envelope.uid)
    # The group's transaction rolled back; then one commit per envelope the database
    # took (on PostgreSQL each envelope alone is one statement in autocommit).
    assert writer_trace.commits == (0 if connection.vendor == "postgresql" else 3)


# -- backpressure, outages ----------------------------------------------------------------


def test_a_full_queue_makes_the_request_write_its_own_envelope_and_nothing_is_lost(call, background):
    background(LOG_WRITER_MAX_DELAY=30, LOG_WRITER_QUEUE_SIZE=2)
    for i in range(5):
        call(_subtract(i))
    # Two wait in memory; the three that found the queue full are in the log already.
    assert writer.pending() == 2
    assert sorted(Call.objects.values_list("result", flat=True)) == [1, 2, 3]
    assert writer.flush(timeout=30)
    assert sorted(Call.objects.values_list("result", flat=True)) == [-1, 0, 1, 2, 3]
    assert Envelope.objects.values("uid").distinct().count() == 5


class _OneMoreAlias(dict):
    """
    connections.settings with an alias added on the fly: every thread can
    open it, and Django's test case, which lets a thread open only the
    databases a test declares or aliases that are not configured, counts it
    as one of the latter (as test_spool's alias, made in the test's thread).
    """

    def __iter__(self):
        return (alias for alias in dict.__iter__(self) if alias != UNREACHABLE)


@pytest.fixture
def unreachable_everywhere():
    """
    A PostgreSQL alias nothing listens on, known to every thread (the
    writer's thread opens its own connection to it).
    """
    settings_dict = unreachable_settings()
    configured = connections.settings
    connections.settings = _OneMoreAlias(configured, **{UNREACHABLE: settings_dict})
    connections[UNREACHABLE] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(
        settings_dict, UNREACHABLE
    )
    yield UNREACHABLE
    writer.stop(timeout=30)
    connections[UNREACHABLE].close()
    del connections[UNREACHABLE]
    connections.settings = configured


def test_with_the_database_down_every_envelope_is_spooled_and_replayed_exactly_once(
    call, background, unreachable_everywhere
):
    background(LOG_DATABASE=unreachable_everywhere, LOG_WRITER_MAX_DELAY=30)
    for i in range(6):
        assert call(_subtract(i)) == {"jsonrpc": "2.0", "result": i - 1, "id": i}
    assert writer.flush(timeout=60)
    directory = Path(spool.spool_dir())
    lines = _spooled_lines(directory)
    assert sorted(line["calls"][0]["result"] for line in lines) == [-1, 0, 1, 2, 3, 4]
    assert Envelope.objects.using("default").count() == 0

    background(LOG_DATABASE="default", LOG_WRITER_MAX_DELAY=30)
    result = store.flush()
    assert (result.written, result.rejected) == (6, 0)
    assert store.flush().written == 0
    assert sorted(Call.objects.values_list("result", flat=True)) == [-1, 0, 1, 2, 3, 4]
    assert Envelope.objects.values("uid").distinct().count() == 6


def test_flush_spool_command_writes_what_the_writer_holds_first(call, background):
    from django.core.management import call_command

    background(LOG_WRITER_MAX_DELAY=30)
    call(_subtract(8))
    assert Envelope.objects.count() == 0
    call_command("jsonrpc_flush_spool", stdout=io.StringIO())
    assert Envelope.objects.count() == 1


# -- processes ---------------------------------------------------------------------------


def test_a_forked_child_has_a_writer_of_its_own_and_the_parent_keeps_its_envelopes(
    call, background, client
):
    background(LOG_WRITER_MAX_DELAY=30)
    for i in range(3):
        call(_subtract(i))
    assert writer.pending() == 3
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running pytest's teardown
        code = 1
        try:
            os.close(read)
            fresh = writer.pending() == 0  # the parent's envelopes are not the child's
            client.generic("POST", "/rpc/", json.dumps(_subtract(50)), content_type="application/json")
            queued = writer.pending()
            flushed = writer.flush(timeout=30)
            os.write(write, json.dumps([fresh, queued, flushed, writer.pending()]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        report = json.loads(f.read() or "null")
    assert os.waitpid(pid, 0)[1] == 0
    assert report == [True, 1, True, 0]
    assert writer.pending() == 3
    assert writer.flush(timeout=30)
    results = sorted(Call.objects.values_list("result", flat=True))
    if connection.vendor != "sqlite":
        # One database server for both processes: the child's row is there too.
        assert results == [-1, 0, 1, 49]
    else:
        # The in-memory test database was copied into the child with the rest of its memory.
        assert results == [-1, 0, 1]
    assert Envelope.objects.values("uid").distinct().count() == len(results)


SCRIPT = textwrap.dedent(
    """
    import django, json, sqlite3, sys
    django.setup()
    from django.core.management import call_command
    from django.test import Client, override_settings
    from django.test.utils import setup_test_environment

    call_command("migrate", verbosity=0)
    setup_test_environment()
    override_settings(JSONRPC={
        "LOG_WRITER": "background", "LOG_WRITER_MAX_DELAY": 30,
        "SPOOL_DIR": sys.argv[2], "SPOOL_FLUSH_INTERVAL": None,
    }).enable()
    client = Client()
    for i in range(3):
        body = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i})
        assert client.post("/rpc/", body, content_type="application/json").status_code == 200
    with sqlite3.connect(sys.argv[1]) as db:
        print(db.execute("SELECT COUNT(*) FROM jsonrpc_app_envelope").fetchone()[0])
    # Ends without flushing: the atexit handler does.
    """
)


def test_a_process_that_exits_without_flushing_writes_its_envelopes_at_exit(tmp_path):
    db = tmp_path / "log.sqlite3"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL="sqlite:///%s" % db,
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(db), str(tmp_path / "spool")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]  # nothing written before the process ended
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM jsonrpc_app_envelope").fetchone()[0] == 3
        assert sorted(r for (r,) in conn.execute("SELECT result FROM jsonrpc_app_call")) == ["-1", "0", "1"]


# -- the admin, settings ---------------------------------------------------------------------


def test_admin_try_it_writes_its_envelope_at_once_and_links_to_it(admin_client, background):
    background(LOG_WRITER_MAX_DELAY=30)
    response = admin_client.post("/admin/jsonrpc_app/methodentry/subtract/", {"params": "[42, 23]", "id": "7"})
    assert response.status_code == 200
    envelope = Envelope.objects.get()
    assert envelope.source == "admin"
    assert 'href="/admin/jsonrpc_app/envelope/%d/change/"' % envelope.pk in response.content.decode()
    assert writer.pending() == 0


def test_replay_in_background_mode_redirects_to_the_saved_replay(admin_client, background, call):
    background(LOG_WRITER_MAX_DELAY=30)
    call(_subtract(10))
    assert writer.flush(timeout=30)
    original = Envelope.objects.get()
    response = admin_client.post("/admin/jsonrpc_app/envelope/%d/replay/" % original.pk)
    replay = Envelope.objects.get(replay_of=original)
    assert response.status_code == 302
    assert response["Location"].endswith("/%d/comparison/" % replay.pk)


@pytest.mark.parametrize(
    "extra, ids",
    [
        ({"LOG_WRITER": "background", "LOG_WRITER_MAX_DELAY": 0, "LOG_WRITER_QUEUE_SIZE": 1}, []),
        ({"LOG_WRITER": "thread"}, ["jsonrpc_app.E041"]),
        ({"LOG_WRITER_MAX_DELAY": -1}, ["jsonrpc_app.E042"]),
        ({"LOG_WRITER_MAX_DELAY": "0.05"}, ["jsonrpc_app.E042"]),
        ({"LOG_WRITER_MAX_DELAY": None}, ["jsonrpc_app.E042"]),
        ({"LOG_WRITER_QUEUE_SIZE": 0}, ["jsonrpc_app.E043"]),
        ({"LOG_WRITER_QUEUE_SIZE": True}, ["jsonrpc_app.E043"]),
        ({"LOG_WRITER_QUEUE_SIZE": 10.0}, ["jsonrpc_app.E043"]),
    ],
)
def test_writer_settings_are_checked(settings, extra, ids):
    settings.JSONRPC = {**settings.JSONRPC, **extra}
    assert [e.id for e in check_spool_settings()] == ids
