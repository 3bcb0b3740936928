"""The end-of-run summary of ``gymloop train`` (:func:`gymloop.train.pipeline.run`) says when the
trained agent is not clearly better than random, and points to what to do."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

from support import train_games as tg  # noqa: E402
from support.train_games import Arm, Player, tiny  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.train.pipeline import run  # noqa: E402


def coin(agent, seed):
    """One decision per episode, paid by a coin flip whatever the arm: nothing to learn."""
    rng = random.Random(seed)
    while True:
        agent.act(gl.Obs(score=0).actor(Player(1.0)), Arm)
        agent.game_over(gl.Obs(score=float(rng.random() < 0.5)))


def test_a_run_no_better_than_random_says_so_and_points_to_the_docs():
    lines: list[str] = []
    run(coin, tiny(512), None, eval_episodes=60, say=lines.append)
    warn = [x for x in lines if "not clearly better than the random one" in x]
    assert len(warn) == 1 and "When a game does not learn" in warn[0] and "60 episodes each" in warn[0]


def test_a_run_clearly_better_than_random_says_nothing_of_the_kind():
    lines: list[str] = []
    run(tg.bandit, tiny(2048), None, eval_episodes=60, say=lines.append)
    assert not any("not clearly better" in x for x in lines), lines
