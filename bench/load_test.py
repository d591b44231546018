#!/usr/bin/env python
"""
Load test of the call log: does every acknowledged call reach the log?

Starts the demo project under gunicorn (4 workers) against a fresh database,
sends a known number of JSON-RPC calls -- singles, batches, notifications,
some with hostile values (NUL, lone surrogates, 2**64, 1e308) -- from
several concurrent clients on 127.0.0.1, restarts PostgreSQL in the middle
(or, with ``--kill-worker``, SIGKILLs one gunicorn worker in the middle),
stops the server, runs a loader (``manage.py jsonrpc_log_loader --once``: the
journal, LOG_WRITER "journal", the default) and flushes the spool (``manage.py
jsonrpc_flush_spool``), and compares the calls acknowledged (HTTP 200/204
with a valid answer) with the rows in the call log. Prints::

    sent S, ok K, 5xx X, logged L, lost N

and exits non-zero unless 5xx and lost are both 0 (and nothing was logged
twice, and every request got an answer).

    python -m bench.load_test                      # PostgreSQL with a restart, then SQLite
    python -m bench.load_test --db sqlite --calls 2000
    python -m bench.load_test --db postgres --no-restart
    python -m bench.load_test --db postgres --no-restart --kill-worker

PostgreSQL: a database named --pg-db (default "loadtest") is dropped and
created at --pg-url; the restart runs ``pg_ctlcluster --skip-systemctl-redirect
<version> main restart`` (root or postgres user). Not part of the unit suite.
"""

import argparse
import collections
import http.client
import json
import os
import queue
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HOSTILE = ['"nul\\u0000here"', '"lone\\ud800"', str(2**64), "1e308", '{"k\\u0000":[-1e308]}']


# -- the workload -------------------------------------------------------------


def build_bodies(total, batch_size=8):
    """
    Return [(body bytes, [markers of its calls], expects_answer)] holding
    exactly ``total`` calls; each call's marker is its id, or for a
    notification its first param.
    """
    bodies = []
    n = 0

    def call(kind):
        nonlocal n
        n += 1
        marker = "L-%d" % n
        if kind == "notify":
            return {"jsonrpc": "2.0", "method": "update", "params": [marker]}, marker, False
        if kind == "hostile":
            value = HOSTILE[n % len(HOSTILE)]
            text = '{"jsonrpc":"2.0","method":"echo","params":[%s],"id":"%s"}' % (value, marker)
            return text, marker, True
        if kind == "sum":
            return {"jsonrpc": "2.0", "method": "sum", "params": [n, 0.5], "id": marker}, marker, True
        return {"jsonrpc": "2.0", "method": "subtract", "params": [n, 1], "id": marker}, marker, True

    def encode(element):
        return element if isinstance(element, str) else json.dumps(element, separators=(",", ":"))

    kinds = ["single", "notify", "batch", "single", "hostile", "batch"]
    i = 0
    while n < total:
        kind = kinds[i % len(kinds)]
        i += 1
        if kind == "batch":
            size = min(batch_size, total - n)
            elements = []
            for j in range(size):
                elements.append(call(["single", "sum", "notify", "hostile"][j % 4]))
            text = "[" + ",".join(encode(e) for e, _m, _a in elements) + "]"
            bodies.append((text.encode(), [m for _e, m, _a in elements], any(a for *_x, a in elements)))
        else:
            element, marker, answers = call(kind)
            bodies.append((encode(element).encode(), [marker], answers))
    return bodies


# -- the server ---------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, env, check=True, timeout=300):
    return subprocess.run(
        args, cwd=ROOT, env=env, check=check, timeout=timeout, capture_output=True, text=True
    )


def start_server(env, port, workers, log_path):
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [
            PYTHON, "-m", "gunicorn", "project.wsgi:application",
            "--workers", str(workers),
            "--bind", "127.0.0.1:%d" % port,
            "--timeout", "60",
            "--graceful-timeout", "30",
            "--no-control-socket",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("gunicorn exited with %s; see %s" % (proc.returncode, log_path))
        try:
            status, _ = post(port, b'{"jsonrpc":"2.0","method":"get_data","id":0}', timeout=5)
            if status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("gunicorn did not answer within 60 s; see %s" % log_path)


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def post(port, body, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/rpc/", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# -- databases ----------------------------------------------------------------


def pg_recreate(url, name):
    import psycopg

    with psycopg.connect(url.rstrip("/") + "/postgres", autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        conn.execute('CREATE DATABASE "%s"' % name)


def pg_restart():
    versions = sorted(os.listdir("/etc/postgresql"))
    started = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return time.monotonic() - started


def logged_markers(database_url, sqlite_path):
    """Return a Counter of the markers of every Call row in the log."""
    if sqlite_path is not None:
        conn = sqlite3.connect(sqlite_path)
        rows = conn.execute("SELECT request_id, params FROM jsonrpc_app_call").fetchall()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(database_url) as conn:
            rows = conn.execute(
                "SELECT request_id::text, params::text FROM jsonrpc_app_call"
            ).fetchall()
    markers = collections.Counter()
    for request_id, params in rows:
        request_id = json.loads(request_id) if request_id is not None else None
        if isinstance(request_id, str):
            markers[request_id] += 1
        elif request_id is None and params is not None:
            params = json.loads(params)
            if isinstance(params, list) and params and isinstance(params[0], str):
                markers[params[0]] += 1
    return markers


# -- one run ------------------------------------------------------------------


def check_answer(status, content, markers, expects_answer):
    """Return True if the answer acknowledges every call of the body."""
    if status == 204:
        return not expects_answer and content == b""
    if status != 200:
        return False
    try:
        answer = json.loads(content)
    except ValueError:
        return False
    answers = answer if isinstance(answer, list) else [answer]
    ids = {a.get("id") for a in answers if isinstance(a, dict)}
    return all(isinstance(a, dict) and a.get("jsonrpc") == "2.0" for a in answers) and ids <= set(
        markers
    )


def load(db, args):
    work = Path(tempfile.mkdtemp(prefix="jsonrpc-load-%s-" % db))
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="project.settings",
        DJANGO_DEBUG="0",
        JSONRPC_SPOOL_DIR=str(work / "spool"),
        JSONRPC_JOURNAL_DIR=str(work / "journal"),
        JSONRPC_LOG_WRITER=args.log_writer,
        JSONRPC_LOG_LOADER=args.loader,
        # Persistent connections: a restart breaks them under the workers' feet.
        CONN_MAX_AGE=str(args.conn_max_age),
        PYTHONPATH=str(ROOT),
    )
    sqlite_path = None
    if db == "postgres":
        database_url = "%s/%s" % (args.pg_url.rstrip("/"), args.pg_db)
        pg_recreate(args.pg_url, args.pg_db)
    else:
        sqlite_path = work / "db.sqlite3"
        database_url = "sqlite:///%s" % sqlite_path
    env["DATABASE_URL"] = database_url
    restart = db == "postgres" and not args.no_restart
    print(
        "== %s: %d calls, %d clients, gunicorn -w %d, LOG_WRITER %s (loader: %s)%s%s (work dir %s)"
        % (db, args.calls, args.clients, args.workers, args.log_writer, args.loader,
           ", PostgreSQL restart" if restart else "", ", one worker SIGKILLed" if args.kill_worker else "", work),
        flush=True,
    )
    run([PYTHON, "manage.py", "migrate", "--noinput"], env)

    bodies = build_bodies(args.calls)
    port = free_port()
    server = start_server(env, port, args.workers, work / "gunicorn.log")

    todo = queue.Queue()
    for item in bodies:
        todo.put(item)
    lock = threading.Lock()
    acked = set()
    stats = collections.Counter()
    progress = [0]
    restart_at = int(args.calls * args.restart_at)
    restarted = threading.Event()
    restart_info = {}

    def client():
        while True:
            try:
                body, markers, expects = todo.get_nowait()
            except queue.Empty:
                return
            try:
                status, content = post(port, body)
            except OSError as exc:
                with lock:
                    stats["unanswered"] += 1
                    stats["unanswered_calls"] += len(markers)
                    stats["error:" + type(exc).__name__] += 1
                continue
            with lock:
                stats["requests"] += 1
                progress[0] += len(markers)
                if status >= 500:
                    stats["5xx"] += 1
                elif check_answer(status, content, markers, expects):
                    acked.update(markers)
                else:
                    stats["bad_answers"] += 1

    def restarter():
        while progress[0] < restart_at:
            if not any(t.is_alive() for t in threads):
                return
            time.sleep(0.01)
        restart_info["at_call"] = progress[0]
        if args.kill_worker:
            restart_info["killed"] = kill_one_worker(server.pid)
        if restart:
            restart_info["seconds"] = pg_restart()
        restarted.set()

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    watcher = None
    if restart or args.kill_worker:
        watcher = threading.Thread(target=restarter)
        watcher.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    if watcher is not None:
        watcher.join()
    stop_server(server)

    journal_left = unloaded_lines(work / "journal")
    loaded = run([PYTHON, "manage.py", "jsonrpc_log_loader", "--once"], env, check=False)
    pending = spool_lines(work / "spool")
    flushed = run([PYTHON, "manage.py", "jsonrpc_flush_spool"], env, check=False)
    markers = logged_markers(database_url, sqlite_path)
    log_text = (work / "gunicorn.log").read_text(errors="replace")
    replayed_by_workers = sum(int(m) for m in re.findall(r"FlushResult written=(\d+)", log_text))
    spool_warnings = log_text.count("cannot be written")
    loader_warnings = log_text.count("The call log loader cannot write")

    sent = args.calls
    ok = len(acked)
    logged = sum(markers[m] for m in markers if m.startswith("L-"))
    lost = len(acked - set(markers))
    duplicated = sum(c - 1 for m, c in markers.items() if c > 1)
    print(
        "requests %d in %.1f s (%.0f calls/s); unanswered %d, bad answers %d"
        % (stats["requests"], elapsed, sent / elapsed, stats["unanswered"], stats["bad_answers"])
    )
    if restart:
        if restarted.is_set():
            print(
                "PostgreSQL restarted after %d calls; pg_ctlcluster restart took %.1f s"
                % (restart_info["at_call"], restart_info["seconds"])
            )
        else:
            print("PostgreSQL was NOT restarted (the run ended first)")
    print(
        "spool: %d workers reported the database unwritable; workers replayed %d envelopes; "
        "%d envelopes were left for jsonrpc_flush_spool"
        % (spool_warnings, replayed_by_workers, pending)
    )
    if args.kill_worker:
        print("worker %s SIGKILLed after %s calls" % (restart_info.get("killed"), restart_info.get("at_call")))
    print("journal: loaders reported the database unwritable %d times; %d lines were left after the "
          "workers stopped, for the next loader" % (loader_warnings, journal_left))
    print("jsonrpc_log_loader --once: %s" % (loaded.stdout.strip() or loaded.stderr.strip()))
    print("jsonrpc_flush_spool: %s" % (flushed.stdout.strip() or flushed.stderr.strip()))
    if duplicated:
        print("DUPLICATED: %d calls were logged more than once" % duplicated)
    print("sent %d, ok %d, 5xx %d, logged %d, lost %d" % (sent, ok, stats["5xx"], logged, lost), flush=True)
    # A killed worker drops the connections it held: those calls were never
    # answered, and only answered calls must be logged.
    passed = (
        stats["5xx"] == 0
        and lost == 0
        and duplicated == 0
        and (stats["unanswered"] == 0 or args.kill_worker)
        and flushed.returncode == 0
        and loaded.returncode == 0
        and (restarted.is_set() or not (restart or args.kill_worker))
    )
    return passed


def spool_lines(directory, suffixes=(".jsonl", ".replay")):
    count = 0
    if directory.is_dir():
        for path in directory.iterdir():
            if path.name.endswith(suffixes):
                count += path.read_bytes().count(b"\n")
    return count


def unloaded_lines(directory):
    """Lines of the journal files past their loader's checkpoint."""
    count = 0
    if directory.is_dir():
        for path in directory.glob("*.journal"):
            pos = Path(str(path) + ".pos")
            offset = int(pos.read_bytes().strip() or 0) if pos.exists() else 0
            with open(path, "rb") as f:
                f.seek(offset)
                count += f.read().count(b"\n")
    return count


def kill_one_worker(master_pid):
    """SIGKILL one of gunicorn's workers (the master starts another); return its pid."""
    children = subprocess.run(["pgrep", "-P", str(master_pid)], capture_output=True, text=True).stdout.split()
    if not children:
        return None
    pid = int(children[0])
    os.kill(pid, signal.SIGKILL)
    return pid


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--no-restart", action="store_true", help="do not restart PostgreSQL")
    parser.add_argument(
        "--log-writer", choices=["journal", "request", "background"], default="journal",
        help="JSONRPC LOG_WRITER of the workers (background: stopped with SIGTERM, which flushes)",
    )
    parser.add_argument("--kill-worker", action="store_true", help="SIGKILL one gunicorn worker mid-run")
    parser.add_argument("--loader", choices=["thread", "command"], default="thread",
                        help="journal: a loader thread in each worker, or only jsonrpc_log_loader after the run")
    parser.add_argument(
        "--restart-at", type=float, default=0.4, help="restart after this share of the calls"
    )
    parser.add_argument("--pg-url", default=os.environ.get("LOAD_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--pg-db", default="loadtest")
    parser.add_argument("--conn-max-age", type=int, default=60, help="CONN_MAX_AGE of the workers")
    args = parser.parse_args()
    dbs = ["postgres", "sqlite"] if args.db == "both" else [args.db]
    results = [load(db, args) for db in dbs]
    for db, passed in zip(dbs, results):
        print("%s: %s" % (db, "PASS" if passed else "FAIL"))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
