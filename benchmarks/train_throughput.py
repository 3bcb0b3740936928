"""End-to-end training throughput on snake: environment and PPO together, default network.

Trains snake with the default configuration for ``--steps`` steps and prints, per phase of
training (early: short episodes, few entities; late: long snakes, many entities), the median
steps/s and how a rollout+update cycle splits between collecting the rollout (game stepping and
the policy's forward pass) and the PPO update. Add ``--profile`` for the top functions (cProfile)
of a fresh run of one update cycle.

    python benchmarks/train_throughput.py --steps 2000000
    python benchmarks/train_throughput.py --steps 300000 --shape-of 3000000 --json   # the 3M-step shape, 300K steps;
                                                     # also write benchmarks/results/train_throughput.json
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import statistics
import time

from results import Run, add_json_option, figure

from gymloop.games.snake import snake
from gymloop.train import TrainConfig
from gymloop.train.ppo import Trainer


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="PyTorch threads (default: the config's, measured while training)")
    ap.add_argument("--workers", type=int, default=0, help="processes stepping the games (default 0: the trainer's process)")
    ap.add_argument("--shape-of", type=int, default=None, metavar="BUDGET",
                    help="copies, learning rate, epochs and minibatch as the defaults choose them for BUDGET steps "
                         "(e.g. 3000000, gymloop train's default) while training --steps (default: those of --steps)")
    ap.add_argument("--profile", action="store_true", help="after the measured run, cProfile a fresh run of one update cycle")
    add_json_option(ap, "train_throughput")
    args = ap.parse_args(argv)
    run = Run(__file__, "train_throughput", "Training throughput (snake, default configuration)", "2", argv)
    cfg = TrainConfig(steps=args.steps, seed=args.seed)
    if args.shape_of:  # the automatic fields as a run of that budget resolves them (docs/config.md, "Automatic fields")
        shape = TrainConfig(steps=args.shape_of).resolved()
        cfg = dataclasses.replace(cfg, num_envs=shape.num_envs, ppo=shape.ppo)
    if args.threads:
        cfg.threads = args.threads
    cfg.workers = args.workers
    t = Trainer(snake, cfg)
    t0, cpu0 = time.time(), time.process_time()
    result = t.train()
    wall, cpu = time.time() - t0, time.process_time() - cpu0
    h = result.history
    thirds = [h[: len(h) // 3], h[len(h) // 3 : 2 * len(h) // 3], h[2 * len(h) // 3 :]]
    rc = cfg.resolved()  # the automatic (None) fields as the run chose them
    print(f"snake, default config ({rc.num_envs} envs x {rc.rollout_steps} steps per rollout, "
          f"minibatch {rc.ppo.minibatch_size}, {rc.ppo.epochs} epoch(s), d_model {rc.net.d_model}, "
          f"{t.policy.num_params():,} parameters)")
    print(f"{'phase':<8} {'steps':>10} {'steps/s':>9} {'rollout s':>10} {'update s':>9} {'rollout %':>9} {'length':>7} {'threads':>7}")
    for name, part in zip(("early", "middle", "late"), thirds):
        if not part:
            continue
        sps = statistics.median(x["steps_per_second"] for x in part)
        ro = statistics.median(x["time/rollout_s"] for x in part)
        up = statistics.median(x["time/update_s"] for x in part)
        lengths = [x["length_mean"] for x in part if "length_mean" in x]
        ln = statistics.mean(lengths) if lengths else float("nan")
        th = statistics.median(x.get("threads", 1) for x in part)
        print(f"{name:<8} {int(part[-1]['step']):>10,} {sps:>9,.0f} {ro:>10.3f} {up:>9.3f} {100 * ro / (ro + up):>8.0f}% {ln:>7.1f} {th:>7g}")
    print(f"overall: {result.steps:,} steps in {wall:.1f} s = {result.steps / wall:,.0f} steps/s (including set-up); "
          f"{cpu:.1f} CPU-s of this process = {result.steps / cpu:,.0f} steps per CPU-second")
    cycle = sorted(x["time/rollout_s"] + x["time/update_s"] for x in h)
    print(f"seconds per rollout+update: median {statistics.median(cycle):.3f}, p90 {cycle[9 * len(cycle) // 10]:.3f}, "
          f"max {cycle[-1]:.3f}, total {sum(cycle):.1f}")
    lengths = [x["length_mean"] for x in h[-max(1, len(h) // 10):] if "length_mean" in x]
    run.write(args, [
        figure(f"snake training steps/s, environment + PPO, {result.steps:,} steps, {rc.num_envs} copies x {rc.rollout_steps} steps, "
               f"{rc.ppo.epochs} epoch(s) of minibatches of {rc.ppo.minibatch_size}", result.steps / wall, "steps/s", decimals=0),
        figure("the same per CPU-second of the training process (less sensitive to other load)", result.steps / cpu, "steps/CPU-s", decimals=0),
        figure(f"snake mean final length after {result.steps:,} steps (last 10% of updates)", statistics.mean(lengths) if lengths else None,
               "cells", decimals=1),
    ], {"wall_s": wall, "cpu_s": cpu, "steps": result.steps, "num_envs": rc.num_envs, "rollout_steps": rc.rollout_steps,
        "cycle_s": {"median": statistics.median(cycle), "p90": cycle[9 * len(cycle) // 10], "max": cycle[-1]},
        "history": [{k: x.get(k) for k in ("step", "steps_per_second", "time/rollout_s", "time/update_s", "length_mean")} for x in h]})
    if args.profile:  # a fresh run of one rollout and one update (set-up included), through the public API only
        pr = cProfile.Profile()
        one = Trainer(snake, dataclasses.replace(cfg, steps=rc.batch_size))
        t1 = time.time()
        pr.enable()
        one.train()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
        print(f"one update cycle (a fresh run, set-up included) profiled in {time.time() - t1:.2f} s:")
        print(s.getvalue())


if __name__ == "__main__":
    main()
