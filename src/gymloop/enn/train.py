"""Train a gymloop game with enn-trainer: ``python -m gymloop.enn.train GAME --out DIR``.

enn-trainer's own command (``python -m enn_trainer.train``) finds only entity-gym's registered
environments. This entry point runs enn-trainer's PPO (its defaults, or ``--set`` overrides of its
``TrainConfig``, e.g. ``--set optim.lr=0.003``) on any gymloop game through gymloop's entity-gym
adapter (:func:`gymloop.adapters.entity_gym_vec.env_factory`), and writes the trained agent as an
enn-trainer checkpoint folder ``DIR/agent`` that ``gymloop eval GAME --agent DIR/agent``,
``gl.load`` and ``gymloop export`` read. It needs the entity-gym extra (enn-trainer, which pins
numpy below 2) in the environment that runs it; gymloop imports nothing of it otherwise.

Example (in a virtual environment with enn-trainer)::

    python -m gymloop.enn.train snake --out runs/snake-enn --steps 200000 --set optim.lr=0.003
    gymloop eval snake --agent runs/snake-enn/agent
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, GymloopError
from ..files import make_folder

__all__ = ["AGENT_FOLDER", "train_with_enn", "main"]

log = logging.getLogger(__name__)

#: the folder of the trained agent inside the run folder (an enn-trainer checkpoint)
AGENT_FOLDER = "agent"

_NEEDS = ("training with enn-trainer needs enn-trainer and hyperstate in this Python environment (they pin numpy < 2): "
          "pip install enn-trainer, in a separate virtual environment if this one has numpy 2")


def train_with_enn(
    game: Callable[..., Any] | str,
    out_dir: str | os.PathLike,
    *,
    steps: int = 1_000_000,
    seed: int = 0,
    overrides: Sequence[str] = (),
    processes: int = 1,
    threads: int = 1,
) -> str:
    """Train ``game`` with enn-trainer's PPO; returns the trained agent's checkpoint folder.

    Args:
        game: a game loop, a bundled game's name or ``module:function``.
        out_dir: the run folder: enn-trainer's data and the agent (``out_dir/agent``).
        steps: environment steps (enn-trainer's ``total_timesteps``).
        seed: enn-trainer's seed (the game copies' seeds derive from it too).
        overrides: enn-trainer ``TrainConfig`` fields as ``"path=value"`` (``"optim.lr=0.003"``,
            ``"rollout.num_envs=64"``); they win over the ones above.
        processes: game worker processes (enn-trainer's ``rollout.processes``; 1: in this process).
        threads: torch threads.

    Raises:
        ConfigError: enn-trainer is not installed, an argument is out of range, or enn-trainer
            refused an override (its message is kept).
        OutputPathError: ``out_dir`` is not a folder.
    """
    try:
        import torch
        from enn_trainer import State, TrainConfig, init_train_state, train
        from hyperstate import StateManager
    except ImportError as e:
        raise ConfigError(f"{_NEEDS} ({e})") from None
    from ..adapters.entity_gym_vec import env_factory
    from ..games import game_name, get_game

    for name, v, lo in (("steps", steps, 1), ("processes", processes, 1), ("threads", threads, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"train_with_enn: {name} must be an int >= {lo}, got {v!r}")
    loop = get_game(game) if isinstance(game, str) else game
    out = os.path.abspath(make_folder(out_dir, "the run folder (--out)"))
    settings = [f"total_timesteps={steps}", f"seed={seed}", "cuda=false", f"env.id={game_name(loop)}",
                f"rollout.processes={processes}", f"data_dir={out}", *overrides]
    try:
        sm = StateManager(TrainConfig, State, init_train_state, None, None, list(settings))
        sm.config  # noqa: B018  (parses the settings now, so a bad override fails before the games start)
    except Exception as e:  # hyperstate raises its own error types, ValueError and TypeError
        raise ConfigError(f"enn-trainer refused the configuration {list(overrides)}: {type(e).__name__}: {e}") from None
    torch.set_num_threads(threads)
    log.info("training %s with enn-trainer: %s", game_name(loop), " ".join(settings))
    train(sm, env_factory(loop, seed=seed))
    target = os.path.join(out, AGENT_FOLDER)
    if os.path.isdir(target):
        shutil.rmtree(target)  # (the agent of an earlier run into the same folder)
    sm.checkpoint(target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gymloop.enn.train``: the command line of :func:`train_with_enn`."""
    p = argparse.ArgumentParser(
        prog="python -m gymloop.enn.train",
        description="Train a gymloop game with enn-trainer's PPO; the agent is written to OUT/agent (an enn-trainer "
                    "checkpoint that gymloop eval, gl.load and gymloop export read).",
    )
    p.add_argument("game", help="a bundled game's name (snake, duel, tactics, ...) or module:function")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--steps", type=int, default=1_000_000, help="environment steps (default 1,000,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--processes", type=int, default=1, help="game worker processes (default 1: in this process)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="an enn-trainer TrainConfig field, e.g. --set optim.lr=0.003 --set rollout.num_envs=64 (repeatable)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `module:function` games next to the user
    try:
        path = train_with_enn(args.game, args.out, steps=args.steps, seed=args.seed, overrides=args.set,
                              processes=args.processes, threads=args.threads)
    except GymloopError as e:
        print(f"gymloop.enn.train: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gymloop.enn.train: interrupted", file=sys.stderr)
        return 130
    print(f"wrote the agent {path}; evaluate it with: gymloop eval {args.game} --agent {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
