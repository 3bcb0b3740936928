"""A user's own two-player game for the render tests (not a bundled one): ``farm``.

Two farmers on a 6x6 field pick crops; crows eat them, rocks block the way. Five entity types
(``Farmer``, the actor; ``Rival``; ``Crop`` with an Enum ``kind``; ``Rock``; ``Crow``), global
features (``Season``), two agents asked together with ``gl.act_all``, masks given with the Enum's
members. It is declared only with ``@gl.game(agents=2)``: no ``entities=``/``globals=``, as a new
user writes it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

import gymloop as gl

SIZE = 6
STEPS = 12


class Move(Enum):
    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3
    STAY = 4


class CropKind(Enum):
    WHEAT = 0
    CORN = 1
    BERRY = 2


@dataclass
class Farmer:
    x: int
    y: int


@dataclass
class Rival:
    x: int
    y: int


@dataclass
class Crop:
    x: int
    y: int
    kind: CropKind


@dataclass
class Rock:
    x: int
    y: int


@dataclass
class Crow:
    x: int
    y: int


@dataclass
class Season:
    steps_left: int
    mine: int
    theirs: int


_DELTA = {Move.UP: (0, 1), Move.DOWN: (0, -1), Move.LEFT: (-1, 0), Move.RIGHT: (1, 0), Move.STAY: (0, 0)}


@gl.entity(name="Season")
@dataclass
class ShortSeason:
    """Another version of the game's globals: without ``theirs``."""

    steps_left: int
    mine: int

    def __init__(self, steps_left: int, mine: int, theirs: int) -> None:
        self.steps_left, self.mine = steps_left, mine


@gl.game(agents=2)
def farm(agents: Any, seed: int, season: Any = Season) -> None:
    """Both farmers move at once; a crop is worth 1 (a berry 2); the season lasts ``STEPS`` steps.

    ``season``: the globals class (``None``: no globals), for versions of the game in the tests.
    """
    rng = random.Random(seed)
    while True:
        pos = [[0, 0], [SIZE - 1, SIZE - 1]]
        rocks = [Rock(2, 3), Rock(3, 2)]
        crops = [Crop(rng.randrange(SIZE), rng.randrange(SIZE), CropKind(rng.randrange(3))) for _ in range(5)]
        crow = Crow(rng.randrange(SIZE), rng.randrange(SIZE))
        score = [0, 0]
        for t in range(STEPS):
            reqs = []
            for i in (0, 1):
                me, other = pos[i], pos[1 - i]
                legal = [m for m, (dx, dy) in _DELTA.items()
                         if 0 <= me[0] + dx < SIZE and 0 <= me[1] + dy < SIZE
                         and not any(r.x == me[0] + dx and r.y == me[1] + dy for r in rocks)]
                obs = (gl.Obs(score=score[i]).actor(Farmer(*me), masks={Move: legal}).entities(Rival(*other))
                       .entities(list(crops)).entities(list(rocks)).entities(crow))
                if season is not None:
                    obs.globals(season(STEPS - t, score[i], score[1 - i]))
                reqs.append((agents[i], obs, Move))
            moves = gl.act_all(reqs)
            for i in (0, 1):
                dx, dy = _DELTA[moves[i]]
                pos[i] = [pos[i][0] + dx, pos[i][1] + dy]
                for c in list(crops):
                    if [c.x, c.y] == pos[i]:
                        crops.remove(c)
                        score[i] += 2 if c.kind is CropKind.BERRY else 1
            crow.x, crow.y = rng.randrange(SIZE), rng.randrange(SIZE)
            crops = [c for c in crops if (c.x, c.y) != (crow.x, crow.y)]
        for i in (0, 1):
            agents[i].game_over(gl.Obs(score=score[i]), truncated=True)


class GoRight:
    """A scripted agent a user writes (``support.farm:GoRight`` on the command line): right when it may."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, obs: gl.Obs, move: type) -> Any:
        legal = obs.legal(0, move)
        return Move.RIGHT if not legal or Move.RIGHT in legal else legal[0]

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass
