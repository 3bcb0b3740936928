"""gl.check: every bundled game passes; broken games are caught with a message that says why."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

import gymloop as gl
from gymloop.checker import CheckError
from gymloop.games import GAMES, find_game, get_game


@pytest.mark.parametrize("name", sorted(GAMES))
def test_every_bundled_game_passes_the_checker(name):
    report = gl.check(get_game(name), steps=300, agents_per_game=find_game(name).agents)
    assert report.decisions >= 300
    assert report.entity_types and report.action_types
    assert any("determinism" in c for c in report.checks)


@dataclass
class P:
    x: float


class Move(Enum):
    A = 0
    B = 1


_unseeded = random.Random()


def nondeterministic(agent, seed):
    while True:
        agent.act(gl.Obs().actor(P(_unseeded.random())), Move)


def nan_feature(agent, seed):
    n = 0
    while True:
        n += 1
        agent.act(gl.Obs().actor(P(float("nan") if n == 5 else 1.0)), Move)


def no_legal_choice(agent, seed):
    while True:
        agent.act(gl.Obs().actor(P(1.0), masks={Move: [False, False]}), Move)


def never_acts(agent, seed):
    return None


@pytest.mark.parametrize(
    "game, match",
    [
        (nondeterministic, r"does not observe the same in a second run alone.*random generator not made from the game.s seed"),
        (nan_feature, "feature 'x' is nan"),
        (no_legal_choice, "no legal choice"),
    ],
    ids=["nondeterministic", "nan", "no-legal-choice"],
)
def test_broken_games_fail_the_checker(game, match):
    with pytest.raises(CheckError, match=match):
        gl.check(game, steps=50)


def test_game_that_never_acts_is_reported():
    with pytest.raises(CheckError, match="never asked its agent for a decision"):
        gl.check(never_acts, steps=10)


def test_cli_check(capsys):
    from gymloop.cli import main

    assert main(["check", "snake", "--steps", "100"]) == 0
    out = capsys.readouterr().out
    assert "snake: OK" in out and "Body, Food, Head" in out


def test_a_game_asking_only_global_decisions_passes_the_checker():
    from support import train_games as tg

    report = gl.check(tg.global_only, steps=200)
    assert "Guess" in report.action_types


def test_a_global_decision_whose_mask_allows_nothing_is_reported():
    from support import train_games as tg

    def nothing_allowed(agent, seed):
        while True:
            obs = gl.Obs(score=0).entities(tg.Light(0, True)).mask(tg.Guess, [])
            agent.act(obs, tg.Guess)

    # gl.run refuses it before the checker's own inspection, with the VecEnv's message
    with pytest.raises(gl.CheckError, match="action type 'Guess': .* mask that leaves no legal choice"):
        gl.check(nothing_allowed, steps=50)





@dataclass
class Beacon:
    x: float


def endless(agent, seed):
    """A game loop with no episode ends: it never calls game_over."""
    from gymloop.games.snake import Move

    while True:
        agent.act(gl.Obs().actor(Beacon(1.0)), Move)


def test_cli_check_notes_a_game_whose_episodes_never_end(capsys):
    from gymloop.cli import main

    assert main(["check", "snake", "--steps", "50"]) == 0
    assert "note: no episode ended" not in capsys.readouterr().out
    assert main(["check", f"{__name__}:endless", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    assert "OK (30 decisions, 0 episodes)" in out
    assert "note: no episode ended in 30 decisions. A game with episodes calls agent.game_over(...) at each end" in out


def test_evaluation_warns_when_no_episode_ends(caplog):
    from gymloop.evaluation import SILENT_DECISIONS, evaluate_episodes

    with caplog.at_level("WARNING", logger="gymloop"):
        out = evaluate_episodes(endless, None, episodes=2, num_envs=2, max_steps=2 * SILENT_DECISIONS + 10)
    assert out == {}
    assert f"no episode has ended in {SILENT_DECISIONS} decisions of each of 2 game copies" in caplog.text
    assert "0 of 2 episodes ended within max_steps=4010 decisions; does the game call agent.game_over(...)" in caplog.text


def test_a_batch_off_the_layout_is_named():
    from gymloop.checker import _batch_consistent
    from gymloop.games.tactics import tactics

    env = gl.VecEnv(tactics, num_envs=2, seed=0)
    try:
        b = env.reset()
        _batch_consistent(b, env)
        b.reward = b.reward.astype(np.float64)
        with pytest.raises(CheckError, match=r"batch reward is float64 of shape \(2,\), expected float32 of shape \(2,\) \(one row per slot\)"):
            _batch_consistent(b, env)
        b = env.reset()
        b.entities["Unit"] = b.entities["Unit"][1:]
        with pytest.raises(CheckError, match=r"batch entities\['Unit'\] is float32 of shape .*\(one row per entity\)"):
            _batch_consistent(b, env)
    finally:
        env.close()


def test_a_time_limit_that_ends_without_the_last_state_is_warned():
    from support.entities import Move, Unit

    def game(agent, seed):
        while True:
            for _ in range(3):
                agent.act(gl.Obs().actor(Unit(0, 0)), Move)
            agent.game_over(gl.Obs(score=1), truncated=True)  # the last state's entities left out

    report = gl.check(game, steps=20)
    assert len(report.warnings) == 1 and "without entities" in report.warnings[0] and "truncated=True" in report.warnings[0]

    def fine(agent, seed):
        while True:
            for _ in range(3):
                agent.act(gl.Obs().actor(Unit(0, 0)), Move)
            agent.game_over(gl.Obs(score=1).entities([Unit(0, 0)]), truncated=True)

    assert gl.check(fine, steps=20).warnings == []
