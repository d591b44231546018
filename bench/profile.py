"""
Profile one target on one workload, in-process (cProfile, or pyinstrument
when installed and asked for).

    python -m bench.profile TARGET WORKLOAD [--seconds 3] [--sort tottime] [--pyinstrument]

What the "make it fast" work of issue 6 was driven by; not part of ``make bench``.
"""

import argparse
import cProfile
import os
import pstats
import time

from .inprocess import make_environ, post
from .workloads import TARGETS, WORKLOADS


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="cProfile on CPU time, not wall-clock time")
    args = parser.parse_args(argv)
    path, log = TARGETS[args.target]
    os.environ["BENCH_LOG"] = log
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

    import django
    from django.core.handlers.wsgi import WSGIHandler

    django.setup(set_prefix=False)
    handler = WSGIHandler()
    _label, body, _expected, _calls = WORKLOADS[args.workload]
    environ = make_environ(path, body)
    for _ in range(50):
        post(handler, environ, body)

    def loop():
        deadline = time.perf_counter() + args.seconds
        n = 0
        while time.perf_counter() < deadline:
            post(handler, environ, body)
            n += 1
        return n

    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0002)
        profiler.start()
        n = loop()
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False, show_all=False))
    else:
        profiler = cProfile.Profile(time.process_time) if args.cpu else cProfile.Profile()
        n = profiler.runcall(loop)
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.limit)
    print("%d requests profiled" % n)


if __name__ == "__main__":
    main()
