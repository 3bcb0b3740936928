"""What padding costs: Stable-Baselines3 through the Gymnasium adapter against gymloop's entity trainer, on snake.

At an equal number of environment steps (``--steps``), each trainer trains snake from scratch and
is then scored on the same evaluation games (:func:`gymloop.evaluation.evaluate_episodes`: the
same seeds, ``--episodes`` episodes, sampled actions):

* ``gymloop train``: gymloop's PPO on the ragged entities (``TrainConfig(steps=N)``, every
  other setting its default);
* SB3 ``PPO`` / sb3-contrib ``MaskablePPO`` (``MultiInputPolicy``) on the padded ``Dict``
  observation, through :class:`gymloop.adapters.sb3.GymloopSB3VecEnv` (``--num-envs`` copies in
  one ``gl.VecEnv``), with the tiny settings of the SB3 learning test (64-step rollouts per copy,
  minibatch 128, 4 epochs, lr 1e-3, a 64x64 net);
* SB3 ``PPO`` the default SB3 way: its ``DummyVecEnv`` over ``--num-envs`` ``GymloopEnv`` copies
  (same settings);
* a uniformly random legal agent (the return to beat).

Steps/s is end to end (games, padding, the policy's forward passes and the PPO updates), over the
training's wall time. A second table isolates the environment: steps/s of stepping the same
number of copies with random actions through ``gl.VecEnv`` (ragged batches), ``GymloopSB3VecEnv``
(padded) and ``DummyVecEnv`` of ``GymloopEnv`` (padded, copy by copy).

Run it with one thread per process (``OMP_NUM_THREADS=1``; the script also sets torch's)::

    OMP_NUM_THREADS=1 python benchmarks/sb3_snake.py --steps 100000
    OMP_NUM_THREADS=1 python benchmarks/sb3_snake.py --steps 100000 --json   # also write benchmarks/results/sb3_snake.json
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from results import Run, add_json_option, figure
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv

import gymloop as gl
from gymloop.adapters.gymnasium import GymloopEnv
from gymloop.adapters.sb3 import GymloopSB3VecEnv, sb3_chooser
from gymloop.evaluation import evaluate_episodes
from gymloop.games.snake import snake
from gymloop.train import TrainConfig
from gymloop.train.ppo import Trainer, evaluate

#: the SB3 settings of tests/adapters/test_sb3.py (what learns snake in 40K steps there)
SB3_SETTINGS: dict[str, Any] = {"n_steps": 64, "batch_size": 128, "n_epochs": 4, "learning_rate": 1e-3, "ent_coef": 0.01,
                                "policy_kwargs": {"net_arch": [64, 64]}, "device": "cpu"}


def _score(choose: Any, episodes: int, seed: int) -> tuple[float, float]:
    per = evaluate_episodes(snake, choose, episodes=episodes, num_envs=64, seed=seed)
    return float(np.mean(per["episode_return"])), float(np.mean(per["episode_length"]))


def run_gymloop(steps: int, seed: int, episodes: int, eval_seed: int) -> dict[str, Any]:
    trainer = Trainer(snake, TrainConfig(steps=steps, seed=seed))
    t0 = time.perf_counter()
    result = trainer.train()
    secs = time.perf_counter() - t0
    m = evaluate(snake, trainer.policy, episodes=episodes, seed=eval_seed)
    r = trainer.cfg.resolved()
    return {"trainer": "gymloop train (entity PPO, defaults)", "env": f"gl.VecEnv, {r.num_envs} copies",
            "steps": result.steps, "seconds": secs, "ret": m["episode_return"], "len": m["episode_length"]}


def run_sb3(algo: type, make_env: Callable[[], Any], label: str, env_label: str, steps: int, seed: int, episodes: int,
            eval_seed: int) -> dict[str, Any]:
    env = make_env()
    layout = env.layout if isinstance(env, GymloopSB3VecEnv) else env.envs[0].unwrapped.layout
    model = algo("MultiInputPolicy", env, seed=seed, **SB3_SETTINGS)
    model.set_logger(Logger(None, []))  # no SB3-<time> folder left in the temporary folder
    t0 = time.perf_counter()
    model.learn(steps)
    secs = time.perf_counter() - t0
    env.close()
    ret, length = _score(sb3_chooser(model, layout), episodes, eval_seed)
    return {"trainer": label, "env": env_label, "steps": model.num_timesteps, "seconds": secs, "ret": ret, "len": length}


def env_only(n: int, steps: int, max_entities: int) -> list[tuple[str, float]]:
    """Steps/s of stepping ``n`` snake copies with random actions, ragged vs padded."""
    out = []
    acts = np.random.default_rng(0).integers(0, 4, size=(steps, n))
    vec = gl.VecEnv(snake, n, seed=0)
    vec.reset()
    move = next(iter(vec.spaces.actions))  # 'Move'
    t0 = time.perf_counter()
    for a in acts:
        vec.step({move: a})
    out.append((f"gl.VecEnv ({n} copies, ragged batches)", steps * n / (time.perf_counter() - t0)))
    vec.close()
    for label, env in ((f"GymloopSB3VecEnv ({n} copies, padded)", GymloopSB3VecEnv(snake, n, max_entities=max_entities)),
                       (f"DummyVecEnv of {n} GymloopEnv (padded)",
                        DummyVecEnv([lambda: GymloopEnv(snake, max_entities=max_entities) for _ in range(n)]))):
        env.reset()
        t0 = time.perf_counter()
        for a in acts:
            env.step(a)
        out.append((label, steps * n / (time.perf_counter() - t0)))
        env.close()
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100_000, help="environment steps of each training")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-envs", type=int, default=8, help="game copies of the SB3 runs")
    p.add_argument("--max-entities", type=int, default=100, help="padding rows per entity type (snake can fill its 10x10 board)")
    p.add_argument("--episodes", type=int, default=200, help="evaluation episodes (the same games for every agent)")
    p.add_argument("--eval-seed", type=int, default=10_000)
    p.add_argument("--env-steps", type=int, default=2_000, help="steps of the environment-only table")
    p.add_argument("--only", default="gymloop,ppo,maskable,dummy", help="rows to run, comma-separated")
    add_json_option(p, "sb3_snake")
    args = p.parse_args(argv)
    run = Run(__file__, "sb3_snake", "Stable-Baselines3 through the adapter", "9", argv)
    torch.set_num_threads(1)
    rows = set(args.only.split(","))
    n, me = args.num_envs, args.max_entities
    ours = f"GymloopSB3VecEnv, {n} copies"
    print(f"snake, {args.steps:,} steps per training, seed {args.seed}, torch threads 1 (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}), load average before: {os.getloadavg()[0]:.2f}", flush=True)
    results = []
    if "gymloop" in rows:
        results.append(run_gymloop(args.steps, args.seed, args.episodes, args.eval_seed))
    if "ppo" in rows:
        results.append(run_sb3(PPO, lambda: GymloopSB3VecEnv(snake, n, max_entities=me, seed=args.seed), "SB3 PPO (padded Dict)",
                               ours, args.steps, args.seed, args.episodes, args.eval_seed))
    if "maskable" in rows:
        results.append(run_sb3(MaskablePPO, lambda: GymloopSB3VecEnv(snake, n, max_entities=me, seed=args.seed),
                               "sb3-contrib MaskablePPO (padded Dict)", ours, args.steps, args.seed, args.episodes, args.eval_seed))
    if "dummy" in rows:
        results.append(run_sb3(PPO, lambda: DummyVecEnv([lambda: GymloopEnv(snake, max_entities=me) for _ in range(n)]),
                               "SB3 PPO (padded Dict)", f"DummyVecEnv of {n} GymloopEnv", args.steps, args.seed, args.episodes,
                               args.eval_seed))
    rand_ret, rand_len = _score(None, args.episodes, args.eval_seed)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}; evaluation: {args.episodes} episodes, the same games for every agent\n")
    print("| trainer | environment | steps | seconds | steps/s | eval return | eval length |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['trainer']} | {r['env']} | {r['steps']:,} | {r['seconds']:.1f} | {r['steps'] / r['seconds']:,.0f} | "
              f"{r['ret']:.2f} | {r['len']:.1f} |")
    print(f"| random legal actions | | | | | {rand_ret:.2f} | {rand_len:.1f} |")
    print(f"\nenvironment only, random actions, {args.env_steps:,} steps (max_entities={me}):\n")
    print("| environment | steps/s |")
    print("|---|---:|")
    env_rates = []
    for copies in sorted({n, 64}):
        for label, rate in env_only(copies, args.env_steps, me):
            print(f"| {label} | {rate:,.0f} |")
            env_rates.append({"environment": label, "steps_per_s": rate})
    by = {(r["trainer"].split()[0], r["env"].split(",")[0].split()[0]): r for r in results}
    mine, padded, dummy = by.get(("gymloop", "gl.VecEnv")), by.get(("SB3", "GymloopSB3VecEnv")), by.get(("SB3", "DummyVecEnv"))
    figs = []
    if mine and padded:
        figs.append(figure(f"snake eval return after {mine['steps']:,} steps, `gymloop train` defaults ({mine['env']})", mine["ret"], "",
                           baseline=f"SB3 PPO ({padded['env']})", baseline_value=padded["ret"],
                           ratio=mine["ret"] / padded["ret"], decimals=2))
    if padded and dummy:
        figs.append(figure(f"SB3 PPO training steps/s ({padded['env']})", padded["steps"] / padded["seconds"], "steps/s",
                           baseline=f"SB3 PPO ({dummy['env']})", baseline_value=dummy["steps"] / dummy["seconds"],
                           ratio=(padded["steps"] / padded["seconds"]) / (dummy["steps"] / dummy["seconds"])))
    run.write(args, figs, {"trainers": results, "random": {"ret": rand_ret, "len": rand_len}, "environment_only": env_rates},
              packages=("stable-baselines3", "sb3-contrib", "gymnasium"))


if __name__ == "__main__":
    main()
