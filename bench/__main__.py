"""
Run the whole benchmark and print its tables (``make bench``).

    python -m bench [--rounds 5] [--cycles 40] [--http-rounds 3] [--duration 2]
                    [--no-http] [--no-inprocess] [--no-asgi]

In-process, each round starts a fresh process per target and hands them
short chunks of calls in turn (bare, bare-orjson, app, app-log, app-log-bg,
modern-rpc, then again: see lockstep()), so that a disturbance on this shared machine
hits every target alike; ratios are medians of the ratios of neighbouring
chunks. Over HTTP, each target runs in turn per round; then the async
targets under uvicorn (bench.over_asgi). Each figure is the median of the
rounds, and ratios are taken within the same run.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import django

from .workloads import BATCH, INPROCESS_TARGETS, LABELS, TARGETS, WORKLOADS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HTTP_WORKLOADS = ("single", "batch")
CLOCKS = {"us": "CPU", "wall_us": "wall"}


def log_database():
    url = os.environ.get("DATABASE_URL")
    if not url:
        return "SQLite (WAL, synchronous=NORMAL)"
    return "%s (DATABASE_URL)" % url.split(":", 1)[0]


def machine():
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import rest_framework

    return "%s, %d cores, %s, Python %s, Django %s, DRF %s" % (
        cpu,
        os.cpu_count() or 0,
        platform.platform(terse=True),
        platform.python_version(),
        django.get_version(),
        rest_framework.VERSION,
    )


def run_json(args, env, timeout):
    out = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit("bench: %s failed (exit %s)" % (" ".join(args), out.returncode))
    return json.loads(out.stdout.strip().splitlines()[-1])


def prepare(env):
    results = Path(env["BENCH_RESULTS_DIR"])
    results.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("DATABASE_URL"):
        for suffix in ("", "-wal", "-shm"):
            (results / ("bench.sqlite3" + suffix)).unlink(missing_ok=True)
    shutil.rmtree(results / "journal", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )


# Bodies per timed chunk: a few milliseconds of the fastest target.
CHUNK = {"single": 20, "typed": 20, "batch": 2, "typed-batch": 2}


def lockstep(env, cycles, warmup=3, targets=INPROCESS_TARGETS, workloads=WORKLOADS):
    """
    One in-process round: a fresh process per target, set up side by side,
    then handed chunks of each workload in turn (bare, bare-orjson, app,
    app-log, app-log-bg, modern-rpc, bare, ...), ``cycles`` chunks each. Neighbouring
    chunks of different targets are a few milliseconds apart, so a busy
    spell on this shared machine hits them alike; each chunk's ratio to the
    bare view's neighbouring chunk is what the tables' ratios are made of.
    """
    procs = {}
    try:
        for target in targets:
            procs[target] = subprocess.Popen(
                [sys.executable, "-m", "bench.inprocess", target, "--serve"],
                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
        for target, proc in procs.items():
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise SystemExit("bench: %s did not start (%r)" % (target, line))

        def ask(target, line):
            proc = procs[target]
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
            if not answer:
                raise SystemExit("bench: %s stopped (exit %s)" % (target, proc.wait()))
            return json.loads(answer)

        rnd = {t: {"us": {}, "wall_us": {}, "chunks": {"us": {}, "wall_us": {}}} for t in targets}
        for name in workloads:
            for _ in range(warmup):
                for target in targets:
                    ask(target, "%s %d" % (name, CHUNK[name]))
            for target in targets:
                for key in CLOCKS:
                    rnd[target]["chunks"][key][name] = []
            for _ in range(cycles):
                for target in targets:
                    chunk = ask(target, "%s %d" % (name, CHUNK[name]))
                    for key in CLOCKS:
                        rnd[target]["chunks"][key][name].append(chunk[key])
            for target in targets:
                for key in CLOCKS:
                    rnd[target][key][name] = statistics.median(rnd[target]["chunks"][key][name])
        if "app-log" in procs:
            rnd["app-log"]["queries"] = {name: ask("app-log", "queries " + name) for name in workloads}
        return rnd
    finally:
        for proc in procs.values():
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def paired(values, bases):
    """The median over rounds of value / base, each pair from the same round."""
    return statistics.median(v / b for v, b in zip(values, bases) if b)


def round_ratio(rnd, target, base, key, name):
    """
    One round's ratio of ``target`` to ``base``: the median of the ratios of
    chunks timed back to back (see lockstep()), else of the round's medians.
    """
    chunks = rnd[target].get("chunks")
    if chunks:
        pairs = zip(chunks[key][name], rnd[base]["chunks"][key][name])
        return statistics.median(a / b for a, b in pairs if b)
    b = rnd[base][key][name]
    return rnd[target][key][name] / b if b else 0.0


def ratio_over(rounds, target, base, key, name):
    """The median over rounds of the round's ratio of ``target`` to ``base``."""
    return statistics.median(round_ratio(r, target, base, key, name) for r in rounds)


def fmt(r):
    return "%.2f×" % r


def spread(values):
    med = statistics.median(values)
    return "±%.0f%%" % ((max(values) - min(values)) / 2 / med * 100) if med else "–"


def inprocess_table(rounds, key):
    """Return (markdown table, {(target, workload): median µs}, {(target, workload): ratio to bare})."""
    other = "wall_us" if key == "us" else "us"
    lines = [
        "| workload | target | µs per call (%s) | spread | × bare | × modern-rpc | (%s µs) |"
        % (CLOCKS[key], CLOCKS[other]),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    medians = {}
    ratios = {}
    for name, (label, *_rest) in WORKLOADS.items():
        series = {t: [r[t][key][name] for r in rounds] for t in INPROCESS_TARGETS}
        for target in INPROCESS_TARGETS:
            values = series[target]
            medians[target, name] = statistics.median(values)
            ratios[target, name] = ratio_over(rounds, target, "bare", key, name)
            lines.append(
                "| %s | %s | %.2f | %s | %s | %s | %.2f |"
                % (label, LABELS[target], medians[target, name], spread(values),
                   fmt(ratios[target, name]), fmt(ratio_over(rounds, target, "modern-rpc", key, name)),
                   statistics.median(r[target][other][name] for r in rounds))
            )
    return "\n".join(lines), medians, ratios


def http_table(rounds):
    lines = [
        "| workload | target | req/s | p50 ms | p99 ms | × bare req/s | × modern-rpc req/s "
        "| worker CPU µs/req | × bare capacity | × modern-rpc capacity |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    medians = {}
    for name in HTTP_WORKLOADS:
        label = WORKLOADS[name][0].replace(", per call", "")
        runs = {t: [r[t]["http"][name] for r in rounds] for t in TARGETS}
        rps = {t: [run["rps"] for run in runs[t]] for t in TARGETS}
        # Capacity: the inverse of the workers' CPU per request.
        cap = {t: [1.0 / run["cpu_us"] if run["cpu_us"] else 0.0 for run in runs[t]] for t in TARGETS}
        for target in TARGETS:
            m = {key: statistics.median(run[key] for run in runs[target])
                 for key in ("rps", "p50_us", "p99_us", "cpu_us")}
            m["errors"] = sum(run["errors"] + run["non_2xx"] for run in runs[target])
            m["rps_bare"] = paired(rps[target], rps["bare"])
            m["rps_modern"] = paired(rps[target], rps["modern-rpc"])
            m["cap_bare"] = paired(cap[target], cap["bare"])
            m["cap_modern"] = paired(cap[target], cap["modern-rpc"])
            medians[target, name] = m
            lines.append(
                "| %s | %s | %.0f | %.2f | %.2f | %s | %s | %.0f | %s | %s |%s"
                % (label, LABELS[target], m["rps"], m["p50_us"] / 1000, m["p99_us"] / 1000,
                   fmt(m["rps_bare"]), fmt(m["rps_modern"]), m["cpu_us"],
                   fmt(m["cap_bare"]), fmt(m["cap_modern"]),
                   " %d errors" % m["errors"] if m["errors"] else "")
            )
    return "\n".join(lines), medians


def verdicts(rounds, key, http):
    """The targets of issue 6, checked against this run (paired ratios, as in the tables)."""
    out = []

    def check(text, value, limit, ok):
        out.append("- [%s] %s: %.2f (target %s)" % ("x" if ok else " ", text, value, limit))

    def ratio_of(target, base, name):
        return ratio_over(rounds, target, base, key, name)

    if rounds:
        r = ratio_of("app", "bare", "single")
        check("single call, logging off, × bare", r, "≤ 1.10", r <= 1.10)
        r = ratio_of("app", "bare", "batch")
        check("batch of %d, logging off, × bare per call" % BATCH, r, "≤ 1.25", r <= 1.25)
        r = ratio_of("app-log", "app", "batch")
        check("batch of %d, logging on × logging off" % BATCH, r, "≤ 3", r <= 3)
        if "app-log-bg" in rounds[0]:
            r = ratio_of("app-log-bg", "app", "batch")
            check("batch of %d, logging on (background writer) × logging off" % BATCH, r, "≤ 3", r <= 3)
        if "app-log-journal" in rounds[0]:
            # Issue 13's targets, the loader's work included (process CPU).
            r = ratio_of("app-log-journal", "app", "single")
            check("single call, logging on (journal + loader) × logging off", r, "≤ 1.8", r <= 1.8)
            r = ratio_of("app-log-journal", "app", "batch")
            check("batch of %d, logging on (journal + loader) × logging off" % BATCH, r, "≤ 2.5", r <= 2.5)
        if "app-log-append" in rounds[0]:
            # What the request itself pays for the journal (the loader elsewhere).
            r = ratio_of("app-log-append", "app", "single")
            check("single call, logging on (the request's append) × logging off", r, "≤ 1.2", r <= 1.2)
            r = ratio_of("app-log-append", "app", "batch")
            check("batch of %d, logging on (the request's append) × logging off" % BATCH, r, "≤ 1.3", r <= 1.3)
        worst = max(ratio_of("app", "modern-rpc", n) for n in WORKLOADS)
        check("in-process, logging off, worst row × modern-rpc", worst, "< 1 on every row", worst < 1)
    if http:
        r = http["app", "batch"]["rps_bare"]
        check("HTTP batch of %d, logging off, × bare req/s" % BATCH, r, "≥ 0.85", r >= 0.85)
        r = http["app", "batch"]["cap_bare"]
        check("HTTP batch of %d, logging off, × bare capacity (worker CPU)" % BATCH, r, "≥ 0.85", r >= 0.85)
        for target in ("app-log-journal", "app-log-append", "app-log-idle"):
            if (target, "single") in http:
                for name in ("single", "batch"):
                    r = http[target, name]["rps"] / http["app", name]["rps"]
                    check("HTTP %s, %s × logging off req/s" % (name, LABELS[target].split(", ", 1)[1]),
                          r, "≥ 0.8", r >= 0.8)
        worst = min(http["app", n]["rps_modern"] for n in HTTP_WORKLOADS)
        check("HTTP, logging off, worst row × modern-rpc req/s", worst, "> 1 on every row", worst > 1)
        worst = min(http["app", n]["cap_modern"] for n in HTTP_WORKLOADS)
        check("HTTP, logging off, worst row × modern-rpc capacity", worst, "> 1 on every row", worst > 1)
    return "\n".join(out)


def render(report):
    """Return the tables (markdown) of a run's raw figures."""
    key = report.get("clock", "us")
    sections = []
    http = None
    if report["inprocess"]:
        table, _medians, _ratios = inprocess_table(report["inprocess"], key)
        queries = report["inprocess"][-1]["app-log"].get("queries", {})
        sections.append(
            "### In-process (Django's WSGIHandler), median of %d rounds\n\n%s\n\n"
            "Ratios: each chunk of calls is compared with the other target's chunk timed just "
            "before or after it (the targets take turns, a few ms each, so a busy spell hits them "
            "alike); a round's ratio is the median over its chunks, the table's the median over rounds. "
            "Spread: half the range of the rounds, in %% of the median. "
            "Logging on, SQL statements per envelope: single call %s; batch of %d %s. "
            "Background writer (LOG_WRITER = \"background\"): the envelopes waiting are written in "
            "one transaction per group, off the request; every timed chunk ends by waiting for "
            "the writer (flush), so its CPU time includes the writes its calls caused."
            % (len(report["inprocess"]), table, " ".join(queries.get("single", [])), BATCH,
               " ".join(queries.get("batch", [])))
        )
    if report["http"]:
        table, http = http_table(report["http"])
        sections.append(
            "### Over HTTP (gunicorn, 2 sync workers, 127.0.0.1; wrk 1 thread, 4 connections, %ds), "
            "median of %d rounds\n\n%s\n\n"
            "Worker CPU: the user + system time of gunicorn's workers per request (/proc); "
            "capacity = its inverse, as a ratio: what req/s would be with the cores to itself."
            % (report.get("duration", 2), len(report["http"]), table)
        )
    elif not report.get("wrk", True):
        sections.append("### Over HTTP\n\nSkipped: wrk is not installed (Debian: `apt-get install wrk`).")
    sections.append("### Targets (issues 6 and 13)\n\n" + verdicts(report["inprocess"], key, http))
    if report.get("asgi"):
        sections.append(
            "### The async endpoint over HTTP (uvicorn, 1 worker, 127.0.0.1; wrk 1 thread, 4 connections, "
            "%ds), logging off, median of %d rounds\n\n%s"
            % (report["asgi"]["duration"], len(report["asgi"]["rounds"]), report["asgi"]["table"])
        )
    return "\n\n".join(sections)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--rounds", type=int, default=5, help="in-process rounds")
    parser.add_argument("--cycles", type=int, default=40, help="chunks timed per target, workload and round")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        help="what the in-process tables compare: the process's CPU time (default), or wall-clock "
        "time (the default with DATABASE_URL, where the log's cost is partly in the database server)",
    )
    parser.add_argument("--http-rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=2, help="seconds of wrk load per workload and round")
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--no-inprocess", action="store_true")
    parser.add_argument("--no-asgi", action="store_true", help="leave out the async endpoint under uvicorn")
    parser.add_argument("--tables", metavar="JSON", help="print the tables of a saved run (latest.json) and stop")
    args = parser.parse_args(argv)
    if args.tables:
        report = json.loads(Path(args.tables).read_text())
        print("\n".join(report["machine"]) + "\n\n" + render(report))
        return

    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.settings")
    env.setdefault("BENCH_RESULTS_DIR", str(HERE / "results"))
    middleware = env.get("BENCH_MIDDLEWARE", "none")
    clock = args.clock or ("wall" if os.environ.get("DATABASE_URL") else "cpu")
    key = "us" if clock == "cpu" else "wall_us"
    started = time.time()
    prepare(env)

    header = [
        "Machine: %s; load average at start %.2f." % (machine(), os.getloadavg()[0]),
        "Settings: bench.settings, the same for every target: MIDDLEWARE = %s, DEBUG = False, "
        "persistent DB connections; call log database: %s."
        % ("startproject's 7 middleware" if middleware == "django" else "[] (none)", log_database()),
    ]
    print("\n".join(header), flush=True)
    report = {
        "machine": header,
        "clock": key,
        "duration": args.duration,
        "wrk": shutil.which("wrk") is not None or args.no_http,
        "inprocess": [],
        "http": [],
    }

    if not args.no_inprocess:
        print("\nIn-process: %d rounds of %s in lockstep, %d chunks each per workload; "
              "%s µs single/batched call ..." % (args.rounds, ", ".join(INPROCESS_TARGETS), args.cycles, CLOCKS[key]),
              flush=True)
        for i in range(args.rounds):
            rnd = lockstep(env, args.cycles)
            report["inprocess"].append(rnd)
            print("  round %d: %s" % (i + 1, ", ".join(
                "%s %.1f/%.2f" % (t, rnd[t][key]["single"], rnd[t][key]["batch"]) for t in INPROCESS_TARGETS
            )), flush=True)

    if not args.no_http and shutil.which("wrk") is not None:
        print("\nHTTP: %d interleaved rounds, gunicorn 2 sync workers, wrk %ds per workload ..."
              % (args.http_rounds, args.duration), flush=True)
        for i in range(args.http_rounds):
            rnd = {}
            for target in TARGETS:
                rnd[target] = run_json(
                    ["bench.over_http", target, "--duration", str(args.duration)], env, timeout=300
                )
            report["http"].append(rnd)
            print("  round %d: %s" % (i + 1, ", ".join(
                "%s %.0f/%.0f req/s" % (t, rnd[t]["http"]["single"]["rps"], rnd[t]["http"]["batch"]["rps"])
                for t in TARGETS
            )), flush=True)

    if not args.no_http and not args.no_asgi and shutil.which("wrk") is not None:
        print("\nASGI: %d rounds, uvicorn 1 worker, wrk %ds per workload, then batches of ten waits ..."
              % (args.http_rounds, args.duration), flush=True)
        report["asgi"] = run_json(
            ["bench.over_asgi", "--rounds", str(args.http_rounds), "--duration", str(args.duration), "--json"],
            env, timeout=1800,
        )

    text = render(report)
    print("\n" + text)
    print("\nLoad average at end %.2f; took %.0f s." % (os.getloadavg()[0], time.time() - started))
    out = Path(env["BENCH_RESULTS_DIR"]) / "latest.json"
    report["tables"] = text
    out.write_text(json.dumps(report, indent=1))
    print("Raw figures: %s" % out)


if __name__ == "__main__":
    main()
