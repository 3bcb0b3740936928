"""Bad input at the Gymnasium and PettingZoo adapters' doors: seeds, options, agent names, sizes, action shapes.

Both adapters agree: a seed is a non-negative int (numpy integers included), anything else is a
:class:`~gymloop.errors.ConfigError`; options are refused by the Gymnasium adapters and logged by the
PettingZoo one (whose API test resets with an arbitrary option); an unknown agent's space, a size
beyond what a padded observation may hold get typed errors naming the fix (a multi-actor
action of the wrong shape: ``test_pettingzoo.py``). A Hypothesis fuzzer throws arbitrary values at ``reset`` and ``step``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("pettingzoo")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.adapters.gymnasium import GymloopEnv, GymloopVectorEnv  # noqa: E402
from gymloop.adapters.padded import MAX_PADDED  # noqa: E402
from gymloop.adapters.pettingzoo import GymloopParallelEnv  # noqa: E402
from gymloop.games.duel import duel  # noqa: E402
from gymloop.games.snake import snake  # noqa: E402


@pytest.fixture(scope="module")
def envs():
    made = {
        "env": GymloopEnv(snake, max_entities=8, max_actors=1),
        "vector": GymloopVectorEnv(snake, num_envs=2, max_entities=8, max_actors=1),
        "parallel": GymloopParallelEnv(duel, max_entities=8, max_actors=1),
    }
    yield made
    for e in made.values():
        e.close()


@pytest.mark.parametrize("which", ["env", "vector", "parallel"])
@pytest.mark.parametrize("seed", [-1, 1.5, "a", True, [1, 2]])
def test_a_seed_that_is_not_a_non_negative_int_is_a_config_error(envs, which, seed):
    with pytest.raises(gl.ConfigError, match=r"seed|one int"):
        envs[which].reset(seed=seed)


@pytest.mark.parametrize("which", ["env", "vector", "parallel"])
def test_numpy_integer_seeds_are_seeds(envs, which):
    e = envs[which]
    a, _ = e.reset(seed=np.int64(3))
    b, _ = e.reset(seed=3)
    flat = (lambda o: o) if which != "parallel" else (lambda o: o["player_0"])
    for k in flat(a):
        if isinstance(flat(a)[k], np.ndarray):
            assert np.array_equal(flat(a)[k], flat(b)[k])


@pytest.mark.parametrize("which", ["env", "vector"])
def test_gymnasium_adapters_refuse_options_they_would_ignore(envs, which):
    with pytest.raises(gl.ConfigError, match=r"reset\(\) got the options \['level'\], which it would ignore"):
        envs[which].reset(seed=0, options={"level": 3})
    envs[which].reset(seed=0, options={})  # (nothing to ignore)


def test_pettingzoo_logs_options_it_ignores(envs, caplog):
    with caplog.at_level(logging.WARNING):
        envs["parallel"].reset(seed=0, options={"level": 3})
    assert "ignores the options ['level']" in caplog.text


def test_an_unknown_agent_has_no_space(envs):
    env = envs["parallel"]
    with pytest.raises(gl.ConfigError, match=r"no agent 'player_7'; the agents are \['player_0', 'player_1'\]"):
        env.action_space("player_7")
    with pytest.raises(gl.ConfigError, match="no agent"):
        env.observation_space(["unhashable"])


def test_sizes_beyond_a_padded_observation_are_refused_before_allocating():
    with pytest.raises(gl.ConfigError, match=rf"max_entities\['Body'\] is 1000000000000, more than a padded observation may hold \(at most {MAX_PADDED:,}"):
        GymloopEnv(snake, max_entities=10**12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.one_of(st.none(), st.integers(-5, 2**70), st.floats(allow_nan=True), st.text(max_size=3), st.booleans()),
       action=st.one_of(st.integers(-5, 10), st.floats(), st.lists(st.integers(-2, 5), max_size=3), st.text(max_size=2), st.none()))
def test_fuzz_reset_and_step_raise_only_gymloop_errors(envs, seed, action):
    env = envs["env"]
    try:
        env.reset(seed=seed)
    except gl.GymloopError:
        env.reset(seed=0)
    try:
        env.step(action)
    except gl.GymloopError:
        pass
