"""What the entity-gym adapter's per-copy random streams cost, two source trees side by side.

Each round runs, in a fresh process per tree (trees alternating, CPU time of the process):

- ``Streams.call`` of a function that does nothing, for 64 copies: inside ``held()`` (the
  executor's batch scope), an episode's first (seeded) call, a call outside ``held()``, and a
  batch of one call (the caller's states taken out and put back once);
- ``VecEnv.step`` of 128 copies of a few of entity-gym's examples, isolated
  (``from_entity_gym(Env)``) and not (``isolate_random=False``), stepped alternately in one process:
  the difference is the isolation's own cost.

Needs entity-gym (the second venv, see ``entity_gym_suite.py``)::

    git worktree add /tmp/old f0850cf
    .venv-eg/bin/python benchmarks/entity_gym_streams.py --old /tmp/old/src --new src --rounds 4

Prints medians over the rounds (and writes every round's figures as JSON with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from typing import Any

GAMES = ["Count", "MultiArmedBandit", "Xor", "MineSweeper", "CherryPick", "RockPaperScissors", "NotHotdog"]
COPIES = 128


def _per_call() -> dict[str, float]:
    """µs per ``Streams.call`` (what the call adds to a function that does nothing)."""
    from gymloop.adapters._streams import Streams, held

    def noop() -> None:
        return None

    copies = [Streams() for _ in range(64)]
    for i, c in enumerate(copies):
        c.call(noop, seed=i)

    def bare() -> None:
        with held():
            for _c in copies:
                noop()

    def calls() -> None:
        with held():
            for c in copies:
                c.call(noop)

    def seeded() -> None:
        with held():
            for i, c in enumerate(copies):
                c.call(noop, seed=i + 1000)

    def alone() -> None:
        for c in copies:
            c.call(noop)

    def one_batch() -> None:
        with held():
            copies[0].call(noop)

    def t(fn: Any, number: int = 20) -> float:
        return min(timeit.repeat(fn, number=number, repeat=10, timer=time.process_time)) / number * 1e6

    base = t(bare)
    return {"call in held": (t(calls) - base) / 64, "seeded call in held": (t(seeded) - base) / 64,
            "call outside held": (t(alone) - base) / 64, "batch of one call": t(one_batch, 200)}


def _steps(games: list[str], steps: int) -> dict[str, float]:
    """CPU µs per ``VecEnv.step`` of 128 copies, isolated and not (``NAME shared``), stepped alternately."""
    from entity_gym.examples import ENV_REGISTRY

    import gymloop as gl
    from gymloop.adapters.entity_gym import from_entity_gym

    out = {}
    for name in games:
        envs = {iso: gl.VecEnv(from_entity_gym(ENV_REGISTRY[name], isolate_random=iso), num_envs=COPIES, seed=1) for iso in (True, False)}
        total = dict.fromkeys(envs, 0.0)
        for env in envs.values():
            env.reset()
            for _ in range(20):
                env.step(env.sample_actions())
        for _ in range(steps):
            for iso, env in envs.items():
                a = env.sample_actions()
                t0 = time.process_time()
                env.step(a)
                total[iso] += time.process_time() - t0
        for env in envs.values():
            env.close()
        out[name] = total[True] / steps * 1e6
        out[name + " shared"] = total[False] / steps * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", help="the old tree's src folder (required)")
    ap.add_argument("--new", default="src", help="the new tree's src folder")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--games", nargs="+", default=GAMES)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps({"call": _per_call(), "step": _steps(args.games, args.steps)}))
        return
    if not args.old:
        ap.error("--old (the old tree's src folder) is required")
    rows: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    trees = [("old", args.old), ("new", args.new)]
    for r in range(args.rounds):
        for tag, src in trees if r % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src), OMP_NUM_THREADS="1")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(args.steps), "--games", *args.games]
            rows[tag].append(json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout))

    def med(tag: str, part: str, key: str) -> float:
        return statistics.median(row[part][key] for row in rows[tag])

    print(f"per call, CPU µs (median of {args.rounds})   old      new")
    for k in rows["old"][0]["call"]:
        print(f"{k:32s} {med('old', 'call', k):8.2f} {med('new', 'call', k):8.2f}")
    print(f"\nstep of {COPIES} copies, CPU µs   old      new  new/old   isolation per copy-step: old    new")
    for k in args.games:
        o, n = med("old", "step", k), med("new", "step", k)
        iso = {tag: statistics.median(row["step"][k] - row["step"][k + " shared"] for row in rows[tag]) / COPIES for tag in rows}
        print(f"{k:24s} {o:8.0f} {n:8.0f} {n / o:8.3f}   {iso['old']:27.2f} {iso['new']:6.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
