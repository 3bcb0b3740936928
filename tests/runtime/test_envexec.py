"""The low-level Environment executor: bad masks are clear errors naming the env copy and action type;
featureless entity types given as ``(n, 0)`` arrays, also in the observations of truncated episodes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gymloop as gl
from gymloop.runtime.seeding import derive_seed, seed_base, seed_of_run


def make(mask_move=None, mask_pick=None, pick_actors=(0,)):
    class Env(gl.Environment):
        def obs_space(self):
            return gl.ObsSpace(entities={"Unit": ("x",), "Coin": ("v",)})

        def action_space(self):
            return {
                "Move": gl.ActionDesc("Move", "categorical", ("L", "R", "S")),
                "Pick": gl.ActionDesc("Pick", "select_entity", (), ("Coin",)),
            }

        def reset(self, seed):
            return self._obs()

        def act(self, actions):
            return self._obs()

        def _obs(self):
            masks = {}
            if mask_move is not None:
                masks["Move"] = mask_move
            if mask_pick is not None:
                masks["Pick"] = mask_pick
            return gl.EnvObservation(entities={"Unit": [[0.0], [1.0]], "Coin": [[2.0], [3.0]]},
                                     actors={"Move": [0, 1], "Pick": list(pick_actors)}, masks=masks)

    return Env


def test_good_masks_reach_the_batch():
    with gl.VecEnv(make([[True, False, False], [False, True, True]], [False, True]), num_envs=2) as env:
        b = env.reset()
        assert b.masks["Move"].tolist() == [[True, False, False], [False, True, True]] * 2
        assert b.masks["Pick"].tolist() == [False, True] * 2


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(mask_move=[[True, False, False], [False, False, False]]),
         r"environment copy 0: action type 'Move', actor 1 has no legal choice \(its mask allows none\)"),
        (dict(mask_pick=[False, False]), r"environment copy 0: action type 'Pick', actor 0 has no legal candidate"),
        (dict(mask_move=[True, False]), r"environment copy 0: the mask of action type 'Move' has shape \(2,\), expected \(2, 3\) or 6 entries flat"),
        (dict(mask_pick=[[True]] * 3), r"the mask of action type 'Pick' has shape \(3, 1\), expected \(1, 2\) or 2 entries flat"),
        # the right number of entries in the wrong shape: reshaped, actor 0 would get choice 1, which it may not take
        (dict(mask_move=np.array([[True, False, False], [True, True, True]]).T),
         r"the mask of action type 'Move' has shape \(3, 2\), expected \(2, 3\)"),
        (dict(mask_move=[["True", "False", "False"], ["False", "True", "True"]]), r"'Move' has <U5 entries; a mask holds booleans"),
        (dict(mask_move=[[np.nan, 0.0, 1.0], [1.0, 1.0, 1.0]]), r"'Move' has values \[\[nan, 0.0, 1.0\].*; a mask holds booleans .* or 0/1"),
        (dict(mask_pick=[2, 1]), r"'Pick' has values \[2, 1\]; a mask holds booleans"),
        (dict(mask_move=[[True, False], [True]]), r"'Move' has not an array of booleans"),
    ],
    ids=["categorical-none-legal", "select-none-legal", "categorical-shape", "select-shape", "transposed", "strings", "nan",
         "not-0-1", "ragged"],
)
def test_bad_masks_name_the_env_copy_and_action_type(kw, match):
    with gl.VecEnv(make(**kw), num_envs=2) as env:
        with pytest.raises(gl.InvalidObservationError, match=match):
            env.reset()


def test_masks_of_0_and_1_and_flat_masks_are_read_as_booleans():
    with gl.VecEnv(make(np.array([[1, 0, 0], [0, 1, 1]], dtype=np.int8), np.array([0.0, 1.0])), num_envs=1) as env:
        b = env.reset()
        assert b.masks["Move"].tolist() == [[True, False, False], [False, True, True]]
        assert b.masks["Pick"].tolist() == [False, True]
    with gl.VecEnv(make([True, False, False, False, True, True], [[False, True]]), num_envs=1) as env:
        b = env.reset()  # flat (one actor's choices after the other), and (actors, candidates) for select-entity
        assert b.masks["Move"].tolist() == [[True, False, False], [False, True, True]]
        assert b.masks["Pick"].tolist() == [False, True]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["rows", "array", "none", "flat", "flat array", "ints", "tuples"]), st.integers(0, 2**31)),
                min_size=1, max_size=5))
def test_masks_given_in_any_form_by_each_copy_reach_the_batch_as_given(copies):
    """Copies with different numbers of actors give their masks as lists of rows, arrays, flat lists or arrays, 0/1 ints,
    tuples or not at all: the batch holds each copy's rows in order (the copies' list rows are converted together)."""
    expected = []

    def mask_of(k, form, seed):
        rng = np.random.default_rng(seed)
        m = rng.random((k, 3)) < 0.5
        m[:, rng.integers(0, 3)] = True  # (every actor has a legal choice)
        if form == "none":
            expected.extend([[True] * 3] * k)
            return None
        expected.extend(m.tolist())
        return {"rows": m.tolist(), "array": m, "flat": m.reshape(-1).tolist(), "flat array": m.reshape(-1), "ints": m.astype(int).tolist(),
                "tuples": [tuple(r) for r in m.tolist()]}[form]

    masks = [mask_of(k, form, seed) for k, form, seed in copies]
    counts = [k for k, _f, _s in copies]

    class Env(gl.Environment):
        made = 0

        def __init__(self):
            self.copy, Env.made = Env.made, Env.made + 1

        def obs_space(self):
            return gl.ObsSpace(entities={"Unit": ("x",)})

        def action_space(self):
            return {"Move": gl.ActionDesc("Move", "categorical", ("L", "R", "S"))}

        def reset(self, seed):
            k, m = counts[self.copy], masks[self.copy]
            return gl.EnvObservation(entities={"Unit": [[0.0]] * max(k, 1)}, actors={"Move": list(range(k))},
                                     masks={} if m is None else {"Move": m})

        def act(self, actions):
            return self.reset(0)

    with gl.VecEnv(Env, num_envs=len(copies)) as env:
        b = env.reset()
    assert b.masks["Move"].dtype == np.bool_ and b.masks["Move"].tolist() == expected


def test_sampled_actions_respect_the_masks():
    with gl.VecEnv(make([[False, False, True], [True, False, False]], [True, False]), num_envs=3, seed=1) as env:
        env.reset()
        for _ in range(5):
            a = env.sample_actions()
            assert a["Move"].tolist() == [2, 0] * 3 and a["Pick"].tolist() == [0] * 3
            env.step(a)


def test_a_select_entity_actor_without_candidates_is_named():
    """Copy 0 sees coins, copy 1 none: the empty candidate list comes after a full one."""

    class SomeCoins(make()):
        made = 0

        def __init__(self):
            self.copy, SomeCoins.made = SomeCoins.made, SomeCoins.made + 1

        def reset(self, seed):
            self.coins = [] if self.copy else [[2.0], [3.0]]
            return self._obs()

        def _obs(self):
            return gl.EnvObservation(entities={"Unit": [[0.0]], "Coin": self.coins}, actors={"Move": [0], "Pick": [0]})

    with gl.VecEnv(SomeCoins, num_envs=2) as env:
        with pytest.raises(gl.InvalidObservationError, match=r"environment copy 1: action type 'Pick', actor 0 has no legal candidate"):
            env.reset()


# ---------------------------------------------------------------------- entity types without features


def featureless(counts, as_array, truncate_at=None):
    """Copy ``i`` shows ``counts[i][t % len]`` featureless ``Marker`` rows at step ``t``, as ``(n, 0)``
    arrays (``as_array[i]``) or lists of empty rows; its episodes are truncated after ``truncate_at`` steps."""

    class Env(gl.Environment):
        made = 0

        def __init__(self):
            self.copy, Env.made = Env.made, Env.made + 1

        def obs_space(self):
            return gl.ObsSpace(entities={"Marker": (), "Unit": ("t",)})

        def action_space(self):
            return {"Move": gl.ActionDesc("Move", "categorical", ("L", "R"))}

        def reset(self, seed):
            self.t = 0
            return self._obs()

        def act(self, actions):
            self.t += 1
            return self._obs(truncated=self.t == truncate_at)

        def _obs(self, truncated=False):
            c = counts[self.copy]
            n = c[self.t % len(c)]
            markers = np.zeros((n, 0), dtype=np.float32) if as_array[self.copy] else [[] for _ in range(n)]
            return gl.EnvObservation(entities={"Marker": markers, "Unit": np.array([[self.t]], dtype=np.float32)},
                                     actors={"Move": [n]}, truncated=truncated)

    return Env


def expected(counts, t):
    return [c[t % len(c)] for c in counts]


def test_n_by_0_arrays_for_a_featureless_type():
    counts = [[2, 0, 1], [0, 3], [1]]
    with gl.VecEnv(featureless(counts, [True, True, False]), num_envs=3) as env:
        b = env.reset()
        for t in range(1, 6):
            assert b.counts["Marker"].tolist() == expected(counts, t - 1)
            assert b.entities["Marker"].shape == (sum(expected(counts, t - 1)), 0)
            assert b.actor_index["Move"].tolist() == expected(counts, t - 1)  # Unit comes after the markers
            b = env.step({"Move": np.zeros(3, dtype=np.int64)})


def test_n_by_0_arrays_on_the_truncation_path():
    counts = [[2, 1, 0], [0, 0, 0], [3]]
    with gl.VecEnv(featureless(counts, [True, True, True], truncate_at=2), num_envs=3) as env:
        env.reset()
        env.step({"Move": np.zeros(3, dtype=np.int64)})
        b = env.step({"Move": np.zeros(3, dtype=np.int64)})  # step 2: every copy truncated
        assert b.truncated.tolist() == [True] * 3 and b.final is not None
        f = b.final
        assert f.counts["Marker"].tolist() == [0, 0, 3]  # the truncated observations' markers (step 2)
        assert f.entities["Marker"].shape == (3, 0)
        assert f.counts["Unit"].tolist() == [1, 1, 1] and f.entities["Unit"][:, 0].tolist() == [2.0, 2.0, 2.0]
        assert b.counts["Marker"].tolist() == [2, 0, 3]  # the next episodes' first observations


@given(st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.booleans()), min_size=1, max_size=4),
       st.integers(1, 4))
@settings(max_examples=40)
def test_featureless_rows_any_counts_any_form(copies, truncate_at):
    counts = [c for c, _ in copies]
    with gl.VecEnv(featureless(counts, [a for _, a in copies], truncate_at=truncate_at), num_envs=len(copies)) as env:
        b = env.reset()
        for t in range(1, 2 * truncate_at + 1):
            b = env.step({"Move": np.zeros(len(copies), dtype=np.int64)})
            ended = t % truncate_at == 0
            assert b.truncated.tolist() == [ended] * len(copies)
            assert b.counts["Marker"].tolist() == expected(counts, t % truncate_at)  # (a new episode starts at 0)
            assert b.entities["Marker"].shape == (sum(b.counts["Marker"]), 0)
            if ended:
                assert b.final.counts["Marker"].tolist() == expected(counts, truncate_at)
                assert b.final.entities["Marker"].shape == (sum(expected(counts, truncate_at)), 0)


ROW_FORMS = {
    "lists": lambda a: a.tolist(),
    "float32": lambda a: a.astype(np.float32),
    "float64": lambda a: a,
    "int64": lambda a: a.round().astype(np.int64),
    "bool": lambda a: a > 0,
    "tuples": lambda a: [tuple(r) for r in a.tolist()],
}


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(sorted(ROW_FORMS)), st.integers(0, 2**31)), min_size=1, max_size=5))
@settings(max_examples=40, deadline=None)
def test_entity_rows_in_any_form_reach_the_batch_as_float32_rows_in_order(copies):
    """Copies give their rows as lists, tuples or arrays of any numeric dtype, mixed across copies: the batch holds
    each copy's rows in order, as float32 (arrays of one dtype are concatenated at once, the rest converted per copy)."""
    rows = [ROW_FORMS[form](np.random.default_rng(seed).normal(size=(n, 2)) * 3) for n, form, seed in copies]
    want = np.concatenate([np.asarray(r, dtype=np.float32).reshape(-1, 2) for r in rows])

    class Env(gl.Environment):
        made = 0

        def __init__(self):
            self.copy, Env.made = Env.made, Env.made + 1

        def obs_space(self):
            return gl.ObsSpace(entities={"Unit": ("x", "y"), "Hero": ()})

        def action_space(self):
            return {"Move": gl.ActionDesc("Move", "categorical", ("L", "R"))}

        def reset(self, seed):
            return gl.EnvObservation(entities={"Unit": rows[self.copy], "Hero": np.zeros((1, 0))}, actors={"Move": [len(rows[self.copy])]})

        def act(self, actions):
            return self.reset(0)

    with gl.VecEnv(Env, num_envs=len(copies)) as env:
        b = env.reset()
    assert b.entities["Unit"].dtype == np.float32 and b.entities["Unit"].tolist() == want.tolist()
    assert b.counts["Unit"].tolist() == [n for n, _f, _s in copies]


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 3)), r"environment copy 1: entity type 'Unit'"),
    (np.zeros(2), r"environment copy 1: entity type 'Unit'"),
    (np.array([["1", "x"]]), r"environment copy 1: entity type 'Unit' has rows that are not 2 numbers each"),
], ids=["three-columns", "flat", "strings"])
def test_array_rows_of_another_shape_or_type_among_good_ones_name_the_copy(bad, match):
    class Env(gl.Environment):
        made = 0

        def __init__(self):
            self.copy, Env.made = Env.made, Env.made + 1

        def obs_space(self):
            return gl.ObsSpace(entities={"Unit": ("x", "y")})

        def action_space(self):
            return {"Move": gl.ActionDesc("Move", "categorical", ("L", "R"))}

        def reset(self, seed):
            return gl.EnvObservation(entities={"Unit": bad if self.copy == 1 else np.ones((2, 2))}, actors={"Move": [0]})

        def act(self, actions):
            return self.reset(0)

    with gl.VecEnv(Env, num_envs=3) as env, pytest.raises(gl.InvalidObservationError, match=match):
        env.reset()


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**20), st.integers(0, 2**20), st.integers(0, 2**20))
def test_a_copys_seeds_from_its_base_are_derive_seed(seed, env, restart, generation):
    # the executor computes a copy's seed base once per generation and each restart's seed from it
    assert seed_of_run(seed_base(seed, env, generation), restart) == derive_seed(seed, env, restart, generation)
    assert 0 <= derive_seed(seed, env, restart, generation) < 2**32


def steps_then(**last):
    """An environment whose second step returns an observation with ``last``'s fields (and the first one's otherwise)."""

    class Env(gl.Environment):
        def obs_space(self):
            return gl.ObsSpace(entities={"Unit": ("x", "y")}, globals=("g",))

        def action_space(self):
            return {"Move": gl.ActionDesc("Move", "categorical", ("L", "R"))}

        def reset(self, seed):
            self.t = 0
            return gl.EnvObservation(entities={"Unit": [[0.0, 1.0]]}, actors={"Move": [0]}, globals=[0.5])

        def act(self, actions):
            self.t += 1
            kw = dict(entities={"Unit": [[0.0, 1.0]]}, actors={"Move": [0]}, globals=[0.5])
            if self.t == 2:
                kw.update(last)
            return gl.EnvObservation(**kw)

    return Env


@pytest.mark.parametrize(
    "last, match",
    [
        (dict(reward=float("nan")), r"environment copy 0 raised InvalidObservationError: the reward is nan; rewards must be finite"),
        (dict(reward=float("-inf")), r"the reward is -inf; rewards must be finite"),
        (dict(reward=None), r"the reward is None \(NoneType\); a reward must be a real number"),
        (dict(reward="1.5"), r"the reward is '1.5' \(str\); a reward must be a real number"),
        (dict(reward=np.array([1.0])), r"the reward is \[1.0\] \(ndarray\); a reward must be a real number"),
        (dict(terminated="False"), r"terminated is 'False' \(str\); it must be True or False"),
        (dict(truncated=2), r"truncated is 2 \(int\); it must be True or False"),
        (dict(terminated=True, metrics={"score": "high"}), r"metric 'score' is 'high' \(str\); metrics must be numbers"),
        (dict(metrics={"score": np.array([1.0, 2.0])}), r"metric 'score' is \[1.0, 2.0\] \(ndarray\); metrics must be numbers"),
    ],
    ids=["nan-reward", "inf-reward", "none-reward", "str-reward", "array-reward", "str-done", "int-truncated", "str-metric",
         "array-metric"],
)
def test_a_bad_reward_end_or_metric_is_the_copys_game_error_with_its_seed(last, match):
    with gl.VecEnv(steps_then(**last), num_envs=2, seed=3) as env:
        env.reset()
        env.step(env.sample_actions())
        with pytest.raises(gl.GameError, match=match) as e:
            env.step(env.sample_actions())
        assert e.value.env_index == 0 and isinstance(e.value.seed, int)


def test_numpy_and_0_1_rewards_and_ends_are_accepted():
    Env = steps_then(reward=np.float32(2.5), terminated=np.bool_(True), metrics={"hits": np.int64(3), "ok": True})
    with gl.VecEnv(Env, num_envs=1, seed=0) as env:
        env.reset()
        env.step(env.sample_actions())
        b = env.step(env.sample_actions())
        assert b.reward.tolist() == [2.5] and b.terminated.tolist() == [True]
        assert b.metrics["hits"].tolist() == [3.0] and b.metrics["ok"].tolist() == [1.0]
    with gl.VecEnv(steps_then(terminated=1, reward=np.array(1.0)), num_envs=1, seed=0) as env:
        env.reset()
        env.step(env.sample_actions())
        assert env.step(env.sample_actions()).terminated.tolist() == [True]


@pytest.mark.parametrize(
    "last, match",
    [
        (dict(globals=[float("nan")]), r"environment copy 0: global feature 'g' is nan; features must be finite"),
        (dict(globals=["a"]), r"environment copy 0: its global features are \['a'\], which are not numbers; every observation must "
                              r"give the 1 global features \('g',\) as numbers"),
        (dict(globals=[1.0, 2.0]), r"its global features are \[1.0, 2.0\], not 1 numbers"),
        (dict(entities={"Unit": np.array([["a", "b"]])}),
         r"environment copy 0: entity type 'Unit' has rows that are not 2 numbers each \(an array of <U1: .*features \['x', 'y'\] must be numbers"),
    ],
    ids=["nan-global", "str-global", "two-globals", "str-array-rows"],
)
def test_bad_globals_and_array_rows_name_the_copy(last, match):
    with gl.VecEnv(steps_then(**last), num_envs=2, seed=0) as env:
        env.reset()
        env.step(env.sample_actions())
        with pytest.raises(gl.InvalidObservationError, match=match):
            env.step(env.sample_actions())


def test_gl_run_refuses_an_environment_and_points_to_the_vec_env():
    with pytest.raises(gl.ConfigError, match=r"gl.run plays a game loop, game\(agent, seed\); 'Env' makes a gl.Environment. Step it "
                                             r"with gl.VecEnv\(factory, num_envs=1"):
        gl.run(make(), gl.RandomAgent(seed=0), seed=1)


def test_a_restarted_environment_copy_is_replayed_by_its_reset(caplog):
    with gl.VecEnv(steps_then(reward=float("nan")), num_envs=1, seed=0, on_game_error="restart") as env:
        env.reset()
        env.step(env.sample_actions())
        with caplog.at_level("WARNING", logger="gymloop"):
            env.step(env.sample_actions())
    assert "environment copy 0 failed and was restarted" in caplog.text
    assert "replay the failure by making the environment and calling its reset(" in caplog.text
    assert "gl.run" not in caplog.text
