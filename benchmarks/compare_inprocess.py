"""Two source trees of gymloop in ONE process, timed in alternating blocks of CPU time.

The finer companion of ``compare_trees.py``: separate processes on this machine differ by up to
+-15% from one another (steal time, cache and import-order effects), which hides a few percent.
Here both trees are imported side by side (``gymloop`` is re-imported from each ``src`` in turn),
their objects live in the same process, and every block of one is followed by a block of the other.

* ``step``: ``VecEnv.step`` of snake (256 copies, in-process backend), fixed random actions;
* ``train``: one PPO cycle (``Trainer._collect`` with GAE, ``_update``) of the default
  configuration, one torch thread; its rollout and its update timed apart.

Usage::

    python benchmarks/compare_inprocess.py /tmp/base/src src --rounds 600 --what step
    python benchmarks/compare_inprocess.py /tmp/base/src src --rounds 16 --what train
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from typing import Any

import numpy as np


def _import(src: str) -> dict[str, Any]:
    for k in [k for k in sys.modules if k == "gymloop" or k.startswith("gymloop.")]:
        del sys.modules[k]
    sys.path.insert(0, src)
    try:
        return {
            "gl": importlib.import_module("gymloop"),
            "snake": importlib.import_module("gymloop.games.snake").snake,
            "train": importlib.import_module("gymloop.train"),
            "ppo": importlib.import_module("gymloop.train.ppo"),
        }
    finally:
        sys.path.remove(src)


def _step_setup(src: str) -> Any:
    m = _import(src)
    env = m["gl"].VecEnv(m["snake"], num_envs=256, seed=0)
    env.reset()
    for _ in range(50):
        env.step(env.sample_actions())
    return env


def _train_setup(src: str) -> Any:
    m = _import(src)
    t = m["ppo"].Trainer(m["snake"], m["train"].TrainConfig(steps=10**9, seed=0))
    t._setup()
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the base tree's src folder")
    p.add_argument("this", help="this tree's src folder")
    p.add_argument("--what", choices=["step", "train"], default="step")
    p.add_argument("--rounds", type=int, default=None, help="alternating blocks per tree (default: 600 step, 16 train)")
    args = p.parse_args(argv)
    rounds = args.rounds or (600 if args.what == "step" else 16)
    names = ("base", "this")
    if args.what == "step":
        envs = {n: _step_setup(getattr(args, n)) for n in names}
        rng = np.random.default_rng(0)
        acts = [{"Move": rng.integers(0, 4, 256)} for _ in range(64)]

        def block(n: str) -> tuple[float, ...]:
            c0 = time.process_time()
            for i in range(20):
                envs[n].step(acts[i & 63])
            return (time.process_time() - c0,)

        parts = ["20 steps"]
    else:
        import torch

        torch.set_num_threads(1)
        trainers = {n: _train_setup(getattr(args, n)) for n in names}

        def block(n: str) -> tuple[float, ...]:
            t = trainers[n]
            c0 = time.process_time()
            r = t._collect()
            if hasattr(t, "_gae"):  # a tree before the trainer's split: GAE apart from the rollout
                adv, ret = t._gae(r)
                c1 = time.process_time()
                t._update(r, adv, ret, t.cfg.ppo.ent_coef)
            else:  # the rollout comes with its advantages
                c1 = time.process_time()
                t._update(r, t.cfg.ppo.ent_coef)
            return (c1 - c0, time.process_time() - c1)

        parts = ["rollout", "update"]
    res: dict[str, list[tuple[float, ...]]] = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            res[n].append(block(n))
    print(f"{args.what}: median CPU seconds per block (this/base: median of per-round ratios; below 1 is faster here)")
    for i, part in enumerate(parts):
        b = [x[i] for x in res["base"]]
        t = [x[i] for x in res["this"]]
        ratios = [y / x for x, y in zip(b, t)]
        print(f"  {part:<10} base {statistics.median(b):.4f}  this {statistics.median(t):.4f}  this/base {statistics.median(ratios):.3f} "
              f"(p25 {np.percentile(ratios, 25):.3f}, p75 {np.percentile(ratios, 75):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
