"""The Ray backend against the process backend: snake steps/s at 1 and 2 actors, and the per-step overhead.

Every row steps the same ``--num-envs`` snakes with random actions (``env.sample_actions()``, the
same cost in every row) after a warm-up; the rows are timed in interleaved rounds and each
reports its median. ``overhead`` is what a step costs more than the process backend's with as
many workers: ``1/ray - 1/process``, per batch and per game copy.

The ``overlap`` rows measure what pipelining could gain: per step the caller also does
``--learner-us`` microseconds of work that does not need the next batch (a busy loop standing
for a learner's bookkeeping), either after the step (``sequential``) or between sending the
actions and fetching the batch (``overlapped``: ``VecEnv.step_async`` / ``step_wait``).

It starts its own local Ray instance (``ray.init(num_cpus=...)``) and shuts it down at the end.

Usage::

    python benchmarks/ray_backend.py               # 3 rounds of 3 s per row (~1-2 min)
    python benchmarks/ray_backend.py --quick       # a tiny run, to check that it works
    python benchmarks/ray_backend.py --num-envs 1024 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import gymloop as gl
from gymloop.games.snake import snake

log = logging.getLogger("bench.ray")


def _spin(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def _stepper(env: gl.VecEnv, mode: str, learner_us: float) -> Callable[[], None]:
    if mode == "plain":
        return lambda: env.step(env.sample_actions()) and None
    if mode == "sequential":
        def step() -> None:
            env.step(env.sample_actions())
            _spin(learner_us)
        return step

    def overlapped() -> None:  # the same work, done while the actors step
        env.step_async(env.sample_actions())
        _spin(learner_us)
        env.step_wait()
    return overlapped


def _time(step: Callable[[], None], seconds: float) -> float:
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(10):
            step()
        n += 10
        now = time.perf_counter()
        if now >= end:
            return n / (now - t0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=256, help="game copies in every row (default 256)")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each timed run (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the median is reported (default 3)")
    p.add_argument("--learner-us", type=float, default=1000.0, help="work per step of the overlap rows, in µs (default 1000)")
    p.add_argument("--quick", action="store_true", help="a tiny run (for tests)")
    p.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.quick:
        args.num_envs, args.seconds, args.repeats = 16, 0.3, 1
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows: dict[str, list[float]] = {}
    envs: dict[str, tuple[gl.VecEnv, Callable[[], None]]] = {}
    try:
        specs: list[tuple[str, dict[str, Any], str]] = [
            ("process, 1 worker", dict(workers=1, backend="process"), "plain"),
            ("ray, 1 actor", dict(workers=1, backend="ray"), "plain"),
            ("process, 2 workers", dict(workers=2, backend="process"), "plain"),
            ("ray, 2 actors", dict(workers=2, backend="ray"), "plain"),
            (f"ray, 2 actors + {args.learner_us:g} µs work, sequential", dict(workers=2, backend="ray"), "sequential"),
            (f"ray, 2 actors + {args.learner_us:g} µs work, overlapped", dict(workers=2, backend="ray"), "overlapped"),
        ]
        for name, kw, mode in specs:
            if kw["backend"] == "ray":  # every row's actors live at once (the rows are interleaved), one steps at a time
                kw["backend_options"] = {"num_cpus": 0.25}
            env = gl.VecEnv(snake, args.num_envs, seed=0, checked=False, **kw)
            env.reset()
            step = _stepper(env, mode, args.learner_us)
            _time(step, min(1.0, args.seconds))  # warm-up
            envs[name] = (env, step)
        for r in range(args.repeats):
            for name, (_, step) in envs.items():
                rows.setdefault(name, []).append(_time(step, args.seconds))
            log.info("round %d/%d done", r + 1, args.repeats)
    finally:
        for env, _ in envs.values():
            env.close()
        ray.shutdown()
    med = {k: statistics.median(v) for k, v in rows.items()}
    n = args.num_envs
    print(f"snake, {n} copies, random actions; {os.cpu_count()} CPUs; median of {args.repeats} rounds of {args.seconds:g} s\n")
    print("| backend | batches/s | env steps/s | overhead per batch | per game copy |")
    print("|---|---:|---:|---:|---:|")
    base = {"1": med["process, 1 worker"], "2": med["process, 2 workers"]}
    for name, sps in med.items():
        over = ""
        if name.startswith("ray, 1 actor") or name == "ray, 2 actors":
            ref = base["1" if "1 actor" in name else "2"]
            d = (1 / sps - 1 / ref) * 1e6
            over = f"{d:,.0f} µs | {d / n:,.2f} µs"
        else:
            over = " | "
        print(f"| {name} | {sps:,.0f} | {sps * n:,.0f} | {over} |")
    if args.json:
        print(json.dumps(med, indent=1))
    return 0


if __name__ == "__main__":  # the guard matters: worker processes are spawned and import this file
    sys.exit(main())
