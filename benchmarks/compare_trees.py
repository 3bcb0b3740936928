"""The same measurements on two source trees of gymloop, side by side in interleaved rounds.

For refactors that must not lose speed: each round runs every measurement once on the base tree
and once on this tree (in alternating order), each in a fresh subprocess with ``PYTHONPATH`` set to
that tree's ``src``. The table gives per tree the median over rounds, and the median of the
per-round ratios (this tree / base: above 1 is faster here), so a noisy machine's drift mostly
cancels out of the ratio.

The measurements mirror the three benchmark scripts, through the public API both trees share:

* ``env``, ``env_workers``: ``benchmarks/throughput.py``'s agent-API rows: snake in a ``gl.VecEnv``
  (256 copies in-process; 1024 copies on 2 worker processes), random legal actions, steps/s;
* ``train``: ``benchmarks/train_throughput.py``: ``gymloop.train`` on snake with the default
  configuration (one process, one torch thread), environment steps per CPU second of the process
  (CPU time, not wall time: this machine's steal time would otherwise swamp a few percent);
* ``infer_one``, ``infer_batch``: ``benchmarks/inference.py``: a random default-network snake agent
  deciding for one observation (decisions/s), and the numpy forward pass of a 256-slot batch
  (slots/s), in a process without torch (as in a shipped game).

Usage (the base tree: a worktree of the commit to compare with)::

    git worktree add /tmp/base <commit>
    python benchmarks/compare_trees.py /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap

_COMMON = """
import time, numpy as np, gymloop as gl
from gymloop.games.snake import snake
"""

# A random default-network snake agent, written by a child process: the measuring process never
# imports torch, as in a shipped game (importing torch changes numpy's matrix-product speed on this
# machine, by up to 5x either way depending on import order, which would swamp the comparison).
_CHECKPOINT = """
import subprocess, sys, tempfile, os
path = os.path.join(tempfile.mkdtemp(), "a.safetensors")
subprocess.run([sys.executable, "-c", "import sys; from gymloop.neural import random_checkpoint; "
                "from gymloop.games.snake import snake; random_checkpoint(sys.argv[1], snake, seed=0)", path], check=True)
assert "torch" not in sys.modules
"""

MEASUREMENTS: dict[str, str] = {
    "env": """
env = gl.VecEnv(snake, num_envs=256, seed=0)
env.reset()
for _ in range(50):
    env.step(env.sample_actions())
t0, n = time.perf_counter(), 0
while time.perf_counter() - t0 < SECONDS:
    env.step(env.sample_actions())
    n += 256
print(n / (time.perf_counter() - t0))
env.close()
""",
    "env_workers": """
if __name__ == "__main__":
    env = gl.VecEnv(snake, num_envs=1024, seed=0, workers=2)
    env.reset()
    for _ in range(20):
        env.step(env.sample_actions())
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < SECONDS:
        env.step(env.sample_actions())
        n += 1024
    print(n / (time.perf_counter() - t0))
    env.close()
""",
    "train": """
from gymloop.train import TrainConfig
from gymloop.train.ppo import Trainer
cfg = TrainConfig(steps=int(150_000 * SECONDS), seed=0)
t = Trainer(snake, cfg, progress=False) if "progress" in Trainer.__init__.__code__.co_varnames else Trainer(snake, cfg)
c0 = time.process_time()
r = t.train()
print(r.steps / (time.process_time() - c0))  # steps per CPU second (set-up included, the same in both trees)
""",
    "infer_one": _CHECKPOINT + """
agent = gl.load(path, seed=0)
class Keep:
    def __init__(self): self.seen = []; self.r = gl.RandomAgent(0)
    def act(self, obs, *t):
        import copy; self.seen.append((copy.deepcopy(obs), t)); return self.r.act(obs, *t)
    def game_over(self, obs, truncated=False): pass
k = Keep(); gl.run(snake, k, seed=0, max_steps=200)
obs = k.seen
for o, t in obs[:50]:
    agent.act(o, *t)
t0, n = time.perf_counter(), 0
while time.perf_counter() - t0 < SECONDS:
    for o, t in obs:
        agent.act(o, *t)
    n += len(obs)
print(n / (time.perf_counter() - t0))
""",
    "infer_batch": _CHECKPOINT + """
pol = gl.load(path).policy
env = gl.VecEnv(snake, num_envs=256, seed=0)
b = env.reset()
for _ in range(30):
    b = env.step(env.sample_actions())
p = pol.pack(b)
pol.forward(p)
t0, n = time.perf_counter(), 0
while time.perf_counter() - t0 < SECONDS:
    pol.forward(pol.pack(b))
    n += 256
print(n / (time.perf_counter() - t0))
env.close()
""",
}


def _run(tree: str, name: str, seconds: float) -> float:
    code = _COMMON + f"SECONDS = {seconds}\n" + textwrap.dedent(MEASUREMENTS[name])
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tree, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{name} on {tree} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the other tree (a worktree of the base commit)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--seconds", type=float, default=2.0, help="timed length of each measurement (default 2)")
    p.add_argument("--only", nargs="+", choices=list(MEASUREMENTS), default=list(MEASUREMENTS))
    args = p.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"base": os.path.abspath(args.base), "this": here}
    res: dict[str, dict[str, list[float]]] = {m: {"base": [], "this": []} for m in args.only}
    for r in range(args.rounds):
        for m in args.only:
            order = ("base", "this") if r % 2 == 0 else ("this", "base")
            for which in order:
                res[m][which].append(_run(trees[which], m, args.seconds))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'measurement':<12} {'base (median)':>14} {'this (median)':>14} {'this/base (median of rounds)':>30}")
    for m in args.only:
        b, t = res[m]["base"], res[m]["this"]
        ratio = statistics.median(x / y for x, y in zip(t, b))
        print(f"{m:<12} {statistics.median(b):>14,.0f} {statistics.median(t):>14,.0f} {ratio:>30.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
