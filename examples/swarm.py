"""Swarm: many units deciding every frame, answered by one forward pass.

Each of ``units`` drones moves one step (N, S, E, W or stays) every frame towards the beacons on
a 64 x 64 field; a drone on a beacon scores and the beacon moves elsewhere. All drones are actors
of one observation, so ``agent.act`` answers all of them at once: with a trained agent, one
forward pass of the network per frame, whatever the number of drones.

Example:
    >>> import gymloop as gl
    >>> from swarm import swarm
    >>> r = gl.run(swarm, gl.RandomAgent(seed=0), seed=0, max_steps=5)
    >>> r.steps
    5
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

import gymloop as gl

SIZE = 64
FRAMES = 300


@dataclass(slots=True)
class Drone:
    x: int
    y: int


@dataclass(slots=True)
class Beacon:
    x: int
    y: int


class Fly(Enum):
    N = 0
    S = 1
    E = 2
    W = 3
    STAY = 4


STEP = {Fly.N: (0, 1), Fly.S: (0, -1), Fly.E: (1, 0), Fly.W: (-1, 0), Fly.STAY: (0, 0)}


@gl.game(entities=[Drone, Beacon], actions=[Fly])
def swarm(agent: Any, seed: int, units: int = 100, beacons: int = 8) -> None:
    """The swarm loop; ``units`` drones decide every frame, ``beacons`` beacons to reach."""
    rng = random.Random(seed)
    while True:
        drones = [Drone(rng.randrange(SIZE), rng.randrange(SIZE)) for _ in range(units)]
        goals = [Beacon(rng.randrange(SIZE), rng.randrange(SIZE)) for _ in range(beacons)]
        score = 0
        for _ in range(FRAMES):
            moves = agent.act(gl.Obs(score=score).entities(goals).actors(drones), Fly)
            for d, m in zip(drones, moves):
                dx, dy = STEP[m]
                d.x = min(SIZE - 1, max(0, d.x + dx))
                d.y = min(SIZE - 1, max(0, d.y + dy))
            for g in goals:
                if any(d.x == g.x and d.y == g.y for d in drones):
                    score += 1
                    g.x, g.y = rng.randrange(SIZE), rng.randrange(SIZE)
        agent.game_over(gl.Obs(score=score).entities(goals).entities(drones), truncated=True)
