"""
The call log's journal (LOG_WRITER = "journal", the default): the request
appends one line, the loader writes the lines to the database in bulk
(COPY on PostgreSQL, multi-row INSERTs elsewhere), each envelope exactly
once; a killed worker's journal is loaded by the next loader; a database
outage only makes the journal grow.

Runs on the database of DATABASE_URL (SQLite, PostgreSQL, MariaDB).
"""

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connections
from django.db.utils import load_backend

from jsonrpc_app.log import journal, lines, loader
from jsonrpc_app.models import Call, Envelope

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def journal_dir(tmp_path):
    return tmp_path / "journal"


@pytest.fixture
def use_journal(settings, journal_dir):
    def configure(**extra):
        settings.JSONRPC = {
            **settings.JSONRPC,
            "LOG_WRITER": "journal",
            "LOG_JOURNAL_DIR": str(journal_dir),
            "LOG_LOADER": "command",
            **extra,
        }

    configure()
    return configure


@pytest.fixture
def post(client):
    def send(body, **extra):
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        response = client.generic("POST", "/rpc/", body, content_type="application/json", **extra)
        assert response.status_code in (200, 204)
        return json.loads(response.content) if response.content else None

    return send


def _journal_lines(directory):
    return [line for path in journal.journals(directory) for line in path.read_bytes().splitlines()]


def _edit_line(line, change):
    """A journal line with ``change(record)`` applied to its JSON (any bodies after it kept)."""
    head, *bodies = line.rstrip(b"\n").split(b"\x1e")
    record = json.loads(head)
    change(record)
    return b"\x1e".join([json.dumps(record).encode(), *bodies]) + b"\n"


def _subtract(i):
    return {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i}


# The bodies the synchronous log and the journal must store alike: batches
# with errors and notifications, a secret, hostile text, a value over the
# size cap, an unknown method, an invalid element.
BODIES = [
    _subtract(5),
    [_subtract(1), {"jsonrpc": "2.0", "method": "subtract", "params": [2, 1]}, {"jsonrpc": "2.0", "method": "nope", "id": "x"}],
    {"jsonrpc": "2.0", "method": "echo", "params": {"value": {"password": "hunter2", "ok": [1, 2.5, None]}}, "id": 7},
    {"jsonrpc": "2.0", "method": "echo", "params": ["nul \x00 and \ud800 and \\u0041 é"], "id": [1]},
    {"jsonrpc": "2.0", "method": "echo", "params": ["x" * 70000], "id": 9},
    [1, {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 2**64, "subtrahend": 1}, "id": 2**63}],
    {"jsonrpc": "2.0", "method": "echo", "params": [1e300, -0.0, 12345678901234567890], "id": None},
    "{not json",
    [],
    # Bodies a split line carries (log.split): the calls read back from the bodies.
    [_subtract(i) for i in range(20)],
    [
        _subtract(1),
        {"jsonrpc": "2.0", "method": "subtract", "params": [7, 2]},
        {"jsonrpc": "2.0", "method": "echo", "params": {"value": {"a": [1, 2.5, "x"]}}},
        {"jsonrpc": "2.0", "method": "testapp.boom", "id": "b"},
        {"jsonrpc": "2.0", "method": "testapp.boom"},
        {"jsonrpc": "2.0", "method": "testapp.app_error", "id": 3},
        {"jsonrpc": "2.0", "method": "nope", "id": 4},
        {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 1}, "id": 5},
        {"jsonrpc": "2.0", "method": "echo", "params": [{"k": {"deep": [True, False, 1.5e300]}}], "id": 6.5},
    ],
    {"jsonrpc": "2.0", "method": "testapp.boom", "id": 1},
    {"jsonrpc": "2.0", "method": "echo", "params": [-0.0], "id": "only"},
    {"jsonrpc": "2.0", "method": "echo", "params": [1]},
    # ... and bodies it must not: a sensitive param by position, a method that
    # is not logged, a result of None, an int too long for a double.
    [{"jsonrpc": "2.0", "method": "testapp.set_pin", "params": ["acct", "1234"], "id": 1}, _subtract(2)],
    [{"jsonrpc": "2.0", "method": "testapp.heartbeat", "params": [1], "id": 1}, _subtract(2)],
    [{"jsonrpc": "2.0", "method": "testapp.none", "id": 1}, _subtract(2)],
    [{"jsonrpc": "2.0", "method": "echo", "params": [2**70], "id": 1}, _subtract(2)],
    {"jsonrpc": "2.0", "method": "testapp.login", "params": ["ann", "pw"], "id": 1},
    # Split again: a colon and a brace in strings (the key scan runs), a
    # newline between members (the bodies inside the line's JSON), a number
    # beyond a double in params (read as infinity, stored as null).
    [{"jsonrpc": "2.0", "method": "echo", "params": ["a:{b", "c"], "id": "x:y"}, _subtract(1)],
    '[{"jsonrpc": "2.0",\n "method": "subtract", "params": [3, 1], "id": 1}]',
    '{"jsonrpc": "2.0", "method": "testapp.big", "params": [1e400], "id": 1}',
    # A sensitive word in a string value: no key, nothing to redact.
    [{"jsonrpc": "2.0", "method": "echo", "params": ["my password is"], "id": 1}],
    # Not split: a sensitive key in a batch (redacted on the request), in
    # params by name, in a result written from an object (testapp.types).
    [_subtract(1), {"jsonrpc": "2.0", "method": "echo", "params": [{"Token": "t0k3n"}], "id": 2}],
    [_subtract(i) for i in range(40)] + [{"jsonrpc": "2.0", "method": "testapp.login", "params": {"username": "a", "password": "b"}, "id": "p"}],
    [_subtract(i) for i in range(40)] + [{"jsonrpc": "2.0", "method": "echo", "params": {"value": {"secret": 1}}, "id": "e"}],
]
# Which of BODIES a split line carries (the others: the rows, built on the request).
SPLIT = {0, 1} | set(range(9, 14)) | {17, 19, 20, 21, 22}

# Columns that differ between two envelopes logged from the same body.
_VARYING = {"id", "uid", "created_at", "duration_ms", "envelope_id"}


def _columns(obj):
    return {
        f.attname: getattr(obj, f.attname)
        for f in obj._meta.concrete_fields
        if f.attname not in _VARYING
    }


def _logged(envelope):
    return _columns(envelope), [_columns(c) for c in envelope.calls.order_by("position")]


def _body(body):
    return body if isinstance(body, str) else json.dumps(body)


@pytest.mark.parametrize("index", range(len(BODIES)))
def test_journal_then_loader_stores_the_same_rows_as_the_synchronous_log(
    index, settings, use_journal, post, journal_dir
):
    body = _body(BODIES[index])
    settings.JSONRPC = {**settings.JSONRPC, "LOG_WRITER": "request"}
    answer_now = post(body)
    sync = Envelope.objects.get()
    expected = _logged(sync)
    sync.delete()

    use_journal()
    answer_later = post(body)
    assert answer_later == answer_now
    assert not Envelope.objects.exists(), "the request wrote to the database"
    (line,) = _journal_lines(journal_dir)
    assert line.startswith(b'{"v":2,') == (index in SPLIT), line[:200]
    result = loader.load_pending()
    assert (result.written, result.rejected, result.error) == (1, 0, None)
    assert _logged(Envelope.objects.get()) == expected


def test_a_split_line_holds_no_call_row_only_the_bodies_and_a_duration_per_call(use_journal, post, journal_dir):
    post([_subtract(i) for i in range(3)] + [{"jsonrpc": "2.0", "method": "testapp.boom"}])
    (line,) = _journal_lines(journal_dir)
    head, request_body, response_body = line.split(b"\x1e")
    assert json.loads(request_body)[0] == _subtract(0)  # the bodies as they came and went, unescaped
    assert [a["result"] for a in json.loads(response_body)] == [-1, 0, 1]
    record = json.loads(head)
    assert set(record) == {"v", "e", "s", "n", "t"}
    assert len(record["s"]) == 4 and all(isinstance(d, float) for d in record["s"])
    # The notification's error and traceback are in no body: they alone are written per call.
    assert list(record["n"]) == ["3"] and record["n"]["3"][:3] == [True, None, -32603]
    assert list(record["t"]) == ["3"] and "RuntimeError" in record["t"]["3"]
    assert not {"methods", "error_count", "request_body", "response_body"} & set(record["e"])
    rows = lines.decode(line + b"\n")
    assert [(c.method, c.params, c.result) for c in rows.calls[:3]] == [("subtract", [i, 1], i - 1) for i in range(3)]
    assert (rows.envelope.methods, rows.envelope.call_count, rows.envelope.error_count) == (
        "subtract, testapp.boom", 4, 1)


def test_a_split_lines_durations_are_loaded_to_the_last_bit(use_journal, post, journal_dir):
    post([_subtract(i) for i in range(70)])
    (line,) = _journal_lines(journal_dir)
    seconds = json.loads(line.split(b"\x1e")[0])["s"]
    assert loader.load_pending().written == 1
    stored = list(Call.objects.order_by("position").values_list("duration_ms", flat=True))
    assert stored == [s * 1000.0 for s in seconds]


def test_a_split_line_with_a_method_that_is_no_string_never_stops_the_loader(use_journal, post, journal_dir):
    post([_subtract(1), _subtract(2)])
    (line,) = _journal_lines(journal_dir)
    head, request_body, response_body = line.split(b"\x1e")
    tampered = request_body.replace(b'"method": "subtract"', b'"method": ["subtract"]', 1)
    for path in journal.journals(journal_dir):
        path.write_bytes(b"\x1e".join([head, tampered, response_body]) + b"\n")
    post(_subtract(3))  # a good line after it
    result = loader.load_pending()
    assert result.error is None
    # The tampered line is stored (its method as text, as the ORM writes a list to a CharField) or set aside.
    assert result.written + result.rejected == 2
    assert Envelope.objects.filter(is_batch=False).count() == 1  # the good line


def test_a_split_line_whose_bodies_do_not_hold_its_calls_is_refused_not_misread(use_journal, post, journal_dir):
    post([_subtract(1), _subtract(2)])
    (line,) = _journal_lines(journal_dir)
    head, request_body, response_body = line.split(b"\x1e")
    record = json.loads(head)

    def line_of(record, response=response_body, bodies=2):
        return json.dumps(record).encode() + (b"\x1e" + request_body + b"\x1e" + response)[: None if bodies == 2 else len(request_body) + 1] + b"\n"

    assert len(lines.decode(line_of(record)).calls) == 2
    record["s"].append(0.5)  # three durations for two calls
    with pytest.raises(ValueError):
        lines.decode(line_of(record))
    record["s"] = record["s"][:2]
    with pytest.raises(ValueError):  # one answer for two calls
        lines.decode(line_of(record, json.dumps([{"jsonrpc": "2.0", "result": 0, "id": 1}]).encode()))
    with pytest.raises(ValueError):  # a body missing
        lines.decode(line_of(record, bodies=1))


def test_a_batch_is_one_line_and_the_secret_never_reaches_the_journal(use_journal, post, journal_dir):
    post([
        {"jsonrpc": "2.0", "method": "echo", "params": {"value": {"token": "s3cret-token"}}, "id": 1},
        _subtract(3),
    ])
    (line,) = _journal_lines(journal_dir)
    assert b"s3cret-token" not in line
    assert b"********" in line
    rows = lines.decode(line + b"\n")
    assert [c.method for c in rows.calls] == ["echo", "subtract"]


def test_the_loader_writes_many_envelopes_per_chunk_in_order(use_journal, post):
    use_journal(LOG_LOADER_CHUNK=7)
    for i in range(30):
        post(_subtract(i))
    post([_subtract(i) for i in range(100, 150)])
    result = loader.load_pending()
    assert (result.written, result.calls, result.present) == (31, 80, 0)
    assert Envelope.objects.count() == 31
    assert Call.objects.count() == 80
    assert sorted(Call.objects.filter(envelope__is_batch=False).values_list("result", flat=True)) == [
        i - 1 for i in range(30)
    ]


def test_a_crash_between_the_commit_and_the_checkpoint_loads_nothing_twice(use_journal, post, journal_dir):
    for i in range(5):
        post(_subtract(i))
    assert loader.load_pending().written == 5
    # As if the loader died after its transaction committed and before it
    # moved the checkpoint: the checkpoint still says nothing is loaded.
    (path,) = journal.journals(journal_dir)
    Path(str(path) + journal.POS).write_bytes(b"0\n")
    post(_subtract(99))
    result = loader.load_pending()
    assert (result.written, result.present) == (1, 5)
    assert Envelope.objects.count() == 6
    assert Call.objects.count() == 6


def test_a_torn_checkpoint_reloads_from_the_start_exactly_once(use_journal, post, journal_dir):
    for i in range(3):
        post(_subtract(i))
    loader.load_pending()
    (path,) = journal.journals(journal_dir)
    Path(str(path) + journal.POS).write_bytes(b"12\x00garbage")
    result = loader.load_pending()
    assert Envelope.objects.count() == 3
    assert result.written == 0


def test_a_live_journal_is_loaded_and_kept_a_sealed_one_is_loaded_and_deleted(use_journal, post, journal_dir):
    post(_subtract(1))
    (path,) = journal.journals(journal_dir)
    assert not journal.is_sealed(path), "this process still appends to it"
    assert loader.load_pending().files == 0
    assert path.exists()
    journal.close()  # as at exit: sealed
    assert journal.is_sealed(path)
    post(_subtract(2))  # opens a new journal
    result = loader.load_pending()
    assert (result.written, result.files) == (1, 1)
    assert not path.exists() and not Path(str(path) + journal.POS).exists()
    assert Envelope.objects.count() == 2


def test_journals_rotate_past_their_size_and_each_is_deleted_once_loaded(use_journal, post, journal_dir):
    use_journal(LOG_JOURNAL_ROTATE_BYTES=1)
    for i in range(4):
        post(_subtract(i))
    assert len(journal.journals(journal_dir)) == 4
    result = loader.load_pending()
    assert (result.written, result.files) == (4, 3)
    assert len(journal.journals(journal_dir)) == 1


def test_a_killed_worker_loses_nothing_it_answered(use_journal, journal_dir):
    """
    A real process answers calls (appending to its journal, no loader of its
    own), then is killed with SIGKILL; the next loader loads all it answered.
    """
    script = r"""
import json, os, sys
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
django.setup()
from django.conf import settings
settings.JSONRPC = {**settings.JSONRPC, "LOG_WRITER": "journal", "LOG_LOADER": "command",
                    "LOG_JOURNAL_DIR": sys.argv[1], "LOG_JOURNAL_FSYNC": "never"}
from jsonrpc_app import service
from jsonrpc_app.context import CallContext
for i in range(50):
    body = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i})
    answer = service.answer(body, CallContext(source="http", log=True))
    print(json.loads(answer.content)["id"], flush=True)
print("ready", flush=True)
sys.stdin.readline()
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(journal_dir)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    answered = []
    try:
        for line in proc.stdout:
            if line.strip() == "ready":
                break
            answered.append(int(line))
        (path,) = journal.journals(journal_dir)
        assert not journal.is_sealed(path)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(answered) == 50
    assert journal.is_sealed(path), "the kernel drops a killed process's lock"
    result = loader.load_pending()
    assert (result.written, result.files, result.rejected) == (50, 1, 0)
    assert sorted(Call.objects.values_list("request_id", flat=True)) == answered
    assert not journal.journals(journal_dir)


def test_a_torn_last_line_of_a_dead_process_is_kept_aside_and_the_rest_loaded(use_journal, post, journal_dir):
    post(_subtract(1))
    (path,) = journal.journals(journal_dir)
    journal.close()
    with open(path, "ab") as f:
        f.write(b'{"v":1,"e":{"uid":"0189')  # a power loss mid-write
    result = loader.load_pending()
    assert (result.written, result.rejected, result.files) == (1, 1, 1)
    (rejected,) = journal_dir.glob("*" + journal.REJECTED)
    assert rejected.read_bytes().startswith(b'{"v":1')
    assert journal.status(journal_dir, count=True).rejected == 1


def test_a_line_the_database_refuses_is_kept_aside_and_the_rest_loaded(use_journal, post, journal_dir):
    for i in range(3):
        post(_subtract(i))
    (path,) = journal.journals(journal_dir)
    data = path.read_bytes().splitlines(keepends=True)
    # http_status is a PositiveSmallIntegerField: -5 is refused by its CHECK or range.
    data[1] = _edit_line(data[1], lambda bad: bad["e"].update(http_status=-5))
    journal.close()
    path.write_bytes(b"".join(data))
    result = loader.load_pending()
    assert (result.written, result.rejected) == (2, 1)
    assert Envelope.objects.count() == 2


def test_a_database_outage_only_makes_the_journal_grow(use_journal, post, journal_dir, unreachable_log):
    use_journal(LOG_DATABASE=unreachable_log)
    answers = [post(_subtract(i)) for i in range(4)]
    assert [a["result"] for a in answers] == [-1, 0, 1, 2]
    result = loader.load_pending()
    assert result.error is not None and result.written == 0
    status = journal.status(journal_dir, count=True)
    assert status.pending_lines == 4
    assert status.oldest.startswith((b'{"v":1', b'{"v":2'))
    use_journal(LOG_DATABASE="default")
    result = loader.load_pending()
    assert (result.written, result.error) == (4, None)
    assert journal.status(journal_dir).pending_bytes == 0


def test_the_loader_thread_loads_in_the_background(use_journal, post, journal_dir):
    use_journal(LOG_LOADER="thread", LOG_LOADER_INTERVAL=0.05)
    for i in range(10):
        post(_subtract(i))
    # Watched through the journal's checkpoints, not the table: SQLite's
    # in-memory test database locks a table that another thread writes.
    deadline = time.monotonic() + 20
    while journal.status(journal_dir).pending_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert journal.status(journal_dir).pending_bytes == 0
    assert loader.stop(10)
    assert Envelope.objects.count() == 10


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_the_loader_thread_runs_below_the_request_threads_by_log_loader_nice(use_journal, post, journal_dir):
    use_journal(LOG_LOADER="thread", LOG_LOADER_INTERVAL=0.05, LOG_LOADER_NICE=5)
    post(_subtract(1))
    deadline = time.monotonic() + 20
    while journal.status(journal_dir).pending_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    thread = loader._current().thread
    try:
        assert thread is not None and thread.is_alive()
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == min(19, mine + 5)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # the request thread's is its own
    finally:
        assert loader.stop(10)


def test_fsync_always_syncs_every_append_and_interval_groups_them(use_journal, post, monkeypatch):
    synced = []
    real_sync = journal._datasync

    def counting_sync(fd):
        synced.append(fd)
        return real_sync(fd)

    monkeypatch.setattr(journal, "_datasync", counting_sync)
    use_journal(LOG_JOURNAL_FSYNC="always")
    post(_subtract(0))  # opens the file (the directory is fsync'd too)
    journal.sync()  # what an earlier test appended under "interval" is on disk: its syncer has nothing to do
    before = len(synced)
    for i in range(5):
        post(_subtract(i))
    assert len(synced) - before == 5

    use_journal(LOG_JOURNAL_FSYNC="never")
    before = len(synced)
    for i in range(5):
        post(_subtract(i))
    time.sleep(0.2)
    assert len(synced) == before

    use_journal(LOG_JOURNAL_FSYNC="interval", LOG_JOURNAL_FSYNC_INTERVAL=0.05)
    before = len(synced)
    for i in range(20):
        post(_subtract(i))
    deadline = time.monotonic() + 5
    while len(synced) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 1 <= len(synced) - before < 20, "one group fsync for many appends"


def test_a_full_journal_warns_and_keeps_appending_by_default(use_journal, post, journal_dir, caplog):
    use_journal(LOG_JOURNAL_MAX_BYTES=10)
    from jsonrpc_app import log

    log._full["warned_at"] = -1e9
    with caplog.at_level(logging.WARNING, logger="jsonrpc_app"):
        for i in range(3):
            assert post(_subtract(i))["result"] == i - 1
    assert len(_journal_lines(journal_dir)) == 3
    assert sum("LOG_JOURNAL_MAX_BYTES" in r.getMessage() for r in caplog.records) == 1


def test_a_full_journal_refuses_calls_with_a_server_error_when_set_to(use_journal, post, journal_dir):
    use_journal(LOG_JOURNAL_MAX_BYTES=10, LOG_JOURNAL_FULL="refuse")
    journal._current().backlog_at = -1e9
    assert post(_subtract(1))["result"] == 0  # nothing waits yet
    journal._current().backlog_at = -1e9
    answer = post(_subtract(2))
    assert answer == {"jsonrpc": "2.0", "error": {"code": -32050, "message": "Call log full"}, "id": None}
    assert len(_journal_lines(journal_dir)) == 1, "a refused call is not run, nor appended"
    loader.load_pending()
    journal._current().backlog_at = -1e9
    assert post(_subtract(3))["result"] == 2, "answered again once the loader caught up"


def test_the_huge_integer_notification_is_not_answered_and_is_loaded(use_journal, client, journal_dir):
    from tests.test_hostile_values import _subtract_big

    body = _subtract_big()  # the result has more digits than str() writes
    response = client.generic("POST", "/rpc/", body, content_type="application/json")
    assert response.status_code == 204 and response.content == b""
    result = loader.load_pending()
    assert (result.written, result.rejected) == (1, 0)
    call = Call.objects.get()
    assert call.is_notification and call.error_code is None
    assert call.result["__unserializable__"].startswith("1999")


def test_a_journal_that_cannot_be_written_falls_back_to_writing_at_once(use_journal, post, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    use_journal(LOG_JOURNAL_DIR=str(blocker / "journal"))
    assert post(_subtract(5))["result"] == 4
    assert Envelope.objects.count() == 1


def test_system_check_warns_when_the_journal_directory_cannot_be_written(use_journal, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    use_journal(LOG_JOURNAL_DIR=str(blocker / "journal"))
    found = [e for e in checks.run_checks() if e.id == "jsonrpc_app.W041"]
    assert len(found) == 1 and str(blocker) in found[0].msg


@pytest.mark.parametrize(
    "key,value,check_id",
    [
        ("LOG_JOURNAL_FSYNC", "sometimes", "jsonrpc_app.E045"),
        ("LOG_JOURNAL", "tape", "jsonrpc_app.E045"),
        ("LOG_LOADER_CHUNK", 0, "jsonrpc_app.E046"),
        ("LOG_LOADER_NICE", 20, "jsonrpc_app.E046"),
        ("LOG_LOADER_NICE", 2.5, "jsonrpc_app.E046"),
    ],
)
def test_system_check_refuses_bad_journal_settings(use_journal, key, value, check_id):
    use_journal(**{key: value})
    assert check_id in {e.id for e in checks.run_checks()}


def test_the_loader_command_loads_once_and_reports(use_journal, post, journal_dir):
    for i in range(3):
        post(_subtract(i))
    journal.close()
    from io import StringIO

    out = StringIO()
    call_command("jsonrpc_log_loader", "--once", stdout=out)
    assert "3 envelopes" in out.getvalue()
    assert Envelope.objects.count() == 3
    assert not journal.journals(journal_dir)


def test_the_loader_command_runs_at_the_priority_asked_and_loads_what_the_workers_append(
    use_journal, post, journal_dir, tmp_path
):
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time
    from pathlib import Path

    for i in range(3):
        post(_subtract(i))
    journal.close()
    root = Path(__file__).resolve().parent.parent
    database = tmp_path / "loader.sqlite3"
    env = dict(os.environ, DATABASE_URL="sqlite:///%s" % database, JSONRPC_JOURNAL_DIR=str(journal_dir),
               DJANGO_SETTINGS_MODULE="project.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True,
                   timeout=120)
    loader_process = subprocess.Popen(
        [sys.executable, "manage.py", "jsonrpc_log_loader", "--nice", "7", "--interval", "0.1"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        loaded = 0
        while time.monotonic() < deadline and loaded < 3:
            time.sleep(0.2)
            if database.exists():
                with sqlite3.connect(database) as db:
                    loaded = db.execute("SELECT COUNT(*) FROM jsonrpc_app_call").fetchone()[0]
        # Field 19 of /proc/PID/stat: the nice value.
        stat = Path("/proc/%d/stat" % loader_process.pid).read_text()
        nice = int(stat.rsplit(")", 1)[1].split()[16])
    finally:
        loader_process.send_signal(signal.SIGTERM)
        out, err = loader_process.communicate(timeout=30)
    assert loaded == 3, err.decode()[-2000:]
    assert nice == os.nice(0) + 7
    assert loader_process.returncode == 0


def test_the_loader_command_refuses_a_priority_out_of_range(use_journal):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="1 to 19"):
        call_command("jsonrpc_log_loader", "--once", "--nice", "25")


# -- Redis Streams -----------------------------------------------------------------


def _redis_or_skip():
    redis = pytest.importorskip("redis")
    c = redis.Redis.from_url("redis://127.0.0.1:6379/0", socket_connect_timeout=1)
    try:
        c.ping()
    except redis.RedisError as exc:
        pytest.skip("Redis does not answer on 127.0.0.1:6379: %s" % exc)
    return c


@pytest.fixture
def redis_stream(use_journal, request):
    c = _redis_or_skip()
    name = "jsonrpc_app:test:%d:%s" % (os.getpid(), request.node.name[:40])
    c.delete(name, name + ":rejected")
    use_journal(LOG_JOURNAL="redis", LOG_JOURNAL_REDIS_STREAM=name, LOG_JOURNAL_REDIS_CLAIM_IDLE=30.0)
    yield c, name
    c.delete(name, name + ":rejected")


def test_redis_journal_appends_with_xadd_and_loads_with_a_consumer_group(redis_stream, post):
    c, name = redis_stream
    for i in range(5):
        post(_subtract(i))
    assert c.xlen(name) == 5
    assert not Envelope.objects.exists()
    result = loader.load_pending()
    assert (result.written, result.error) == (5, None)
    assert Envelope.objects.count() == 5
    assert c.xlen(name) == 0, "acknowledged and deleted after the commit"
    assert c.xpending(name, "jsonrpc-loaders")["pending"] == 0


def test_redis_entries_of_a_loader_that_died_mid_chunk_are_loaded_by_the_next(redis_stream, post, settings):
    c, name = redis_stream
    for i in range(4):
        post(_subtract(i))
    from jsonrpc_app.log import redis_journal

    redis_journal._ensure_group(c, name)
    # A loader reads the entries and dies before its commit: they stay pending.
    taken = c.xreadgroup(redis_journal.GROUP, "dead-loader", {name: ">"}, count=10)
    assert len(taken[0][1]) == 4
    assert c.xpending(name, redis_journal.GROUP)["pending"] == 4
    result = loader.load_pending()
    assert result.written == 0, "not claimed before they are idle long enough"
    settings.JSONRPC = {**settings.JSONRPC, "LOG_JOURNAL_REDIS_CLAIM_IDLE": 0.001}
    time.sleep(0.01)
    result = loader.load_pending()
    assert result.written == 4
    assert Envelope.objects.count() == 4
    assert c.xpending(name, redis_journal.GROUP)["pending"] == 0


def test_redis_status_says_how_many_entries_wait_and_since_when(redis_stream, post):
    from jsonrpc_app.log import redis_journal

    post(_subtract(1))
    post(_subtract(2))
    status = redis_journal.status()
    assert status.pending_lines == 2
    assert abs(status.oldest_at - time.time()) < 60


# -- helpers --------------------------------------------------------------------------


@pytest.fixture
def unreachable_log():
    """A database alias whose server refuses connections (of the test database's engine)."""
    from tests.test_spool import UNREACHABLE, unreachable_settings

    settings_dict = unreachable_settings()
    connections[UNREACHABLE] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, UNREACHABLE)
    yield UNREACHABLE
    connections[UNREACHABLE].close()
    del connections[UNREACHABLE]



def test_the_admin_lists_say_how_far_the_loader_is_behind(use_journal, post, admin_client, journal_dir):
    for i in range(3):
        post(_subtract(i))
    page = admin_client.get("/admin/jsonrpc_app/envelope/").content.decode()
    assert "3 envelopes wait in the call log journal" in page
    assert str(journal_dir) in page
    assert "the oldest was received" in page
    loader.load_pending()
    page = admin_client.get("/admin/jsonrpc_app/call/").content.decode()
    assert "wait in the call log journal" not in page


def test_the_admin_warns_when_the_oldest_unloaded_envelope_is_old(use_journal, post, admin_client, journal_dir):
    post(_subtract(1))
    (path,) = journal.journals(journal_dir)
    journal.close()
    path.write_bytes(_edit_line(path.read_bytes(), lambda record: record["e"].update(created_at="2020-01-01T00:00:00+00:00")))
    response = admin_client.get("/admin/jsonrpc_app/envelope/")
    levels = {m.level_tag: m.message for m in response.context["messages"]}
    assert "Is the loader running" in levels["warning"]
    assert "1 envelope waits" in levels["warning"]


def test_envelope_uids_drawn_after_a_fork_differ_from_the_parents():
    """uuid7()'s generator is seeded again in a forked worker: no two workers repeat a uid."""
    from jsonrpc_app.models import uuid7

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next uid, then exit at once
        os.write(write, uuid7().bytes)
        os._exit(0)
    os.close(write)
    mine = uuid7()
    theirs = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    random_bits = (1 << 62) - 1  # below the variant bits
    assert mine.int & random_bits != int.from_bytes(theirs, "big") & random_bits
    assert mine.version == 7
