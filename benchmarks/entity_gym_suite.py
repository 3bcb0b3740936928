"""Train every entity-gym example with gymloop's defaults and with enn-trainer's, side by side.

For each environment of ``entity_gym.examples.ENV_REGISTRY`` (all 13), each seed and each trainer,
one training run in its own process (``OMP_NUM_THREADS=1``, one torch thread, environments in the
trainer's process for both; ``torch._dynamo``, which enn-trainer's ``torch.optim.Adam`` imports when
it is built (~1.8 CPU-s; gymloop's own Adam does not), is imported before the clock starts, so
neither trainer is charged for it) reports:

- **final**: the mean episode return over the last 20% of training steps (episodes that ended
  there, as each trainer logs them);
- **eval**: the trained policy (sampling, as in training) on 256 fresh episodes, each counted
  once: gymloop's ``evaluate``; for enn-trainer the first episode of each of 256 copies of the
  environment, run by its own ``Rollout``;
- **sps/cpu**: training steps per CPU-second of the training process (rollouts and updates).

``random`` is the uniformly random legal policy on the same 256-episode evaluation. gymloop runs
``TrainConfig(steps=N, seed=s)``, which is what ``gymloop train entity_gym.examples:NAME --steps N``
runs; enn-trainer runs its ``TrainConfig`` defaults with ``total_timesteps=N``, ``seed=s``,
``cuda=False`` and ``rollout.processes=1`` (its default of 4 processes would hide CPU time in
other processes).

Needs a virtual environment with both trainers (Python 3.11)::

    python -m venv .venv-eg && .venv-eg/bin/pip install torch==2.13.0
    .venv-eg/bin/pip install --ignore-requires-python --prefer-binary entity-gym==0.1.10 \\
        enn-trainer==0.1.16 rogue-net==0.1.9 "numpy<2"
    .venv-eg/bin/pip install -e .
    echo "$PWD/benchmarks/enn_shim" > .venv-eg/lib/python3.11/site-packages/enn_shim.pth

Usage::

    .venv-eg/bin/python benchmarks/entity_gym_suite.py --steps 49152 --seeds 1 2 --jobs 2
    .venv-eg/bin/python benchmarks/entity_gym_suite.py --trainers gymloop --envs Xor Count --steps 393216

Results are printed as a table and written as JSON: ``--out`` every run's result, ``--json [PATH]``
the result file of BENCHMARKS.md's table (``benchmarks/results/entity_gym_suite.json`` by default;
with both trainers the median over games of the steps/CPU-s ratio and how many finals match
enn-trainer's, with gymloop alone each game's final; a run at another budget wants its own PATH,
e.g. ``--json benchmarks/results/entity_gym_suite_393k.json``). ``--set KEY=VALUE`` passes gymloop
config overrides (as ``gymloop train --set``) for experiments.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from results import Run, add_json_option, figure

ENVS = [
    "Xor", "CherryPick", "Count", "NotHotdog", "MoveToOrigin", "TreasureHunt", "MineSweeper", "PickMatchingBalls",
    "MultiArmedBandit", "MultiSnake", "FloorIsLava", "Minefield", "RockPaperScissors",
]
#: the learning targets at 393,216 steps (BENCHMARKS.md §5), shown beside each game's final in a gymloop-only run of that length
TARGETS_393K = {
    "Xor": ">= 0.99", "Count": ">= 0.99", "CherryPick": ">= 0.95", "MultiArmedBandit": ">= 0.99",
    "MultiSnake": "clearly above random (0.004)", "MineSweeper": "clearly above random (0.158)", "Minefield": "clearly above random (0.037)",
}
EVAL_EPISODES = 256
FINAL_SHARE = 0.2


def _final(points: list[tuple[float, float, float]], steps: int) -> float:
    """Mean episode return over episodes that ended in the last 20% of ``steps``: (step, mean, count)."""
    lo = (1 - FINAL_SHARE) * steps
    num = sum(m * c for s, m, c in points if s > lo and c > 0)
    den = sum(c for s, m, c in points if s > lo and c > 0)
    return num / den if den else float("nan")


def run_gymloop(env_name: str, seed: int, steps: int, overrides: list[str], isolate_random: bool = True) -> dict[str, Any]:
    from entity_gym.examples import ENV_REGISTRY

    from gymloop.adapters.entity_gym import from_entity_gym
    from gymloop.cli import _parse_overrides
    from gymloop.train import TrainConfig
    from gymloop.train.ppo import Trainer, evaluate

    game = from_entity_gym(ENV_REGISTRY[env_name], isolate_random=isolate_random)
    cfg = TrainConfig(steps=steps, seed=seed)
    _parse_overrides(cfg, overrides)
    trainer = Trainer(game, cfg)
    c0 = time.process_time()
    result = trainer.train()
    cpu = time.process_time() - c0
    points = [(h["step"], h["episode_return_mean"], h["episode_return_count"]) for h in result.history if "episode_return_mean" in h]
    ev = evaluate(game, trainer.policy, episodes=EVAL_EPISODES, seed=10_000 + seed)
    rnd = evaluate(game, None, episodes=EVAL_EPISODES, seed=10_000 + seed)
    return {"final": _final(points, result.steps), "eval": ev["episode_return"], "random": rnd["episode_return"],
            "sps_cpu": result.steps / cpu, "steps": result.steps, "config": trainer.cfg.to_dict()}


def run_enn(env_name: str, seed: int, steps: int) -> dict[str, Any]:
    import re

    import torch
    from enn_trainer import State, TrainConfig, init_train_state, train
    from enn_trainer.rollout import Rollout
    from entity_gym.env import Environment, EnvList
    from entity_gym.examples import ENV_REGISTRY
    from hyperstate import StateManager
    from rogue_net.rogue_net import Tracer

    torch.set_num_threads(1)
    cls = ENV_REGISTRY[env_name]
    # enn-trainer's defaults but for the budget, the seed, one process on the CPU (hyperstate's public overrides)
    sm = StateManager(TrainConfig, State, init_train_state, None, overrides=[
        f"total_timesteps={steps}", f"seed={seed}", "cuda=false", f"env.id={env_name}", "rollout.processes=1",
        f"data_dir={tempfile.mkdtemp(prefix='enn-suite-')}"])
    import contextlib
    import io

    buf = io.StringIO()
    c0 = time.process_time()
    with contextlib.redirect_stdout(buf):
        train(sm, cls)
    cpu = time.process_time() - c0
    # enn-trainer logs one line per update: "<step>/<total> | ... | episodic_reward <m> | ... | episodes <n> | ..."
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    points = []
    for line in buf.getvalue().splitlines():
        line = ansi.sub("", line)
        m = re.match(r"\s*(\d+)/\d+ .*episodic_reward (\S+) .*episodes (\d+)", line)
        if m:
            points.append((float(m.group(1)), float(m.group(2)), float(m.group(3))))
    agent = sm.state.agent

    first: dict[int, float] = {}

    class _FirstEpisode(Environment):
        """Records the return of its first episode (each copy counted once)."""

        count = 0

        def __init__(self) -> None:
            self.inner = cls()
            self.index = _FirstEpisode.count
            _FirstEpisode.count += 1
            self.ret = 0.0

        def obs_space(self) -> Any:
            return self.inner.obs_space()

        def action_space(self) -> Any:
            return self.inner.action_space()

        def reset(self) -> Any:
            self.ret = 0.0
            return self.inner.reset()

        def act(self, actions: Any) -> Any:
            o = self.inner.act(actions)
            self.ret += o.reward
            if o.done and self.index not in first:
                first[self.index] = self.ret
            return o

    envs = EnvList(_FirstEpisode, EVAL_EPISODES)
    rollout = Rollout(envs, obs_space=envs.obs_space(), action_space=envs.action_space(), agent=agent,
                      value_function=None, device=torch.device("cpu"), tracer=Tracer(cuda=False))
    for _ in range(1000):
        with torch.no_grad():
            rollout.run(16, record_samples=False)
        if len(first) >= EVAL_EPISODES:
            break
    return {"final": _final(points, steps), "eval": sum(first.values()) / max(len(first), 1), "sps_cpu": steps / cpu, "steps": steps}


def _one(args: argparse.Namespace) -> None:
    import logging

    import torch._dynamo  # noqa: F401  # torch.optim (enn-trainer's optimizer) imports it on creation (~1.8 s): not counted

    logging.basicConfig(level=logging.WARNING)
    if args.one == "gymloop":
        r = run_gymloop(args.env_name, args.seed, args.steps, args.set or [], isolate_random=not args.shared_random)
    else:
        r = run_enn(args.env_name, args.seed, args.steps)
    print("RESULT " + json.dumps(r))


def _launch(trainer: str, env: str, seed: int, steps: int, sets: list[str], shared_random: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", trainer, "--env-name", env, "--seed", str(seed), "--steps", str(steps)]
    for s in sets:
        cmd += ["--set", s]
    if shared_random:
        cmd.append("--shared-random")
    e = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=e)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r.update(trainer=trainer, env=env, seed=seed, wall=time.time() - t0)
            return r
    tail = (p.stderr or p.stdout)[-2000:]
    return {"trainer": trainer, "env": env, "seed": seed, "error": tail}


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


def table(results: list[dict[str, Any]], trainers: list[str], envs: list[str]) -> str:
    head = "| env | random | " + " | ".join(f"{t} final | {t} eval | {t} sps/cpu" for t in trainers) + " |"
    lines = [head, "|" + "---|" * (2 + 3 * len(trainers))]
    for env in envs:
        rs = [r for r in results if r["env"] == env and "error" not in r]
        rnd = _mean([r["random"] for r in rs if "random" in r])
        cells = [env, f"{rnd:.3f}"]
        for t in trainers:
            tr = [r for r in rs if r["trainer"] == t]
            if not tr:
                errs = [r for r in results if r["env"] == env and r["trainer"] == t]
                cells += ["error" if errs else "-", "", ""]
                continue
            cells += [f"{_mean([r['final'] for r in tr]):.3f}", f"{_mean([r['eval'] for r in tr]):.3f}", f"{_mean([r['sps_cpu'] for r in tr]):,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return (xs[(n - 1) // 2] + xs[n // 2]) / 2


def figures(results: list[dict[str, Any]], trainers: list[str], envs: list[str], steps: int) -> list[dict[str, Any]]:
    """The result file's rows: with both trainers, the speed ratio and the finals compared; with one, each game's final."""
    def mean_of(t: str, env: str, key: str) -> float:
        return _mean([r[key] for r in results if r["env"] == env and r["trainer"] == t and "error" not in r])

    games = [e for e in envs if all(mean_of(t, e, "final") == mean_of(t, e, "final") for t in trainers)]
    if len(trainers) == 2 and games:
        ratios = [mean_of("gymloop", e, "sps_cpu") / mean_of("enn", e, "sps_cpu") for e in games]
        level = sum(mean_of("gymloop", e, "final") >= mean_of("enn", e, "final") - 0.01 for e in games)
        return [
            figure(f"entity-gym's examples, {steps:,} steps: training steps per CPU-second, median over {len(games)} games", _median(ratios), "x",
                   baseline="enn-trainer's defaults, same games, steps and seeds", ratio_range=[min(ratios), max(ratios)]),
            figure(f"entity-gym's examples, {steps:,} steps: games whose final return is at least enn-trainer's (within 0.01)",
                   level, f"of {len(games)}", decimals=0),
        ]
    seeds = len({r["seed"] for r in results})
    return [figure(f"{e}, {steps:,} steps: final return, mean of {seeds} seeds", mean_of(trainers[0], e, "final"), "", decimals=3,
                   target=TARGETS_393K.get(e) if steps >= 393_216 else None) for e in games]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=49_152)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--envs", nargs="+", default=ENVS)
    ap.add_argument("--trainers", nargs="+", default=["gymloop", "enn"], choices=["gymloop", "enn"])
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    ap.add_argument("--set", action="append", help="gymloop config override KEY=VALUE (experiments)")
    ap.add_argument("--out", default=None, help="write every run's result to this JSON file")
    add_json_option(ap, "entity_gym_suite")
    ap.add_argument("--shared-random", action="store_true",
                    help="gymloop's games draw from the global generators as they are (isolate_random=False), as enn-trainer's do")
    ap.add_argument("--one", choices=["gymloop", "enn"], help=argparse.SUPPRESS)
    ap.add_argument("--env-name", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(args)
        return
    run = Run(__file__, "entity_gym_suite", "entity-gym's examples: gymloop's defaults against enn-trainer's", "5")
    jobs = [(t, e, s) for e in args.envs for t in args.trainers for s in args.seeds]
    t0 = time.time()
    results = []
    with ThreadPoolExecutor(args.jobs) as ex:
        for r in ex.map(lambda j: _launch(j[0], j[1], j[2], args.steps, args.set or [], args.shared_random), jobs):
            results.append(r)
            if "error" in r:
                state = "error: " + r["error"].strip().splitlines()[-1]
            else:
                state = f"final {r['final']:.3f} eval {r['eval']:.3f} sps/cpu {r['sps_cpu']:,.0f}"
            print(f"[{time.time() - t0:6.0f}s] {r['trainer']:8s} {r['env']:18s} seed {r['seed']}: {state}", file=sys.stderr, flush=True)
    print(f"\n{args.steps:,} steps, seeds {args.seeds}, {time.time() - t0:.0f} s wall\n")
    print(table(results, args.trainers, args.envs))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"steps": args.steps, "seeds": args.seeds, "sets": args.set or [], "shared_random": args.shared_random,
                       "results": results}, f, indent=1)
    run.write(args, figures(results, args.trainers, args.envs, args.steps),
              {"steps": args.steps, "seeds": args.seeds, "sets": args.set or [], "shared_random": args.shared_random, "results": results},
              packages=("entity-gym", "enn-trainer"))


if __name__ == "__main__":
    main()
