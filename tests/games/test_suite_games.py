"""The learning suite's games (gymloop.games.suite): determinism, the checker, scripted above random."""

from __future__ import annotations

import statistics

import pytest

import gymloop as gl
from gymloop.cli import main
from gymloop.games import find_game
from gymloop.games.suite import cycles as cyc
from gymloop.games.suite import dispatch as dis
from gymloop.games.suite import invaders as inv
from gymloop.games.suite import junction as jun
from gymloop.games.suite import keydoor as kd

SINGLE = ["invaders", "keydoor", "dispatch", "junction"]
SUITE = [*SINGLE, "cycles"]


def _agents(name: str, make):
    """One agent (single-agent games) or one per seat, seeded by seat."""
    n = find_game(name).agents
    return make(0) if n == 1 else [make(i) for i in range(n)]


def _scores(name: str, agents, episodes: int, seed: int = 0, seat: int = 0) -> list[float]:
    n = find_game(name).agents
    r = gl.run(find_game(name).loop, agents, seed=seed, max_episodes=episodes * n)
    return [e.score for e in r.episodes if e.agent == seat]


def _interval(xs: list[float]) -> tuple[float, float]:
    m = statistics.mean(xs)
    h = 1.96 * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0
    return m - h, m + h


@pytest.mark.parametrize("name", SUITE)
def test_a_suite_game_is_registered_with_a_scripted_agent(name):
    g = find_game(name)
    assert g is not None and g.scripted is not None and g.description
    assert g.target.startswith("gymloop.games.suite.")


@pytest.mark.parametrize("name", SUITE)
def test_a_suite_game_is_deterministic_for_a_seed(name):
    def play(seed):
        r = gl.run(find_game(name).loop, _agents(name, lambda i: gl.RandomAgent(seed=i)), seed=seed, max_episodes=4)
        return [(e.agent, e.score, e.length, sorted(e.metrics.items())) for e in r.episodes], r.steps

    assert play(3) == play(3)
    assert play(3) != play(4)


@pytest.mark.parametrize("name", SUITE)
def test_a_suite_game_passes_the_checker(name):
    report = gl.check(find_game(name).loop, steps=300, agents_per_game=find_game(name).agents)
    assert report.decisions >= 300 and report.episodes >= 1
    assert any("determinism" in c for c in report.checks)


@pytest.mark.parametrize("name, episodes", [("invaders", 8), ("keydoor", 20), ("dispatch", 8), ("junction", 6)])
def test_the_scripted_agent_beats_random_by_an_interval(name, episodes):
    scripted = _scores(name, find_game(name).scripted(seed=0), episodes)
    rand = _scores(name, gl.RandomAgent(seed=0), episodes)
    assert _interval(scripted)[0] > _interval(rand)[1], (statistics.mean(scripted), statistics.mean(rand))


def test_the_scripted_rider_beats_random_from_either_seat():
    for seat in (0, 1):
        agents = [gl.RandomAgent(seed=1), gl.RandomAgent(seed=2)]
        agents[seat] = cyc.CyclesAgent(seed=0)
        wins = _scores("cycles", agents, 20, seat=seat)
        assert statistics.mean(wins) > 0.8, (seat, wins)
    both = _scores("cycles", [cyc.CyclesAgent(seed=0), cyc.CyclesAgent(seed=1)], 20)
    assert -0.6 < statistics.mean(both) < 0.6  # even against itself


class ParkAndFire:
    """Invaders' local optimum: sit at the left wall and fire whenever a shot is ready."""

    def act(self, obs, *types):
        return inv.Control.LEFT_FIRE if obs.global_features.shots_ready else inv.Control.LEFT

    def game_over(self, obs, truncated=False):
        pass


def test_parking_at_the_wall_and_firing_scores_far_below_the_scripted_agent():
    park = gl.run(inv.invaders, ParkAndFire(), seed=0, max_episodes=8)
    scripted = gl.run(inv.invaders, inv.InvadersAgent(seed=0), seed=0, max_episodes=8)
    assert _interval(park.scores)[1] < 0.25 * _interval(scripted.scores)[0], (statistics.mean(park.scores), statistics.mean(scripted.scores))
    assert statistics.mean(e.metrics["at_wall"] for e in park.episodes) > 0.8  # the metric that shows the local optimum
    assert statistics.mean(e.metrics["at_wall"] for e in scripted.episodes) < 0.3


def test_invaders_masks_firing_while_two_shots_are_alive():
    g = inv.InvadersGame(0)
    g.step(inv.Control.FIRE)
    g.step(inv.Control.FIRE)
    assert len(g.shots) == 2
    obs = g.observe()
    assert obs.legal(0, inv.Control) == [inv.Control.STAY, inv.Control.LEFT, inv.Control.RIGHT]


def test_keydoor_needs_the_key_to_open_the_door():
    g = kd.KeyDoorGame(5)
    a, door = g.agent, g.door
    a.x, a.y = door.x - 1, door.y
    g.step(kd.Move.RIGHT)
    assert (a.x, a.y) == (door.x - 1, door.y) and not door.open
    a.has_key = True
    g.step(kd.Move.RIGHT)
    assert (a.x, a.y) == (door.x, door.y) and door.open


def test_keydoor_rewards_only_the_exit():
    r = gl.run(kd.keydoor, kd.KeyDoorAgent(), seed=0, max_episodes=3)
    assert r.scores == [1.0, 1.0, 1.0] and all(e.metrics["success"] == 1 and e.length < kd.MAX_STEPS for e in r.episodes)
    rand = gl.run(kd.keydoor, gl.RandomAgent(seed=0), seed=0, max_episodes=3)
    assert all(s in (0, 1) for s in rand.scores)


def test_dispatch_offers_between_20_and_60_orders():
    g = dis.DispatchGame(1)
    agent = gl.RandomAgent(seed=0)
    seen = []
    for _ in range(200):
        seen.append(len(g.orders))
        g.step(agent.act(g.observe(), dis.Serve))
        if g.over:
            g.reset()
    assert min(seen) >= dis.MIN_ORDERS and max(seen) <= dis.MAX_ORDERS


def test_junction_is_a_global_decision_masked_during_the_amber():
    g = jun.JunctionGame(0)
    other = jun.Phase.EAST_WEST if g.phase is jun.Phase.NORTH_SOUTH else jun.Phase.NORTH_SOUTH
    assert gl.RandomAgent(seed=0).act(g.observe(), jun.Phase) in list(jun.Phase)  # no actor needed
    g.step(other)
    assert g.amber == jun.AMBER - 1
    assert gl.RandomAgent(seed=0).act(g.observe(), jun.Phase) is other


def test_a_short_run_of_each_suite_game_with_the_random_agent():
    for name in SUITE:
        r = gl.run(find_game(name).loop, _agents(name, lambda i: gl.RandomAgent(seed=i)), seed=0, max_steps=400)
        assert r.steps >= 400 and all(isinstance(e.score, (int, float)) for e in r.episodes), name


def test_the_command_line_runs_the_scripted_agent(capsys):
    assert main(["run", "keydoor", "--agent", "scripted", "--episodes", "2"]) == 0
    assert "mean final score 1.00" in capsys.readouterr().out
    assert main(["run", "cycles", "--agent", "scripted", "--episodes", "2"]) == 0
