"""The Ray backend against the process backend: snake steps/s at 1 and 2 actors, and the per-step overhead.

Every row steps the same ``--num-envs`` snakes with random actions (``env.sample_actions()``, the
same cost in every row) after a warm-up; the rows are timed in interleaved rounds and each
reports its median. ``overhead`` is what a step costs more than the process backend's with as
many workers: ``1/ray - 1/process``, per batch and per game copy.

The ``overlap`` rows measure what pipelining could gain: per step the caller also does
``--learner-us`` microseconds of work that does not need the next batch (a busy loop standing
for a learner's bookkeeping), either after the step (``sequential``) or between sending the
actions and fetching the batch (``overlapped``: ``VecEnv.step_async`` / ``step_wait``).

``--train`` measures training instead (``TrainConfig.overlap``, ``gymloop train --overlap``): PPO on
snake whose every step also waits ``--wait-ms`` milliseconds without burning CPU (``time.sleep``,
standing for a game waiting on an engine or a remote service), the Ray backend with 2 actors,
training steps/s with overlap off and on (the rollout part and the whole run, update included).

It starts its own local Ray instance (``ray.init(num_cpus=...)``) and shuts it down at the end.

Usage::

    python benchmarks/ray_backend.py               # 3 rounds of 3 s per row (~1-2 min)
    python benchmarks/ray_backend.py --quick       # a tiny run, to check that it works
    python benchmarks/ray_backend.py --num-envs 1024 --seconds 5
    python benchmarks/ray_backend.py --train       # overlap off/on, 60K training steps each (~3 min)
    python benchmarks/ray_backend.py --train --quick
    python benchmarks/ray_backend.py --json        # also write benchmarks/results/ray_backend.json
                                                   # (--train: benchmarks/results/ray_backend_train.json)
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from results import RESULTS, Run, add_json_option, figure

import gymloop as gl
from gymloop.games.snake import Body, Food, Head, Move, snake

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


class _Waiting:
    """An agent wrapper that waits ``wait_s`` (``time.sleep``: no CPU) before each decision."""

    def __init__(self, agent: Any, wait_s: float) -> None:
        self.agent, self.wait_s = agent, wait_s

    def act(self, *a: Any, **k: Any) -> Any:
        if self.wait_s:
            time.sleep(self.wait_s)
        return self.agent.act(*a, **k)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)


WAIT_S = 0.002


@gl.game(entities=[Head, Body, Food], actions=[Move])
def waiting_snake(agent: Any, seed: int) -> Any:
    """Snake whose every step also waits :data:`WAIT_S` seconds (a game waiting on an engine or a service)."""
    return snake(_Waiting(agent, WAIT_S), seed)


def train_overlap(args: argparse.Namespace) -> int:
    """``--train``: training steps/s of the Ray backend (2 actors) with ``TrainConfig.overlap`` off and on."""
    import ray

    from gymloop.train import TrainConfig
    from gymloop.train.ppo import Trainer

    global WAIT_S
    WAIT_S = args.wait_ms / 1000
    steps = 2048 if args.quick else args.steps
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows: dict[str, dict[str, float]] = {}
    try:
        for overlap in (False, True):
            cfg = TrainConfig(steps=steps, num_envs=args.num_envs, rollout_steps=16, workers=2, backend="ray", seed=0,
                              overlap=overlap, checkpoint_minutes=0)
            t0 = time.perf_counter()
            r = Trainer(waiting_snake, cfg, game_name="waiting_snake").train()
            wall = time.perf_counter() - t0
            rollout = sum(h["time/rollout_s"] for h in r.history)
            update = sum(h["time/update_s"] for h in r.history)
            rows["on" if overlap else "off"] = {"steps": r.steps, "train_s": rollout + update, "rollout_s": rollout,
                                                "update_s": update, "wall_s": wall, "return": r.final_score}
            log.info("overlap %s: %s", overlap, rows["on" if overlap else "off"])
    finally:
        ray.shutdown()
    wait = f"{args.wait_ms:g} ms time.sleep per step and copy" if args.wait_ms else "no wait"
    print(f"snake + {wait}, {args.num_envs} copies, 16 steps per rollout, Ray backend "
          f"with 2 actors; {steps:,} training steps; {os.cpu_count()} CPUs\n")
    print("| overlap | training steps/s | rollout steps/s | rollout s | update s | start-up + close s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['steps'] / row['train_s']:,.0f} | {row['steps'] / row['rollout_s']:,.0f} | {row['rollout_s']:.1f} | "
              f"{row['update_s']:.1f} | {row['wall_s'] - row['train_s']:.1f} |")
    on, off = (rows[k]["steps"] / rows[k]["train_s"] for k in ("on", "off"))
    args.run.write(args, [figure(f"training steps/s with overlap, Ray backend, snake + {wait}, {args.num_envs} copies", on, "steps/s",
                                 baseline="overlap off", baseline_value=off, ratio=on / off)], rows, packages=("ray",))
    return 0


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
    add_json_option(p, "ray_backend")
    p.add_argument("--train", action="store_true", help="training steps/s with overlap off and on (see above)")
    p.add_argument("--steps", type=int, default=60_000, help="--train: training steps per row (default 60,000)")
    p.add_argument("--wait-ms", type=float, default=2.0, help="--train: time.sleep per step and game copy (default 2 ms; 0: none)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.train and args.json == str(RESULTS / "ray_backend.json"):
        args.json = str(RESULTS / "ray_backend_train.json")
    name, title = ("ray_backend_train", "Ray backend: training with overlap") if args.train else ("ray_backend", "Ray backend")
    args.run = Run(__file__, name, title, "10", argv)
    if args.train:
        if args.num_envs == 256:  # the stepping rows' default; training rows default to 32 copies
            args.num_envs = 32
        return train_overlap(args)
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
    args.run.write(args, [figure(f"snake env steps/s, Ray backend, {k} actor{'s' * (k > 1)}, {n} copies", med[f"ray, {k} actor{'s' * (k > 1)}"] * n,
                                 "steps/s", baseline=f"process backend, {k} worker{'s' * (k > 1)}", baseline_value=base[str(k)] * n,
                                 ratio=med[f"ray, {k} actor{'s' * (k > 1)}"] / base[str(k)]) for k in (1, 2)], med, packages=("ray",))
    return 0


if __name__ == "__main__":  # the guard matters: worker processes are spawned and import this file
    sys.exit(main())
