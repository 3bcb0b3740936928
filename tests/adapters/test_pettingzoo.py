"""The PettingZoo adapter (:mod:`gymloop.adapters.pettingzoo`): multi-agent games as a ParallelEnv.

- the bundled two-player game passes ``pettingzoo.test.parallel_api_test`` (and its AEC view
  ``api_test``);
- agents, spaces, per-agent masks, episode ends together, turn-based agents without a decision;
- bad input: undeclared agent counts, too many entities, missing or unknown agents' actions, an
  agent asked again after its episode ended.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("pettingzoo")
with warnings.catch_warnings():  # pettingzoo.test imports its classic envs through a deprecated path
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.test import api_test, parallel_api_test

import gymloop as gl
from conftest import Move, Unit
from gymloop.adapters.pettingzoo import GymloopParallelEnv
from gymloop.games import bundled_games
from gymloop.games.duel import duel

MULTI_AGENT = [g for g in bundled_games() if g.agents > 1]


@pytest.fixture(autouse=True)
def close_every_env(monkeypatch):
    """Close every adapter a test made (games are closed in this thread, not by a finalizer later)."""
    made: list = []

    def init(self, *args, _orig=GymloopParallelEnv.__init__, **kwargs):
        made.append(self)
        _orig(self, *args, **kwargs)

    monkeypatch.setattr(GymloopParallelEnv, "__init__", init)
    yield
    for env in made:
        if hasattr(env, "_vec"):
            env.close()


@pytest.mark.parametrize("bundled", MULTI_AGENT, ids=lambda g: g.name)
def test_parallel_api_test_passes_for_the_bundled_multi_agent_games(bundled):
    env = GymloopParallelEnv(bundled.loop, max_entities=100)
    parallel_api_test(env, num_cycles=300)  # warnings are errors here (pyproject filterwarnings)
    env.close()


def test_the_aec_view_passes_api_test():
    aec = GymloopParallelEnv(duel, max_entities=100).aec()
    with warnings.catch_warnings():
        # PettingZoo's AEC test only suggests Box/Discrete observations; ours is a Dict of them
        warnings.filterwarnings("ignore", message="Observation is not a NumPy array")
        warnings.filterwarnings("ignore", message="Observation space for each agent probably should be")
        api_test(aec, num_cycles=100)


def test_agents_spaces_and_episode_end():
    env = GymloopParallelEnv(duel, max_entities=100)
    assert env.possible_agents == ["player_0", "player_1"] and env.agents == []
    assert env.observation_space("player_0") is env.observation_space("player_1")
    obs, infos = env.reset(seed=3)
    assert env.agents == ["player_0", "player_1"] and infos == {"player_0": {}, "player_1": {}}
    # each player sees its own head: the two observations differ
    assert obs["player_0"]["Head"][0].tolist() != obs["player_1"]["Head"][0].tolist()
    assert env.action_masks("player_1").tolist() == [True] * 4
    rng = np.random.default_rng(0)
    for _ in range(400):
        obs, rew, term, trunc, info = env.step({a: int(rng.integers(4)) for a in env.agents})
        assert set(obs) == set(rew) == {"player_0", "player_1"}
        if any(term.values()) or any(trunc.values()):
            break
    assert env.agents == []  # both agents' episodes end together in duel
    assert {"won", "draw", "episode_return"} <= set(info["player_0"])
    with pytest.raises(gl.EnvStateError, match=r"after every agent's episode ended; call reset\(\)"):
        env.step({})
    obs, _ = env.reset()  # the next episode, which the game has started itself
    assert obs["player_0"]["counts"].tolist()[2] == 1 and env.agents == ["player_0", "player_1"]


def test_reset_with_a_seed_is_deterministic():
    env = GymloopParallelEnv(duel, max_entities=100)
    a, _ = env.reset(seed=11)
    env.step({"player_0": 0, "player_1": 1})
    b, _ = env.reset(seed=11)
    for p in env.possible_agents:
        for k in a[p]:
            assert np.array_equal(a[p][k], b[p][k])


def turn_based(agents, seed):
    """Two agents taking turns: only one is asked per step; every 4 steps both episodes end."""
    t = 0
    while True:
        who = agents[t % 2]
        gl.act_all([(who, gl.Obs(score=t).actor(Unit(t, t % 2)), Move)])
        t += 1
        if t % 4 == 0:
            for a in agents:
                a.game_over(gl.Obs(score=t))


def test_an_agent_without_a_decision_this_step_gets_an_observation_without_actor():
    env = GymloopParallelEnv(turn_based, agents=2, max_entities=1, max_actors=1)
    obs, _ = env.reset(seed=0)
    assert obs["player_0"]["actors"].tolist() == [0] and obs["player_1"]["actors"].tolist() == [-1]
    assert env.action_masks("player_1").tolist() == [True, False, False]  # only choice 0, ignored
    obs, *_ = env.step({"player_0": 1})  # player_1 has no decision: its action may be left out
    assert obs["player_1"]["actors"].tolist() == [0]


def test_missing_and_unknown_agents_actions_are_refused():
    env = GymloopParallelEnv(duel, max_entities=100)
    env.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"no action for agent 'player_1', which has a decision this step"):
        env.step({"player_0": 0})
    with pytest.raises(gl.InvalidActionError, match=r"actions for \['player_7'\], which are not live agents"):
        env.step({"player_0": 0, "player_1": 0, "player_7": 0})
    with pytest.raises(gl.InvalidActionError, match=r"action 9 for Move\[0\] is outside the action space"):
        env.step({"player_0": 9, "player_1": 0})


def test_bad_configuration():
    with pytest.raises(gl.ConfigError, match=r"does not declare its number of agents.*agents=N"):
        GymloopParallelEnv(turn_based, max_entities=1)
    with pytest.raises(gl.ConfigError, match=r"takes 2 agent\(s\).*got 3"):
        GymloopParallelEnv(duel, agents=3, max_entities=1)
    with pytest.raises(gl.ConfigError, match=r"pass agents=N \(not agents_per_game\)"):
        GymloopParallelEnv(duel, agents_per_game=2, max_entities=1)


def test_more_entities_than_max_entities_name_the_agent_the_limit_and_the_fix():
    with pytest.raises(gl.InvalidObservationError, match=r"agent 'player_0' has 3 'Food' entities, more than the 2 .*max_entities=\{'Food': N\}"):
        GymloopParallelEnv(duel, max_entities=2).reset(seed=0)


def eliminated(agents, seed):
    """player_0's episode ends at once, but the game keeps asking it while player_1 plays on."""
    a, b = agents
    gl.act_all([(a, gl.Obs().actor(Unit(0, 0)), Move), (b, gl.Obs().actor(Unit(1, 0)), Move)])
    a.game_over(gl.Obs())
    while True:
        gl.act_all([(a, gl.Obs().actor(Unit(0, 0)), Move), (b, gl.Obs().actor(Unit(1, 0)), Move)])


def test_an_agent_asked_again_after_its_episode_ended_is_an_error():
    env = GymloopParallelEnv(eliminated, agents=2, max_entities=1, max_actors=1)
    env.reset(seed=0)
    with pytest.raises(gl.InvalidObservationError, match=r"asks agent 'player_0' for a decision after its episode ended, while \['player_1'\] play on"):
        env.step({"player_0": 0, "player_1": 0})
    env.close()
