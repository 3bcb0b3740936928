"""The Gymnasium adapter (:mod:`gymloop.adapters.gymnasium`): Env and VectorEnv of any single-agent game.

- every bundled single-agent game passes ``check_env`` (registered, so the checks that need a
  spec run too), and the VectorEnv passes the vector checks Gymnasium 1.4 has (its passive
  checkers, ``batch_space``, ``data_equivalence`` / ``data_shares_objects``, the vector
  ``RecordEpisodeStatistics`` wrapper) and steps exactly like ``SyncVectorEnv`` (SAME_STEP) over
  the single Env;
- the layout: padded entities, counts, globals, actors, flat masks, select-entity candidates,
  composite and several actors, episode ends and final observations;
- bad input: multi-agent games, more entities or actors than the sizes, masked-out and
  out-of-space actions, bad sizes.
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env, data_equivalence
from gymnasium.utils.passive_env_checker import check_action_space, check_obs, check_observation_space, data_shares_objects
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from support.adapters import closes_every_env, legal_actions
from support.entities import Fire, Move, Unit
from support.generic_game import make_game

import gymloop as gl
from gymloop.adapters.gymnasium import GymloopEnv, GymloopVectorEnv
from gymloop.games import bundled_games
from gymloop.games.duel import duel
from gymloop.games.snake import snake

SINGLE_AGENT = [g for g in bundled_games() if g.agents == 1]
#: steps the vector tests play: past the end of an episode of every bundled game (200 decisions at most)
STEPS = 240
#: options that bring a game's random episodes within STEPS (skyfall's last about 540 frames with 3 lives)
SHORT = {"skyfall": {"lives": 1}}


def loop_of(bundled):
    """The bundled game's loop, with the options that keep its random episodes within STEPS."""
    opts = SHORT.get(bundled.name)
    return functools.partial(bundled.loop, **opts) if opts else bundled.loop


#: closes every adapter a test made (games are closed in this thread, not by a finalizer later)
close_every_env = closes_every_env(GymloopEnv, GymloopVectorEnv)


def as_action(space, row: np.ndarray):
    return int(row[0]) if isinstance(space, gymnasium.spaces.Discrete) else row


# ====================================================================== every bundled single-agent game


def test_the_registry_has_single_agent_games():
    assert {"snake", "tactics"} <= {g.name for g in SINGLE_AGENT}


@pytest.mark.parametrize("bundled", SINGLE_AGENT, ids=lambda g: g.name)
def test_check_env_passes_for_every_bundled_single_agent_game(bundled):
    env_id = f"gymloop-test/{bundled.name}-v0"
    gymnasium.register(id=env_id, entry_point=lambda **kw: GymloopEnv(bundled.loop, **kw), disable_env_checker=True)
    try:
        env = gymnasium.make(env_id)
        assert env.unwrapped.spec is not None  # so check_env also runs its seeded-determinism asserts and the close check
        check_env(env.unwrapped)  # Gymnasium's warnings are errors here (pyproject filterwarnings)
        env.close()
    finally:
        del gymnasium.registry[env_id]


def check_vector_env(envs: GymloopVectorEnv, steps: int, seed: int = 123) -> int:
    """Gymnasium 1.4's checks, applied to a VectorEnv; returns how many episodes ended."""
    n = envs.num_envs
    assert isinstance(envs.metadata["autoreset_mode"], AutoresetMode)
    check_observation_space(envs.observation_space)
    check_action_space(envs.action_space)
    assert envs.observation_space == batch_space(envs.single_observation_space, n)
    assert envs.action_space == batch_space(envs.single_action_space, n)
    envs.action_space.seed(seed)
    action = envs.action_space.sample()
    obs0, info0 = envs.reset(seed=seed)
    check_obs(obs0, envs.observation_space, "reset")
    assert isinstance(info0, dict)
    step0 = envs.step(action)
    obs1, _ = envs.reset(seed=seed)
    step1 = envs.step(action)
    assert data_equivalence(obs0, obs1, exact=True)
    for a, b in zip(step0, step1):
        assert data_equivalence(a, b, exact=True)
    calls = [obs0, step0[0], obs1, step1[0]]
    for i in range(len(calls)):
        for j in range(i + 1, len(calls)):
            assert not data_shares_objects(calls[i], calls[j])
    wrapped = RecordEpisodeStatistics(envs)
    wrapped.reset(seed=seed)
    ended = 0
    for _ in range(steps):
        obs, rew, term, trunc, info = wrapped.step(envs.action_space.sample())
        check_obs(obs, envs.observation_space, "step")
        assert rew.shape == (n,) and rew.dtype == np.float64
        assert term.dtype == bool and trunc.dtype == bool and term.shape == trunc.shape == (n,)
        done = term | trunc
        if done.any():
            assert info["_final_obs"].tolist() == done.tolist()
            for i in np.flatnonzero(done):
                assert info["final_obs"][i] in envs.single_observation_space
                # the game's own return equals the one Gymnasium's wrapper summed from the rewards
                assert info["final_info"]["_episode_return"][i]
                assert info["final_info"]["episode_return"][i] == pytest.approx(info["episode"]["r"][i], rel=1e-5)
            ended += int(done.sum())
    envs.close()
    envs.close()
    return ended


@pytest.mark.parametrize("bundled", SINGLE_AGENT, ids=lambda g: g.name)
def test_vector_env_passes_the_vector_checks(bundled):
    probe = GymloopEnv(loop_of(bundled), measure_steps=STEPS)  # (episodes of up to 200 decisions: the fire games)
    room = {t: 2 * n + 4 for t, n in probe.layout.max_n.items()}
    probe.close()
    ended = check_vector_env(GymloopVectorEnv(loop_of(bundled), 4, max_entities=room), steps=STEPS)
    assert ended > 0


@pytest.mark.parametrize("bundled", SINGLE_AGENT, ids=lambda g: g.name)
def test_vector_env_steps_exactly_like_sync_vector_env_over_the_single_env(bundled):
    game = loop_of(bundled)
    probe = GymloopEnv(game, measure_steps=STEPS)
    layout = probe.layout
    kw = dict(max_entities={t: 2 * n + 4 for t, n in layout.max_n.items()},  # room for what STEPS steps may show
              max_actors={a: k for a, k in layout.max_actors.items() if probe.spaces.actions[a].kind.actor_bound})
    probe.close()
    ours = GymloopVectorEnv(game, 1, **kw)
    sync = SyncVectorEnv([lambda: GymloopEnv(game, **kw)], autoreset_mode=AutoresetMode.SAME_STEP)
    assert sync.single_observation_space == ours.single_observation_space
    assert sync.single_action_space == ours.single_action_space
    rng = np.random.default_rng(0)
    a_obs, _ = ours.reset(seed=7)
    b_obs, _ = sync.reset(seed=7)
    ends = 0
    for _ in range(STEPS):
        assert data_equivalence(a_obs, b_obs, exact=True)
        act = legal_actions(ours.action_masks(), ours.layout.nvec, rng)
        act = act[:, 0] if len(ours.components) == 1 else act
        a_obs, a_rew, a_term, a_trunc, a_info = ours.step(act)
        b_obs, b_rew, b_term, b_trunc, b_info = sync.step(act)
        assert np.array_equal(a_rew, b_rew) and np.array_equal(a_term, b_term) and np.array_equal(a_trunc, b_trunc)
        if a_term.any() or a_trunc.any():
            ends += 1
            assert data_equivalence(a_info["final_obs"][0], b_info["final_obs"][0], exact=True)
            assert a_info["final_info"].keys() == b_info["final_info"].keys()
            for k, v in a_info["final_info"].items():
                assert np.allclose(v, b_info["final_info"][k])
    assert ends > 0
    ours.close()
    sync.close()


# ====================================================================== the layout


@dataclass
class Item:
    v: int


@dataclass
class Other:
    a: float
    b: float


@dataclass
class Info:
    level: int


Pick = gl.SelectEntity("Pick", among=(Item, Other))


def test_padded_entities_counts_globals_and_actors():
    def obs(st):
        items = [Item(st.t * 10 + i) for i in range(1 + st.t % 2)]
        return gl.Obs().entities(items).actor(Unit(st.t, 7)).globals(Info(st.t))

    env = GymloopEnv(make_game(obs), max_entities={"Item": 3, "Unit": 2}, max_actors=1)
    assert env.action_space == gymnasium.spaces.Discrete(3)
    o, info = env.reset(seed=0)
    assert info == {}
    assert o["Item"].shape == (3, 1) and o["Item"][:, 0].tolist() == [0, 0, 0]
    assert o["counts"].tolist() == [1, 1]  # Item, Unit
    assert o["Unit"].tolist() == [[0, 7], [0, 0]]
    assert o["globals"].tolist() == [0.0]
    assert o["actors"].tolist() == [3]  # Unit row 0 comes after the 3 padded Item rows
    assert o["action_mask"].tolist() == [1, 1, 1] and o["action_mask"].dtype == np.int8
    o, *_ = env.step(1)
    assert o["Item"][:, 0].tolist() == [10, 11, 0] and o["counts"].tolist() == [2, 1]
    assert o["globals"].tolist() == [1.0]


def test_several_actors_become_padded_components_with_their_masks():
    def obs(st):
        units = [Unit(i, st.t) for i in range(1 + st.t % 3)]
        masks = [[True, i == 0, False] for i in range(len(units))]
        return gl.Obs().actors(units, masks={Move: masks})

    log: list = []
    env = GymloopEnv(make_game(obs, log=log), max_entities=3, max_actors=3)
    assert env.action_space == gymnasium.spaces.MultiDiscrete([3, 3, 3])
    assert [str(c) for c in env.components] == ["Move[0]", "Move[1]", "Move[2]"]
    o, _ = env.reset(seed=0)
    # one actor: its mask, then two absent actors that allow choice 0 only
    assert env.action_masks().tolist() == [True, True, False, True, False, False, True, False, False]
    assert o["actors"].tolist() == [0, -1, -1]
    env.step(np.array([1, 0, 0]))
    assert log[-1][2] == [Move.RIGHT]
    assert env.action_masks().tolist() == [True, True, False, True, False, False, True, False, False]
    env.step(np.array([0, 0, 2]))  # two actors now; the absent third actor's value is ignored
    assert log[-1][2] == [Move.LEFT, Move.LEFT]


def test_select_entity_is_a_discrete_over_padded_candidates():
    def obs(st):
        items = [Item(i) for i in range(2)]
        others = [Other(1.0, 2.0)]
        st.data["cands"] = items + others
        return gl.Obs().entities(items).entities(others).actor(Unit(0, 0), masks={Pick: [True, False, True]})

    log: list = []
    game = gl.game(entities=[Item, Other])(make_game(obs, action_types=(Pick,), log=log))
    env = GymloopEnv(game, max_entities=3, max_actors=1)
    assert env.action_space == gymnasium.spaces.Discrete(6)  # Item rows 0-2, Other rows 3-5
    env.reset(seed=0)
    # Item 0 legal, Item 1 masked, padding row illegal, Other 0 legal, padding illegal
    assert env.action_masks().tolist() == [True, False, False, True, False, False]
    env.step(3)
    assert log[-1][2] == Other(1.0, 2.0)
    env.step(0)
    assert log[-1][2] == Item(0)


def test_composite_action_is_one_component_over_the_combinations():
    from gymloop.games.tactics import tactics

    env = GymloopEnv(tactics, max_entities={"Unit": 3, "Enemy": 4, "Wall": 6}, max_actors=3)
    assert env.action_space.nvec.tolist() == [15, 15, 15, 4, 4, 4]
    env.reset(seed=3)
    m = env.action_masks()
    assert m.shape == (57,) and m[:45].reshape(3, 15).any(axis=1).all()


def test_sizes_are_measured_and_reported(caplog):
    def obs(st):
        return gl.Obs().entities([Item(i) for i in range(st.t % 4)]).actor(Unit(0, 0))

    game = gl.game(entities=[Item])(make_game(obs))
    with caplog.at_level(logging.WARNING, logger="gymloop.adapters.gymnasium"):  # (seen by default: a warning)
        env = GymloopEnv(game, measure_steps=16)
    # entities: twice the most seen (3 items, 1 unit); actors: the most seen
    assert env.layout.max_n == {"Item": 6, "Unit": 2} and env.layout.max_actors == {"Move": 1}
    assert "max_entities={'Item': 6, 'Unit': 2}" in caplog.text and "pass max_entities" in caplog.text
    assert [r.levelname for r in caplog.records if "padded sizes measured" in r.getMessage()] == ["WARNING"]  # said once
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gymloop.adapters.gymnasium"):
        GymloopEnv(game, max_entities={"Item": 6, "Unit": 2}, max_actors=1)
    assert "padded sizes measured" not in caplog.text  # sizes given: nothing measured, nothing said
    env = GymloopEnv(game, max_entities={"Item": 5}, max_actors=1, measure_steps=16)  # the rest measured
    assert env.layout.max_n == {"Item": 5, "Unit": 2} and env.layout.max_actors == {"Move": 1}


def test_terminated_step_returns_an_empty_observation_and_reset_the_next_episode():
    game = make_game(lambda st: gl.Obs(score=st.score).actor(Unit(st.t, st.episode)), episode_len=2,
                     on_step=lambda st, a: setattr(st, "score", st.score + 1))
    env = GymloopEnv(game, max_entities=1, max_actors=1)
    o, _ = env.reset(seed=0)
    assert o["Unit"].tolist() == [[0, 0]]
    o, r, term, trunc, info = env.step(0)
    assert (r, term, trunc) == (1.0, False, False)
    o, r, term, trunc, info = env.step(0)
    assert (term, trunc) == (True, False)
    assert o["counts"].tolist() == [0] and o["action_mask"].tolist() == [1, 0, 0]
    assert info["episode_length"] == 2.0 and info["episode_return"] == 2.0
    with pytest.raises(gl.EnvStateError, match=r"after the episode ended; call reset\(\)"):
        env.step(0)
    o, _ = env.reset()
    assert o["Unit"].tolist() == [[0, 1]]  # the next episode of the same game


def test_truncated_step_returns_the_final_observation_the_game_gave():
    game = make_game(lambda st: gl.Obs().actor(Unit(st.t, 0)), episode_len=2, truncated=True,
                     final_obs=lambda st: gl.Obs().entities(Unit(99, 98)).metric("seen", 1))
    env = GymloopEnv(game, max_entities=1, max_actors=1)
    env.reset(seed=0)
    env.step(0)
    o, r, term, trunc, info = env.step(0)
    assert (term, trunc) == (False, True)
    assert o["Unit"].tolist() == [[99, 98]] and o["counts"].tolist() == [1]
    assert info["seen"] == 1.0


def test_reset_with_a_seed_restarts_that_game():
    game = make_game(lambda st: gl.Obs().actor(Unit(st.rng.randrange(1000), 0)))
    env = GymloopEnv(game, max_entities=1, max_actors=1)
    a = env.reset(seed=5)[0]["Unit"].tolist()
    env.step(0)
    assert env.reset(seed=5)[0]["Unit"].tolist() == a
    assert env.reset(seed=6)[0]["Unit"].tolist() != a
    with gl.VecEnv(game, 1, seed=5) as v:  # the seed VecEnv(game, 1, seed=s) gives its copy
        assert v.reset().entities["Unit"].tolist() == a


# ====================================================================== bad input


@pytest.mark.parametrize("make", [GymloopEnv, lambda g, **kw: GymloopVectorEnv(g, 2, **kw)], ids=["Env", "VectorEnv"])
def test_a_multi_agent_game_is_refused_with_the_adapter_to_use(make):
    with pytest.raises(gl.ConfigError, match=r"game 'duel' takes 2 agents per game.*single-agent.*GymloopParallelEnv"):
        make(duel, max_entities=10)
    with pytest.raises(gl.ConfigError, match=r"takes 2 agents per game.*GymloopParallelEnv"):
        make(snake, max_entities=10, agents_per_game=2)


def growing(kind: str):
    """A game whose observation ``t`` has ``t + 1`` items (``kind="entities"``) or actors (``"actors"``)."""
    def obs(st):
        if kind == "entities":
            return gl.Obs().entities([Item(i) for i in range(st.t + 1)]).actor(Unit(0, 0))
        return gl.Obs().actors([Unit(i, 0) for i in range(st.t + 1)])

    return gl.game(entities=[Item])(make_game(obs))


@pytest.mark.parametrize("vector", [False, True], ids=["Env", "VectorEnv"])
def test_more_entities_than_max_entities_fail_naming_the_limit_and_the_fix(vector):
    if vector:
        env = GymloopVectorEnv(growing("entities"), 2, max_entities={"Item": 2, "Unit": 1}, max_actors=1)
        step = lambda: env.step(np.zeros(2, dtype=np.int64))  # noqa: E731
        who = "copy 0"
    else:
        env = GymloopEnv(growing("entities"), max_entities={"Item": 2, "Unit": 1}, max_actors=1)
        step = lambda: env.step(0)  # noqa: E731
        who = "the game"
    env.reset(seed=0)
    o = step()[0]
    assert o["counts"][..., 0].max() == 2  # exactly at the limit: fine
    with pytest.raises(gl.InvalidObservationError,
                       match=rf"{who} has 3 'Item' entities, more than the 2 .*nothing is truncated.*max_entities=\{{'Item': N\}}.*at least 3"):
        step()
    with pytest.raises(gl.EnvStateError, match=r"call reset\(\) first"):
        step()
    env.reset(seed=0)  # and the env is usable again


def test_more_actors_than_max_actors_fail_naming_the_limit_and_the_fix():
    env = GymloopEnv(growing("actors"), max_entities=10, max_actors=2)
    env.reset(seed=0)
    env.step(np.array([0, 0]))
    with pytest.raises(gl.InvalidObservationError, match=r"has 3 actors of action type 'Move', more than the 2 .*max_actors=\{'Move': N\}"):
        env.step(np.array([0, 0]))


def test_measured_sizes_too_small_later_fail_loudly():
    env = GymloopEnv(growing("entities"), max_actors=1, measure_steps=1)  # the measuring run sees at most 2 items
    assert env.layout.max_n["Item"] == 4
    env.reset(seed=0)
    with pytest.raises(gl.InvalidObservationError, match=r"has 5 'Item' entities, more than the 4"):
        for _ in range(5):
            env.step(0)


def masked_game(log):
    return make_game(lambda st: gl.Obs().actor(Unit(0, 0), masks={Move: [False, True, False]}), log=log)


def test_masked_out_actions_are_replaced_and_counted_by_default():
    log: list = []
    env = GymloopEnv(masked_game(log), max_entities=1, max_actors=1)
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert info["illegal_actions"] == 1 and log[-1][2] == Move.RIGHT  # the only legal move
    _, _, _, _, info = env.step(1)
    assert "illegal_actions" not in info


def test_masked_out_actions_raise_when_asked():
    env = GymloopEnv(masked_game(None), max_entities=1, max_actors=1, illegal_actions="raise")
    env.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"action 2 for Move\[0\] is masked out \(legal: \[1\]\).*action_masks\(\)"):
        env.step(2)
    envs = GymloopVectorEnv(masked_game(None), 3, max_entities=1, max_actors=1, illegal_actions="raise")
    envs.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"copy 1: action 0 for Move\[0\] is masked out"):
        envs.step(np.array([1, 0, 1]))


def test_vector_env_counts_replaced_actions_per_copy():
    envs = GymloopVectorEnv(masked_game(None), 3, max_entities=1, max_actors=1)
    envs.reset(seed=0)
    info = envs.step(np.array([1, 0, 2]))[4]
    assert info["illegal_actions"].tolist() == [0, 1, 1] and info["_illegal_actions"].tolist() == [False, True, True]


def test_actions_outside_the_action_space_are_refused():
    env = GymloopEnv(masked_game(None), max_entities=1, max_actors=1)
    env.reset(seed=0)
    with pytest.raises(gl.InvalidActionError, match=r"action 3 for Move\[0\] is outside the action space Discrete\(3\)"):
        env.step(3)
    with pytest.raises(gl.InvalidActionError, match=r"the action must be one int \(Discrete\(3\)\)"):
        env.step(np.array([1, 1]))
    with pytest.raises(gl.InvalidActionError, match=r"must be one int"):
        env.step(0.5)


@pytest.mark.parametrize(("kw", "match"), [
    ({"max_entities": {"Nope": 3}}, r"max_entities names \['Nope'\], which the game does not have; it has \['Unit'\]"),
    ({"max_entities": 0}, r"max_entities\['Unit'\] must be an int >= 1, got 0"),
    ({"max_entities": 1, "max_actors": {"Move": 2.5}}, r"max_actors\['Move'\] must be an int >= 1"),
    ({"illegal_actions": "ignore"}, r"illegal_actions must be one of \['replace', 'raise'\]"),
    ({"render_mode": "human"}, r"no render modes"),
    ({"max_entities": {"Unit": 1}, "measure_steps": 0}, r"measure_steps must be an int >= 1"),
])
def test_bad_configuration_is_a_config_error(kw, match):
    with pytest.raises(gl.ConfigError, match=match):
        GymloopEnv(make_game(), **kw)


def test_an_entity_type_with_a_reserved_name_is_refused():
    @gl.entity(name="counts")
    @dataclass
    class Counter:
        n: int

    game = make_game(lambda st: gl.Obs().entities(Counter(1)).actor(Unit(0, 0)))
    with pytest.raises(gl.ConfigError, match=r"entity type\(s\) \['counts'\].*rename them with @gl.entity\(name=...\)"):
        GymloopEnv(game, max_entities=2)


def test_vector_reset_takes_one_root_seed():
    envs = GymloopVectorEnv(make_game(), 2, max_entities=1, max_actors=1)
    with pytest.raises(gl.ConfigError, match=r"takes one int"):
        envs.reset(seed=[1, 2])
    with pytest.raises(gl.ConfigError, match=r"reset_mask"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    envs.close()
    with pytest.raises(gl.EnvStateError, match=r"after close\(\)"):
        envs.step(np.zeros(2, dtype=np.int64))


def test_importing_gymloop_does_not_import_gymnasium():
    import subprocess
    import sys

    code = "import sys, gymloop, gymloop.adapters; print('gymnasium' in sys.modules, 'pettingzoo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_several_action_types_are_multidiscrete_and_none_of_it_warns():
    game = make_game(lambda st: gl.Obs().actor(Unit(0, 0), masks={Fire: [True, st.t % 2 == 0]}), action_types=(Move, Fire))
    env = GymloopEnv(game, max_entities=1, max_actors=1)
    assert env.action_space == gymnasium.spaces.MultiDiscrete([2, 3]) or env.action_space == gymnasium.spaces.MultiDiscrete([3, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_the_adapters_share_the_padded_layout_by_public_names():
    """gymnasium, pettingzoo and sb3 import no private name of another module of the package."""
    import ast
    from pathlib import Path

    import gymloop.adapters

    folder = Path(gymloop.adapters.__path__[0])
    for module in ("gymnasium", "pettingzoo", "sb3"):
        tree = ast.parse((folder / f"{module}.py").read_text())
        private = [f"{'.' * n.level}{n.module}.{a.name}" for n in ast.walk(tree)
                   if isinstance(n, ast.ImportFrom) and n.level for a in n.names if a.name.startswith("_")]
        assert not private, f"adapters/{module}.py imports private names {private}"
