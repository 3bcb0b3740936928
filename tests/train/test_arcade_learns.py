"""Learning tests for the real-time arcade class (issue 29, item 2): a ship that moves along one row.

A small catching game in the mould of the suite's ``invaders``: the ship (``Ship``: ``x`` only, it
never leaves its row) moves left, right or stays each tick while things fall one row a tick at
random columns; each one the ship is under when it lands pays 1, each one missed costs 1. What
matters is where a falling thing is relative to the ship, and the ship's entity type has no ``y``:
``relpos="auto"`` encodes the offsets along ``x`` alone (``net.relpos_1d``) and the learning rate
follows the update's KL (``ppo.target_kl``); docs/training.md. Each test trains with the defaults
and ``steps`` only (one torch thread, about 7 s) and asserts that the trained ship catches clearly
more than a random one: at 100K steps it scores 8.0-8.4 on seeds 0-2 (random -15); with
``net.relpos_1d=False`` -12.4, -6.9 and -10.2.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import pytest

torch = pytest.importorskip("torch")

import gymloop as gl  # noqa: E402
from gymloop.nn.config import RelposConfig  # noqa: E402
from gymloop.train import TrainConfig  # noqa: E402
from gymloop.train.ppo import Trainer, evaluate  # noqa: E402

WIDTH, HEIGHT, TICKS = 9, 6, 60


class Steer(Enum):
    """The ship's move; its value is the step along ``x``."""

    LEFT = -1
    STAY = 0
    RIGHT = 1


@dataclass
class Ship:
    x: int


@dataclass
class Drop:
    x: int
    y: int


@gl.game(entities=[Ship, Drop], actions=[Steer])
def catch(agent, seed):
    """Things fall every third tick; the score counts the catches less the misses."""
    rng = random.Random(seed)
    while True:
        ship, drops, score = Ship(WIDTH // 2), [], 0
        for tick in range(TICKS):
            if tick % 3 == 0:
                drops.append(Drop(rng.randrange(WIDTH), HEIGHT))
            move = agent.act(gl.Obs(score=score).entities(drops).actor(ship), Steer)
            ship.x = min(max(ship.x + move.value, 0), WIDTH - 1)
            for d in drops:
                d.y -= 1
                if d.y == 0:
                    score += 1 if d.x == ship.x else -1
            drops = [d for d in drops if d.y > 0]
        agent.game_over(gl.Obs(score=score), truncated=True)


def test_positions_along_x_alone_get_the_relative_encoding():
    cfg = TrainConfig().net
    assert cfg.resolve_relpos({"Ship": ("x",), "Drop": ("x", "y")}) == RelposConfig(position_features=["x"], extent=[10])
    assert cfg.resolve_relpos({"Ship": ("x", "y"), "Drop": ("x", "y")}) == RelposConfig()
    assert cfg.resolve_relpos({"Ship": ("speed",), "Drop": ("x", "y")}) is None
    cfg.relpos_1d = False
    assert cfg.resolve_relpos({"Ship": ("x",), "Drop": ("x", "y")}) is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_ship_on_one_row_learns_to_catch_with_the_defaults(seed):
    trainer = Trainer(catch, TrainConfig(steps=98_304, seed=seed, threads=1))
    trainer.train()
    trained = evaluate(catch, trainer.policy, episodes=100)["episode_return"]
    random_level = evaluate(catch, None, episodes=100)["episode_return"]
    assert random_level < -8, f"the game became easy for a random ship: {random_level}"
    assert trained > random_level + 15, (trained, random_level)
