"""The low-level Environment executor: bad masks are clear errors naming the env copy and action type."""

from __future__ import annotations

import pytest

import gymloop as gl


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
        (dict(mask_move=[True, False]), r"environment copy 0: the mask of action type 'Move' has 2 entries \(shape \(2,\)\), expected \(2, 3\)"),
        (dict(mask_pick=[[True]] * 3), r"the mask of action type 'Pick' has 3 entries .*expected \(2,\)"),
    ],
    ids=["categorical-none-legal", "select-none-legal", "categorical-shape", "select-shape"],
)
def test_bad_masks_name_the_env_copy_and_action_type(kw, match):
    with gl.VecEnv(make(**kw), num_envs=2) as env:
        with pytest.raises(gl.InvalidObservationError, match=match):
            env.reset()


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
