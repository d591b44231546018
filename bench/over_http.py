"""
One target over HTTP: the bench project under gunicorn (2 sync workers on
127.0.0.1, a free port), loaded by wrk for a bounded time per workload.

    python -m bench.over_http TARGET [--duration SECONDS]

Prints one JSON object: requests/s and p50/p99 latency for each workload, and
the CPU time the workers spent per request (from /proc).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .workloads import TARGETS, WORKLOADS

HERE = Path(__file__).resolve().parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, body, timeout=5.0):
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read()


def start_gunicorn(port, target, workers=2):
    log = TARGETS[target][1]
    env = dict(os.environ, BENCH_LOG=log, BENCH_TARGET=target, DJANGO_SETTINGS_MODULE="bench.settings")
    return subprocess.Popen(
        [
            sys.executable, "-m", "gunicorn", "bench.wsgi:application",
            "--bind", "127.0.0.1:%d" % port,
            "--workers", str(workers),
            "--worker-class", "sync",
            "--log-level", "warning",
        ],
        cwd=HERE.parent,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def stop(proc, timeout=15):
    """SIGTERM ``proc`` (a server, a loader) and wait; SIGKILL it after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_loader(target):
    """For app-log-idle: ``manage.py jsonrpc_log_loader --nice 19`` beside the workers, which only append."""
    if target != "app-log-idle":
        return None
    env = dict(os.environ, BENCH_LOG=TARGETS[target][1], BENCH_TARGET=target, DJANGO_SETTINGS_MODULE="bench.settings")
    return subprocess.Popen(
        [sys.executable, "-m", "django", "jsonrpc_log_loader", "--nice", "19", "--interval", "0.05"],
        cwd=HERE.parent, env=env, stdout=subprocess.DEVNULL,
    )


def catch_up(loader, timeout=120.0):
    """Wait (bounded) until the journal has nothing left to load; return the seconds it took."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from jsonrpc_app.log import journal

    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if loader.poll() is not None:
            raise SystemExit("the loader stopped (exit %s)" % loader.returncode)
        if not journal.status().pending_bytes:
            return time.monotonic() - started
        time.sleep(0.05)
    raise SystemExit("the loader did not catch up within %.0f s" % timeout)


def wait_ready(url, body, proc, timeout=30.0, server="gunicorn"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("%s exited with %s" % (server, proc.returncode))
        try:
            return fetch(url, body)
        except OSError:
            time.sleep(0.1)
    raise SystemExit("%s did not answer within %ss" % (server, timeout))


def workers(master):
    """Return the pids of the gunicorn master's worker processes."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...; comm may hold spaces and parentheses.
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                pids.append(int(entry.name))
    return pids


def cpu_seconds(pids):
    """Return the user + system CPU seconds the processes ``pids`` have used."""
    total = 0
    for pid in pids:
        fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def run_wrk(url, body, duration, connections, threads):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(body)
        f.flush()
        out = subprocess.run(
            [
                "wrk", "-t%d" % threads, "-c%d" % connections, "-d%ds" % duration,
                "--timeout", "5s", "-s", str(HERE / "post.lua"), url,
            ],
            env=dict(os.environ, BENCH_BODY_FILE=f.name),
            capture_output=True,
            text=True,
            timeout=duration + 30,
            check=True,
        ).stdout
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    stats = json.loads(line[len("BENCH "):])
    stats["rps"] = stats["requests"] / (stats["duration_us"] / 1e6)
    return stats


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--duration", type=int, default=3, help="seconds of load per workload")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workloads", default="single,batch")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    path, log = TARGETS[args.target]
    port = free_port()
    url = "http://127.0.0.1:%d%s" % (port, path)
    proc = start_gunicorn(port, args.target)
    out = {"target": args.target, "http": {}}
    loader = start_loader(args.target)
    try:
        for i, name in enumerate(args.workloads.split(",")):
            _label, body, expected, _calls = WORKLOADS[name]
            status, answer = wait_ready(url, body, proc)
            if status != 200 or json.loads(answer) != expected:
                raise SystemExit("%s answered %s with %s %r" % (args.target, name, status, answer[:200]))
            if i == 0:
                # Unmeasured: until both workers have booted and served, only one answers.
                run_wrk(url, body, 1, args.connections, args.threads)
                pids = workers(proc.pid)
            if loader is not None:
                catch_up(loader)
            before = cpu_seconds(pids)
            loader_before = cpu_seconds([loader.pid]) if loader is not None else 0.0
            stats = run_wrk(url, body, args.duration, args.connections, args.threads)
            # The workers' CPU per request: what a busy shared machine disturbs least.
            stats["cpu_us"] = (cpu_seconds(pids) - before) / max(stats["requests"], 1) * 1e6
            if loader is not None:
                # The loader beside the workers: how long it took to catch up after
                # the load, and its CPU per request, during the load and after it.
                stats["catch_up_s"] = catch_up(loader)
                stats["loader_cpu_us"] = (cpu_seconds([loader.pid]) - loader_before) / max(stats["requests"], 1) * 1e6
            out["http"][name] = stats
    finally:
        if loader is not None:
            stop(loader, timeout=30)
        stop(proc)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
