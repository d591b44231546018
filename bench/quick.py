"""
A quick lockstep comparison of a few targets with the bare view, ratios
only: what a change to the hot path is checked with before ``make bench``.

    python -m bench.quick [--targets app,modern-rpc] [--workloads single,batch]
                          [--rounds 3] [--cycles 60]
"""

import argparse
import os
import statistics

from .__main__ import HERE, lockstep, prepare, round_ratio
from .workloads import TARGETS


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.quick")
    parser.add_argument("--targets", default="app")
    parser.add_argument("--workloads", default="single,batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=60)
    args = parser.parse_args(argv)
    targets = ["bare"] + [t for t in args.targets.split(",") if t != "bare"]
    for t in targets:
        if t not in TARGETS:
            parser.error("unknown target %r" % t)
    names = args.workloads.split(",")
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.settings")
    env.setdefault("BENCH_RESULTS_DIR", str(HERE / "results"))
    prepare(env)
    rounds = [lockstep(env, args.cycles, targets=targets, workloads=names) for _ in range(args.rounds)]
    for name in names:
        for target in targets[1:]:
            per_round = [round_ratio(r, target, "bare", "us", name) for r in rounds]
            print("%-12s %-12s × bare (CPU) %.3f   rounds: %s   bare µs/call %.2f" % (
                name, target, statistics.median(per_round),
                " ".join("%.3f" % x for x in per_round),
                statistics.median(r["bare"]["us"][name] for r in rounds)))


if __name__ == "__main__":
    main()
