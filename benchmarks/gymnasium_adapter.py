"""Steps/s of the Gymnasium adapter's VectorEnv against Gymnasium's SyncVectorEnv over the adapter's Env.

Both run the same game (snake, padded to ``max_entities``) with the same number of copies and the
same autoreset mode (SAME_STEP):

* ``GymloopVectorEnv``: every copy in one :class:`gymloop.VecEnv` (``--workers`` processes),
  observations padded for all copies at once;
* ``SyncVectorEnv``: Gymnasium's loop over ``num_envs`` :class:`GymloopEnv` (each a ``gl.VecEnv``
  of one copy), stepping and padding copy by copy, then concatenating.

Actions are fixed random ones, drawn before timing. The two are timed in interleaved rounds of
``--steps`` steps each (so drifts of the machine hit both alike); the table gives the median
steps/s (copies x steps per second) of each and their ratio.

Usage::

    python benchmarks/gymnasium_adapter.py --num-envs 64 --rounds 7 --steps 200
    python benchmarks/gymnasium_adapter.py --json   # also write benchmarks/results/gymnasium_adapter.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from results import Run, add_json_option, figure

from gymloop.adapters.gymnasium import GymloopEnv, GymloopVectorEnv
from gymloop.games.snake import snake


def _round(env: Any, actions: np.ndarray, num_envs: int) -> float:
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    return len(actions) * num_envs / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200, help="steps per round")
    p.add_argument("--workers", type=int, default=0, help="processes of GymloopVectorEnv")
    p.add_argument("--max-entities", type=int, default=100, help="rows per entity type (snake can fill its 10x10 board)")
    add_json_option(p, "gymnasium_adapter")
    args = p.parse_args(argv)
    run = Run(__file__, "gymnasium_adapter", "The Gymnasium adapter's vector env", "8", argv)
    n = args.num_envs
    ours = GymloopVectorEnv(snake, n, workers=args.workers, max_entities=args.max_entities)
    sync = SyncVectorEnv([lambda: GymloopEnv(snake, max_entities=args.max_entities) for _ in range(n)],
                         autoreset_mode=AutoresetMode.SAME_STEP)
    ours.reset(seed=0)
    sync.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, size=(args.steps, n))
    rates: dict[str, list[float]] = {"GymloopVectorEnv": [], "SyncVectorEnv(GymloopEnv)": []}
    _round(ours, actions[:10], n)  # warm up
    _round(sync, actions[:10], n)
    for _ in range(args.rounds):
        rates["GymloopVectorEnv"].append(_round(ours, actions, n))
        rates["SyncVectorEnv(GymloopEnv)"].append(_round(sync, actions, n))
    ours.close()
    sync.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"snake, {n} copies, workers={args.workers}, max_entities={args.max_entities}, "
          f"{args.rounds} interleaved rounds of {args.steps} steps")
    print(f"{'vector env':<28}{'median steps/s':>16}{'min':>12}{'max':>12}")
    for k, v in rates.items():
        print(f"{k:<28}{med[k]:>16,.0f}{min(v):>12,.0f}{max(v):>12,.0f}")
    print(f"{'ratio':<28}{med['GymloopVectorEnv'] / med['SyncVectorEnv(GymloopEnv)']:>15.1f}x")
    per = [a / b for a, b in zip(rates["GymloopVectorEnv"], rates["SyncVectorEnv(GymloopEnv)"])]
    run.write(args, [figure(
        f"`GymloopVectorEnv` steps/s, snake padded to {args.max_entities} rows, {n} copies", med["GymloopVectorEnv"], "steps/s",
        baseline=f"Gymnasium SyncVectorEnv of {n} `GymloopEnv`", baseline_value=med["SyncVectorEnv(GymloopEnv)"],
        ratio=statistics.median(per), ratio_range=[min(per), max(per)])], {"rounds": rates}, packages=("gymnasium",))


if __name__ == "__main__":
    main()
