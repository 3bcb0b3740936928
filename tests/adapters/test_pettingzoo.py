"""The PettingZoo adapter (:mod:`gymloop.adapters.pettingzoo`): multi-agent games as a ParallelEnv.

- the bundled two-player game passes ``pettingzoo.test.parallel_api_test`` (and its AEC view
  ``api_test``);
- agents, spaces, per-agent masks, episode ends together, turn-based agents without a decision;
- bad input: undeclared agent counts, too many entities, missing or unknown agents' actions, an
  agent asked again after its episode ended;
- agents with several action components (``squads``: 2-3 actors, two action types): the
  observation's ``action_mask`` is the tuple of per-component int8 masks gymnasium's
  ``MultiDiscrete.sample(mask=...)`` takes, so PettingZoo's harnesses pass, masked samples are
  legal, observations are in the observation space; ``action_masks(agent)`` stays flat.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("pettingzoo")
with warnings.catch_warnings():  # pettingzoo.test imports its classic envs through a deprecated path
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.test import api_test, parallel_api_test

from gymnasium import spaces as gspaces
from support.adapters import closes_every_env
from support.entities import Move, Unit

import gymloop as gl
from gymloop.adapters.pettingzoo import GymloopParallelEnv
from gymloop.games import bundled_games
from gymloop.games.duel import duel

MULTI_AGENT = [g for g in bundled_games() if g.agents > 1]


#: closes every adapter a test made (games are closed in this thread, not by a finalizer later)
close_every_env = closes_every_env(GymloopParallelEnv, close=lambda env: env.close())


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


# ---------------------------------------------------------------------- several action components per agent
@dataclass
class Soldier:
    x: int


class Step(Enum):
    LEFT = 0
    STAY = 1
    RIGHT = 2


class Stance(Enum):
    HOLD = 0
    FIRE = 1


WIDTH = 4
SQUAD_STEPS = 6


def _squad_masks(xs):
    steps = [[x > 0, True, x < WIDTH - 1] for x in xs]  # no step off the board
    stances = [[True, x >= 2] for x in xs]  # FIRE only from the far half
    return {Step: steps, Stance: stances}


@gl.game(agents=2, entities=[Soldier], actions=[Step, Stance])
def squads(agents, seed):
    """Two squads of 3 soldiers on a line of 4 cells; each soldier steps and holds or fires (both masked).

    Agent ``i`` commands its first ``3 - (t + i) % 2`` soldiers at step ``t`` (2 or 3 actors: the
    third actor slot is sometimes absent). A masked-out answer is an ``AssertionError`` in the game.
    The score is the number of shots fired; both episodes end after 6 steps.
    """
    rng = random.Random(seed)
    while True:
        xs = [[rng.randrange(WIDTH) for _ in range(3)] for _ in agents]
        shots = [0, 0]
        for t in range(SQUAD_STEPS):
            reqs = []
            for i, a in enumerate(agents):
                k = 3 - (t + i) % 2
                mine = xs[i][:k]
                obs = gl.Obs(score=shots[i]).actors([Soldier(x) for x in mine], masks=_squad_masks(mine))
                reqs.append((a, obs, Step, Stance))
            answers = gl.act_all(reqs)
            for i, (steps, stances) in enumerate(answers):
                k = 3 - (t + i) % 2
                masks = _squad_masks(xs[i][:k])
                for j, (st, sn) in enumerate(zip(steps, stances, strict=True)):
                    if not (masks[Step][j][st.value] and masks[Stance][j][sn.value]):
                        raise AssertionError(f"squads: agent {i} soldier {j} at x={xs[i][j]} got masked-out {st}, {sn}")
                    xs[i][j] += st.value - 1
                    shots[i] += sn is Stance.FIRE
        for i, a in enumerate(agents):
            a.game_over(gl.Obs(score=shots[i]))


def squad_env(**kw):
    return GymloopParallelEnv(squads, max_entities=3, max_actors=3, **kw)


#: squads' components: Stance[0..2] (2 choices each), then Step[0..2] (3 choices); their flat-mask starts
SQUAD_NVEC = [2, 2, 2, 3, 3, 3]
SQUAD_STARTS = np.cumsum([0, *SQUAD_NVEC[:-1]])


def test_a_squad_action_of_the_wrong_shape_names_the_shape_that_works():
    env = squad_env()
    env.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"the action of 'player_0' must be integers of shape \(6,\)"):
        env.step({a: np.zeros((1, 5), np.int64) for a in env.agents})
    env.step({a: np.zeros(6, np.int64) for a in env.agents})  # what the message says works
    env.close()


def test_squads_spaces_tuple_mask_of_per_component_int8_masks():
    env = squad_env()
    assert [str(c) for c in env.components] == [f"{t}[{i}]" for t in ("Stance", "Step") for i in range(3)]
    assert env.action_space("player_0") == gspaces.MultiDiscrete(SQUAD_NVEC)
    space = env.observation_space("player_0")["action_mask"]
    assert space == gspaces.Tuple([gspaces.MultiBinary(n) for n in SQUAD_NVEC])
    obs, _ = env.reset(seed=0)
    for agent in env.agents:
        mask = obs[agent]["action_mask"]
        assert isinstance(mask, tuple) and [m.shape for m in mask] == [(n,) for n in SQUAD_NVEC]
        assert all(isinstance(m, np.ndarray) and m.dtype == np.int8 for m in mask)
        # the flat mask (for learners that want it) is the concatenation of the components
        flat = env.action_masks(agent)
        assert flat.dtype == bool and flat.shape == (15,)
        assert np.array_equal(np.concatenate(mask).astype(bool), flat)
    # player_1 commands 2 soldiers at step 0: its third Step and Stance components allow only choice 0
    assert obs["player_1"]["action_mask"][2].tolist() == [1, 0]
    assert obs["player_1"]["action_mask"][5].tolist() == [1, 0, 0]
    assert obs["player_0"]["actors"].tolist() == [0, 1, 2, 0, 1, 2]
    assert obs["player_1"]["actors"].tolist() == [0, 1, -1, 0, 1, -1]


def test_squads_pass_parallel_api_test():
    env = squad_env(illegal_actions="raise")  # a masked sample that is not legal would raise
    parallel_api_test(env, num_cycles=40)


def test_squads_aec_view_passes_api_test():
    aec = squad_env(illegal_actions="raise").aec()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Observation is not a NumPy array")
        warnings.filterwarnings("ignore", message="Observation space for each agent probably should be")
        # ... and Box/Discrete actions; a squad's are MultiDiscrete, whose mask is a tuple of per-component
        # arrays (what MultiDiscrete.sample takes), which its checker skips with this warning
        warnings.filterwarnings("ignore", message="Action space for each agent probably should be")
        warnings.filterwarnings("ignore", message="Action mask is not a NumPy array")
        api_test(aec, num_cycles=40)


def test_squads_masked_samples_are_legal_and_observations_are_in_the_space():
    env = squad_env(illegal_actions="raise")
    obs, _ = env.reset(seed=5)
    for agent in env.possible_agents:
        env.action_space(agent).seed(7)
    steps = ends = 0
    while steps < 60:
        for agent in env.agents:
            assert env.observation_space(agent).contains(obs[agent]), agent
        actions = {a: env.action_space(a).sample(mask=obs[a]["action_mask"]) for a in env.agents}
        for a, act in actions.items():
            assert env.action_masks(a)[SQUAD_STARTS + act].all(), (a, act)  # every component's choice is legal
        obs, rew, term, trunc, info = env.step(actions)
        steps += 1
        assert not any("illegal_actions" in i for i in info.values())
        for agent in obs:  # the final observations too
            assert env.observation_space(agent).contains(obs[agent]), agent
        if not env.agents:
            ends += 1
            obs, _ = env.reset()
    assert ends == 60 // SQUAD_STEPS  # every episode reached its end: no sampled action was refused


def test_squads_masked_out_actions_are_replaced_or_refused():
    env = squad_env()
    obs, _ = env.reset(seed=0)
    # every soldier of both squads asks to step LEFT and FIRE; some of those are masked out
    left_fire = np.array([1, 1, 1, 0, 0, 0])
    flat = {a: env.action_masks(a) for a in env.agents}
    present = {"player_0": [True] * 6, "player_1": [True, True, False, True, True, False]}
    expected = {a: int((~flat[a][SQUAD_STARTS + left_fire] & np.array(present[a])).sum()) for a in env.agents}
    assert sum(expected.values()) > 0  # the seed puts some soldier at x = 0 or x < 2
    _, _, _, _, info = env.step(dict.fromkeys(env.agents, left_fire))  # the game would raise on an illegal one
    assert {a: i.get("illegal_actions", 0) for a, i in info.items()} == expected

    strict = squad_env(illegal_actions="raise")
    strict.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"agent 'player_\d': action [01] for (Step|Stance)\[\d\] is masked out \(legal: \[.*\]\)"):
        strict.step(dict.fromkeys(strict.agents, left_fire))
    with pytest.raises(gl.InvalidActionError, match=r"action 3 for Step\[0\] is outside the action space"):
        strict.step({"player_0": [0, 0, 0, 3, 0, 0], "player_1": [0, 0, 0, 1, 1, 0]})


def test_discrete_agents_keep_the_flat_int8_mask_and_mask_in_obs_false_drops_it():
    env = GymloopParallelEnv(duel, max_entities=100)
    assert env.observation_space("player_0")["action_mask"] == gspaces.MultiBinary(4)
    obs, _ = env.reset(seed=0)
    mask = obs["player_0"]["action_mask"]
    assert isinstance(mask, np.ndarray) and mask.dtype == np.int8 and mask.tolist() == [1, 1, 1, 1]
    assert env.observation_space("player_0").contains(obs["player_0"])
    bare = squad_env(mask_in_obs=False)
    assert "action_mask" not in bare.observation_space("player_0").spaces
    obs, _ = bare.reset(seed=0)
    assert "action_mask" not in obs["player_0"] and bare.action_masks("player_0").shape == (15,)
