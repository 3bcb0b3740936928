"""The learning suite: each suite game trained with gymloop's defaults, enn-trainer's and SB3's MaskablePPO, side by side.

For every game of :mod:`gymloop.games.suite` (``invaders``, ``keydoor``, ``dispatch``, ``junction``,
``cycles``, and the fire-fighting games ``fires`` and ``fires3`` of
``gymloop.games.suite.fires`` when that module exists), every seed and every trainer, one training
run in its own process with one torch thread (``OMP_NUM_THREADS=1``):

* **gymloop**: ``gymloop train GAME --steps N --seed S`` (every setting its default), then
  ``gymloop eval GAME --agent RUN --episodes E`` (the trained agent and the random one on the same
  games);
* **enn**: enn-trainer 0.1.16's ``TrainConfig`` defaults (``total_timesteps=N``, ``seed=S``,
  ``cuda=False``, ``rollout.processes=1``) on the game through gymloop's entity-gym adapter
  (:func:`gymloop.adapters.entity_gym_vec.env_factory`), run by the Python of ``--enn-python``
  (a virtual environment with enn-trainer: see ``benchmarks/entity_gym_suite.py``); evaluated on
  the first episode of each of E copies of the game, sampling as in training;
* **sb3**: sb3-contrib's ``MaskablePPO("MultiInputPolicy")`` with its defaults on 8 copies of the
  game through :class:`gymloop.adapters.sb3.GymloopSB3VecEnv` (padded observations; single-agent
  games only), evaluated with :func:`gymloop.evaluation.evaluate_episodes` on the games ``gymloop
  eval`` plays.

The **scripted** level is the game's scripted agent (``gymloop run GAME --agent scripted``) over E
episodes. A two-agent game (``cycles``) is scored against its scripted agent: the agent under test
plays half the episodes in each seat (random and scripted likewise, so the scripted level is the
scripted agent against itself); enn-trainer and SB3 have no seat-by-seat evaluation here and are
left out of it.

**Level.** Each figure is a mean episode return with its 95% interval (1.96 sample std / sqrt(n)).
**Time to 50% / 90%**: the training wall time (the run's own clock: ``time/total_s`` of gymloop's
``metrics.csv``, the time of enn-trainer's log line, SB3's rollout ends) at which the training
curve first reaches ``random + f * (scripted - random)``: f of the way from the random level to the
scripted one (``-`` when never). The curve is the mean return of the episodes that ended within
a window of ``copies * longest`` steps (``longest``: the longest episode of the random and scripted
agents; at least 3 updates), from the first step past that window: game copies that start
together end their longest episodes together, and between those waves only short episodes end
(in ``keydoor``, the successes). SB3's curve is its own (the last 100 episodes). A self-play curve says nothing about the level
against the scripted agent, so ``cycles`` has no times.

Over the seeds, the table shows minimum / median / maximum of each figure.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/learning_suite.py --steps 1000000 --seeds 1 2 3 --jobs 2 --json
    python benchmarks/learning_suite.py --games invaders keydoor --trainers gymloop --steps 200000 --seeds 1 2 3
    python benchmarks/learning_suite.py --steps 4096 --seeds 1 --episodes 10      # a smoke test of every game and trainer

Results are printed as a table; ``--out FILE`` writes every run's result, ``--json [PATH]`` the
result file (``benchmarks/results/learning_suite.json``; one figure per game and trainer: the median
final level over the seeds, with the random and scripted levels beside it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from results import ROOT, Run, add_json_option, figure

#: the suite's games: name -> (the game as ``gymloop train`` takes it, max_entities for SB3's padding)
GAMES: dict[str, tuple[str, Any]] = {
    "invaders": ("invaders", {"Ship": 1, "Alien": 6, "Bomb": 64, "Shot": 2}),
    "keydoor": ("keydoor", None),
    "dispatch": ("dispatch", {"Courier": 1, "Order": 60}),
    "junction": ("junction", {"Car": 48}),
    "cycles": ("cycles", None),
    "fires": ("fires", None),
    "fires3": ("fires3", None),
}
TRAINERS = ["gymloop", "enn", "sb3"]
FRACTIONS = (0.5, 0.9)
SMOOTH = 3
SB3_ENVS = 8
DEFAULT_ENN_PYTHON = "/work/main/.venv-eg/bin/python"


def _available(target: str) -> bool:
    """Whether a game's module exists in this tree (``fires`` is written separately)."""
    if ":" not in target:
        return True
    return importlib.util.find_spec(target.partition(":")[0]) is not None


def _env() -> dict[str, str]:
    """The child processes' environment: this tree's gymloop first, one thread."""
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=src + (os.pathsep + path if path else ""), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _estimate(xs: list[float]) -> dict[str, float]:
    n = len(xs)
    if not n:
        return {"mean": math.nan, "ci95": math.nan, "n": 0}
    sd = statistics.stdev(xs) if n > 1 else 0.0
    return {"mean": statistics.fmean(xs), "ci95": 1.96 * sd / math.sqrt(n), "n": n}


def _agents_of(game: str) -> int:
    from gymloop.games import find_game, get_game
    from gymloop.spaces import declared_agents

    entry = find_game(game)
    return entry.agents if entry is not None else declared_agents(get_game(game)) or 1


# ---------------------------------------------------------------------- the levels of the reference agents
def seat_levels(game: str, make_agent: Any, episodes: int, seed: int) -> list[float]:
    """A two-agent game: ``make_agent(seat)`` against the scripted agent, half the episodes in each seat (its returns)."""
    import gymloop as gl
    from gymloop.agent_specs import load_agent
    from gymloop.games import get_game

    loop = get_game(game)
    out: list[float] = []
    for seat in (0, 1):
        n = episodes // 2 + (episodes % 2 if seat == 0 else 0)
        agents = [load_agent("scripted", loop, seed + 1), load_agent("scripted", loop, seed + 2)]
        agents[seat] = make_agent(seat)
        r = gl.run(loop, agents, seed=seed + seat, max_episodes=2 * n)
        out += [e.score for e in r.episodes if e.agent == seat][:n]
    return out


def reference_levels(game: str, episodes: int, seed: int) -> dict[str, Any]:
    """The random and scripted agents' levels (two-agent games: against the scripted agent) and
    ``longest``, the length of their longest episode (single-agent games)."""
    import gymloop as gl
    from gymloop.agent_specs import load_agent
    from gymloop.evaluation import evaluate_episodes
    from gymloop.games import get_game

    loop = get_game(game)
    if _agents_of(game) > 1:
        return {"random": _estimate(seat_levels(game, lambda s: gl.RandomAgent(seed=seed + s), episodes, seed)),
                "scripted": _estimate(seat_levels(game, lambda s: load_agent("scripted", loop, seed + s), episodes, seed)),
                "longest": 0}
    rand = evaluate_episodes(loop, None, episodes=episodes, seed=seed)
    scripted = gl.run(loop, load_agent("scripted", loop, seed), seed=seed, max_episodes=episodes)
    longest = max(rand["episode_length"] + [e.length for e in scripted.episodes])
    return {"random": _estimate(rand["episode_return"]), "scripted": _estimate([float(s) for s in scripted.scores]),
            "longest": longest}


# ---------------------------------------------------------------------- one run of each trainer
def curve_times(points: list[tuple[float, float, float, float]], random_level: float, scripted_level: float,
                window: float = 0) -> dict[str, float | None]:
    """Wall seconds at which the training curve ``[(step, seconds, mean return, episodes)]`` first reaches each
    fraction of the way from ``random_level`` to ``scripted_level`` (``None``: never).

    The curve at a point is the mean return of the episodes that ended within the last ``window``
    steps (at least :data:`SMOOTH` points), counted from the first point past ``window``. A window
    of ``copies * longest episode`` steps holds whole waves of episodes: game copies that start
    together also end their longest episodes together, and between those waves only short episodes
    end (in ``keydoor``, the successes).
    """
    out: dict[str, float | None] = {f"t{int(f * 100)}": None for f in FRACTIONS}
    for i, (step, t, _, _) in enumerate(points):
        if step < window:
            continue
        span = [p for j, p in enumerate(points[: i + 1]) if p[0] > step - window or j > i - SMOOTH]
        n = sum(p[3] for p in span)
        if n <= 0:
            continue
        level = sum(p[2] * p[3] for p in span) / n
        for f in FRACTIONS:
            key = f"t{int(f * 100)}"
            if out[key] is None and level >= random_level + f * (scripted_level - random_level):
                out[key] = t
    return out


def run_gymloop(game: str, seed: int, steps: int, episodes: int, eval_seed: int, sets: list[str]) -> dict[str, Any]:
    """``gymloop train`` then ``gymloop eval`` (in child processes), the curve read from ``metrics.csv``."""
    import csv

    out = tempfile.mkdtemp(prefix=f"suite-{game.replace(':', '_')}-")
    # one torch thread, as enn-trainer and SB3 get here (the default chooses threads while training)
    cmd = [sys.executable, "-m", "gymloop", "train", game, "--steps", str(steps), "--seed", str(seed), "--out", out, "--quiet",
           "--eval-episodes", "0", "--set", "threads=1"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    if p.returncode:
        return {"error": (p.stderr or p.stdout)[-2000:]}
    wall = time.time() - t0
    points = []
    last_step = 0.0
    with open(os.path.join(out, "metrics.csv"), newline="") as f:
        for row in csv.DictReader(f):
            last_step = float(row["step"])
            if row.get("episode_return_mean"):
                points.append((last_step, float(row["time/total_s"]), float(row["episode_return_mean"]),
                               float(row["episode_return_count"])))
    train_s = points[-1][1] if points else math.nan
    if _agents_of(game) > 1:
        from gymloop.agent_specs import load_agent
        from gymloop.games import get_game

        level = _estimate(seat_levels(game, lambda s: load_agent(out, get_game(game), seed + s), episodes, eval_seed))
    else:
        p = subprocess.run([sys.executable, "-m", "gymloop", "eval", game, "--agent", out, "--episodes", str(episodes), "--seed",
                            str(eval_seed), "--json"], capture_output=True, text=True, env=_env())
        if p.returncode:
            return {"error": (p.stderr or p.stdout)[-2000:]}
        level = json.loads(p.stdout)["agents"]["agent"]["episode_return"]
    from gymloop.cli import _parse_overrides
    from gymloop.train import TrainConfig

    cfg = TrainConfig(steps=steps, seed=seed, agents_per_game=_agents_of(game))
    _parse_overrides(cfg, sets)
    copies = cfg.resolved().num_envs * _agents_of(game)
    return {"level": level, "points": points, "steps": int(last_step), "train_s": train_s, "wall": wall, "run_dir": out,
            "copies": copies}


def run_enn(game: str, seed: int, steps: int, episodes: int, eval_seed: int) -> dict[str, Any]:
    """enn-trainer's defaults on the game through gymloop's entity-gym adapter (in this process)."""
    import io

    import numpy as np
    import torch
    from enn_trainer import State, TrainConfig, init_train_state, train
    from enn_trainer.rollout import Rollout
    from hyperstate import StateManager
    from rogue_net.rogue_net import Tracer

    from gymloop.adapters.entity_gym_vec import GymloopVecEnv, env_factory
    from gymloop.games import get_game

    torch.set_num_threads(1)
    loop = get_game(game)
    # enn-trainer's defaults but for the budget, the seed, one process on the CPU (hyperstate's public overrides)
    sm = StateManager(TrainConfig, State, init_train_state, None, overrides=[
        f"total_timesteps={steps}", f"seed={seed}", "cuda=false", f"env.id={game}", "env.validate=false", "rollout.processes=1",
        f"data_dir={tempfile.mkdtemp(prefix='enn-suite-')}"])
    cfg = sm.config
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    line = re.compile(r"\s*(\d+)/\d+ .*episodic_reward (\S+) .*episodes (\d+)")
    points: list[tuple[float, float, float, float]] = []
    t0 = time.perf_counter()

    class Log(io.TextIOBase):
        """enn-trainer's progress lines, each timed as it is written."""

        def write(self, s: Any) -> int:
            text = s.decode(errors="replace") if isinstance(s, bytes) else s  # click writes bytes
            for ln in text.splitlines():
                m = line.match(ansi.sub("", ln))
                if m and int(m.group(3)) > 0:
                    points.append((float(m.group(1)), time.perf_counter() - t0, float(m.group(2)), float(m.group(3))))
            return len(s)

    with contextlib.redirect_stdout(Log()):
        train(sm, env_factory(loop, seed=seed))
    train_s = time.perf_counter() - t0
    # evaluation: the first episode of each of `episodes` copies, sampling as in training
    envs = GymloopVecEnv(loop, episodes, seed=eval_seed)
    rollout = Rollout(envs, obs_space=envs.obs_space(), action_space=envs.action_space(), agent=sm.state.agent,
                      value_function=None, device=torch.device("cpu"), tracer=Tracer(cuda=False))
    totals = np.zeros(len(envs))
    first: dict[int, float] = {}
    for _ in range(100_000 // 16):
        with torch.no_grad():
            rollout.run(16, record_samples=True)
        for r, d in zip(rollout.rewards.numpy(), rollout.dones.numpy()):
            for i in np.flatnonzero(d):  # dones[t] marks the observation of step t as an episode's first
                first.setdefault(int(i), float(totals[i]))
                totals[i] = 0.0
            totals += r
        if len(first) >= len(envs):
            break
    envs.close()
    return {"level": _estimate(list(first.values())), "points": points, "steps": steps, "train_s": train_s,
            "copies": cfg.rollout.num_envs}


def run_sb3(game: str, seed: int, steps: int, episodes: int, eval_seed: int, max_entities: Any) -> dict[str, Any]:
    """sb3-contrib's MaskablePPO with its defaults on the padded game (in this process)."""
    import numpy as np
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger

    from gymloop.adapters.sb3 import GymloopSB3VecEnv, sb3_chooser
    from gymloop.evaluation import evaluate_episodes
    from gymloop.games import get_game

    torch.set_num_threads(1)
    loop = get_game(game)
    env = GymloopSB3VecEnv(loop, SB3_ENVS, seed=seed, max_entities=max_entities)
    points: list[tuple[float, float, float, float]] = []
    t0 = time.perf_counter()

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            buf = self.model.ep_info_buffer
            if buf:
                # the buffer holds the last 100 episodes: one point stands for them all, not added to the next
                points.append((self.num_timesteps, time.perf_counter() - t0, float(np.mean([e["r"] for e in buf])), 1.0))

    model = MaskablePPO("MultiInputPolicy", env, seed=seed, device="cpu")
    model.set_logger(Logger(None, []))  # no SB3-<time> folder left in the temporary folder
    model.learn(steps, callback=Curve())
    train_s = time.perf_counter() - t0
    layout = env.layout
    env.close()
    rets = evaluate_episodes(loop, sb3_chooser(model, layout), episodes=episodes, seed=eval_seed)["episode_return"]
    return {"level": _estimate(rets), "points": points, "steps": int(model.num_timesteps), "train_s": train_s, "copies": SB3_ENVS}


def _one(args: argparse.Namespace) -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    target, max_entities = GAMES.get(args.game_name, (args.game_name, None))
    if args.one == "gymloop":
        r = run_gymloop(target, args.seed, args.steps, args.episodes, args.eval_seed, args.set or [])
    elif args.one == "enn":
        r = run_enn(target, args.seed, args.steps, args.episodes, args.eval_seed)
    elif args.one == "sb3":
        r = run_sb3(target, args.seed, args.steps, args.episodes, args.eval_seed, max_entities)
    else:
        r = reference_levels(target, args.episodes, args.eval_seed)
    print("RESULT " + json.dumps(r))


def _launch(what: str, game: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    python = args.enn_python if what == "enn" else sys.executable
    cmd = [python, os.path.abspath(__file__), "--one", what, "--game-name", game, "--seed", str(seed), "--steps", str(args.steps),
           "--episodes", str(args.episodes), "--eval-seed", str(args.eval_seed)]
    for s in args.set or []:
        cmd += ["--set", s]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT / "benchmarks")
    for ln in p.stdout.splitlines():
        if ln.startswith("RESULT "):
            r = json.loads(ln[7:])
            r.update(trainer=what, game=game, seed=seed, wall=round(time.time() - t0, 1))
            return r
    return {"trainer": what, "game": game, "seed": seed, "error": (p.stderr or p.stdout)[-2000:]}


# ---------------------------------------------------------------------- the table
def spread(xs: list[float | None], fmt: str) -> str:
    """``min / median / max`` of the seeds' figures (``-`` for a seed that never got there)."""
    if not xs:
        return ""
    if len(xs) == 1:
        return "-" if xs[0] is None else format(xs[0], fmt)
    vals = sorted((math.inf if x is None else x) for x in xs)
    med = statistics.median(vals)

    def f(v: float) -> str:
        return "-" if math.isinf(v) else format(v, fmt)

    return f"{f(vals[0])} / {f(med)} / {f(vals[-1])}"


def summarize(results: list[dict[str, Any]], refs: dict[str, dict[str, Any]], games: list[str],
              trainers: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """The markdown table and, per game and trainer, the summary row."""
    head = "| game | random | scripted | " + " | ".join(f"{t} final | {t} s to 50% / 90%" for t in trainers) + " |"
    lines = [head, "|---|---:|---:|" + "---:|---:|" * len(trainers)]
    rows = []
    for g in games:
        ref = refs.get(g)
        if ref is None:
            continue
        rnd, scr = ref["random"], ref["scripted"]
        cells = [g, f"{rnd['mean']:.2f} ± {rnd['ci95']:.2f}", f"{scr['mean']:.2f} ± {scr['ci95']:.2f}"]
        for t in trainers:
            rs = [r for r in results if r["game"] == g and r["trainer"] == t]
            ok = [r for r in rs if "error" not in r and "skipped" not in r]
            if not ok:
                why = next((r.get("skipped") for r in rs if "skipped" in r), None)
                cells += [why or ("error" if rs else "-"), ""]
                continue
            finals = [r["level"]["mean"] for r in ok]
            for r in ok:
                r["times"] = ({} if _agents_of(GAMES.get(g, (g,))[0]) > 1 else
                              curve_times([tuple(p) for p in r["points"]], rnd["mean"], scr["mean"], r["copies"] * ref["longest"]))
            t50 = [r["times"].get("t50") for r in ok]
            t90 = [r["times"].get("t90") for r in ok]
            times = "n/a (self-play)" if not ok[0]["times"] else f"{spread(t50, '.0f')} · {spread(t90, '.0f')}"
            cells += [spread(finals, ".2f"), times]
            rows.append({"game": g, "trainer": t, "seeds": len(ok), "final_median": statistics.median(finals), "finals": finals,
                         "t50": t50, "t90": t90, "random": rnd["mean"], "scripted": scr["mean"]})
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", nargs="+", default=list(GAMES), help=f"games to run (default: all of {list(GAMES)})")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--steps", type=int, default=1_000_000, help="training steps of each run")
    ap.add_argument("--trainers", default=",".join(TRAINERS), help="comma-separated, of gymloop,enn,sb3")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    ap.add_argument("--episodes", type=int, default=100, help="evaluation episodes of each agent")
    ap.add_argument("--eval-seed", type=int, default=10_000, help="root seed of the evaluation games (gymloop eval's default)")
    ap.add_argument("--enn-python", default=DEFAULT_ENN_PYTHON if os.path.exists(DEFAULT_ENN_PYTHON) else sys.executable,
                    help="the Python of a virtual environment with enn-trainer (default: /work/main/.venv-eg's if it exists)")
    ap.add_argument("--set", action="append", help="gymloop config override KEY=VALUE (experiments; not the defaults any more)")
    ap.add_argument("--out", default=None, help="write every run's result to this JSON file")
    add_json_option(ap, "learning_suite")
    ap.add_argument("--one", choices=[*TRAINERS, "reference"], help=argparse.SUPPRESS)
    ap.add_argument("--game-name", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(args)
        return
    trainers = [t for t in args.trainers.split(",") if t]
    bad = [t for t in trainers if t not in TRAINERS]
    if bad:
        ap.error(f"--trainers: unknown {bad}; choose among {TRAINERS}")
    unknown = [g for g in args.games if g not in GAMES]
    if unknown:
        ap.error(f"--games: unknown {unknown}; the suite's games are {list(GAMES)}")
    games = []
    for g in args.games:
        if _available(GAMES[g][0]):
            games.append(g)
        else:
            print(f"skipping {g}: {GAMES[g][0].partition(':')[0]} is not in this tree", file=sys.stderr)
    run = Run(__file__, "learning_suite", "the learning suite: gymloop's defaults, enn-trainer and SB3 MaskablePPO", "12")
    t0 = time.time()
    refs: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    jobs: list[tuple[str, str, int]] = [("reference", g, 0) for g in games]
    for g in games:
        for t in trainers:
            if t == "sb3" and _agents_of(GAMES[g][0]) > 1:
                results.append({"trainer": t, "game": g, "seed": 0, "skipped": "n/a (two agents)"})
            elif t == "enn" and _agents_of(GAMES[g][0]) > 1:
                results.append({"trainer": t, "game": g, "seed": 0, "skipped": "n/a (seat evaluation)"})
            else:
                jobs += [(t, g, s) for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as ex:
        for r in ex.map(lambda j: _launch(*j, args), jobs):
            if r["trainer"] == "reference":
                if "error" in r:
                    print(f"reference levels of {r['game']}: error: {r['error']}", file=sys.stderr)
                    continue
                refs[r["game"]] = {k: r[k] for k in ("random", "scripted", "longest")}
                state = f"random {r['random']['mean']:.2f}, scripted {r['scripted']['mean']:.2f}"
            elif "error" in r:
                state = "error: " + r["error"].strip().splitlines()[-1]
                results.append(r)
            else:
                state = f"final {r['level']['mean']:.2f} ± {r['level']['ci95']:.2f}, {r['steps']:,} steps in {r['train_s']:.0f} s"
                results.append(r)
            print(f"[{time.time() - t0:6.0f}s] {r['trainer']:9s} {r['game']:9s} seed {r['seed']}: {state}", file=sys.stderr, flush=True)
    text, rows = summarize(results, refs, games, trainers)
    print(f"\n{args.steps:,} steps, seeds {args.seeds}, {args.episodes} evaluation episodes, {time.time() - t0:.0f} s wall; "
          "finals and times are min / median / max over the seeds; times in training seconds\n")
    print(text)
    details = {"steps": args.steps, "seeds": args.seeds, "episodes": args.episodes, "sets": args.set or [], "references": refs,
               "results": results}
    if args.out:
        Path(args.out).write_text(json.dumps(details, indent=1) + "\n")
    figs = [figure(f"{r['game']}, {args.steps:,} steps, {r['trainer']}: final return, median of {r['seeds']} seeds", r["final_median"], "",
                   baseline=f"scripted {r['scripted']:.2f}, random {r['random']:.2f}", decimals=2) for r in rows]
    run.write(args, figs, details, packages=("stable-baselines3", "sb3-contrib", "enn-trainer"))


if __name__ == "__main__":
    main()
