"""
The call log's spool: envelopes the log database cannot take are spooled,
the client's answer does not change, and a flush writes each spooled
envelope to the log exactly once -- also after a crash between inserting
and deleting the spool file.

The unreachable database is real: a PostgreSQL alias on a port nothing
listens on.
"""

import json
import os
import shutil
import socket
import time
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.db.utils import load_backend

from jsonrpc_app.log import spool, store
from jsonrpc_app.models import Call, Envelope

UNREACHABLE = "spool_unreachable"


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unreachable_settings():
    """The settings of alias UNREACHABLE: a PostgreSQL server nothing listens for."""
    return connections.configure_settings(
        {
            "default": dict(connections.settings["default"]),
            UNREACHABLE: {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "spool_unreachable",
                "USER": "postgres",
                "HOST": "127.0.0.1",
                "PORT": str(_closed_port()),
                "OPTIONS": {"connect_timeout": 2},
            },
        }
    )[UNREACHABLE]


@pytest.fixture
def unreachable_alias():
    """
    A database alias whose server refuses connections (nothing listens on its
    port); created on the fly, as Django allows for connections that are not
    in settings.DATABASES.
    """
    settings_dict = unreachable_settings()
    connections[UNREACHABLE] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(
        settings_dict, UNREACHABLE
    )
    yield UNREACHABLE
    connections[UNREACHABLE].close()
    del connections[UNREACHABLE]


@pytest.fixture
def spool_dir(tmp_path):
    return tmp_path / "spool"


@pytest.fixture
def log_to(settings, spool_dir):
    """Point the call log at a database alias (spool in tmp, replay inline)."""

    def configure(alias, **extra):
        settings.JSONRPC = {
            **getattr(settings, "JSONRPC", {}),
            "LOG_DATABASE": alias,
            "SPOOL_DIR": str(spool_dir),
            "SPOOL_FLUSH_INTERVAL": None,
            "SPOOL_RETRY_DELAY": 0,
            **extra,
        }

    return configure


def _spooled_lines(directory):
    lines = []
    for path in sorted(directory.glob("*")):
        if path.name.endswith((spool.ACTIVE, spool.CLAIMED)):
            lines.extend(json.loads(line) for line in path.read_bytes().splitlines())
    return lines


def _subtract(i):
    return {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i}


@pytest.mark.django_db
def test_answer_is_unchanged_and_envelope_spooled_when_log_database_is_unreachable(
    call, unreachable_alias, log_to, spool_dir
):
    log_to(unreachable_alias)
    assert call(_subtract(43)) == {"jsonrpc": "2.0", "result": 42, "id": 43}
    assert call([_subtract(1), {"jsonrpc": "2.0", "method": "update", "params": [1]}]) == [
        {"jsonrpc": "2.0", "result": 0, "id": 1}
    ]
    lines = _spooled_lines(spool_dir)
    assert len(lines) == 2
    assert [len(line["calls"]) for line in lines] == [1, 2]
    assert lines[0]["envelope"]["uid"] == lines[0]["uid"]
    assert lines[0]["calls"][0]["method"] == "subtract"
    assert lines[0]["calls"][0]["result"] == 42
    assert lines[1]["envelope"]["is_batch"] is True
    assert "OperationalError" in lines[0]["reason"]
    # Appended with a newline per envelope, in a file named after this process.
    (active,) = spool_dir.glob("*" + spool.ACTIVE)
    assert "-%d-" % os.getpid() in active.name
    assert active.read_bytes().count(b"\n") == 2
    assert Envelope.objects.using("default").count() == 0
    assert spool.status(spool_dir).pending == 2


@pytest.mark.django_db
def test_flush_writes_spooled_envelopes_exactly_once(call, unreachable_alias, log_to, spool_dir):
    log_to(unreachable_alias)
    for i in range(3):
        call(_subtract(i))
    uids = sorted(line["uid"] for line in _spooled_lines(spool_dir))
    log_to("default")

    result = store.flush()
    assert (result.written, result.present, result.rejected, result.files) == (3, 0, 0, 1)
    assert sorted(str(u) for u in Envelope.objects.values_list("uid", flat=True)) == uids
    assert sorted(Call.objects.values_list("result", flat=True)) == [-1, 0, 1]
    assert list(spool_dir.iterdir()) == []
    assert not spool.status(spool_dir)

    again = store.flush()
    assert (again.written, again.present, again.files) == (0, 0, 0)
    assert Envelope.objects.count() == 3
    assert Call.objects.count() == 3


@pytest.mark.django_db
def test_spooled_envelope_keeps_its_fields(call, unreachable_alias, log_to, spool_dir):
    log_to(unreachable_alias)
    call(
        [_subtract(7), {"jsonrpc": "2.0", "method": "nope", "id": "x"}],
        HTTP_USER_AGENT="agent/1.0",
    )
    log_to("default")
    store.flush()
    envelope = Envelope.objects.get()
    assert envelope.is_batch
    assert envelope.user_agent == "agent/1.0"
    assert envelope.call_count == 2
    assert envelope.error_count == 1
    assert json.loads(envelope.request_body)[0]["method"] == "subtract"
    first, second = envelope.calls.order_by("position")
    assert (first.method, first.params, first.result, first.request_id) == ("subtract", [7, 1], 6, 7)
    assert (second.method, second.error_code, second.request_id) == ("nope", -32601, "x")
    assert first.created_at == envelope.created_at


@pytest.mark.django_db
def test_next_successful_write_replays_the_spool(call, unreachable_alias, log_to, spool_dir):
    log_to(unreachable_alias)
    call(_subtract(10))
    call(_subtract(11))
    log_to("default")
    call(_subtract(12))
    assert sorted(Call.objects.values_list("request_id", flat=True)) == [10, 11, 12]
    assert list(spool_dir.iterdir()) == []


@pytest.mark.django_db
def test_replay_is_idempotent_after_a_crash_between_insert_and_truncation(
    call, unreachable_alias, log_to, spool_dir, tmp_path
):
    log_to(unreachable_alias)
    for i in range(4):
        call(_subtract(i))
    # What a flush that dies after its commit and before deleting the file
    # leaves behind: the rows in the log and the same file, claimed, in the spool.
    saved = tmp_path / "saved"
    shutil.copytree(spool_dir, saved)
    log_to("default")
    assert store.flush().written == 4
    for path in saved.iterdir():
        claimed = spool_dir / (path.name[: -len(spool.ACTIVE)] + ".dead0001" + spool.CLAIMED)
        shutil.copy(path, claimed)

    result = store.flush()
    assert (result.written, result.present, result.files) == (0, 4, 1)
    assert Envelope.objects.count() == 4
    assert Call.objects.count() == 4
    assert list(spool_dir.iterdir()) == []


@pytest.mark.django_db
def test_replay_after_a_crash_mid_file_writes_only_the_missing_envelopes(
    call, unreachable_alias, log_to, spool_dir, tmp_path
):
    log_to(unreachable_alias)
    for i in range(5):
        call(_subtract(i))
    (active,) = spool_dir.glob("*" + spool.ACTIVE)
    lines = active.read_bytes().splitlines(keepends=True)
    log_to("default")
    # Two of the five reached the log before the crash.
    partial = tmp_path / "partial" / active.name
    partial.parent.mkdir()
    partial.write_bytes(b"".join(lines[:2]))
    assert store.flush(directory=partial.parent).written == 2

    result = store.flush()
    assert (result.written, result.present) == (3, 2)
    assert sorted(Call.objects.values_list("request_id", flat=True)) == [0, 1, 2, 3, 4]


@pytest.mark.django_db
def test_torn_last_line_of_a_dead_process_is_kept_aside_and_the_rest_replayed(
    call, unreachable_alias, log_to, spool_dir
):
    log_to(unreachable_alias)
    call(_subtract(1))
    call(_subtract(2))
    (active,) = spool_dir.glob("*" + spool.ACTIVE)
    with open(active, "ab") as f:
        f.write(b'{"v":1,"uid":"6b0a')
    log_to("default")
    result = store.flush()
    assert (result.written, result.rejected) == (2, 1)
    (rejected,) = spool_dir.glob("*" + spool.REJECTED)
    assert rejected.read_bytes() == b'{"v":1,"uid":"6b0a\n'
    assert spool.status(spool_dir).rejected == 1
    assert spool.status(spool_dir).pending == 0


@pytest.mark.django_db
def test_flush_while_the_database_is_unreachable_keeps_everything(
    call, unreachable_alias, log_to, spool_dir
):
    log_to(unreachable_alias)
    call(_subtract(1))
    call(_subtract(2))
    result = store.flush()
    assert result.error is not None
    assert result.written == 0
    assert spool.status(spool_dir).pending == 2
    log_to("default")
    assert store.flush().written == 2


@pytest.mark.django_db
def test_envelopes_go_straight_to_the_spool_during_the_retry_delay(
    call, unreachable_alias, log_to, spool_dir
):
    log_to(unreachable_alias, SPOOL_RETRY_DELAY=3600)
    call(_subtract(1))
    call(_subtract(2))
    first, second = _spooled_lines(spool_dir)
    assert "OperationalError" in first["reason"]
    # The database failed a moment ago: the second envelope did not try it.
    assert "SPOOL_RETRY_DELAY" in second["reason"]


@pytest.mark.django_db
def test_management_command_flushes_the_spool(call, unreachable_alias, log_to, spool_dir):
    log_to(unreachable_alias)
    call(_subtract(5))
    call(_subtract(6))
    with pytest.raises(CommandError, match="cannot be written"):
        call_command("jsonrpc_flush_spool", stdout=StringIO())
    log_to("default")
    out = StringIO()
    call_command("jsonrpc_flush_spool", stdout=out)
    assert "Wrote 2 envelopes" in out.getvalue()
    assert Envelope.objects.count() == 2
    out = StringIO()
    call_command("jsonrpc_flush_spool", stdout=out)
    assert "Wrote 0 envelopes" in out.getvalue()
    assert Envelope.objects.count() == 2


@pytest.mark.django_db
def test_spool_lines_round_trip_hostile_values(call, unreachable_alias, log_to):
    log_to(unreachable_alias)
    body = '{"jsonrpc":"2.0","method":"echo","params":["a\\u0000\\ud800", %d, 1e308],"id":1}' % 2**64
    call(body)
    log_to("default")
    assert store.flush().written == 1
    (logged,) = Call.objects.all()
    assert logged.params == ["a\\u0000\\ud800", 2**64, 1e308]
    assert type(logged.params[2]) is float


@pytest.mark.skipif(connection.vendor != "postgresql", reason="kills a PostgreSQL backend")
@pytest.mark.django_db(transaction=True)
def test_failed_write_leaves_the_connection_usable_for_the_next_one(call, log_to, spool_dir):
    log_to("default")
    call(_subtract(1))
    assert Envelope.objects.count() == 1
    # The server ends this connection, as a restart would.
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    call(_subtract(2))  # fails on the dead connection: spooled
    assert spool.status(spool_dir).pending == 1
    call(_subtract(3))  # a new connection: written, and the spool replayed
    assert sorted(Call.objects.values_list("request_id", flat=True)) == [1, 2, 3]
    assert not spool.status(spool_dir)


@pytest.mark.django_db
def test_admin_changelists_say_how_many_envelopes_wait_in_the_spool(
    admin_client, call, unreachable_alias, log_to, spool_dir
):
    log_to(unreachable_alias)
    call(_subtract(1))
    call(_subtract(2))
    log_to("default")
    for url in ("/admin/jsonrpc_app/envelope/", "/admin/jsonrpc_app/call/"):
        page = admin_client.get(url).content.decode()
        assert "2 envelopes are waiting in the call log&#x27;s spool (%s)" % spool_dir in page
        assert "jsonrpc_flush_spool" in page
    store.flush()
    page = admin_client.get("/admin/jsonrpc_app/envelope/").content.decode()
    assert "waiting in the call log" not in page
    assert Envelope.objects.count() == 2


@pytest.mark.django_db
def test_admin_changelist_reports_rejected_spool_lines(admin_client, log_to, spool_dir):
    log_to("default")
    spool_dir.mkdir()
    (spool_dir / ("host-1-abc" + spool.REJECTED)).write_bytes(b"{not json\n")
    page = admin_client.get("/admin/jsonrpc_app/envelope/").content.decode()
    assert "1 spooled envelope was refused by the database" in page


@pytest.fixture
def flush_thread():
    yield
    store.stop_flusher()


@pytest.mark.django_db(transaction=True)
def test_background_thread_replays_the_spool_without_another_write(
    call, unreachable_alias, log_to, spool_dir, flush_thread
):
    log_to(unreachable_alias, SPOOL_FLUSH_INTERVAL=0.05)
    call(_subtract(1))
    call(_subtract(2))
    assert spool.status(spool_dir).pending == 2
    # The database is back; nobody calls: the thread replays on its own.
    log_to("default", SPOOL_FLUSH_INTERVAL=0.05)
    deadline = time.monotonic() + 60
    while spool.status(spool_dir).pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spool.status(spool_dir).pending == 0
    assert sorted(Call.objects.values_list("request_id", flat=True)) == [1, 2]


def _spool_check_ids():
    from jsonrpc_app.checks import check_spool_settings

    return [e.id for e in check_spool_settings()]


def test_spool_settings_pass_the_system_checks(log_to):
    log_to("default")
    assert _spool_check_ids() == []


def test_negative_spool_timings_are_a_system_check_error(log_to):
    log_to("default", SPOOL_FLUSH_INTERVAL=-1, SPOOL_RETRY_DELAY="soon")
    assert _spool_check_ids() == ["jsonrpc_app.E040", "jsonrpc_app.E040"]


def test_spool_dir_that_cannot_be_written_is_a_system_check_warning(log_to, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    log_to("default", SPOOL_DIR=str(blocker / "spool"))
    assert _spool_check_ids() == ["jsonrpc_app.W040"]
