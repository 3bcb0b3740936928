"""Light cycles: two riders leave walls behind them; the first to crash loses (two agents, self-play).

**Board.** 12×12 cells (``x``, ``y`` in ``[0, 12)``). Rider 0 starts at a random row of the left
quarter heading right, rider 1 at a random row of the right quarter heading left.

**Observation.** Each rider sees the board from its own side. Entities:

* ``Head`` (the actor): its cycle, ``x``, ``y``;
* ``Body``: the cells of its own wall, newest first;
* ``OpponentHead``: the other rider's cycle;
* ``OpponentBody``: the cells of the other rider's wall, newest first.

(All with features ``x``, ``y``; the entity types of :mod:`gymloop.games.snake` and
:mod:`gymloop.games.duel`: a light cycle is a snake that never stops growing.)

Global features (``Race``): ``steps_left``.

**Action.** ``Move`` (from :mod:`gymloop.games.grid`): ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT``
(x-1), ``RIGHT`` (x+1). Turning back onto its own trail is masked.

**Dynamics.** Both riders move at once; each leaves its previous cell as a wall. A rider crashes
when it leaves the board or enters a wall; both entering the same cell, or swapping cells, is a
crash of both.

**Reward.** At the end: +1 to the winner, -1 to the loser, 0 to both in a draw (the score).

**Termination.** The episode *terminates* at the first crash (the other rider wins; both crashing
is a draw) and is *truncated* after 150 steps (a draw). Both agents get ``game_over`` with the
metrics ``won`` and ``draw`` (1 or 0).

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.suite.cycles import CyclesAgent, cycles
    >>> r = gl.run(cycles, [CyclesAgent(seed=0), gl.RandomAgent(seed=1)], seed=0, max_episodes=20)
    >>> sum(e.score for e in r.episodes if e.agent == 0) > 5
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ...obs import Obs
from ...spaces import game as declare_game
from ..duel import OpponentBody, OpponentHead
from ..grid import DELTA, MOVES, OPPOSITE, Move, play_pair, room
from ..registry import register_game
from ..rules import Rules
from ..snake import Body, Head

__all__ = ["Head", "Body", "OpponentHead", "OpponentBody", "Race", "Move", "CyclesGame", "cycles", "CyclesAgent", "SIZE",
           "MAX_STEPS"]

SIZE = 12
MAX_STEPS = 150


@dataclass(slots=True)
class Race:
    steps_left: int


class CyclesGame(Rules):
    """The rules, independent of who plays."""

    __slots__ = ("riders", "trails", "headings", "walls", "steps", "over", "winner")

    def reset(self) -> None:
        rng = self.rng
        q = SIZE // 4
        self.riders = [Head(rng.randrange(q), rng.randrange(SIZE)), Head(SIZE - 1 - rng.randrange(q), rng.randrange(SIZE))]
        self.trails: list[list[Body]] = [[], []]
        self.headings = [Move.RIGHT, Move.LEFT]
        self.walls: set[tuple[int, int]] = set()
        self.steps = 0
        self.over = False
        self.winner: int | None = None

    def observe(self, i: int) -> Obs:
        """What rider ``i`` sees: itself as the actor, the other as opponent entities."""
        me, other = self.riders[i], self.riders[1 - i]
        back = OPPOSITE[self.headings[i]._value_]
        allowed = [m for m in MOVES if m is not back or not self.trails[i]]
        return (
            Obs(score=0)
            .entities(self.trails[i])
            .entities(OpponentHead(other.x, other.y))
            .entities([OpponentBody(t.x, t.y) for t in self.trails[1 - i]])
            .actor(me, masks={Move: allowed})
            .globals(Race(MAX_STEPS - self.steps))
        )

    def step(self, moves: list[Move]) -> None:
        """Move both riders at once; sets ``over`` (and ``winner``) at a crash."""
        old = [(r.x, r.y) for r in self.riders]
        new = []
        for i in (0, 1):
            dx, dy = DELTA[moves[i]._value_]
            self.headings[i] = moves[i]
            new.append((old[i][0] + dx, old[i][1] + dy))
        self.steps += 1
        walls = self.walls
        walls.update(old)
        crash = [not (0 <= x < SIZE and 0 <= y < SIZE) or (x, y) in walls for x, y in new]
        if new[0] == new[1]:
            crash = [True, True]
        for i in (0, 1):
            self.trails[i].insert(0, Body(*old[i]))
            self.riders[i].x, self.riders[i].y = new[i]
        if crash[0] or crash[1]:
            self.over = True
            self.winner = None if crash[0] and crash[1] else (1 if crash[0] else 0)

    def final(self, i: int) -> Obs:
        won = self.winner == i
        lost = self.winner == 1 - i
        return (
            Obs(score=1 if won else -1 if lost else 0)
            .metric("won", 1.0 if won else 0.0)
            .metric("draw", 1.0 if self.winner is None else 0.0)
        )


@declare_game(entities=[Head, Body, OpponentHead, OpponentBody], actions=[Move], globals=Race, agents=2)
def cycles(agents: Any, seed: int) -> None:
    """The light-cycles game loop for a pair of agents; runs forever (episodes restart in place) until closed."""
    play_pair(agents, CyclesGame(seed), Move, MAX_STEPS)


class CyclesAgent:
    """The scripted rider, for either seat: the move that keeps the most room.

    For each move that does not crash at once, it counts the free cells reachable afterwards (a
    flood fill through the walls and both riders' cells), and takes the move with the most; ties
    go to the move that brings it nearer the opponent (to cut it off), then to its seeded
    generator. Cells next to the opponent's rider count as taken (it may move there).

    Args:
        seed: seed of the tie-breaking generator.
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, obs: Obs, *action_types: Any) -> Move:
        me = obs.actor_list[0]
        other = obs.entities_of(OpponentHead)[0]
        walls = {(t.x, t.y) for t in obs.entities_of(Body)} | {(t.x, t.y) for t in obs.entities_of(OpponentBody)}
        walls.add((other.x, other.y))
        reach = {(other.x + dx, other.y + dy) for dx, dy in DELTA}
        trail = obs.entities_of(Body)
        back = (trail[0].x, trail[0].y) if trail else None
        options = []
        fallback = Move.UP
        for m in MOVES:
            dx, dy = DELTA[m._value_]
            nx, ny = me.x + dx, me.y + dy
            if (nx, ny) != back:
                fallback = m
            if not (0 <= nx < SIZE and 0 <= ny < SIZE) or (nx, ny) in walls:
                continue
            free = room(nx, ny, walls | {(me.x, me.y)}, SIZE)
            contested = (nx, ny) in reach
            dist = abs(nx - other.x) + abs(ny - other.y)
            options.append(((not contested, free, -dist, self.rng.random()), m))
        if not options:
            return fallback  # every move crashes: any legal one
        return max(options, key=lambda o: o[0])[1]

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


register_game("cycles", cycles, "light cycles: two riders leave walls behind them, the first to crash loses", scripted=CyclesAgent)
