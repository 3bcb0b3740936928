"""Duel: two snakes on one board, moving in lock-step; the first to length 8 wins.

A two-agent game: ``duel(agents, seed)`` receives a pair of agents and asks both for their move in
the same frame with :func:`gymloop.act_all` (one batch for a :class:`~gymloop.VecEnv` with
``agents_per_game=2``). The movement rules are those of :mod:`gymloop.games.snake`.

**Board.** 10×10 cells. Each snake starts as a head alone, snake 0 in the left half and snake 1 in
the right half, heading in a random direction. There are always 3 foods on the board (an eaten
food reappears at once on a random free cell).

**Observation.** Each agent sees the board from its own snake. Entities (all with features ``x``,
``y``, integers in ``[0, 10)``):

* ``Head``: its own head (the actor);
* ``Body``: its own segments behind the head, nearest first (0 or more);
* ``Food``: every food on the board;
* ``OpponentHead``: the other snake's head;
* ``OpponentBody``: the other snake's segments, nearest to its head first (0 or more).

Global features (``DuelStatus``): ``length``, ``opponent_length``, ``steps_left``.

**Action.** ``Move`` (from the snake game): ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT`` (x-1),
``RIGHT`` (x+1). A move opposite to the current heading is ignored while the snake has a body.

**Dynamics.** Both snakes move at once. A snake that eats grows by one segment; the tail of a
snake that does not eat leaves its cell. A snake dies if its head leaves the board or lands on a
body segment of either snake (the other snake's previous head cell counts as its neck when it has
a body or eats). Heads landing on the same cell, or swapping cells, is a head-on collision: both
die.

**Reward.** Each agent's score is its own length; at the end of the episode the winner gets
``+10``. The reward is the score's change.

**Termination.** The episode *terminates* when a snake dies (the other wins; both dying is a draw)
or when a snake reaches length 8 (it wins; both at once is a draw). It is *truncated* after 300
steps. Both agents get ``game_over`` with the metrics ``length``, ``won`` and ``draw`` (1 or 0).

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.duel import duel
    >>> result = gl.run(duel, [gl.RandomAgent(seed=0), gl.RandomAgent(seed=1)], seed=0, max_episodes=2)
    >>> sorted(e.agent for e in result.episodes)
    [0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..obs import Obs
from ..spaces import game as declare_game
from .board import BODY, FOOD, HEAD, OPPONENT_BODY, OPPONENT_HEAD, GameView
from .grid import DELTA, MOVES, OPPOSITE, Board, Cell, Move, add_food, play_pair, take_food
from .registry import register_game
from .snake import Body, Food, Head

if TYPE_CHECKING:
    from ..render.draw import Canvas

__all__ = [
    "Head", "Body", "Food", "OpponentHead", "OpponentBody", "DuelStatus", "Move", "DuelGame", "duel",
    "SIZE", "TARGET_LENGTH", "MAX_STEPS", "N_FOOD", "WIN_BONUS", "draw_duel",
]

SIZE = 10
TARGET_LENGTH = 8
MAX_STEPS = 300
N_FOOD = 3
WIN_BONUS = 10


@dataclass(slots=True)
class OpponentHead(Cell):
    """The other snake's head."""


@dataclass(slots=True)
class OpponentBody(Cell):
    """One segment of the other snake's body."""


@dataclass(slots=True)
class DuelStatus:
    length: int
    opponent_length: int
    steps_left: int




class DuelGame(Board):
    """The rules of the duel, independent of who plays."""

    __slots__ = ("heads", "bodies", "headings", "food", "occupied", "steps", "over", "winner")

    def __init__(self, seed: int, size: int = SIZE) -> None:
        super().__init__(seed, size)

    def reset(self) -> None:
        size = self.size
        rng = self.rng
        half = size // 2
        self.heads = [
            Head(rng.randrange(half), rng.randrange(size)),
            Head(half + rng.randrange(size - half), rng.randrange(size)),
        ]
        self.bodies: list[list[Body]] = [[], []]
        self.headings = [MOVES[rng.randrange(4)], MOVES[rng.randrange(4)]]
        self.food: list[Food] = []
        self.occupied = bytearray(size * size)  # 1 = a body segment of either snake, 2 = food
        self.steps = 0
        self.over = False
        self.winner: int | None = None  # 0 or 1; None for a draw or while running
        for _ in range(N_FOOD):
            self.spawn_food()

    def length(self, i: int) -> int:
        return 1 + len(self.bodies[i])

    def spawn_food(self) -> None:
        size = self.size
        add_food(self.rng, size, self.occupied, self.food, {h.x * size + h.y for h in self.heads}, Food)

    def observe(self, i: int) -> Obs:
        """What snake ``i`` sees: its head as actor, the other snake as opponent entities."""
        j = 1 - i
        oh = self.heads[j]
        return (
            Obs(score=self.length(i))
            .entities(self.food)
            .entities(self.bodies[i])
            .entities(OpponentHead(oh.x, oh.y))
            .entities([OpponentBody(b.x, b.y) for b in self.bodies[j]])
            .actor(self.heads[i])
            .globals(DuelStatus(self.length(i), self.length(j), MAX_STEPS - self.steps))
        )

    def final(self, i: int) -> Obs:
        """The observation given to ``game_over`` for snake ``i``."""
        won = self.winner == i
        draw = self.over and self.winner is None
        return (
            Obs(score=self.length(i) + (WIN_BONUS if won else 0))
            .metric("length", self.length(i))
            .metric("won", 1.0 if won else 0.0)
            .metric("draw", 1.0 if draw else 0.0)
        )

    def step(self, moves: list[Move]) -> None:
        """Move both snakes at once; sets ``over`` (and ``winner``) when the duel is decided."""
        size = self.size
        occ = self.occupied
        heads, bodies = self.heads, self.bodies
        old = [(h.x, h.y) for h in heads]
        new = []
        for i in (0, 1):
            move = moves[i]
            if bodies[i] and move is OPPOSITE[self.headings[i]._value_]:
                move = self.headings[i]
            self.headings[i] = move
            dx, dy = DELTA[move._value_]
            new.append((old[i][0] + dx, old[i][1] + dy))
        self.steps += 1
        dead = [False, False]
        eat = [False, False]
        for i in (0, 1):
            nx, ny = new[i]
            if nx < 0 or ny < 0 or nx >= size or ny >= size:
                dead[i] = True
            else:
                eat[i] = occ[nx * size + ny] == 2
        # body cells after the move: tails of non-eating snakes leave, old heads become necks
        after: set[tuple[int, int]] = set()
        for i in (0, 1):
            body = bodies[i]
            keep = len(body) if eat[i] else len(body) - 1
            after.update((b.x, b.y) for b in body[:keep])
            if body or eat[i]:
                after.add(old[i])
        for i in (0, 1):
            if new[i] in after:
                dead[i] = True
        if new[0] == new[1] or (new[0] == old[1] and new[1] == old[0]):
            dead[0] = dead[1] = True
        if dead[0] or dead[1]:
            self.over = True
            self.winner = None if dead[0] and dead[1] else (1 if dead[0] else 0)
            return
        for i in (0, 1):
            nx, ny = new[i]
            body = bodies[i]
            grow = eat[i] or bool(body)  # a new segment where the head was (decided before the tail moves)
            if eat[i]:
                take_food(self.food, occ, size, nx, ny)
            elif body:  # the tail leaves its cell
                tail = body.pop()
                occ[tail.x * size + tail.y] = 0
            if grow:
                ox, oy = old[i]
                body.insert(0, Body(ox, oy))
                occ[ox * size + oy] = 1
            heads[i].x, heads[i].y = nx, ny
        while len(self.food) < N_FOOD:
            n = len(self.food)
            self.spawn_food()
            if len(self.food) == n:  # board full
                break
        done = [self.length(i) >= TARGET_LENGTH for i in (0, 1)]
        if done[0] or done[1]:
            self.over = True
            self.winner = None if done[0] and done[1] else (0 if done[0] else 1)


@declare_game(entities=[Head, Body, Food, OpponentHead, OpponentBody], actions=[Move], globals=DuelStatus, agents=2)
def duel(agents: Any, seed: int) -> None:
    """The duel game loop for a pair of agents; runs forever (episodes restart in place) until closed."""
    play_pair(agents, DuelGame(seed), Move, MAX_STEPS)


# ---------------------------------------------------------------------- view and registration
def draw_duel(obs: Obs, canvas: Canvas) -> None:
    """Duel, from the first player's observation: it is yellow/green, its opponent cyan/blue."""
    canvas.clear()
    for f in obs.entities_of(Food):
        canvas.disc(f.x, f.y, FOOD)
    for b in obs.entities_of(OpponentBody):
        canvas.fill(b.x, b.y, OPPONENT_BODY)
    for b in obs.entities_of(Body):
        canvas.fill(b.x, b.y, BODY)
    for h in obs.entities_of(OpponentHead):
        canvas.fill(h.x, h.y, OPPONENT_HEAD, inset=1)
    for h in obs.entities_of(Head):
        canvas.fill(h.x, h.y, HEAD, inset=1)
    g = obs.global_features
    if g is not None:
        canvas.bar_text(f"green {g.length}   blue {g.opponent_length}", f"{g.steps_left} steps left")


def _duel_end(obs: Obs, truncated: bool) -> str:
    m = obs.metrics
    if m.get("won"):
        return "green wins"
    if m.get("draw") or truncated:
        return "draw"
    return "blue wins"


register_game(
    "duel", duel, "two snakes on one board, moving in lock-step: the first to the target length wins",
    view=GameView(draw_duel, SIZE, SIZE, end_text=_duel_end),
)
