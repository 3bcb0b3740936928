"""The ``gymloop`` command: ``gymloop bench``, ``gymloop check GAME``, ``gymloop run GAME``.

Each subcommand calls the same public functions the tests call.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

__all__ = ["main"]


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import cpu_parallelism, format_table, run_benchmarks

    par = None if args.quick else cpu_parallelism()
    rows = run_benchmarks(seconds=args.seconds, repeats=args.repeats, num_envs=args.num_envs, quick=args.quick)
    print(format_table(rows, parallelism=par))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check
    from .games import get_game

    game = get_game(args.game)
    report = check(game, seed=args.seed, steps=args.steps, agents_per_game=args.agents)
    print(f"{args.game}: OK ({report.decisions} decisions, {report.episodes} episodes)")
    print(f"  entity types: {', '.join(report.entity_types)}")
    print(f"  action types: {', '.join(report.action_types)}")
    for c in report.checks:
        print(f"  - {c}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .agent import RandomAgent, run
    from .games import get_game

    game = get_game(args.game)
    agent = RandomAgent(seed=args.seed) if args.agents == 1 else [RandomAgent(seed=args.seed + i) for i in range(args.agents)]
    result = run(game, agent, seed=args.seed, max_episodes=args.episodes)
    scores = result.scores
    mean = sum(scores) / len(scores) if scores else float("nan")
    print(f"{args.game} with a random agent: {len(scores)} episodes, {result.steps} decisions, mean final score {mean:.2f}")
    return 0


def _parse_overrides(cfg: object, items: Sequence[str]) -> None:
    """Apply ``section.field=value`` overrides (e.g. ``ppo.lr=1e-3``, ``net.d_model=64``)."""
    from .errors import ConfigError

    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. ppo.lr=1e-3), got {item!r}")
        obj = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            if not hasattr(obj, p):
                raise ConfigError(f"unknown config section {p!r} in {item!r}")
            obj = getattr(obj, p)
        field = parts[-1]
        if not hasattr(obj, field):
            raise ConfigError(f"unknown config field {key!r}; see gymloop.train.TrainConfig")
        old = getattr(obj, field)
        try:
            if isinstance(old, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                val: object = raw.lower() in ("true", "1")
            elif isinstance(old, int):
                val = int(raw)
            elif isinstance(old, float):
                val = float(raw)
            elif old is None or isinstance(old, str):
                val = None if raw.lower() == "none" else raw
            else:
                raise ConfigError(f"config field {key!r} cannot be set from the command line")
        except ValueError:
            raise ConfigError(f"config field {key!r} expects a {type(old).__name__}, got {raw!r}") from None
        setattr(obj, field, val)


def _cmd_train(args: argparse.Namespace) -> int:
    import os

    from .games import get_game
    from .train import TrainConfig
    from .train.ppo import Trainer, evaluate

    game = get_game(args.game)
    cfg = TrainConfig(steps=args.steps, seed=args.seed, workers=args.workers, agents_per_game=args.agents,
                      opponents=list(args.opponent or []), init_from=args.init_from)
    if args.num_envs:
        cfg.num_envs = args.num_envs
    _parse_overrides(cfg, args.set or [])
    trainer = Trainer(game, cfg, out_dir=args.out, game_name=args.game, resume=args.resume, progress=not args.quiet)
    before = None
    if not args.resume and args.eval_episodes:
        before = evaluate(game, None, episodes=args.eval_episodes, agents_per_game=args.agents, seed=args.seed + 1)
    result = trainer.train()
    after = evaluate(game, trainer.policy, episodes=args.eval_episodes, agents_per_game=args.agents, seed=args.seed + 1) if args.eval_episodes else None
    print(f"trained {args.game}: {result.steps:,} steps in {result.seconds:.0f} s ({result.steps / max(result.seconds, 1e-9):,.0f} steps/s)"
          + (" (interrupted)" if result.interrupted else ""))
    if after is not None:
        keys = [k for k in after if k.endswith("return") or k not in ("episode_return", "episode_length")]
        for k in ["episode_return", "episode_length"] + [k for k in keys if k not in ("episode_return", "episode_length")]:
            if k in after:
                b = f"{before[k]:8.2f}" if before and k in before else "       -"
                print(f"  {k:<20} random agent {b}   trained agent {after[k]:8.2f}")
    print(f"files in {os.path.abspath(args.out)}: agent.safetensors, optimizer.safetensors, metrics.csv, curve.png, tb/")
    return 130 if result.interrupted else 0


def _cmd_library(args: argparse.Namespace) -> int:
    from .library import library, pack_library

    if args.action == "pack":
        if not args.out:
            from .errors import ConfigError

            raise ConfigError("gymloop library pack needs --out FILE (the archive to write)")
        pack_library(args.out, args.path)
        lib = library(args.out)
        print(f"packed {len(lib)} agents into {args.out} ({os.path.getsize(args.out):,} bytes)")
        return 0
    lib = library(args.path)
    print(f"{lib.path}: {lib.kind}, {len(lib)} agents")
    for name in lib.names():
        info = lib.info(name)
        ents = ", ".join(info.get("obs_space", {}).get("entities", {}))
        acts = ", ".join(info.get("action_space", {}))
        print(f"  {name:<30} game={info.get('game', '?')} step={info.get('step', '?')} entities=[{ents}] actions=[{acts}]")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gymloop", description="Game loops as fast RL environments.")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="throughput of snake: gymloop vs Gymnasium vector envs")
    b.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    b.add_argument("--repeats", type=int, default=5, help="measurements per row (the median is shown)")
    b.add_argument("--num-envs", type=int, default=None, help="game copies per vectorized env")
    b.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    b.set_defaults(fn=_cmd_bench)

    c = sub.add_parser("check", help="check a game: schemas, masks, determinism, clean close")
    c.add_argument("game", help="bundled game name (snake, tactics, duel) or module:function")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--steps", type=int, default=500)
    c.add_argument("--agents", type=int, default=None, help="agents per game (default: 2 for duel, else 1)")
    c.set_defaults(fn=_cmd_check)

    t = sub.add_parser("train", help="train an agent with PPO (needs the train extra: torch)")
    t.add_argument("game", help="bundled game name (snake, tactics, duel) or module:function")
    t.add_argument("--steps", type=int, default=3_000_000, help="environment steps (the default takes about 3 minutes for snake on 2 cores)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", default="runs/latest", help="output folder")
    t.add_argument("--workers", type=int, default=0, help="processes stepping games (0: the trainer's process)")
    t.add_argument("--num-envs", type=int, default=None)
    t.add_argument("--agents", type=int, default=None, help="agents per game (default: 2 for duel, else 1)")
    t.add_argument("--opponent", action="append", help="frozen opponent checkpoint for self-play (repeatable)")
    t.add_argument("--resume", action="store_true", help="continue from OUT's checkpoint and optimizer state")
    t.add_argument("--init-from", metavar="PATH", help="warm-start from an older agent of this game (new features start at zero weight)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field, e.g. ppo.lr=1e-3")
    t.add_argument("--eval-episodes", type=int, default=200, help="episodes to score before and after (0: skip)")
    t.add_argument("--quiet", action="store_true", help="no progress line")
    t.set_defaults(fn=_cmd_train)

    lb = sub.add_parser("library", help="list an agent library, or pack a folder of agents into one archive")
    lb.add_argument("action", choices=["list", "pack"])
    lb.add_argument("path", help="a folder of agent checkpoints, or an archive (list only)")
    lb.add_argument("--out", help="pack: the archive file to write")
    lb.set_defaults(fn=_cmd_library)

    r = sub.add_parser("run", help="play a game with a random agent and print the scores")
    r.add_argument("game")
    r.add_argument("--episodes", type=int, default=10)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--agents", type=int, default=None, help="agents per game (default: 2 for duel, else 1)")
    r.set_defaults(fn=_cmd_run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gymloop`` console script."""
    from .errors import GymloopError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "agents", 1) is None:
        args.agents = 2 if args.game == "duel" else 1
    try:
        return args.fn(args)
    except GymloopError as e:
        print(f"gymloop: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
