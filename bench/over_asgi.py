"""
The async endpoint over HTTP: each ASGI target (bench.workloads.ASGI_TARGETS,
logging off) served by uvicorn (1 worker, 127.0.0.1, a free port) and loaded
by wrk for a bounded time per workload; then how long batches of ten waits
take on jsonrpc_app's async endpoint.

    python -m bench.over_asgi [--rounds 3] [--duration 2] [--json]

Each round starts a fresh server per target, in turn (in the opposite order
every other round, so that no target always follows the same one), so that
a disturbance of this shared machine hits every target alike. Each figure is
the median of the rounds; each ratio is the median over the rounds of that
round's ratio (the two targets measured within the same minute), not a
ratio of medians taken minutes apart. With ``--json`` the last line printed
is the raw figures and the table (what ``python -m bench`` reads).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from .over_http import HERE, cpu_seconds, fetch, free_port, run_wrk, stop, wait_ready
from .workloads import ASGI_TARGETS, LABELS, WORKLOADS

WORKLOAD_NAMES = ("single", "batch")
# Ten calls each waiting 0.05 s: one after another they take 0.5 s.
WAITS = 10
WAIT_SECONDS = 0.05
TIMED_BATCHES = 5


def start_uvicorn(port, target):
    env = dict(os.environ, BENCH_LOG=ASGI_TARGETS[target][1], BENCH_TARGET=target,
               DJANGO_SETTINGS_MODULE="bench.settings")
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--log-level", "warning", "--no-access-log",
         "--lifespan", "off"],
        cwd=HERE.parent, env=env, stdout=subprocess.DEVNULL,
    )


def load(target, duration, connections=4, threads=1):
    """Serve ``target`` and load it with each workload; return {workload: wrk stats + cpu_us}."""
    path = ASGI_TARGETS[target][0]
    port = free_port()
    url = "http://127.0.0.1:%d%s" % (port, path)
    proc = start_uvicorn(port, target)
    out = {}
    try:
        for i, name in enumerate(WORKLOAD_NAMES):
            _label, body, expected, _calls = WORKLOADS[name]
            status, answer = wait_ready(url, body, proc, server="uvicorn")
            if status != 200 or json.loads(answer) != expected:
                raise SystemExit("%s answered %s with %s %r" % (target, name, status, answer[:200]))
            if i == 0:
                run_wrk(url, body, 1, connections, threads)  # unmeasured warm-up
            before = cpu_seconds([proc.pid])
            stats = run_wrk(url, body, duration, connections, threads)
            used = cpu_seconds([proc.pid]) - before
            if stats["errors"] or stats["non_2xx"]:
                raise SystemExit("%s %s: %d errors, %d non-2xx answers" % (target, name, stats["errors"], stats["non_2xx"]))
            stats["cpu_us"] = used / stats["requests"] * 1e6 if stats["requests"] else 0.0
            out[name] = stats
    finally:
        stop(proc)
    return out


def _batch(method, seconds):
    return json.dumps([
        {"jsonrpc": "2.0", "method": method, "params": [seconds], "id": i} for i in range(WAITS)
    ]).encode()


def time_waits():
    """Seconds a batch of ten 0.05 s waits takes on the async endpoint: async def, and thread-safe sync."""
    port = free_port()
    url = "http://127.0.0.1:%d/rpc-async/" % port
    proc = start_uvicorn(port, "app-async")
    out = {}
    try:
        for key, method in (("async", "bench.sleep_async"), ("sync_threadsafe", "bench.sleep_safe")):
            body = _batch(method, WAIT_SECONDS)
            status, answer = wait_ready(url, body, proc, server="uvicorn")
            answers = json.loads(answer)
            if status != 200 or sorted(a["id"] for a in answers) != list(range(WAITS)):
                raise SystemExit("app-async answered %s with %s %r" % (method, status, answer[:200]))
            times = []
            for _ in range(TIMED_BATCHES):
                start = time.perf_counter()
                fetch(url, body)
                times.append(time.perf_counter() - start)
            out[key] = statistics.median(times)
    finally:
        stop(proc)
    return out


def run(rounds, duration):
    report = {"rounds": [], "waits": None, "duration": duration}
    for i in range(rounds):
        order = list(ASGI_TARGETS) if i % 2 == 0 else list(reversed(ASGI_TARGETS))
        rnd = {target: load(target, duration) for target in order}
        report["rounds"].append(rnd)
        print("  round %d: %s" % (i + 1, ", ".join(
            "%s %.0f/%.0f req/s" % (t, rnd[t]["single"]["rps"], rnd[t]["batch"]["rps"]) for t in ASGI_TARGETS
        )), file=sys.stderr, flush=True)
    report["waits"] = time_waits()
    return report


def _median(report, target, name, key):
    return statistics.median(r[target][name][key] for r in report["rounds"])


def _ratio(report, target, base, name, key="rps"):
    """The median over the rounds of each round's ``target`` / ``base`` (CPU: base / target, so that higher is better)."""
    if key == "cpu_us":
        return statistics.median(r[base][name][key] / r[target][name][key] for r in report["rounds"])
    return statistics.median(r[target][name][key] / r[base][name][key] for r in report["rounds"])


def render(report):
    """The markdown tables and the issue's targets of one run."""
    lines = [
        "| workload | target | req/s | × bare async | × modern-rpc async | p50 ms | p99 ms | CPU µs/request"
        " | × bare by CPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in WORKLOAD_NAMES:
        for target in ASGI_TARGETS:
            lines.append("| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f |" % (
                name, LABELS[target], _median(report, target, name, "rps"),
                _ratio(report, target, "bare-async", name), _ratio(report, target, "modern-rpc-async", name),
                _median(report, target, name, "p50_us") / 1000, _median(report, target, name, "p99_us") / 1000,
                _median(report, target, name, "cpu_us"), _ratio(report, target, "bare-async", name, "cpu_us"),
            ))
    waits = report["waits"]
    lines += [
        "",
        "A batch of %d calls each waiting %.2f s (one after another: %.1f s), median of %d, on AsyncJsonRpcView:"
        % (WAITS, WAIT_SECONDS, WAITS * WAIT_SECONDS, TIMED_BATCHES),
        "",
        "| methods | seconds |",
        "| --- | ---: |",
        "| `async def`, `await asyncio.sleep(0.05)` | %.3f |" % waits["async"],
        "| sync, `thread_sensitive=False`, `time.sleep(0.05)` | %.3f |" % waits["sync_threadsafe"],
        "",
        "Targets (issue 15):",
        "",
    ]

    def check(text, value, limit, ok):
        lines.append("- %s: %s (target %s) %s" % (text, value, limit, "met" if ok else "MISSED"))

    check("ten async waits", "%.3f s" % waits["async"], "≤ 0.07 s", waits["async"] <= 0.07)
    check("ten thread-safe sync waits", "%.3f s" % waits["sync_threadsafe"], "≤ 0.1 s", waits["sync_threadsafe"] <= 0.1)
    for target in ("app-async", "app-async-inline"):
        for name in WORKLOAD_NAMES:
            bare = _ratio(report, target, "bare-async", name)
            modern = _ratio(report, target, "modern-rpc-async", name)
            check("%s, %s, × bare async view" % (target, name), "%.2f" % bare, "≥ 0.85", bare >= 0.85)
            check("%s, %s, × django-modern-rpc async" % (target, name), "%.2f" % modern, "≥ 1.00", modern >= 1.0)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.over_asgi")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=2, help="seconds of wrk load per workload and round")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON: the figures and the table")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    report = run(args.rounds, args.duration)
    report["table"] = render(report)
    if args.json:
        print(json.dumps(report))
    else:
        print(report["table"])


if __name__ == "__main__":
    main()
