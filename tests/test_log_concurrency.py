"""
Several processes writing the call log at once -- as gunicorn workers do --
neither deadlock nor lose rows: the demo's SQLite runs in WAL mode with
IMMEDIATE transactions and a busy timeout, so no write fails with "database
is locked" (a failed write would show up in the spool).

Runs real processes against a SQLite file (the test database is in memory
and cannot be shared); the load test (bench/load_test.py) does the same over
HTTP with gunicorn, on PostgreSQL and SQLite.
"""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WRITERS = 4
CALLS_PER_WRITER = 150

WRITER = textwrap.dedent(
    """
    import json, sys
    import django
    django.setup()
    from django.test import Client

    writer, count = int(sys.argv[1]), int(sys.argv[2])
    client = Client()
    sys.stdin.readline()  # start together
    for i in range(count):
        marker = "w%d-%d" % (writer, i)
        if i % 3 == 2:
            body = [
                {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": marker},
                {"jsonrpc": "2.0", "method": "update", "params": [marker + "n"]},
            ]
        else:
            body = {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": marker}
        response = client.post("/rpc/", json.dumps(body), content_type="application/json")
        assert response.status_code == 200, response.status_code
    """
)


@pytest.mark.slow
def test_four_processes_writing_the_sqlite_log_at_once_lose_no_row(tmp_path):
    database = tmp_path / "db.sqlite3"
    spool = tmp_path / "spool"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL="sqlite:///%s" % database,
        JSONRPC_SPOOL_DIR=str(spool),
        JSONRPC_JOURNAL_DIR=str(tmp_path / "journal"),
        DJANGO_DEBUG="0",
        PYTHONPATH=str(ROOT),
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(n), str(CALLS_PER_WRITER)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for n in range(WRITERS)
    ]
    for writer in writers:
        writer.stdin.write(b"go\n")
        writer.stdin.flush()
    for writer in writers:
        _out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err.decode()
        assert b"database is locked" not in err

    conn = sqlite3.connect(database)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        ids = [r[0] and json.loads(r[0]) for r in conn.execute("SELECT request_id FROM jsonrpc_app_call")]
        envelopes = conn.execute("SELECT COUNT(*) FROM jsonrpc_app_envelope").fetchone()[0]
    finally:
        conn.close()
    expected = {"w%d-%d" % (w, i) for w in range(WRITERS) for i in range(CALLS_PER_WRITER)}
    assert sorted(i for i in ids if i is not None) == sorted(expected)
    notifications = sum(1 for i in ids if i is None)
    assert notifications == WRITERS * (CALLS_PER_WRITER // 3)
    assert envelopes == WRITERS * CALLS_PER_WRITER
    # Nothing had to wait in the spool.
    assert not spool.exists() or not any(spool.iterdir())
