"""Where a trained light-cycles rider loses: its blunders against the scripted rider, by move number.

A *blunder* is a move into a blocked cell (off the board, a trail, a rider) while another move
leads to at least ``--room`` free cells (a flood fill through the walls): the rider was not
trapped, it did not see the wall. For each agent (a run folder, or ``random``) the script plays
``--episodes`` games against :class:`~gymloop.games.suite.cycles.CyclesAgent`, half in each seat
(the learning suite's evaluation), and prints

* the score (wins less losses, per game) and the mean game length;
* per ten moves of the game, the rider's blunders over its decisions that had a way out: how the
  blunder rate grows as the board fills (what self-play training, whose games end early, rarely
  shows it);
* what each loss ran into (``edge``, ``own`` trail, ``opponent``), blunders apart.

Usage::

    python benchmarks/cycles_blunders.py RUN_DIR [RUN_DIR ...] [--greedy] [--episodes 100]
    python benchmarks/cycles_blunders.py random
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

import gymloop as gl
from gymloop.agent_specs import load_agent
from gymloop.games.grid import room as free_room
from gymloop.games.suite import cycles as cyc


def play(agent_of: Any, episodes: int, room: int, seed: int) -> dict[str, Any]:
    """``agent_of(episode)`` against the scripted rider: the score, the lengths, the blunders by move number, the losses' causes."""
    decisions: collections.Counter[int] = collections.Counter()
    blunders: collections.Counter[int] = collections.Counter()
    causes: collections.Counter[str] = collections.Counter()
    score, lengths = 0, []
    for ep in range(episodes):
        seat = ep % 2
        game = cyc.CyclesGame(seed + ep)
        agents = [cyc.CyclesAgent(seed=ep), cyc.CyclesAgent(seed=ep + 1)]
        agents[seat] = agent_of(ep)
        cause = ""
        while not game.over and game.steps < cyc.MAX_STEPS:
            moves = [agents[i].act(game.observe(i), cyc.Move) for i in (0, 1)]
            me = game.riders[seat]
            blocked = game.walls | {(r.x, r.y) for r in game.riders}
            own = {(t.x, t.y) for t in game.trails[seat]}
            rooms = []
            for dx, dy in cyc.DELTA:
                x, y = me.x + dx, me.y + dy
                free = 0 <= x < cyc.SIZE and 0 <= y < cyc.SIZE and (x, y) not in blocked
                rooms.append(free_room(x, y, blocked, cyc.SIZE) if free else 0)
            x, y = me.x + cyc.DELTA[moves[seat].value][0], me.y + cyc.DELTA[moves[seat].value][1]
            blunder = max(rooms) >= room and rooms[moves[seat].value] == 0
            if max(rooms) >= room:
                decisions[game.steps // 10] += 1
                blunders[game.steps // 10] += blunder
            if rooms[moves[seat].value] == 0:
                kind = "edge" if not (0 <= x < cyc.SIZE and 0 <= y < cyc.SIZE) else "own" if (x, y) in own else "opponent"
                cause = kind + (" (blunder)" if blunder else "")
            game.step(moves)
        lengths.append(game.steps)
        if game.winner == seat:
            score += 1
        elif game.winner == 1 - seat:
            score -= 1
            causes[cause] += 1
    return {"score": score / episodes, "length": sum(lengths) / len(lengths), "decisions": decisions, "blunders": blunders,
            "causes": causes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("agents", nargs="+", help="run folders (or checkpoints) of cycles agents, or 'random'")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=10_000, help="the first game's seed (the learning suite's evaluation seed)")
    ap.add_argument("--room", type=int, default=4, help="free cells a move must lead to for its alternative to count as a way out")
    ap.add_argument("--greedy", action="store_true", help="the trained agents take their most probable move (default: they sample)")
    args = ap.parse_args()
    for spec in args.agents:
        if spec == "random":
            def agent_of(ep: int) -> Any:
                return gl.RandomAgent(seed=ep)
        elif args.greedy:
            trained = gl.load(spec, greedy=True, game=cyc.cycles)

            def agent_of(ep: int, trained: Any = trained) -> Any:
                return trained
        else:
            def agent_of(ep: int, spec: str = spec) -> Any:
                return load_agent(spec, cyc.cycles, ep)
        r = play(agent_of, args.episodes, args.room, args.seed)
        rates = "  ".join(f"moves {10 * k}-{10 * k + 9}: {r['blunders'][k]}/{r['decisions'][k]} ({r['blunders'][k] / r['decisions'][k]:.1%})"
                          for k in sorted(r["decisions"]))
        print(f"{spec}: score {r['score']:+.2f}, {r['length']:.1f} moves a game")
        print(f"  blunders over decisions with a way out: {rates}")
        print("  losses: " + ", ".join(f"{k} {v}" for k, v in r["causes"].most_common()))


if __name__ == "__main__":
    main()
