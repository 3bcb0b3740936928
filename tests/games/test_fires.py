"""The fire-fighting suite game (gymloop.games.suite.fires): rules, determinism, and a scripted policy far above random."""

from __future__ import annotations

import statistics

import pytest

import gymloop as gl
from gymloop.cli import main
from gymloop.games import find_game
from gymloop.games.suite import fires as fires_mod
from gymloop.games.suite.fires import MAX_STEPS, FiresGame, Go, ScriptedFighters, fires, fires3

GAMES = {"fires": fires, "fires3": fires3}


def _interval(xs: list[float]) -> tuple[float, float]:
    """Mean ± 1.96 standard errors."""
    m, se = statistics.mean(xs), statistics.stdev(xs) / len(xs) ** 0.5
    return m - 1.96 * se, m + 1.96 * se


@pytest.mark.parametrize("name", sorted(GAMES))
def test_fires_passes_check(name):
    report = gl.check(GAMES[name], steps=450)
    assert report.entity_types == ["Fighter", "Fire"]
    assert report.action_types == ["Go"]
    assert report.episodes >= 2
    assert any("determinism" in c for c in report.checks)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_fires_is_deterministic_for_a_seed(name):
    a = gl.run(GAMES[name], gl.RandomAgent(seed=2), seed=9, max_episodes=3)
    b = gl.run(GAMES[name], gl.RandomAgent(seed=2), seed=9, max_episodes=3)
    c = gl.run(GAMES[name], gl.RandomAgent(seed=2), seed=10, max_episodes=3)
    assert a.scores == b.scores and a.steps == b.steps == 3 * MAX_STEPS
    assert a.scores != c.scores


def test_the_score_is_minus_the_burning_cells_summed_over_steps():
    game = FiresGame(seed=3, fighters=1)
    total = 0
    for _ in range(50):
        f = game.fighters[0]
        before = {(x.x, x.y) for x in game.fires.values()}
        game.step([Go.LEFT])
        assert (f.x, f.y) not in {(x.x, x.y) for x in game.fires.values()}  # its cell is put out
        total -= len(game.fires)
        assert game.score == total
        assert len(game.fires) <= len(before) + 1 + len(before)  # spread and one outbreak at most
    assert game.fighters[0].x == 0  # moves off the board stay


def test_three_fighters_decide_together_and_score_together():
    seen = []

    class Spy(ScriptedFighters):
        def act(self, obs, *types):
            seen.append(len(obs.actor_list))
            return super().act(obs, *types)

    result = gl.run(fires3, Spy(), seed=0, max_episodes=1)
    assert set(seen) == {3} and len(seen) == MAX_STEPS
    assert result.episodes[0].metrics["put_out"] > 0


def test_the_scripted_fighters_claim_different_fires():
    obs = gl.Obs().entities([fires_mod.Fire(0, 0), fires_mod.Fire(9, 9)]).actors(
        [fires_mod.Fighter(1, 0), fires_mod.Fighter(2, 0), fires_mod.Fighter(5, 5)])
    assert ScriptedFighters().act(obs, Go) == [Go.LEFT, Go.RIGHT, Go.STAY]


@pytest.mark.parametrize("name", sorted(GAMES))
def test_scripted_is_far_better_than_random(name):
    scripted = gl.run(GAMES[name], ScriptedFighters(), seed=4, max_episodes=20)
    rand = gl.run(GAMES[name], gl.RandomAgent(seed=4), seed=4, max_episodes=20)
    s_lo, _ = _interval(scripted.scores)
    _, r_hi = _interval(rand.scores)
    assert s_lo > r_hi + 2000, (s_lo, r_hi)
    assert statistics.mean(scripted.scores) > 0.1 * statistics.mean(rand.scores)  # (negative scores) over 10x fewer burning cells


def test_the_bundled_entries_and_the_cli(capsys):
    for name in GAMES:
        entry = find_game(name)
        assert entry.loop is GAMES[name] and entry.scripted is ScriptedFighters and entry.agents == 1
    assert main(["run", "fires3", "--episodes", "2", "--agent", "scripted"]) == 0
    assert "fires3 with a scripted agent: 2 episodes" in capsys.readouterr().out
    assert main(["check", "fires", "--steps", "250"]) == 0
