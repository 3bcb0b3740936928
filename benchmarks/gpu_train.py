"""Training on the CPU and on a GPU side by side: steps/s, the time of a PPO update and the time to a level.

Snake with the default network (``d_model`` 32, one layer) and a wider one (``d_model`` 128, two layers),
512 and 4,096 game copies, each on every device of the run (``--devices``; by default the CPU, and
``cuda`` when PyTorch sees a GPU). Per row: after one warm-up update (allocations, the CUDA context),
the median training steps/s (games and PPO together), the median seconds of a rollout and of a PPO
update; then, in a fresh run of ``--level-budget`` steps, the seconds until the mean snake length of an
update reaches ``--level`` (not reached: said so). Where PyTorch sees no GPU, the GPU rows are not
measured and the output (and the JSON) says so; nothing is estimated.

    python benchmarks/gpu_train.py --quick                 # 512 copies, 2 timed updates, no time to a level
    python benchmarks/gpu_train.py                         # every row, time to length 5 within 400K steps
    python benchmarks/gpu_train.py --json --conditions "an idle machine with one H100"
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from results import Run, add_json_option, figure

from gymloop.games.snake import snake
from gymloop.nn.config import NetConfig
from gymloop.train import TrainConfig
from gymloop.train.device import resolve_device, torch_sees
from gymloop.train.ppo import Trainer

NETWORKS = {"default": {}, "wide": {"d_model": 128, "n_layer": 2}}


def _config(device: str, net: str, copies: int, steps: int, seed: int, threads: int | None) -> TrainConfig:
    cfg = TrainConfig(steps=steps, num_envs=copies, seed=seed, threads=threads, device=device)
    cfg.net = NetConfig(**NETWORKS[net])
    return cfg


def measure(device: str, net: str, copies: int, updates: int, seed: int, threads: int | None) -> dict[str, Any]:
    """Steps/s and the rollout's and update's seconds (medians over ``updates`` after one warm-up update)."""
    cfg = _config(device, net, copies, (updates + 1) * copies * TrainConfig.rollout_steps, seed, threads)
    t = Trainer(snake, cfg)
    h = t.train().history[1:]
    return {"device": str(t.device), "network": net, "copies": copies, "params": t.policy.num_params(),
            "steps_per_s": statistics.median(x["steps_per_second"] for x in h),
            "rollout_s": statistics.median(x["time/rollout_s"] for x in h),
            "update_s": statistics.median(x["time/update_s"] for x in h),
            "threads": statistics.median(x["threads"] for x in h), "updates": len(h)}


def time_to_level(device: str, net: str, copies: int, budget: int, metric: str, level: float, seed: int,
                  threads: int | None) -> tuple[float | None, int | None]:
    """Seconds (and steps) until an update's mean ``metric`` reaches ``level`` in a run of ``budget`` steps; None: not reached."""
    result = Trainer(snake, _config(device, net, copies, budget, seed, threads)).train()
    for x in result.history:
        if x.get(f"{metric}_mean", float("-inf")) >= level:
            return x["time/total_s"], int(x["step"])
    return None, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default=None, help="comma-separated devices (default: cpu, and cuda when PyTorch sees a GPU)")
    ap.add_argument("--copies", default="512,4096", help="comma-separated numbers of game copies (default 512,4096)")
    ap.add_argument("--networks", default="default,wide", help="comma-separated: default (d_model 32, 1 layer), wide (128, 2 layers)")
    ap.add_argument("--updates", type=int, default=3, help="timed updates per row, after one warm-up update (default 3)")
    ap.add_argument("--level-budget", type=int, default=400_000, help="steps of the time-to-a-level run per row (0: not measured)")
    ap.add_argument("--level-metric", default="length", help="the episode metric of the level (default snake's length)")
    ap.add_argument("--level", type=float, default=5.0, help="the level (default 5.0: a mean snake length of 5 cells)")
    ap.add_argument("--threads", type=int, default=None, help="PyTorch threads (default: the trainer's, measured while training)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="512 copies only, 2 timed updates, no time to a level")
    add_json_option(ap, "gpu_train")
    args = ap.parse_args(argv)
    if args.quick:
        args.copies, args.updates, args.level_budget = "512", 2, 0
    run = Run(__file__, "gpu_train", "Training on the CPU and on a GPU (snake)", "2", argv)
    import torch

    seen = torch_sees()
    devices = args.devices.split(",") if args.devices else ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    for d in devices:
        resolve_device(d)  # a GPU PyTorch does not see: an error now, not after the CPU rows
    gpu_note = None if any(d.startswith("cuda") for d in devices) else (
        f"GPU rows not measured: {seen}" if not torch.cuda.is_available() else "GPU rows not asked for (--devices)")
    print(f"snake, {TrainConfig.rollout_steps} steps per copy and rollout; {seen}")
    if gpu_note:
        print(gpu_note)
    rows = []
    print(f"{'network':<8} {'copies':>6} {'device':<7} {'params':>8} {'steps/s':>9} {'rollout s':>9} {'update s':>8} {'threads':>7}  "
          f"time to {args.level_metric} {args.level:g}")
    for net in args.networks.split(","):
        for copies in (int(c) for c in args.copies.split(",")):
            for device in devices:
                row = measure(device, net, copies, args.updates, args.seed, args.threads)
                if args.level_budget:
                    row["level_s"], row["level_step"] = time_to_level(device, net, copies, args.level_budget, args.level_metric,
                                                                      args.level, args.seed, args.threads)
                rows.append(row)
                level = ("not measured" if not args.level_budget else f"not reached in {args.level_budget:,} steps"
                         if row["level_s"] is None else f"{row['level_s']:.1f} s ({row['level_step']:,} steps)")
                print(f"{net:<8} {copies:>6} {row['device']:<7} {row['params']:>8,} {row['steps_per_s']:>9,.0f} {row['rollout_s']:>9.3f} "
                      f"{row['update_s']:>8.3f} {row['threads']:>7g}  {level}", flush=True)
    figures = []
    for r in rows:
        cpu = next((c for c in rows if c["device"] == "cpu" and (c["network"], c["copies"]) == (r["network"], r["copies"])), None)
        vs_cpu = cpu if cpu is not None and cpu is not r else None
        what = f"snake training, {r['network']} network ({r['params']:,} parameters), {r['copies']:,} copies, {r['device']}"
        figures.append(figure(f"{what}: steps/s", r["steps_per_s"], "steps/s", decimals=0,
                              baseline="the same on the CPU" if vs_cpu else None,
                              baseline_value=vs_cpu["steps_per_s"] if vs_cpu else None,
                              ratio=r["steps_per_s"] / vs_cpu["steps_per_s"] if vs_cpu else None))
        figures.append(figure(f"{what}: seconds per PPO update", r["update_s"], "s", decimals=3))
        if r.get("level_s") is not None:
            figures.append(figure(f"{what}: seconds to a mean {args.level_metric} of {args.level:g}", r["level_s"], "s", decimals=1))
    run.write(args, figures, {"rows": rows, "torch": seen, "gpu": gpu_note or "measured", "level": [args.level_metric, args.level]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
