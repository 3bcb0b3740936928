"""A small shooter in pixel coordinates on a 640 x 480 screen, with two action types in one ``act``.

The ship moves along the bottom (``Steer``: ``LEFT``, ``RIGHT`` or ``NONE``) and fires (``Trigger``:
``FIRE`` or ``NONE``) at aliens that fall from the top; a hit scores 1, an alien at the bottom ends
the episode. Positions are pixels (``x`` right, ``y`` down from the top, as pygame draws), so
the generic view has to scale them. No view is registered: play and record draw it generically.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

import gymloop as gl

WIDTH, HEIGHT = 640, 480
SPEED, SHOT_SPEED, FALL = 8, 16, 4


class Steer(Enum):
    NONE = 0
    LEFT = 1
    RIGHT = 2


class Trigger(Enum):
    NONE = 0
    FIRE = 1


@dataclass
class Ship:
    x: float
    y: float


@dataclass
class Shot:
    x: float
    y: float


@dataclass
class Alien:
    x: float
    y: float


def shooter(agent: Any, seed: int, max_shots: int = 2) -> None:
    """Runs forever; one episode per life."""
    rng = random.Random(seed)
    while True:
        ship = Ship(WIDTH / 2, HEIGHT - 20)
        shots: list[Shot] = []
        aliens = [Alien(rng.randrange(20, WIDTH - 20), rng.randrange(10, 200)) for _ in range(6)]
        score = 0
        while True:
            obs = gl.Obs(score=score).entities(aliens).entities(shots).actor(ship)
            steer, trigger = agent.act(obs, Steer, Trigger)
            ship.x = min(WIDTH - 10, max(10, ship.x + {Steer.LEFT: -SPEED, Steer.RIGHT: SPEED}.get(steer, 0)))
            if trigger is Trigger.FIRE and len(shots) < max_shots:
                shots.append(Shot(ship.x, ship.y - 10))
            for s in shots:
                s.y -= SHOT_SPEED
            for a in aliens:
                a.y += FALL
            hit = [a for a in aliens if any(abs(a.x - s.x) < 16 and abs(a.y - s.y) < 16 for s in shots)]
            score += len(hit)
            aliens = [a for a in aliens if a not in hit]
            shots = [s for s in shots if s.y > 0 and not any(abs(a.x - s.x) < 16 and abs(a.y - s.y) < 16 for a in hit)]
            while len(aliens) < 6:
                aliens.append(Alien(rng.randrange(20, WIDTH - 20), rng.randrange(0, 40)))
            if any(a.y >= HEIGHT for a in aliens):
                agent.game_over(gl.Obs(score=score).entities(aliens).actor(ship))
                break
