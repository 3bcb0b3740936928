"""The ``gymloop`` command: ``gymloop bench``, ``gymloop check GAME``, ``gymloop run GAME``.

Each subcommand calls the same public functions the tests call.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

__all__ = ["main"]


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import format_table, run_benchmarks

    rows = run_benchmarks(seconds=args.seconds, repeats=args.repeats, num_envs=args.num_envs, quick=args.quick)
    print(format_table(rows))
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
