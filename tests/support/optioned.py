"""A game with options (``--game-arg``) and a display: a walker on a line of ``length`` cells."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import gymloop as gl


class Step(Enum):
    LEFT = 0
    RIGHT = 1


class Speed(Enum):
    SLOW = 1
    FAST = 2


@dataclass(slots=True)
class Walker:
    x: int
    goal: int


@gl.game(entities=[Walker], actions=[Step])
def line(agent: Any, seed: int, length: int = 5, speed: Speed = Speed.SLOW, bonus: float = 0.0,
         loop: bool = True, name: str = "line", mode: Literal["easy", "hard"] = "easy", limit: int | None = None,
         display: gl.Display = gl.HEADLESS) -> None:
    """Walk from 0 to ``length``; each RIGHT moves ``speed.value`` cells. Draws a bar when displayed."""
    screen = display.screen((10 * (length + 1), 10), "line")
    score = 0.0
    while True:
        x = 0
        for _ in range(limit or 50):
            if agent.act(gl.Obs(score=score).actor(Walker(x, length)), Step) is Step.RIGHT:
                x = min(length, x + speed.value)
            if screen is not None:
                screen.fill((0, 0, 0))
                screen.fill((255, 255, 0), (10 * x, 0, 10, 10))
            display.tick()
            if x == length:
                score += 1 + bonus
                break
        agent.game_over(gl.Obs(score=score), truncated=x != length)
        if not loop:
            return
