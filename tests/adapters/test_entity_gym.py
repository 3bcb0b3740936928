"""entity-gym both ways, against the real entity-gym 0.1.10 (skipped where it is not installed).

- entity-gym -> gymloop (:mod:`gymloop.adapters.entity_gym`): all 13 examples through ``gl.VecEnv``
  at entity-gym's own random level, per-copy seeding, select-entity actees, global decisions,
  masks, featureless types, visibility, types without ids, and environments that break their
  own declared spaces.
- gymloop -> entity-gym (:mod:`gymloop.adapters.entity_gym_vec`): ``GymloopVecEnv``'s ``VecObs``
  against the batch it comes from and against what entity-gym's own ``EnvList`` makes of the same
  observations, the observation filter, actions back, and enn-trainer's PPO training gymloop games.
"""

from __future__ import annotations

import functools
import math
import random
import sys
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

eg = pytest.importorskip("entity_gym.env")
from entity_gym.env.vec_env import batch_obs
from entity_gym.examples import ENV_REGISTRY, CherryPick, Count, FloorIsLava, MultiArmedBandit, PickMatchingBalls, RockPaperScissors, Xor
from hypothesis import given, settings
from hypothesis import strategies as st
from ragged_buffer import RaggedBufferI64

import gymloop as gl
from gymloop.adapters.entity_gym import EntityGymEnv, from_entity_gym
from gymloop.adapters.entity_gym_vec import GymloopVecEnv, entity_gym_spaces, env_factory
from gymloop.games import get_game

# ====================================================================== helpers


def random_vec_actions(obs, action_space, rng: np.random.Generator) -> dict:
    """Uniform legal actions for any entity-gym ``VecObs`` (``EnvList``'s or ``GymloopVecEnv``'s alike)."""
    out = {}
    for name, space in action_space.items():
        m = obs.action_masks[name]
        lengths = m.actors.size1()
        n = int(lengths.sum())
        if isinstance(m, eg.VecSelectEntityActionMask):
            per = np.repeat(m.actees.size1(), lengths)
            choice = (rng.random(n) * per).astype(np.int64)
        else:
            k = len(space.index_to_label)
            legal = np.ones((n, k), dtype=bool) if m.mask is None or m.mask.size0() == 0 else m.mask.as_array().reshape(n, k)
            choice = np.array([rng.choice(np.flatnonzero(row)) for row in legal], dtype=np.int64)
        out[name] = RaggedBufferI64.from_flattened(choice.reshape(-1, 1), lengths)
    return out


def per_slot_actions(b: gl.Batch, spaces: gl.Spaces, rngs: list[np.random.Generator]) -> dict:
    """Random legal actions where slot ``s`` draws only from ``rngs[s]`` (its choices do not depend on other slots)."""
    out = {}
    for name, d in spaces.actions.items():
        slots, m = b.actor_slot[name], b.masks[name]
        if d.kind.selects_entities:
            nc = b.num_candidates[name]
            start = np.cumsum(nc) - nc
            rows = [m[start[j] : start[j] + nc[j]] for j in range(slots.size)]
        else:
            rows = list(m)
        out[name] = np.array([rngs[s].choice(np.flatnonzero(r)) for s, r in zip(slots, rows)], dtype=np.int64)
    return out


def gymloop_random_returns(make, num_envs: int, steps: int, seed: int) -> list[float]:
    with gl.VecEnv(from_entity_gym(make), num_envs=num_envs, seed=seed) as env:
        env.reset()
        out: list[float] = []
        for _ in range(steps):
            r = env.step(env.sample_actions()).metrics.get("episode_return")
            if r is not None:
                out += r[~np.isnan(r)].tolist()
    return out


def entity_gym_random_returns(make, num_envs: int, steps: int, seed: int) -> list[float]:
    """The same random agent on entity-gym's own ``EnvList`` (its examples draw from the global generators)."""
    random.seed(seed)
    np.random.seed(seed)
    rng = np.random.default_rng(seed)
    env = eg.EnvList(make, num_envs)
    obs = env.reset(env.obs_space())
    total = np.zeros(num_envs)
    out: list[float] = []
    for _ in range(steps):
        obs = env.act(random_vec_actions(obs, env.action_space(), rng), env.obs_space())
        total += obs.reward
        out += total[obs.done].tolist()
        total[obs.done] = 0.0
    env.close()
    return out


def check_vec_obs(obs, env) -> None:
    """What enn-trainer relies on in a ``VecObs``: every type and action present, shapes, indices in range."""
    n = len(env)
    space = env.obs_space()
    counts = np.zeros(n, dtype=np.int64)
    for t, e in space.entities.items():
        f = obs.features[t]
        assert f.size0() == n and f.size2() == len(e.features), t
        counts += f.size1()
    has_global = env.has_global_entity()
    assert isinstance(obs, eg.VecObs) and ("__global__" in obs.features) == has_global
    if has_global:
        assert obs.features["__global__"].size1().tolist() == [1] * n
        assert obs.features["__global__"].size2() == len(space.global_features)
    assert set(obs.action_masks) == set(env.action_space())
    for name, a in env.action_space().items():
        m = obs.action_masks[name]
        assert m.actors.size0() == n
        actors = m.actors.as_array().reshape(-1)
        env_of = np.repeat(np.arange(n), m.actors.size1())
        if isinstance(a, eg.GlobalCategoricalActionSpace):
            assert (actors == counts[env_of]).all() and (m.actors.size1() <= 1).all()
        else:
            assert ((actors >= 0) & (actors < counts[env_of])).all(), name
        if isinstance(a, eg.SelectEntityActionSpace):
            assert isinstance(m, eg.VecSelectEntityActionMask)
            actees = m.actees.as_array().reshape(-1)
            assert ((actees >= 0) & (actees < np.repeat(counts, m.actees.size1()))).all()
            assert (m.actees.size1()[m.actors.size1() > 0] > 0).all()  # every actor can choose
        else:
            assert isinstance(m, eg.VecCategoricalActionMask)
            if m.mask is not None:
                assert m.mask.as_array().shape == (actors.size, len(a.index_to_label))
                assert m.mask.as_array().any(axis=1).all()
    assert obs.reward.shape == (n,) and obs.reward.dtype == np.float32
    assert obs.done.shape == (n,) and obs.done.dtype == bool


def rows_of(obs, t: str, env: int) -> np.ndarray:
    return obs.features[t][env].as_array()


# ====================================================================== entity-gym -> gymloop: the examples


@pytest.mark.parametrize("name", list(ENV_REGISTRY))
def test_every_example_runs_at_entity_gyms_own_random_level(name):
    make = ENV_REGISTRY[name]
    ours = gymloop_random_returns(make, num_envs=16, steps=250, seed=1)
    theirs = entity_gym_random_returns(make, num_envs=16, steps=250, seed=1)
    assert len(ours) >= 10 and len(theirs) >= 10, (len(ours), len(theirs))
    a, b = np.asarray(ours), np.asarray(theirs)
    se = math.sqrt(a.var() / a.size + b.var() / b.size)
    assert abs(a.mean() - b.mean()) <= 4.5 * se + 0.02 * (1 + abs(b.mean())), (name, a.mean(), b.mean(), se)


@pytest.mark.parametrize("name", list(ENV_REGISTRY))
def test_a_copys_episodes_depend_only_on_its_seed(name):
    """Copy 0 alone and among others (different global random use around it) plays the same episodes."""

    def episodes(num_envs: int) -> list[tuple[float, float]]:
        rngs = [np.random.default_rng(100 + s) for s in range(num_envs)]
        out: list[tuple[float, float]] = []
        with gl.VecEnv(from_entity_gym(ENV_REGISTRY[name]), num_envs=num_envs, seed=7) as env:
            b = env.reset()
            for _ in range(2000):  # until copy 0 ends 2 episodes
                random.random(), np.random.random()  # the caller's use of the global generators changes nothing
                b = env.step(per_slot_actions(b, env.spaces, rngs))
                r = b.metrics.get("episode_return")
                if r is not None and not np.isnan(r[0]):
                    out.append((float(r[0]), float(b.metrics["episode_length"][0])))
                    if len(out) == 2:
                        break
        return out

    alone = episodes(1)
    assert alone and alone == episodes(3)


class DrawsWhenMade(eg.Environment):
    """Draws from the global generators in its constructor (as many of entity-gym's examples do) and in every call."""

    made: list[float] = []

    def __init__(self) -> None:
        DrawsWhenMade.made.append(random.random())

    def obs_space(self) -> eg.ObsSpace:
        return eg.ObsSpace(entities={"Player": eg.Entity(["x"])})

    def action_space(self) -> dict:
        return {"move": eg.CategoricalActionSpace(["a", "b"])}

    def reset(self) -> eg.Observation:
        return self.observe()

    def act(self, actions) -> eg.Observation:
        return self.observe(done=random.random() < 0.3)

    def observe(self, done: bool = False) -> eg.Observation:
        return eg.Observation(features={"Player": [[float(np.random.random())]]}, ids={"Player": [0]}, done=done, reward=0.0,
                              actions={"move": eg.CategoricalActionMask(actor_ids=[0])})


def test_the_callers_generators_around_a_batch_and_in_constructors_are_its_own():
    """The copies step with the caller's states taken out once per batch: constructors (made during reset) draw from the
    caller's stream, in order, and after every step the caller's generators go on as if no copy had drawn."""
    random.seed(3)
    np.random.seed(3)
    made = [random.random() for _ in range(4)]
    caller = [(random.random(), float(np.random.random())) for _ in range(6)]
    random.seed(3)
    np.random.seed(3)
    DrawsWhenMade.made = []
    got = []
    with gl.VecEnv(from_entity_gym(DrawsWhenMade), num_envs=4, seed=1) as env:
        env.reset()
        got.append((random.random(), float(np.random.random())))
        for _ in range(5):
            env.step({"move": np.zeros(4, dtype=np.int64)})
            got.append((random.random(), float(np.random.random())))
    assert DrawsWhenMade.made == made
    assert got == caller


def test_a_class_with_filter_methods_is_called_through_them_with_its_space_built_once():
    """Count overrides reset_filter/act_filter (its reset/act call obs_space() each time to reach them):
    the adapter calls them as entity-gym's vector environments do, with the space it got at construction."""
    calls = {"obs_space": 0, "reset_filter": 0, "act_filter": 0}

    class Counted(Count):
        def obs_space(self):
            calls["obs_space"] += 1
            return super().obs_space()

        def reset_filter(self, obs_space):
            calls["reset_filter"] += 1
            return super().reset_filter(obs_space)

        def act_filter(self, action, obs_filter):
            calls["act_filter"] += 1
            return super().act_filter(action, obs_filter)

    with gl.VecEnv(from_entity_gym(Counted), num_envs=4, seed=0) as env:
        env.reset()
        for _ in range(5):
            env.step(env.sample_actions())
    built = calls["obs_space"]
    assert calls["reset_filter"] == 4 * 6 and calls["act_filter"] == 4 * 5  # Count: one step per episode
    assert built <= 4 * 2  # at construction (and discovery), never per call


def test_the_last_observation_of_an_episode_gives_its_reward_and_metrics():
    """An episode's last observation (done) is not converted: its entities are never used (entity-gym has
    no truncation), so only its reward, its end and its metrics count, and the next copy starts from reset."""

    def observe(t):
        if t == 2:  # the last observation breaks the spaces: nothing reads its entities
            return eg.Observation(features={"Ghost": [[1.0]]}, ids={}, actions={}, done=True, reward=2.5, global_features=[0.0],
                                  metrics={"coins": 3.0})
        o = good_obs()
        o.reward = 0.5 * t
        return o

    with gl.VecEnv(from_entity_gym(broken(observe)), num_envs=1, seed=0) as env:
        env.reset()
        b1 = env.step(env.sample_actions())
        b2 = env.step(env.sample_actions())
    assert not b1.terminated[0] and b1.reward[0] == 0.5
    assert b2.terminated[0] and b2.reward[0] == 2.5
    assert b2.metrics["coins"][0] == 3.0 and b2.metrics["episode_return"][0] == 3.0 and b2.metrics["episode_length"][0] == 2
    assert b2.counts["Unit"][0] == 2  # the next episode's first observation


def test_select_entity_actees_map_back_to_entity_ids_pick_matching_balls():
    made: list = []
    log: list = []

    def make():
        env = PickMatchingBalls(max_balls=6)
        act = env.act
        env.act = lambda actions: (log.append((env, actions["Pick Ball"])), act(actions))[1]
        made.append(env)
        return env

    with gl.VecEnv(from_entity_gym(make), num_envs=2, seed=3) as env:
        b = env.reset()
        for _ in range(4):
            balls = b.counts["Ball"]
            assert b.actor_index["Pick Ball"].tolist() == balls.tolist()  # the Player, after its balls
            cand = b.candidate_index("Pick Ball")
            nc = b.num_candidates["Pick Ball"]
            start = np.cumsum(nc) - nc
            choice = []
            for s in range(2):  # the last legal candidate: an unselected ball
                legal = np.flatnonzero(b.masks["Pick Ball"][start[s] : start[s] + nc[s]])
                assert (legal < balls[s]).all()  # only balls are actees, never the player
                choice.append(int(legal[-1]))
            before = b.entities["Ball"]
            log.clear()
            b = env.step({"Pick Ball": np.array(choice)})
            for s, (e, action) in enumerate(log):
                assert e is made[s]
                assert list(action.actors) == [int(balls[s])]  # the Player's id is len(balls)
                assert list(action.actees) == [int(cand[start[s] + choice[s]])]  # a Ball's id is its row
            off = np.cumsum(b.counts["Ball"]) - b.counts["Ball"]
            for s in range(2):
                if not b.done[s]:
                    assert b.entities["Ball"][off[s] + choice[s], 6] == 1.0  # "selected"
                    assert before[(np.cumsum(balls) - balls)[s] + choice[s], 6] == 0.0


def test_select_entity_actees_map_back_to_entity_ids_cherry_pick():
    log: list = []

    def make():
        env = CherryPick(num_cherries=8)
        act = env.act
        env.act = lambda actions: (log.append(actions["Pick Cherry"]), act(actions))[1]
        return env

    rng = np.random.default_rng(0)
    with gl.VecEnv(from_entity_gym(make), num_envs=1, seed=0) as env:
        b = env.reset()
        for _ in range(3):  # (the 4th pick ends the episode: 8 new cherries)
            n = int(b.counts["Cherry"][0])
            c = int(rng.integers(n))
            quality = float(b.entities["Cherry"][c, 0])
            b = env.step({"Pick Cherry": np.array([c])})
            assert list(log[-1].actees) == [("Cherry", c)] and list(log[-1].actors) == ["Player"]
            assert b.reward[0] == pytest.approx(quality)
            assert b.counts["Cherry"][0] == n - 1


def test_global_categorical_xor_and_a_bandit_with_no_entities():
    with gl.VecEnv(from_entity_gym(Xor), num_envs=8, seed=0) as env:
        b = env.reset()
        assert env.action_space["output"].kind == "global_categorical"
        for _ in range(5):
            assert b.actor_slot["output"].tolist() == list(range(8)) and (b.actor_index["output"] == -1).all()
            bits = b.entities["Input"].reshape(8, 2)
            negate = b.globals[:, 0]
            right = np.where(bits[:, 0] == bits[:, 1], negate, 1 - negate).astype(np.int64)
            b = env.step({"output": right})
            assert b.reward.tolist() == [1.0] * 8
    with gl.VecEnv(from_entity_gym(MultiArmedBandit), num_envs=4, seed=0) as env:
        b = env.reset()
        assert env.obs_space.entities == {} and env.obs_space.globals == ("step",)
        for _ in range(32):
            b = env.step({"pull": np.array([0, 0, 1, 4])})  # "A" pays 1/32 a step
        assert b.metrics["episode_return"].tolist() == [1.0, 1.0, 0.0, 0.0]
        assert b.metrics["episode_length"].tolist() == [32] * 4


def test_count_masks_reach_the_batch_and_are_enforced():
    with gl.VecEnv(from_entity_gym(Count), num_envs=16, seed=0) as env:
        b = env.reset()
        right = b.counts["Bean"]
        m = b.masks["count"]
        assert m.shape == (16, 10) and m[np.arange(16), right].all()
        assert not m.all()  # some wrong answers are masked off
        s, wrong = np.argwhere(~m)[0]
        bad = right.copy()
        bad[s] = wrong
        with pytest.raises(gl.InvalidActionError, match=r"action type 'count', actor \d+ .*masked out"):
            env.step({"count": bad})
    with gl.VecEnv(from_entity_gym(Count, masked_choices=2), num_envs=8, seed=0) as env:  # kwargs reach the class
        b = env.reset()
        assert (b.counts["Bean"] < 2).all() and not b.masks["count"][:, 2:].any()
        b = env.step({"count": b.counts["Bean"]})
        assert b.reward.tolist() == [1.0] * 8


def test_featureless_entity_types():
    with gl.VecEnv(from_entity_gym(RockPaperScissors), num_envs=4, seed=0) as env:
        b = env.reset()
        assert env.obs_space.entities["Player"] == ()
        assert b.entities["Player"].shape == (4, 0) and b.counts["Player"].tolist() == [1] * 4
        assert b.actor_index["throw"].tolist() == [0] * 4
    with gl.VecEnv(from_entity_gym(PickMatchingBalls), num_envs=2, seed=0) as env:  # given as (1, 0) arrays
        assert env.reset().entities["Player"].shape == (2, 0)


def test_hidden_entities_never_reach_the_batch():
    with gl.VecEnv(from_entity_gym(RockPaperScissors), num_envs=8, seed=0) as env:
        b = env.reset()
        assert "Opponent" in env.obs_space.entities
        for _ in range(20):
            assert b.counts["Opponent"].sum() == 0 and b.entities["Opponent"].shape == (0, 3)
            b = env.step(env.sample_actions())
    with gl.VecEnv(from_entity_gym(RockPaperScissors, cheat=True), num_envs=8, seed=0) as env:
        b = env.reset()
        assert b.counts["Opponent"].tolist() == [1] * 8 and (b.entities["Opponent"].sum(axis=1) == 1).all()


def test_types_without_ids_the_actor_is_the_player_not_a_lava_tile():
    raw = FloorIsLava()
    random.seed(0)
    o = raw.reset()
    assert "Lava" not in o.ids and "Lava" in o.features
    theirs = o._actor_indices("move", raw.obs_space()).tolist()
    assert theirs == [0]  # entity-gym's own id_to_index skips Lava: index 0 is a Lava tile (or the high ground)

    env = EntityGymEnv(FloorIsLava)
    for seed in range(20):
        e = env.reset(seed)
        n_lava, n_high = len(e.entities["Lava"]), len(e.entities["HighGround"])
        assert list(e.actors["move"]) == [n_lava + n_high]  # the Player's row, after the Lava and HighGround rows
        player = env._last.features["Player"]
        assert np.asarray(e.entities["Player"]).tolist() == np.asarray(player, dtype=np.float32).tolist()
    log: list = []
    act = env.env.act_filter  # (FloorIsLava overrides it; entity-gym's vector environments and the adapter call it)
    env.env.act_filter = lambda a, space: (log.append(a["move"]), act(a, space))[1]
    env.act({"move": np.array([3])})
    assert list(log[0].actors) == [0] and list(log[0].indices) == [3]  # the Player's id goes back


def test_cli_names_an_entity_gym_class(tmp_path, capsys):
    from gymloop.cli import main

    game = get_game("entity_gym.examples:Xor")
    assert game.__name__ == "Xor"
    with gl.VecEnv(game, num_envs=2, seed=0) as env:
        assert env.reset().actor_slot["output"].tolist() == [0, 1]
    assert get_game("gymloop.games.snake:snake").__name__ == "snake"  # other module:function paths are unchanged
    code = main(["train", "entity_gym.examples:Xor", "--steps", "512", "--num-envs", "8", "--out", str(tmp_path),
                 "--eval-episodes", "16", "--quiet", "--set", "threads=1", "--set", "ppo.minibatch_size=64"])
    out = capsys.readouterr().out
    assert code == 0 and "trained entity_gym.examples:Xor" in out and (tmp_path / "agent.safetensors").exists()


def test_process_workers_run_entity_gym_copies():
    game = get_game("entity_gym.examples:PickMatchingBalls")
    with gl.VecEnv(game, num_envs=4, seed=0, workers=2) as env, gl.VecEnv(game, num_envs=4, seed=0) as local:
        b, c = env.reset(), local.reset()
        for _ in range(5):
            assert np.array_equal(b.entities["Ball"], c.entities["Ball"])
            a = local.sample_actions()
            b, c = env.step(a), local.step(a)


# ====================================================================== entity-gym -> gymloop: bad input


def broken(observe, name: str = "Broken"):
    """An entity-gym environment whose observations ``observe(step)`` builds (they may break its spaces)."""

    class Env(eg.Environment):
        def obs_space(self):
            return eg.ObsSpace(entities={"Unit": eg.Entity(["x", "y"]), "Coin": eg.Entity([])}, global_features=["g"])

        def action_space(self):
            return {"move": eg.CategoricalActionSpace(["left", "right"]), "pick": eg.SelectEntityActionSpace()}

        def reset(self):
            self.t = 0
            return observe(self.t)

        def act(self, actions):
            self.t += 1
            return observe(self.t)

    Env.__name__ = Env.__qualname__ = name
    return Env


def good_obs(features=None, ids=None, actions=None, **kw):
    return eg.Observation(
        features=features if features is not None else {"Unit": [[0.0, 1.0], [2.0, 3.0]], "Coin": np.zeros((2, 0), np.float32)},
        ids=ids if ids is not None else {"Unit": ["u1", "u2"], "Coin": ["c1", "c2"]},
        actions=actions if actions is not None else {
            "move": eg.CategoricalActionMask(actor_ids=["u1"]),
            "pick": eg.SelectEntityActionMask(actor_ids=["u2"], actee_types=["Coin"]),
        },
        **{"global_features": [0.5], "done": False, "reward": 0.0, **kw},
    )


BAD = {
    "unknown-type": (lambda: good_obs(features={"Unit": [[0.0, 1.0]], "Ghost": [[1.0]]}, ids={"Unit": ["u1"], "Ghost": ["g1"]}),
                     r"entity-gym environment Broken: the observation has entity type 'Ghost', which obs_space\(\) does not declare"),
    "feature-count": (lambda: good_obs(features={"Unit": np.zeros((2, 3), np.float32), "Coin": np.zeros((2, 0))}),
                      r"entity-gym environment Broken: entity type 'Unit', entity id 'u1': features of shape \(2, 3\), expected \(n, 2\): features \['x', 'y'\]"),
    "ragged-rows": (lambda: good_obs(features={"Unit": [[0.0, 1.0], [2.0]], "Coin": [[], []]}),
                    r"entity-gym environment Broken: entity type 'Unit', entity id 'u2': 1 features, expected 2: features \['x', 'y'\]"),
    "featureless-with-features": (lambda: good_obs(features={"Unit": [[0.0, 1.0], [2.0, 3.0]], "Coin": [[1.0], [2.0]]}),
                                  r"entity-gym environment Broken: entity type 'Coin', entity id 'c1': 1 features, expected 0: features \[\]"),
    "actor-id": (lambda: good_obs(actions={"move": eg.CategoricalActionMask(actor_ids=["u9"]),
                                           "pick": eg.SelectEntityActionMask(actor_ids=["u2"])}),
                 r"entity-gym environment Broken: action 'move' names actor id 'u9', which no visible entity has"),
    "actee-id": (lambda: good_obs(actions={"move": eg.CategoricalActionMask(actor_ids=["u1"]),
                                           "pick": eg.SelectEntityActionMask(actor_ids=["u2"], actee_ids=["c1", "c7"])}),
                 r"entity-gym environment Broken: action 'pick' names actee id 'c7', which no visible entity has"),
    "ids-length": (lambda: good_obs(ids={"Unit": ["u1", "u2", "u3"], "Coin": ["c1", "c2"]}),
                   r"entity-gym environment Broken: entity type 'Unit' has 2 rows of features but 3 ids \['u1', 'u2', 'u3'\]"),
    "duplicate-id": (lambda: good_obs(ids={"Unit": ["u1", "u2"], "Coin": ["c1", "u1"]}),
                     r"entity-gym environment Broken: entity type 'Coin': id 'u1' is given to two entities"),
    "unknown-action": (lambda: good_obs(actions={"jump": eg.CategoricalActionMask(actor_ids=["u1"])}),
                       r"entity-gym environment Broken: the observation asks for action 'jump', which action_space\(\) does not declare"),
    "unknown-actor-type": (lambda: good_obs(actions={"move": eg.CategoricalActionMask(actor_types=["Tank"]),
                                                     "pick": eg.SelectEntityActionMask(actor_ids=["u2"])}),
                           r"entity-gym environment Broken: action 'move' names actor type 'Tank', which obs_space\(\) does not declare"),
    "hidden-actor": (lambda: good_obs(visible={"Unit": [False, True]}),
                     r"entity-gym environment Broken: action 'move' names actor id 'u1', which no visible entity has \(types with hidden entities: \['Unit'\]\)"),
    "visible-length": (lambda: good_obs(visible={"Coin": [True]}),
                       r"entity-gym environment Broken: entity type 'Coin': visible has 1 entries for 2 entities"),
    "ids-of-unknown-type": (lambda: good_obs(ids={"Unit": ["u1", "u2"], "Coin": ["c1", "c2"], "Ghost": ["g1"]}),
                            r"entity-gym environment Broken: the observation has entity type 'Ghost', which obs_space\(\) does not declare"),
    "not-rows": (lambda: good_obs(features={"Unit": [0.0, 1.0], "Coin": [[], []]}),
                 r"entity-gym environment Broken: entity type 'Unit', entity id 'u1': 0.0, not a row of numbers, expected 2"),
    "global-count": (lambda: good_obs(global_features=[0.5, 1.5]),
                     r"entity-gym environment Broken: the observation has 2 global features, expected 1: \['g'\]"),
    "not-an-observation": (lambda: {"Unit": [[0.0, 1.0]]},
                           r"entity-gym environment Broken: reset/act returned dict, expected an entity_gym Observation"),
    "mask-class": (lambda: good_obs(actions={"move": eg.SelectEntityActionMask(actor_ids=["u1"]),
                                             "pick": eg.SelectEntityActionMask(actor_ids=["u2"])}),
                   r"entity-gym environment Broken: action 'move' is a CategoricalActionSpace: its mask must be a "
                   r"CategoricalActionMask, got SelectEntityActionMask"),
    "mask-none": (lambda: good_obs(actions={"move": None}), r"action 'move' is a CategoricalActionSpace: .* got NoneType"),
    "actee-without-id": (lambda: good_obs(ids={"Unit": ["u1", "u2"]}),
                         r"entity-gym environment Broken: action 'pick' may select entities of type 'Coin', which have no ids"),
    "repeated-actor-id": (lambda: good_obs(actions={"move": eg.CategoricalActionMask(actor_ids=["u1", "u1"])}),
                          r"entity-gym environment Broken: action 'move' names actor id 'u1' twice"),
    "ids-without-features": (lambda: good_obs(features={"Unit": [[0.0, 1.0], [2.0, 3.0]]}),
                             r"entity-gym environment Broken: entity type 'Coin' has ids \['c1', 'c2'\] but no features"),
    "visible-unknown-type": (lambda: good_obs(visible={"Ghost": [True]}),
                             r"entity-gym environment Broken: visible names entity type 'Ghost', which obs_space\(\) does not declare"),
    "unhashable-id": (lambda: good_obs(ids={"Unit": [["u1"], "u2"], "Coin": ["c1", "c2"]}),
                      r"entity-gym environment Broken: entity type 'Unit': id \['u1'\] is a list; ids must be hashable"),
    "features-not-dict": (lambda: good_obs(features=[[0.0, 1.0]]),
                          r"entity-gym environment Broken: Observation.features is list, expected a dict"),
    "global-scalar": (lambda: good_obs(global_features=0.5),
                      r"entity-gym environment Broken: global_features is 0.5, expected a list of 1 numbers \['g'\]"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_an_environment_that_breaks_its_own_spaces_gets_a_named_error(case):
    make, match = BAD[case]
    with gl.VecEnv(from_entity_gym(broken(lambda t: make())), num_envs=2, seed=0) as env:
        with pytest.raises(gl.GymloopError, match=match) as info:
            env.reset()
    assert isinstance(info.value, gl.GameError) and isinstance(info.value.__cause__, gl.InvalidObservationError)
    assert info.value.env_index == 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(reward=float("nan")), r"environment copy 0 raised InvalidObservationError: the reward is nan; rewards must be finite"),
        (dict(reward=None), r"the reward is None \(NoneType\); a reward must be a real number"),
        (dict(reward="1.5"), r"the reward is '1.5' \(str\); a reward must be a real number"),
        (dict(done="False"), r"entity-gym environment Broken: done is 'False' \(str\); it must be True or False"),
        (dict(done=True, metrics={"score": "high"}), r"metric 'score' is 'high' \(str\); metrics must be numbers"),
    ],
    ids=["nan-reward", "none-reward", "str-reward", "str-done", "str-metric"],
)
def test_a_bad_reward_end_or_metric_is_named_with_the_copys_seed(kw, match):
    env = gl.VecEnv(from_entity_gym(broken(lambda t: good_obs() if t < 2 else good_obs(**kw))), num_envs=2, seed=0)
    with env:
        env.reset()
        env.step(env.sample_actions())
        with pytest.raises(gl.GameError, match=match) as info:
            env.step(env.sample_actions())
    assert info.value.env_index == 0 and isinstance(info.value.__cause__, gl.InvalidObservationError)


def test_a_duplicate_id_is_named_when_actors_are_given_by_type():
    # the actors' ids reach act() (the action names them by id): two entities with one id would be ambiguous
    obs = good_obs(ids={"Unit": ["u1", "u1"], "Coin": ["c1", "c2"]}, actions={"move": eg.CategoricalActionMask(actor_types=["Unit"])})
    with gl.VecEnv(from_entity_gym(broken(lambda t: obs)), num_envs=2, seed=0) as env:
        env.reset()
        with pytest.raises(gl.GameError, match=r"entity-gym environment Broken: entity type 'Unit': id 'u1' is given to two entities"):
            env.step(env.sample_actions())


@pytest.mark.parametrize(
    "make, match",
    [
        # 3 actors, 2 labels, the mask given transposed: reshaped, actor 0 could take the label it may not
        (lambda: good_obs(features={"Unit": [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], "Coin": np.zeros((2, 0))},
                          ids={"Unit": ["u1", "u2", "u3"], "Coin": ["c1", "c2"]},
                          actions={"move": eg.CategoricalActionMask(actor_ids=["u1", "u2", "u3"],
                                                                    mask=np.array([[True, False], [True, True], [True, True]]).T)}),
         r"environment copy 0: the mask of action type 'move' has shape \(2, 3\), expected \(3, 2\)"),
        (lambda: good_obs(actions={"move": eg.CategoricalActionMask(actor_ids=["u1"], mask=[["False", "True"]])}),
         r"the mask of action type 'move' has <U5 entries; a mask holds booleans"),
        (lambda: good_obs(global_features=[float("nan")]), r"environment copy 0: global feature 'g' is nan; features must be finite"),
        (lambda: good_obs(features={"Unit": np.array([["a", "b"], ["c", "d"]]), "Coin": np.zeros((2, 0))}),
         r"environment copy 0: entity type 'Unit' has rows that are not 2 numbers each \(an array of <U1"),
    ],
    ids=["transposed-mask", "string-mask", "nan-global", "string-rows"],
)
def test_masks_globals_and_rows_that_break_the_batch_are_named(make, match):
    with gl.VecEnv(from_entity_gym(broken(lambda t: make())), num_envs=2, seed=0) as env:
        with pytest.raises(gl.InvalidObservationError, match=match):
            env.reset()


@pytest.mark.parametrize("case", ["unknown-type", "feature-count", "actor-id"])
def test_breaking_the_spaces_later_in_an_episode_names_the_copy_and_seed(case):
    make, match = BAD[case]
    env = gl.VecEnv(from_entity_gym(broken(lambda t: good_obs() if t < 2 else make())), num_envs=3, seed=0)
    with env:
        env.reset()
        env.step(env.sample_actions())
        with pytest.raises(gl.GameError, match=match + r"[\s\S]*\(seed \d+\)") as info:
            env.step(env.sample_actions())
    assert info.value.env_index == 0 and isinstance(info.value.__cause__, gl.InvalidObservationError)


def test_a_bad_environment_raises_invalid_observation_error_directly():
    env = EntityGymEnv(broken(lambda t: BAD["actor-id"][0](), name="Direct"))
    with pytest.raises(gl.InvalidObservationError, match=r"entity-gym environment Direct: action 'move' names actor id 'u9'"):
        env.reset(0)


def test_an_unsupported_action_space_is_a_schema_error():
    class Odd(eg.Environment):
        def obs_space(self):
            return eg.ObsSpace(entities={"Unit": eg.Entity(["x"])})

        def action_space(self):
            return {"aim": object()}

        def reset(self):  # pragma: no cover - never reached
            raise AssertionError

        def act(self, actions):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(gl.SchemaError, match=r"Odd: action 'aim' has space object; supported: CategoricalActionSpace"):
        EntityGymEnv(Odd)


# ====================================================================== entity-gym -> gymloop: round trip of ids (Hypothesis)

ID = st.one_of(st.integers(-5, 50), st.text("abc", min_size=1, max_size=3), st.tuples(st.sampled_from("AB"), st.integers(0, 9)))


@st.composite
def observations(draw):
    """An entity-gym observation of ``Unit`` (2 features) and ``Coin`` (none) entities, some with ids, some hidden."""
    n = {t: draw(st.integers(0, 5)) for t in ("Unit", "Coin")}
    ids_all = draw(st.lists(ID, min_size=sum(n.values()), max_size=sum(n.values()), unique=True))
    ids = {"Unit": ids_all[: n["Unit"]], "Coin": ids_all[n["Unit"] :]}
    with_ids = {t: draw(st.booleans()) for t in ids}
    visible = {t: draw(st.lists(st.booleans(), min_size=n[t], max_size=n[t])) for t in ids if draw(st.booleans())}
    units = np.asarray(draw(st.lists(st.tuples(st.floats(-9, 9, width=32), st.floats(-9, 9, width=32)), min_size=n["Unit"],
                                     max_size=n["Unit"])), dtype=np.float32).reshape(n["Unit"], 2)
    as_array = draw(st.booleans())
    features = {"Unit": units if as_array else units.tolist(), "Coin": np.zeros((n["Coin"], 0), np.float32) if as_array else [[]] * n["Coin"]}
    seen = [(t, i) for t in ids if with_ids[t] for i in range(n[t]) if visible.get(t, [True] * n[t])[i]]
    if draw(st.booleans()):  # visibility as boolean arrays (entity-gym's annotation) rather than lists
        visible = {t: np.asarray(v, dtype=bool) for t, v in visible.items()}
    return features, {t: v for t, v in ids.items() if with_ids[t]}, visible, seen


@given(observations(), st.data())
@settings(max_examples=60)
def test_ids_round_trip_actors_and_actees(case, data):
    features, ids, visible, seen = case
    actions: dict = {}
    if seen:
        actor = data.draw(st.sampled_from(seen))
        actees = data.draw(st.lists(st.sampled_from(seen), min_size=1, unique=True))
        actions = {"move": eg.CategoricalActionMask(actor_ids=[ids[actor[0]][actor[1]]]),
                   "pick": eg.SelectEntityActionMask(actor_ids=[ids[actor[0]][actor[1]]], actee_ids=[ids[t][i] for t, i in actees])}
    log: list = []
    Env = broken(lambda t: eg.Observation(features=features, ids=ids, visible=visible, actions=actions, done=False, reward=0.0, global_features=[0.0]))
    env = EntityGymEnv(Env)
    act = env.env.act
    env.env.act = lambda a: (log.append(a), act(a))[1]
    e = env.reset(0)
    # rows: the visible entities of each type, in order
    kept = {t: [i for i in range(len(features[t])) if list(visible.get(t, [True] * len(features[t])))[i]] for t in ("Unit", "Coin")}
    for t in kept:
        assert len(e.entities[t]) == len(kept[t])
    assert np.array_equal(np.asarray(e.entities["Unit"]).reshape(-1, 2), np.asarray(features["Unit"], np.float32).reshape(-1, 2)[kept["Unit"]])
    row_of = {}  # (type, raw row) -> entity index in the gymloop observation
    for (t, rows), off in zip(kept.items(), (0, len(kept["Unit"]))):
        for j, i in enumerate(rows):
            row_of[(t, i)] = off + j
    if not seen:
        assert dict(e.actors) == {}
        return
    assert list(e.actors["move"]) == [row_of[actor]] and list(e.actors["pick"]) == [row_of[actor]]
    total = sum(len(r) for r in kept.values())
    mask = np.asarray(e.masks["pick"]) if "pick" in e.masks else np.ones(total, dtype=bool)  # no mask: every entity
    assert mask.shape == (total,) and sorted(np.flatnonzero(mask).tolist()) == sorted(row_of[a] for a in actees)
    chosen = data.draw(st.sampled_from(actees))
    env.act({"move": np.array([1]), "pick": np.array([row_of[chosen]])})
    sent = log[-1]
    assert list(sent["pick"].actees) == [ids[chosen[0]][chosen[1]]]
    assert list(sent["pick"].actors) == [ids[actor[0]][actor[1]]] == list(sent["move"].actors)
    assert list(sent["move"].indices) == [1] and sent["move"].labels == ["right"]


# ====================================================================== gymloop -> entity-gym


@dataclass
class Picker:
    pass


@dataclass
class Item:
    value: float
    weight: float


@dataclass
class Wall:
    pass


class Step(Enum):
    LEFT = 0
    RIGHT = 1
    STAY = 2


@gl.global_decision
class Mode(Enum):
    CALM = 0
    WILD = 1


Pick = gl.SelectEntity("Pick", among=Item)


@dataclass
class Status:
    turn: float
    lives: float


def make_picker_game(n_items=(1, 5), walls=(0, 3), masked=False, pickers=1, same_masks=True, episode=4):
    """A game with a featureless actor type, select-entity over items (optionally masked), walls, a
    categorical and a global decision; it records what it receives in ``log``."""
    log: list = []

    @gl.game(entities=[Picker, Item, Wall], actions=[Pick, Step, Mode], globals=Status)
    def picker(agent, seed):
        rng = random.Random(seed)
        while True:
            for turn in range(episode):
                items = [Item(round(rng.random(), 3), float(i)) for i in range(rng.randint(*n_items))]
                ws = [Wall() for _ in range(rng.randint(*walls))]
                actors = [Picker() for _ in range(pickers)]
                masks = {}
                if masked:
                    masks = {Pick: [[it for k, it in enumerate(items) if k % 2 == (0 if same_masks else a % 2) or len(items) == 1]
                                    for a in range(pickers)]}
                obs = gl.Obs(score=0).globals(Status(turn, 3.0)).entities(items).entities(ws).actors(actors, masks=masks).mask(Mode, [Mode.WILD])
                mode, picks, steps = agent.act(obs, Mode, Pick, Step)
                log.append((items, picks, steps, mode))
            agent.game_over(gl.Obs(score=sum(p.value for p in picks)).metric("picked", float(len(picks))))

    return picker, log


def test_spaces_map_to_entity_gym_spaces():
    game, _ = make_picker_game()
    env = GymloopVecEnv(game, 2)
    obs, acts = env.obs_space(), env.action_space()
    assert obs == eg.ObsSpace(global_features=["turn", "lives"],
                              entities={"Item": eg.Entity(["value", "weight"]), "Picker": eg.Entity([]), "Wall": eg.Entity([])})
    assert acts == {"Mode": eg.GlobalCategoricalActionSpace(["CALM", "WILD"]), "Pick": eg.SelectEntityActionSpace(),
                    "Step": eg.CategoricalActionSpace(["LEFT", "RIGHT", "STAY"])}
    assert entity_gym_spaces(env.spaces) == (obs, acts)
    assert len(env) == 2 and env.has_global_entity()
    env.close()


def test_vec_obs_is_the_batch_and_actions_come_back():
    game, log = make_picker_game(masked=True, pickers=2)
    env = GymloopVecEnv(game, 3, seed=1)
    rng = np.random.default_rng(0)
    obs = env.reset(env.obs_space())
    for _ in range(12):
        b = env.env._batch
        check_vec_obs(obs, env)
        counts = sum(b.counts[t] for t in ("Item", "Picker", "Wall"))
        for s in range(3):
            off = np.cumsum(b.counts["Item"]) - b.counts["Item"]
            assert np.array_equal(rows_of(obs, "Item", s), b.entities["Item"][off[s] : off[s] + b.counts["Item"][s]])
            assert rows_of(obs, "Picker", s).shape == (2, 0)
            assert rows_of(obs, "__global__", s).tolist() == [b.globals[s].tolist()]
            assert obs.action_masks["Mode"].actors[s].as_array().tolist() == [[counts[s]]]  # the "__global__" entity, last
        assert obs.action_masks["Mode"].mask.as_array().tolist() == [[False, True]] * 3
        assert obs.action_masks["Step"].mask is None  # every choice legal
        assert np.array_equal(obs.action_masks["Step"].actors.as_array().reshape(-1), b.actor_index["Step"])
        # the actees are the legal candidates (every other item), as entity indices
        sel = obs.action_masks["Pick"]
        for s in range(3):
            legal = [k for k in range(b.counts["Item"][s]) if k % 2 == 0 or b.counts["Item"][s] == 1]
            assert sel.actees[s].as_array().reshape(-1).tolist() == legal  # Item rows come first (types are name-sorted)
        actions = random_vec_actions(obs, env.action_space(), rng)
        chosen = actions["Pick"].as_array().reshape(-1)
        actees = [sel.actees[s].as_array().reshape(-1) for s in range(3)]
        before = len(log)
        obs = env.act(actions, env.obs_space())
        got = log[before:]
        for s, (items, picks, steps, mode) in enumerate(got):
            assert mode is Mode.WILD
            for a in range(2):  # actor a of slot s chose actee chosen[2s + a]: the item at that entity index
                assert picks[a] is items[actees[s][chosen[2 * s + a]]]
            assert [x.value for x in steps] == actions["Step"][s].as_array().reshape(-1).tolist()
    env.close()


def test_rewards_done_and_metrics():
    game, _ = make_picker_game(episode=2)
    env = GymloopVecEnv(game, 4, seed=0)
    obs = env.reset(env.obs_space())
    assert obs.reward.tolist() == [0.0] * 4 and not obs.done.any() and obs.metrics == {}
    obs = env.act(env.sample_actions(), env.obs_space())
    assert not obs.done.any()
    obs = env.act(env.sample_actions(), env.obs_space())
    assert obs.done.all() and (obs.reward > 0).all()
    b = env.env._batch
    assert obs.metrics["episode_return"].count == 4
    assert obs.metrics["episode_return"].sum == pytest.approx(float(b.reward.sum()))
    assert obs.metrics["episode_length"].min == obs.metrics["episode_length"].max == 2
    assert obs.metrics["picked"].mean == 1.0
    env.close()


def test_truncated_episodes_are_done():
    @dataclass
    class Clock:
        t: int

    def clock(agent, seed):
        t = 0
        while True:
            agent.act(gl.Obs(score=t).actor(Clock(t)), Step)
            t += 1
            if t == 3:
                agent.game_over(gl.Obs(score=t).actor(Clock(t)), truncated=True)
                t = 0

    env = GymloopVecEnv(clock, 2)
    obs = env.reset()
    done = []
    for _ in range(6):
        obs = env.act(env.sample_actions())
        done.append(obs.done.tolist())
    assert done == [[False] * 2, [False] * 2, [True] * 2] * 2
    env.close()


def test_different_select_masks_in_one_observation_are_refused():
    game, _ = make_picker_game(n_items=(3, 5), masked=True, pickers=2, same_masks=False)
    with pytest.raises(gl.InvalidObservationError, match=r"picker: slot 0 has actors of select-entity action 'Pick' with different masks"):
        env = GymloopVecEnv(game, 2)
        env.reset()


def test_the_observation_filter_subsets_reorders_and_drops():
    game, log = make_picker_game(walls=(1, 3))
    env = GymloopVecEnv(game, 2, seed=0)
    flt = eg.ObsSpace(global_features=["lives"], entities={"Item": eg.Entity(["weight", "value"]), "Picker": eg.Entity([])})
    obs = env.reset(flt)
    b = env.env._batch
    assert set(obs.features) == {"Item", "Picker", "__global__"}
    assert np.array_equal(obs.features["Item"].as_array(), b.entities["Item"][:, ::-1])
    assert obs.features["__global__"].as_array().reshape(-1).tolist() == [3.0, 3.0]
    # with Wall gone the entity indices are renumbered: Item rows, then Picker, then "__global__"
    for s in range(2):
        n_items = int(b.counts["Item"][s])
        assert obs.action_masks["Step"].actors[s].as_array().tolist() == [[n_items]]
        assert obs.action_masks["Mode"].actors[s].as_array().tolist() == [[n_items + 1]]
        assert obs.action_masks["Pick"].actees[s].as_array().reshape(-1).tolist() == list(range(n_items))
    before = len(log)
    actions = env.sample_actions()
    obs = env.act(actions, flt)
    for s, (items, picks, _, _) in enumerate(log[before:]):
        assert picks[0] is items[actions["Pick"][s].as_array()[0, 0]]
    with pytest.raises(gl.ConfigError, match=r"the obs_space filter names entity type\(s\) \['Tank'\]"):
        env.reset(eg.ObsSpace(entities={"Tank": eg.Entity([])}))
    with pytest.raises(gl.ConfigError, match=r"the obs_space filter asks entity type 'Item' for feature\(s\) \['colour'\]"):
        env.reset(eg.ObsSpace(entities={"Item": eg.Entity(["colour"])}))
    with pytest.raises(gl.ConfigError, match=r"leaves out the entity type of an actor of action 'Pick'"):
        env.reset(eg.ObsSpace(entities={"Item": eg.Entity(["value"])}))
    with pytest.raises(gl.EnvStateError, match=r"act\(\) before reset\(\)"):  # nothing half-converted to act on
        env.act(actions, flt)
    env.reset(flt)
    assert set(env.act(env.sample_actions(), flt).features) == {"Item", "Picker", "__global__"}
    env.close()


def test_bad_actions_are_invalid_action_errors():
    game, _ = make_picker_game(n_items=(2, 2), walls=(0, 0))
    env = GymloopVecEnv(game, 2)
    with pytest.raises(gl.EnvStateError, match=r"act\(\) before reset\(\)"):
        env.act({})
    env.reset()
    good = env.sample_actions()

    def with_(name, rows, lengths):
        return {**good, name: RaggedBufferI64.from_flattened(np.asarray(rows, dtype=np.int64).reshape(-1, 1), np.asarray(lengths, dtype=np.int64))}

    with pytest.raises(gl.InvalidActionError, match=r"actions for 'Step' must have one row per actor, per environment \[1, 1\], got \[2, 0\]"):
        env.act(with_("Step", [0, 1], [2, 0]))
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Pick', actor 1 \(environment 1\): actee 2 is out of range \[0, 2\)"):
        env.act(with_("Pick", [0, 2], [1, 1]))
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Mode', actor 0 \(env 0, slot 0\): action 0 is masked out"):
        env.act(with_("Mode", [0, 1], [1, 1]))
    with pytest.raises(gl.InvalidActionError, match=r"no actions for action type 'Step', which has 2 actor\(s\)"):
        env.act({k: v for k, v in good.items() if k != "Step"})
    with pytest.raises(gl.InvalidActionError, match=r"unknown action type\(s\) \['Jump'\]"):
        env.act({**good, "Jump": good["Step"]})
    two_columns = RaggedBufferI64.from_flattened(np.zeros((2, 2), dtype=np.int64), np.asarray([1, 1], dtype=np.int64))
    with pytest.raises(gl.InvalidActionError, match=r"actions for 'Step' have 2 columns; expected 1 \(one index per actor\)"):
        env.act({**good, "Step": two_columns})
    # plain lists: one per environment (counted per environment), or flat
    with pytest.raises(gl.InvalidActionError, match=r"actions for 'Step' must have one row per actor, per environment \[1, 1\], got \[2, 0\]"):
        env.act({**good, "Step": [[0, 1], []]})
    with pytest.raises(gl.InvalidActionError, match=r"actions for 'Step' given per environment must be 2 lists \(one per environment\)"):
        env.act({**good, "Step": [[0], 1]})
    with pytest.raises(gl.InvalidActionError, match=r"action 18446744073709551615 for 'Step' is out of range \(beyond int64\)"):
        env.act({**good, "Step": np.array([0, 2**64 - 1], dtype=np.uint64)})
    step = good["Step"].as_array().reshape(-1).tolist()
    env.act({**good, "Step": [[step[0]], [step[1]]]})
    env.act({**good, "Step": step})
    env.close()
    env.close()


def test_a_global_select_entity_is_refused_with_the_fix():
    """entity-gym cannot express a select-entity without an actor entity (issue 34 item 6): the error says what works."""
    from support.train_games import triage

    with pytest.raises(gl.ConfigError, match=r"action type 'Treat' is a global select-entity .* entity-gym cannot express.*"
                       r"obs.actor\(\.\.\.\), and Treat = gl.SelectEntity\('Treat', among=Patient\) without gl.global_decision"):
        GymloopVecEnv(triage, 2)


def test_multi_agent_games_are_one_environment_per_agent():
    from gymloop.games.duel import duel

    env = GymloopVecEnv(duel, 3, agents_per_game=2)
    assert len(env) == 6
    obs = env.reset(env.obs_space())
    for _ in range(30):
        check_vec_obs(obs, env)
        obs = env.act(env.sample_actions(), env.obs_space())
    env.close()


def test_a_gymloop_environment_class_runs_too():
    class Coin(gl.Environment):
        def obs_space(self):
            return gl.ObsSpace(entities={"Player": ("x",)})

        def action_space(self):
            return {"Guess": gl.ActionDesc("Guess", "categorical", ("HEADS", "TAILS"))}

        def reset(self, seed):
            return gl.EnvObservation(entities={"Player": [[0.0]]}, actors={"Guess": [0]})

        def act(self, actions):
            return gl.EnvObservation(entities={"Player": [[0.0]]}, actors={"Guess": [0]}, reward=float(actions["Guess"][0]), terminated=True)

    env = GymloopVecEnv(Coin, 2)
    env.reset()
    obs = env.act({"Guess": RaggedBufferI64.from_flattened(np.array([[1], [0]]), np.array([1, 1]))})
    assert obs.reward.tolist() == [1.0, 0.0] and obs.done.tolist() == [True, True]
    env.close()


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 4)), min_size=1, max_size=4), st.integers(0, 2**31))
@settings(max_examples=25)
def test_random_entity_counts_round_trip(shape, seed):
    """Per copy: a random number of items and walls; features, actees and the chosen items survive the trip."""
    log: list = []

    @gl.game(entities=[Picker, Item, Wall], actions=[Pick])
    def game(agent, s):
        rng = random.Random(s)
        k = s % len(shape)
        while True:
            n_items, n_walls = shape[k]  # (per copy: the seed picks one of the drawn shapes)
            items = [Item(rng.random(), float(i)) for i in range(n_items)]
            pick = agent.act(gl.Obs().entities([Wall() for _ in range(n_walls)]).entities(items).actor(Picker()), Pick)
            log.append((k, items, pick))
            agent.game_over(gl.Obs(score=1.0))

    env = GymloopVecEnv(game, len(shape), seed=seed)
    obs = env.reset()
    check_vec_obs(obs, env)
    b = env.env._batch
    assert obs.features["Item"].size1().tolist() == b.counts["Item"].tolist()
    assert obs.features["Wall"].size1().tolist() == b.counts["Wall"].tolist()
    assert np.array_equal(obs.features["Item"].as_array(), b.entities["Item"])
    actions = random_vec_actions(obs, env.action_space(), np.random.default_rng(seed))
    log.clear()
    env.act(actions)
    assert len(log) == len(shape)
    for s, (_, items, pick) in enumerate(log):  # the games answer in slot order
        assert [it.value for it in items] == pytest.approx(rows_of(obs, "Item", s)[:, 0].tolist(), abs=1e-6)
        q = int(actions["Pick"][s].as_array()[0, 0])
        e = int(obs.action_masks["Pick"].actees[s].as_array()[q, 0])  # entity index: Item rows come first
        assert pick is items[e]
    env.close()


# ====================================================================== entity-gym -> gymloop -> entity-gym == EnvList

ROUND_TRIP = [n for n in ENV_REGISTRY if n not in ("RockPaperScissors", "FloorIsLava")]
# RockPaperScissors: gymloop removes hidden entities, entity-gym keeps them with visible=False;
# FloorIsLava: entity-gym's own actor index is a Lava tile (its id_to_index skips types without ids).


class Recording(eg.Environment):
    """Delegates to an entity-gym environment and keeps every observation it returns."""

    def __init__(self, inner):
        self.inner, self.seen = inner, []

    def obs_space(self):
        return self.inner.obs_space()

    def action_space(self):
        return self.inner.action_space()

    def reset(self):
        self.seen.append(self.inner.reset())
        return self.seen[-1]

    def act(self, actions):
        self.seen.append(self.inner.act(actions))
        return self.seen[-1]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_an_entity_gym_env_through_gymloop_is_what_env_list_makes_of_it(name):
    made: list[Recording] = []

    def make():
        made.append(Recording(ENV_REGISTRY[name]()))
        return made[-1]

    env = GymloopVecEnv(from_entity_gym(make), 4, seed=0)
    space, acts = env.obs_space(), env.action_space()
    inner = ENV_REGISTRY[name]()
    assert space.entities == inner.obs_space().entities and space.global_features == inner.obs_space().global_features
    assert acts == inner.action_space()
    rng = np.random.default_rng(0)
    obs = env.reset(space)
    for step in range(40):
        # what EnvList would batch: the latest observation, with the reward and done of the step that ended an episode
        latest = []
        for r in made:
            o = r.seen[-1]
            if step and r.seen[-2].done and len(r.seen) >= 2:
                o = eg.Observation(features=o.features, ids=o.ids, actions=o.actions, done=True, reward=r.seen[-2].reward,
                                   global_features=o.global_features, visible=o.visible)
            latest.append(o)
        theirs = batch_obs(latest, space, acts)
        check_vec_obs(obs, env)
        for t in space.entities:
            assert np.array_equal(obs.features[t].as_array(), theirs.features[t].as_array()), t
            assert obs.features[t].size1().tolist() == theirs.features[t].size1().tolist(), t
        if "__global__" in theirs.features:
            assert np.array_equal(obs.features["__global__"].as_array(), theirs.features["__global__"].as_array())
        for a, m in theirs.action_masks.items():
            ours = obs.action_masks[a]
            assert ours.actors.size1().tolist() == m.actors.size1().tolist(), a
            assert np.array_equal(ours.actors.as_array(), m.actors.as_array()), a
            if isinstance(m, eg.VecSelectEntityActionMask):
                assert np.array_equal(ours.actees.as_array(), m.actees.as_array()) and ours.actees.size1().tolist() == m.actees.size1().tolist()
            else:
                mine = np.ones((ours.actors.items(), len(acts[a].index_to_label)), bool) if ours.mask is None else ours.mask.as_array()
                if m.mask is not None:
                    assert np.array_equal(mine, m.mask.as_array()), a
                else:
                    assert mine.all()
        if step:
            assert np.allclose(obs.reward, theirs.reward) and np.array_equal(obs.done, theirs.done)
        for r in made:
            del r.seen[:-1]
        obs = env.act(random_vec_actions(obs, acts, rng), space)
    env.close()


# ====================================================================== enn-trainer trains gymloop games


def _enn_train(game, steps: int, tmp_path, **rollout):
    pytest.importorskip("enn_trainer")
    import torch
    from enn_trainer.config import RolloutConfig
    from enn_trainer.train import EnvConfig, OptimizerConfig, PPOConfig, State, TrainConfig, init_train_state, train
    from hyperstate import StateManager
    from rogue_net.rogue_net import RogueNetConfig

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = TrainConfig(
            total_timesteps=steps, cuda=False, seed=1, data_dir=str(tmp_path), env=EnvConfig(id=game.__name__, validate=False),
            rollout=RolloutConfig(steps=8, num_envs=32, processes=1, **rollout), net=RogueNetConfig(n_layer=1, d_model=16),
            optim=OptimizerConfig(lr=0.01, bs=64, update_epochs=2), ppo=PPOConfig(ent_coef=0.01, gamma=0.5, anneal_entropy=False),
        )
        sm = StateManager(TrainConfig, State, init_train_state, None)
        sm._config = cfg
        mean_reward = train(sm, env_factory(game, seed=0))
        params = [p.detach() for p in sm.state.agent.parameters()]
    finally:
        torch.set_num_threads(threads)
    assert all(torch.isfinite(p).all() for p in params)
    return mean_reward


def _tests_games():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from support import train_games

    return train_games


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # tensorboard and hyperstate on numpy 1.26
@pytest.mark.parametrize("game, random_level, target", [("masked", 0.47, 0.9), ("select", 0.24, 0.8), ("global_and_actor", 0.79, 1.6)])
def test_enn_trainer_trains_gymloop_games(game, random_level, target, tmp_path, capsys):
    """PPO from enn-trainer, unchanged, on gymloop games: a masked categorical, select-entity, a global decision."""
    reward = _enn_train(getattr(_tests_games(), game), 4096, tmp_path)
    assert math.isfinite(reward)
    assert reward >= target > random_level, (game, reward)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_enn_trainer_env_factory_runs_worker_processes(tmp_path, capsys):
    reward = _enn_train(_tests_games().bandit, 512, tmp_path)
    assert math.isfinite(reward)
    make = env_factory(_tests_games().bandit, seed=3)
    env = make(None, 4, 2, 8)
    assert env.env.workers == 2 and env.env.seed == 11 and len(env) == 4
    env.reset(env.obs_space())
    check_vec_obs(env.act(env.sample_actions(), env.obs_space()), env)
    env.close()


def test_partial_and_function_factories():
    env = GymloopVecEnv(from_entity_gym(functools.partial(Count, masked_choices=3)), 2)
    obs = env.reset()
    assert obs.action_masks["count"].mask is None or obs.action_masks["count"].mask.as_array()[:, 3:].sum() == 0
    env.close()


@pytest.mark.parametrize("command", ["check", "run"])
def test_cli_commands_that_take_game_loops_refuse_an_entity_gym_class(command, capsys):
    from gymloop.cli import main

    assert main([command, "entity_gym.examples:Xor"]) == 2
    assert "is an environment class, not a game loop" in capsys.readouterr().err


def test_empty_ids_of_a_type_without_rows_are_fine():
    # a type with no entity this step may be left out of features while its (empty) id list stays
    obs = good_obs(features={"Unit": [[0.0, 1.0], [2.0, 3.0]]}, ids={"Unit": ["u1", "u2"], "Coin": []},
                   actions={"move": eg.CategoricalActionMask(actor_ids=["u1"])})
    with gl.VecEnv(from_entity_gym(broken(lambda t: obs)), num_envs=2, seed=0) as env:
        b = env.reset()
        assert b.counts["Coin"].tolist() == [0, 0] and b.counts["Unit"].tolist() == [2, 2]
        env.step(env.sample_actions())
