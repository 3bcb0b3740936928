"""Snake throughput: gymloop's Agent API and low-level API vs Gymnasium's vector envs.

Prints one table (steps/s, ratios, resident memory of 10,000 snakes). The measuring code lives in
:mod:`gymloop.bench` (also behind ``gymloop bench``); see its docstring for what each row is, how
Gymnasium is configured, and how the variants are timed in interleaved rounds (each ratio is the
median of the per-round ratios, so the drift of a noisy machine mostly cancels out of it).

Usage::

    python benchmarks/throughput.py                 # 5 rounds, each timing every variant for 2 s (~1-2 min)
    python benchmarks/throughput.py --quick         # a tiny run, to check that it works
    python benchmarks/throughput.py --seconds 1 --repeats 3 --num-envs 512
    python benchmarks/throughput.py --json          # also write benchmarks/results/throughput.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from results import Run, add_json_option, figure

from gymloop.bench import VARIANTS, cpu_parallelism, format_table, run_benchmarks


def figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows of the result file: each gymloop variant against its Gymnasium counterpart."""
    by = {r["key"]: r for r in rows if r["steps_per_s"] is not None}
    out = []
    for key, other, label in (("loop_w0", "gym_sync", "vs SyncVectorEnv"), ("loop_w2", "gym_async", "vs AsyncVectorEnv")):
        if key not in by:
            continue
        r, base = by[key], by.get(other)
        per = r["ratio_runs"].get(label) or []
        out.append(figure(
            f"snake steps/s, Agent API, {r['num_envs']:,} copies, workers={r['workers']}", r["steps_per_s"], "steps/s",
            baseline=f"Gymnasium {base['vectorizer'].split()[-1]}, {base['num_envs']:,} copies" if base else None,
            baseline_value=base["steps_per_s"] if base else None, ratio=r["ratios"].get(label),
            ratio_range=[min(per), max(per)] if per else None))
    if "scale" in by:
        s = by["scale"]
        out.append(figure(f"resident memory of {s['num_envs']:,} snakes in one process", s["rss_mb"], "MiB",
                          target="< 500 MB", decimals=0))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0, help="length of each timed run (default 2)")
    p.add_argument("--repeats", type=int, default=5, help="rounds; each times every variant once; the median is reported (default 5)")
    p.add_argument("--num-envs", type=int, default=256, help="game copies for gymloop and SyncVectorEnv (default 256)")
    p.add_argument("--workers", type=int, default=2, help="worker processes of the workers>0 row (default 2)")
    p.add_argument("--scale-envs", type=int, default=10_000, help="game copies of the scale row (default 10000)")
    p.add_argument("--async-num-envs", type=int, nargs="+", default=[2, 4, 8, 16],
                   help="AsyncVectorEnv sizes to try; the fastest is reported (default 2 4 8 16)")
    p.add_argument("--only", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="run only these rows")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    p.add_argument("--worker-num-envs", type=int, default=None, help="game copies of the workers>0 row (default 1024)")
    add_json_option(p, "throughput")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s", stream=sys.stderr)
    run = Run(__file__, "throughput", "Environment throughput (snake)", "1", argv)
    par = None if args.quick else cpu_parallelism()
    rows = run_benchmarks(
        seconds=args.seconds, repeats=args.repeats, num_envs=args.num_envs, workers=args.workers,
        scale_envs=args.scale_envs, async_num_envs=args.async_num_envs, variants=args.only, quick=args.quick,
        worker_num_envs=args.worker_num_envs,
    )
    print(format_table(rows, parallelism=par))
    run.write(args, figures(rows), {"effective_cores": par, "rows": rows}, packages=("gymnasium",))
    return 0


if __name__ == "__main__":  # the guard matters: worker processes are spawned and import this file
    sys.exit(main())
