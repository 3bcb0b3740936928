"""Stable-Baselines3 over the Gymnasium adapter (:mod:`gymloop.adapters.sb3`), issue 11 item 3.

- SB3's ``PPO`` (``MultiInputPolicy``) and sb3-contrib's ``MaskablePPO`` (with the masks) train
  snake above the random agent's level, judged on the same evaluation episodes (slow tier);
- :class:`GymloopSB3VecEnv` steps exactly like SB3's own ``DummyVecEnv`` over ``Monitor``-wrapped
  ``GymloopEnv`` copies (observations, rewards, dones, ``terminal_observation``,
  ``TimeLimit.truncated``, ``episode``), seeds as SB3 seeds, and gives ``MaskablePPO`` the masks
  (a masked-out action would raise here: ``illegal_actions="raise"``);
- the plain path (``PPO("MultiInputPolicy", GymloopEnv(...))``) works, and SB3's ``check_env``
  accepts every bundled single-agent game (its only remark: the 2-D per-type arrays);
- bad input: a multi-agent game, more entities than the sizes during ``learn``, reset options,
  per-copy calls the shared copies cannot answer, out-of-space actions;
- every python block of ``docs/adapters/stable-baselines3.md`` runs.
"""

from __future__ import annotations

import re
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor
from support.adapters import closes_every_env, legal_actions
from support.generic_game import make_game

from gymloop.adapters.gymnasium import GymloopEnv, GymloopVectorEnv
from gymloop.adapters.sb3 import GymloopSB3VecEnv, sb3_chooser
from gymloop.errors import ConfigError, EnvStateError, InvalidActionError, InvalidObservationError
from gymloop.evaluation import evaluate_episodes
from gymloop.games import bundled_games
from gymloop.games.duel import duel
from gymloop.games.snake import snake
from gymloop.games.tactics import tactics

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adapters" / "stable-baselines3.md"
SINGLE_AGENT = [g for g in bundled_games() if g.agents == 1]
TACTICS = {"max_entities": {"Unit": 3, "Enemy": 4, "Wall": 6}, "max_actors": 3}
#: the tiny PPO of the learning test (and of the docs page): 8 copies, 512-step rollouts, a 64x64 net
TINY = {"n_steps": 64, "batch_size": 128, "n_epochs": 4, "learning_rate": 1e-3, "ent_coef": 0.01,
        "policy_kwargs": {"net_arch": [64, 64]}, "device": "cpu"}


#: closes every adapter a test made (games are closed in this thread, not by a finalizer later)
close_every_env = closes_every_env(GymloopEnv, GymloopVectorEnv)


def assert_same_obs(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert np.array_equal(a[k], b[k]), k


# ====================================================================== the VecEnv against SB3's own


@pytest.mark.parametrize("game,kw", [(snake, {"max_entities": 100}), (tactics, TACTICS)], ids=["snake", "tactics"])
def test_steps_exactly_like_dummy_vec_env_over_monitored_gymloop_env(game, kw):
    ours = GymloopSB3VecEnv(game, 1, **kw)
    ref = DummyVecEnv([lambda: Monitor(GymloopEnv(game, **kw))])
    assert ours.observation_space == ref.observation_space and ours.action_space == ref.action_space
    ours.seed(7)
    ref.seed(7)
    a_obs, b_obs = ours.reset(), ref.reset()
    rng = np.random.default_rng(0)
    nvec = ours.layout.nvec
    ends = 0
    for _ in range(150):
        assert_same_obs(a_obs, b_obs)
        masks = ours.action_masks()
        assert np.array_equal(masks, get_action_masks(ref))
        act = legal_actions(masks, nvec, rng)
        act = act[:, 0] if nvec.size == 1 else act
        a_obs, a_rew, a_done, a_infos = ours.step(act)
        b_obs, b_rew, b_done, b_infos = ref.step(act)
        assert a_rew.dtype == b_rew.dtype == np.float32 and np.array_equal(a_rew, b_rew)
        assert a_done.dtype == b_done.dtype == bool and np.array_equal(a_done, b_done)
        if a_done[0]:
            ends += 1
            a, b = a_infos[0], b_infos[0]
            assert_same_obs(a["terminal_observation"], b["terminal_observation"])
            assert a["TimeLimit.truncated"] == b["TimeLimit.truncated"]
            assert a["episode"]["r"] == pytest.approx(b["episode"]["r"], rel=1e-6)
            assert a["episode"]["l"] == b["episode"]["l"]
    assert ends >= 2
    ours.close()
    ref.close()


@pytest.mark.parametrize("truncated", [True, False])
def test_time_limits_are_marked_for_bootstrapping(truncated):
    """``TimeLimit.truncated`` is set exactly for truncated episodes, with the final observation."""
    game = make_game(episode_len=3, truncated=truncated)
    env = GymloopSB3VecEnv(game, 2, max_entities=1)
    env.reset()
    for t in range(1, 7):
        obs, rew, done, infos = env.step(np.zeros(2, dtype=np.int64))
        assert done.tolist() == [t % 3 == 0] * 2
        for info in infos:
            assert ("terminal_observation" in info) == (t % 3 == 0)
            if t % 3 == 0:
                assert info["TimeLimit.truncated"] is truncated
                assert info["episode"]["l"] == 3
                assert info["terminal_observation"]["counts"].tolist() == [0]  # make_game's final Obs has no entities
    env.close()


def test_episode_info_is_the_games_return_and_length_as_vec_monitor_counts_them():
    env = GymloopSB3VecEnv(snake, 4, max_entities=100, seed=3)
    mon = VecMonitor(GymloopSB3VecEnv(snake, 4, max_entities=100, seed=3))
    env.reset()
    mon.reset()
    rng = np.random.default_rng(1)
    sums, lens, seen = np.zeros(4), np.zeros(4, dtype=int), 0
    for _ in range(200):
        act = rng.integers(0, 4, size=4)
        _, rew, done, infos = env.step(act)
        _, m_rew, m_done, m_infos = mon.step(act)
        assert np.array_equal(rew, m_rew) and np.array_equal(done, m_done)
        sums += rew
        lens += 1
        for i in np.flatnonzero(done):
            ours, theirs = infos[i]["episode"], m_infos[i]["episode"]
            assert ours["r"] == pytest.approx(sums[i]) == pytest.approx(theirs["r"])
            assert ours["l"] == lens[i] == theirs["l"]
            assert infos[i]["episode_return"] == ours["r"] and infos[i]["length"] >= 1  # the game's own metric too
            sums[i], lens[i] = 0, 0
            seen += 1
    assert seen >= 8
    env.close()
    mon.close()


def test_seed_restarts_every_copy_from_that_root_seed_and_reset_continues():
    env = GymloopSB3VecEnv(snake, 3, max_entities=100)
    same = GymloopSB3VecEnv(snake, 3, max_entities=100, seed=5)
    first = same.reset()
    assert env.seed(5) == [5, 6, 7]
    o1 = env.reset()
    assert_same_obs(o1, first)
    env.step(np.zeros(3, dtype=np.int64))
    env.seed(5)
    assert_same_obs(env.reset(), o1)
    o3 = env.reset()  # no seed set: the next episodes
    assert not np.array_equal(o3["Head"], o1["Head"])
    with pytest.raises(ConfigError, match="seed must be a non-negative int"):
        env.seed(-1)
    env.close()
    same.close()


@pytest.mark.slow  # two short PPO runs: ~2.5 s
def test_ppo_seed_makes_training_reproducible():
    def params(seed: int) -> list[np.ndarray]:
        env = GymloopSB3VecEnv(snake, 2, max_entities=100)
        model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=seed, device="cpu",
                    policy_kwargs={"net_arch": [8]})
        model.learn(64)
        env.close()
        return [p.detach().numpy().copy() for p in model.policy.parameters()]

    a, b, c = params(1), params(1), params(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


# ====================================================================== masks


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_maskable_ppo_gets_the_masks_and_never_plays_a_masked_out_action():
    env = GymloopSB3VecEnv(tactics, 4, illegal_actions="raise", **TACTICS)
    env.reset()
    assert is_masking_supported(env)
    masks = get_action_masks(env)
    assert masks.dtype == bool and np.array_equal(masks, env.action_masks())
    assert not masks.all()  # tactics forbids padding rows and more: the masks matter
    model = MaskablePPO("MultiInputPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [16]})
    model.learn(256)  # a masked-out action would raise InvalidActionError (illegal_actions="raise")
    assert model.num_timesteps == 256
    env.close()


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_plain_ppo_ignoring_the_masks_is_caught_with_illegal_actions_raise():
    env = GymloopSB3VecEnv(tactics, 4, illegal_actions="raise", **TACTICS)
    model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [16]})
    with pytest.raises(InvalidActionError, match="is masked out"):
        model.learn(256)
    env.close()


def test_masked_out_actions_replaced_by_default_are_counted_per_copy():
    env = GymloopSB3VecEnv(tactics, 2, **TACTICS)
    env.reset()
    masks = env.action_masks()
    nvec = env.layout.nvec
    start = np.cumsum(nvec) - nvec
    # copy 0: the first illegal choice of the first component that has one; copy 1: legal choices
    act = legal_actions(masks, nvec, np.random.default_rng(0))
    c = next(c for c in range(nvec.size) if not masks[0, start[c]:start[c] + nvec[c]].all())
    act[0, c] = int(np.flatnonzero(~masks[0, start[c]:start[c] + nvec[c]])[0])
    _, _, _, infos = env.step(act)
    assert infos[0]["illegal_actions"] == 1 and "illegal_actions" not in infos[1]
    env.close()


# ====================================================================== the plain path and SB3's checker


@pytest.mark.parametrize("bundled", SINGLE_AGENT, ids=lambda g: g.name)
def test_sb3_check_env_accepts_every_bundled_single_agent_game(bundled):
    env = GymloopEnv(bundled.loop, measure_steps=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(env)
    # SB3's only remark: the per-type (max_entities, n_features) arrays are 2-D; MultiInputPolicy flattens them
    assert sorted(str(w.message).split()[2] for w in caught) == sorted(env.layout.types)
    assert all("unconventional shape" in str(w.message) for w in caught)
    env.close()


@pytest.mark.slow  # (a few seconds of SB3 training each)
@pytest.mark.parametrize("algo", [PPO, MaskablePPO], ids=["PPO", "MaskablePPO"])
def test_sb3_trains_a_gymloop_env_through_its_own_dummy_vec_env(algo):
    env = GymloopEnv(tactics, illegal_actions="raise" if algo is MaskablePPO else "replace", **TACTICS)
    model = algo("MultiInputPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [16]})
    model.learn(64)
    assert model.num_timesteps == 64
    model.get_env().close()


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_sb3_chooser_scores_a_model_on_gymloops_evaluation_episodes():
    env = GymloopSB3VecEnv(tactics, 2, illegal_actions="raise", **TACTICS)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    choose = sb3_chooser(model, env.layout, deterministic=True)
    a = evaluate_episodes(tactics, choose, episodes=6, num_envs=3, seed=11)
    b = evaluate_episodes(tactics, sb3_chooser(model, env.layout, deterministic=True), episodes=6, num_envs=3, seed=11)
    assert len(a["episode_return"]) == 6 and a == b
    other = GymloopSB3VecEnv(snake, 1, max_entities=100)
    with pytest.raises(ConfigError, match="observation space .* is not the layout's"):
        sb3_chooser(model, other.layout)
    env.close()
    other.close()


# ====================================================================== bad input


def test_a_multi_agent_game_is_refused_with_the_adapter_to_use():
    with pytest.raises(ConfigError, match=r"takes 2 agents per game.*pettingzoo\.GymloopParallelEnv"):
        GymloopSB3VecEnv(duel, 2, max_entities=100)


@pytest.mark.slow  # (it trains until the limit is crossed)
def test_more_entities_than_max_entities_stop_learn_naming_the_limit_and_the_fix():
    # snake gets a second food 8 ticks after the first unless it eats it; one food row is too few
    env = GymloopSB3VecEnv(snake, 4, max_entities={"Head": 1, "Body": 100, "Food": 1})
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    with pytest.raises(InvalidObservationError, match=r"has 2 'Food' entities, more than the 1 .*nothing is truncated.*max_entities=\{'Food': N\}"):
        model.learn(512)
    env.close()


def test_reset_options_are_refused_not_dropped():
    env = GymloopSB3VecEnv(snake, 2, max_entities=100)
    env.set_options({"level": 3})
    with pytest.raises(ConfigError, match=r"takes no reset options, got \{'level': 3\}"):
        env.reset()
    env.close()


def test_attribute_calls_answer_for_the_shared_copies_or_say_why_not():
    env = GymloopSB3VecEnv(snake, 2, max_entities=100)
    env.reset()
    assert env.get_attr("render_mode") == [None, None]
    assert env.has_attr("action_masks") and not env.has_attr("no_such_attribute")
    with pytest.raises(AttributeError):
        env.get_attr("no_such_attribute")
    env.set_attr("note", "hi")
    assert env.get_attr("note", indices=[1]) == ["hi"] and env.vector_env.note == "hi"
    with pytest.raises(ConfigError, match="can only be set for all of them"):
        env.set_attr("note", "x", indices=[0])
    with pytest.raises(ConfigError, match=r"knows only 'action_masks'.*env\.vector_env"):
        env.env_method("render")
    assert [m.tolist() for m in env.env_method("action_masks", indices=1)] == [[True] * 4]
    with pytest.raises(ConfigError, match=r"env indices \[2\] are outside \[0, 2\)"):
        env.env_method("action_masks", indices=[2])
    assert env.env_is_wrapped(Monitor) == [False, False]
    env.close()
    env.close()  # idempotent


def test_stepping_wrongly_is_an_error():
    env = GymloopSB3VecEnv(snake, 2, max_entities=100)
    env.reset()
    with pytest.raises(EnvStateError, match=r"step_wait\(\) without step_async"):
        env.step_wait()
    with pytest.raises(InvalidActionError, match=r"action 7 for Move\[0\] is outside the action space"):
        env.step(np.array([0, 7]))
    env.close()


# ====================================================================== learning (slow)


def mean_return(choose, episodes: int = 64, seed: int = 10_000) -> float:
    """Mean episode return over the same ``episodes`` snake games for any chooser (``None``: random legal actions)."""
    return float(np.mean(evaluate_episodes(snake, choose, episodes=episodes, num_envs=16, seed=seed)["episode_return"]))


@pytest.mark.slow
@pytest.mark.parametrize("algo,seed", [(PPO, 0), (MaskablePPO, 1)], ids=["PPO", "MaskablePPO"])
def test_sb3_learns_snake_above_the_random_agent(algo, seed):
    """40K steps (10-20 s on one core): random play returns 0.28 here (dies in ~17 steps); trained 1.3-2.0
    (1.2-2.0 over 8 seeds tried with each algorithm; one seed each here keeps the suite short)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = GymloopSB3VecEnv(snake, 8, max_entities=100, seed=seed)
        model = algo("MultiInputPolicy", env, seed=seed, **TINY)
        model.learn(40_000)
        env.close()
        trained = mean_return(sb3_chooser(model, env.layout))
    finally:
        torch.set_num_threads(threads)
    random = mean_return(None)
    assert random < 0.5
    assert trained > max(3 * random, random + 0.6), f"{algo.__name__} seed {seed}: trained {trained:.3f} vs random {random:.3f}"


# ====================================================================== the docs page


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced python block not preceded by ``<!-- skip: why -->``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        if re.match(r"^```python\b", lines[i]):
            start = i
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            assert i < len(lines), f"{page.name}:{start + 1}: a code block that is never closed"
            if not re.match(r"^\s*<!--\s*skip\b.*-->\s*$", prev):
                out.append((start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


@pytest.mark.slow
def test_docs_page_python_blocks_run(monkeypatch, tmp_path):
    """The blocks run in order in one namespace, in an empty working directory."""
    blocks = python_blocks(DOC)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs_sb3_page")
    monkeypatch.setitem(sys.modules, "docs_sb3_page", module)
    for line, code in blocks:
        exec(compile(code, f"{DOC.relative_to(ROOT)}:{line}", "exec"), module.__dict__)
