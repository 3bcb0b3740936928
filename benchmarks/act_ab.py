"""``NeuralAgent.act`` and the batched pass of two source trees in ONE process, timed in alternating blocks (snake, ``NetConfig()``).

The single decision's companion of ``compare_inprocess.py``: both trees are imported side by side
(``gymloop`` re-imported from each ``src`` in turn), each loads the same random snake agent and
records the same 200 observations of random play (2-12 entities) and one long snake (44
entities), and packs the same ``--slots`` batch of a ``VecEnv`` (the batched pass: forward and
sampling, ``NumpyPolicy.sample``); then blocks of ``--per`` decisions alternate between the trees (which tree goes first
alternates too). A block's median against the other tree's adjacent block gives one ratio; the
figure is the median of those ratios, which a shared machine's changing load hardly moves (two
copies of one tree give 1.00 +- 0.01). The medians over all calls are printed beside it, with the
load average: absolute figures only mean something with it.

Usage::

    git worktree add /tmp/base <commit>
    python benchmarks/act_ab.py /tmp/base/src src            # ~1 minute
    python benchmarks/act_ab.py /tmp/base/src src --rounds 10 # quicker
"""

from __future__ import annotations

import argparse
import copy
import importlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np


def _import(src: str) -> tuple[Any, Any, Any]:
    for k in [k for k in sys.modules if k == "gymloop" or k.startswith("gymloop.")]:
        del sys.modules[k]
    sys.path.insert(0, src)
    try:
        return (importlib.import_module("gymloop"), importlib.import_module("gymloop.games.snake"),
                importlib.import_module("gymloop.neural"))
    finally:
        sys.path.remove(src)


def _setup(src: str, path: str, make: bool, slots: int) -> tuple[Any, list, Any, Any, Any]:
    """(agent, observations of random play, the long snake's observation, Move, packed batch) of one tree."""
    gl, sn, neural = _import(src)
    if make:
        neural.random_checkpoint(path, sn.snake, seed=0)
    agent = neural.load(path, seed=0)
    seen: list = []

    class Recorder:
        def __init__(self) -> None:
            self.inner = gl.RandomAgent(1)

        def act(self, obs: Any, *types: Any) -> Any:
            seen.append((copy.deepcopy(obs), types))  # the game mutates the lists it observed
            return self.inner.act(obs, *types)

        def game_over(self, obs: Any, truncated: bool = False) -> None:
            pass

    gl.run(sn.snake, Recorder(), seed=1, max_steps=2000)
    seen = seen[:: max(1, len(seen) // 200)]
    cells = [(x if y % 2 == 0 else 9 - x, y) for y in range(10) for x in range(10)][:41]
    long_obs = gl.Obs(score=41).entities([sn.Food(0, 9), sn.Food(5, 8), sn.Food(9, 9)])
    long_obs = long_obs.entities([sn.Body(x, y) for x, y in cells[-2::-1]]).actor(sn.Head(*cells[-1]))
    env = gl.VecEnv(sn.snake, num_envs=slots, seed=2)
    b = env.reset()
    for _ in range(60):  # let the snakes grow a little
        b = env.step(env.sample_actions())
    env.close()
    return agent, seen, long_obs, sn.Move, agent.policy.pack(b)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the first tree's src folder")
    p.add_argument("new", help="the second tree's src folder")
    p.add_argument("--rounds", type=int, default=30, help="rounds of 20 block pairs (default 30)")
    p.add_argument("--per", type=int, default=25, help="decisions per block (default 25; a fifth as many batched passes)")
    p.add_argument("--slots", type=int, default=256, help="slots of the batched pass (default 256)")
    args = p.parse_args(argv)
    path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
    trees = {"base": _setup(args.base, path, True, args.slots), "new": _setup(args.new, path, False, args.slots)}
    whats = ("short", "long", "batch")
    times: dict[tuple[str, str], list[int]] = {(t, w): [] for t in trees for w in whats}
    per = {"short": args.per, "long": args.per, "batch": max(1, args.per // 5)}
    rng = np.random.default_rng(0)
    counter = dict.fromkeys(trees, 0)
    clock = time.perf_counter_ns

    def block(tree: str, what: str) -> None:
        agent, seen, long_obs, move, packed = trees[tree]
        out = times[tree, what]
        act = agent.act
        if what == "batch":
            sample = agent.policy.sample
            for _ in range(per["batch"]):
                t0 = clock()
                sample(packed, rng)
                out.append(clock() - t0)
            return
        if what == "long":
            for _ in range(args.per):
                t0 = clock()
                act(long_obs, move)
                out.append(clock() - t0)
            return
        k = counter[tree]
        counter[tree] += args.per
        for i in range(k, k + args.per):
            obs, types = seen[i % len(seen)]
            t0 = clock()
            act(obs, *types)
            out.append(clock() - t0)

    for tree in trees:  # warm-up
        for what in whats:
            block(tree, what)
    for v in times.values():
        v.clear()
    for r in range(args.rounds * 20):
        for what in whats:
            for tree in (("base", "new") if r % 2 else ("new", "base")):
                block(tree, what)
    lengths = [len(o.entity_list()) for o, _ in trees["base"][1]]
    print(f"snake, NetConfig(); load average {os.getloadavg()[0]:.2f}")
    rows = (("short", f"act, {min(lengths)}-{max(lengths)} entities"), ("long", "act, 44 entities"),
            ("batch", f"batched, {args.slots} slots"))
    for what, label in rows:
        b, n, k = times["base", what], times["new", what], per[what]
        ratios = [statistics.median(n[i : i + k]) / statistics.median(b[i : i + k]) for i in range(0, len(b), k)]
        mb, mn = statistics.median(b) / 1e3, statistics.median(n) / 1e3
        print(f"{label:22} base {mb:8.1f} us  new {mn:8.1f} us  ratio of medians {mn / mb:.3f}  "
              f"median of block ratios {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
