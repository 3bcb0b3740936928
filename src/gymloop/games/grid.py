"""Cells and moves on a square board, as the grid games play them (:mod:`~gymloop.games.snake`,
:mod:`~gymloop.games.duel`, :mod:`~gymloop.games.suite.cycles`), and the loop of a two-player game.

A board of ``size`` × ``size`` cells numbers cell ``(x, y)`` as ``x * size + y``; an occupancy
board is a ``bytearray`` of those cells (0 free, 1 a body segment, 2 food). ``y`` grows upward.

Example:
    >>> from gymloop.games.grid import DELTA, OPPOSITE, Move
    >>> DELTA[Move.UP.value], OPPOSITE[Move.LEFT.value] is Move.RIGHT
    ((0, 1), True)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from ..agent import act_all
from ..obs import Obs
from .rules import Rules

__all__ = ["DELTA", "MOVES", "OPPOSITE", "Board", "Cell", "Move", "add_food", "play_pair", "room", "take_food"]


@dataclass(slots=True)
class Cell:
    """A position on a board: the two features ``x`` and ``y``. The grid games' entity types that
    are only a position subclass it (each subclass is its own entity type, named after its class).

    Example:
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> @dataclass(slots=True)
        ... class Rock(Cell):
        ...     pass
        >>> gl.Obs().entities([Rock(1, 2)]).view()[1]
        [[Rock(x=1, y=2)]]
    """

    x: int
    y: int


class Move(Enum):
    """A step to a neighbouring cell."""

    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3


# indexed by a member's value (``_value_`` is a plain attribute: no Enum hashing per step)
DELTA = ((0, 1), (0, -1), (-1, 0), (1, 0))
"""Each move's ``(dx, dy)``, indexed by its value."""
OPPOSITE = (Move.DOWN, Move.UP, Move.RIGHT, Move.LEFT)
"""Each move's reverse, indexed by its value."""
MOVES = list(Move)
"""The moves by value (``MOVES[rng.randrange(4)]`` draws one)."""


def add_food(rng: random.Random, size: int, occupied: bytearray, food: list[Any], heads: Container[int],
             make: Callable[[int, int], Any]) -> None:
    """Put ``make(x, y)`` on a random cell free on ``occupied`` and under none of ``heads`` (marked 2
    on ``occupied``) and append it to ``food``; nothing when the board is full.

    Draws up to 16 cells first (the board is rarely crowded), then one among every free cell.
    """
    n = size * size
    randrange = rng.randrange
    for _ in range(16):
        c = randrange(n)
        if not occupied[c] and c not in heads:
            break
    else:
        free = [c for c in range(n) if not occupied[c] and c not in heads]
        if not free:
            return
        c = free[randrange(len(free))]
    occupied[c] = 2
    food.append(make(c // size, c % size))


def room(x: int, y: int, blocked: Container[tuple[int, int]], size: int) -> int:
    """The free cells reachable from ``(x, y)`` (itself included) on a ``size`` × ``size`` board,
    avoiding ``blocked``: the room a move leaves (the scripted snake and light-cycles riders).

    Example:
        >>> room(0, 0, {(1, 0), (1, 1), (0, 2)}, 3)
        2
    """
    seen = {(x, y)}
    stack = [(x, y)]
    while stack:
        cx, cy = stack.pop()
        for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
            if 0 <= nx < size and 0 <= ny < size and (nx, ny) not in seen and (nx, ny) not in blocked:
                seen.add((nx, ny))
                stack.append((nx, ny))
    return len(seen)


def take_food(food: list[Any], occupied: bytearray, size: int, x: int, y: int) -> None:
    """A snake eats the food on cell ``(x, y)``: it leaves ``food`` and the cell is free on ``occupied``."""
    occupied[x * size + y] = 0
    for i, f in enumerate(food):
        if f.x == x and f.y == y:
            del food[i]
            break


class Board(Rules):
    """:class:`~gymloop.games.rules.Rules` on a ``size`` × ``size`` board of cells (:class:`~gymloop.games.snake.SnakeGame`,
    :class:`~gymloop.games.duel.DuelGame`).

    Attributes:
        size: cells per side.
    """

    __slots__ = ("size",)

    def __init__(self, seed: int, size: int) -> None:
        self.size = size
        super().__init__(seed)


class PairRules(Protocol):
    """What :func:`play_pair` needs of a two-player game's rules (both seats move at once)."""

    over: bool
    steps: int

    def observe(self, seat: int) -> Obs: ...

    def step(self, moves: list[Any]) -> None: ...

    def final(self, seat: int) -> Obs: ...

    def reset(self) -> None: ...


def play_pair(agents: Any, rules: PairRules, action_type: Any, max_steps: int) -> None:
    """The loop of a two-player game whose seats move at the same time; runs forever (episodes
    restart in place) until the game is closed.

    Each step asks both agents together (:func:`~gymloop.act_all`), then plays both moves. An
    episode ends when ``rules.over`` (terminated) or after ``max_steps`` steps (truncated); each
    seat then gets its ``rules.final(seat)`` observation.
    """
    a, b = agents
    while True:
        moves = act_all([(a, rules.observe(0), action_type), (b, rules.observe(1), action_type)])
        rules.step(moves)
        if rules.over or rules.steps >= max_steps:
            truncated = not rules.over
            a.game_over(rules.final(0), truncated=truncated)
            b.game_over(rules.final(1), truncated=truncated)
            rules.reset()
