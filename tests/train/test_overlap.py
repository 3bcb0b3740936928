"""Training with overlap (issue 12, item 2): one half of the game copies steps while the policy acts on
the other half's batch (``TrainConfig.overlap``, ``gymloop train --overlap``)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import train_games as tg  # noqa: E402
from support.train_games import final_return, tiny  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.checkpoint import read_agent, read_safetensors  # noqa: E402
from gymloop.train import ppo, rollout, run_dir  # noqa: E402
from gymloop.train.ppo import Trainer, overlap_seed  # noqa: E402


@pytest.fixture(autouse=True)
def quick_curve(monkeypatch):
    """curve.png costs ~0.3 s a run; these tests check the training, not the drawing."""
    monkeypatch.setattr(run_dir, "plot_curve", lambda *a, **k: None)


def overlapped(steps: int, **kw) -> gl.train.TrainConfig:
    cfg = tiny(steps, **kw)
    cfg.overlap = True
    return cfg


def curve(r) -> list[tuple[float, float]]:
    return [(h["episode_return_mean"], h["loss/policy"]) for h in r.history]


class Spy:
    """Every VecEnv the trainer makes, and the order of their step_async / step_wait calls."""

    def __init__(self, monkeypatch) -> None:
        self.envs: list[gl.VecEnv] = []
        self.kwargs: list[dict] = []
        self.calls: list[tuple[int, str]] = []
        orig = rollout.VecEnv
        spy = self

        def make(*a, **k):
            env = orig(*a, **k)
            spy.envs.append(env)
            spy.kwargs.append(k)
            i = len(spy.envs) - 1
            for name in ("step_async", "step_wait", "step"):
                method = getattr(env, name)

                def wrapped(*args, _m=method, _n=name, _i=i):
                    spy.calls.append((_i, _n))
                    return _m(*args)

                setattr(env, name, wrapped)
            return env

        monkeypatch.setattr(rollout, "VecEnv", make)


def test_overlap_learns_and_steps_one_half_while_acting_on_the_other(monkeypatch):
    spy = Spy(monkeypatch)
    a = Trainer(tg.bandit, overlapped(2048)).train()
    assert final_return(a, last=2) >= 0.9, [h["episode_return_mean"] for h in a.history]
    assert a.steps == 2048 and a.updates == 8  # the same rollout size as without overlap: 32 copies x 8 steps
    # two VecEnvs of 16 copies; the second's seed derived from the run's
    assert [k["num_envs"] for k in spy.kwargs] == [16, 16]
    assert [k["seed"] for k in spy.kwargs] == [0, overlap_seed(0)] and overlap_seed(0) != 0
    assert all(env.closed for env in spy.envs)
    # the pipeline: per step, B is sent off before A is waited for, and A's next step before B is waited for
    first = spy.calls[: 1 + 4 * 8]
    assert first[0] == (0, "step_async")
    for t in range(8):
        want = [(1, "step_async"), (0, "step_wait"), (0, "step_async"), (1, "step_wait")] if t < 7 else \
            [(1, "step_async"), (0, "step_wait"), (1, "step_wait")]
        got = first[1 + 4 * t: 1 + 4 * t + len(want)]
        assert got == want, (t, got)
    assert not any(name == "step" for _, name in spy.calls)


def test_overlap_is_deterministic_for_a_seed():
    a, b = (Trainer(tg.two_types, overlapped(768)).train() for _ in range(2))
    c = Trainer(tg.two_types, overlapped(768, seed=1)).train()
    assert curve(a) == curve(b)
    assert curve(a) != curve(c)
    assert overlap_seed(1) != overlap_seed(0)


@pytest.mark.parametrize("field, value, match", [
    ("num_envs", 33, r"overlap=True splits the game copies into two halves .* num_envs=33 is odd; use an even num_envs "
                     r"\(e.g. --num-envs 34\)"),
    ("workers", 3, r"workers=3 is odd; use an even number \(e.g. --workers 4\) or 0"),
])
def test_odd_num_envs_or_workers_are_refused(field, value, match):
    cfg = overlapped(1024)
    cfg.ppo.minibatch_size = 8  # divides the rollout at 33 and 34 copies
    setattr(cfg, field, value)
    with pytest.raises(gl.ConfigError, match=match):
        Trainer(tg.bandit, cfg)
    setattr(cfg, field, value + 1)
    Trainer(tg.bandit, cfg)  # even: accepted (nothing starts before train())


def test_an_automatic_num_envs_is_even():
    cfg = gl.train.TrainConfig(steps=10_000, overlap=True)
    cfg.check()
    assert cfg.resolved().num_envs % 2 == 0


def test_self_play_with_a_frozen_opponent_has_learner_slots_per_half(tmp_path):
    from gymloop.games.duel import duel

    cfg = overlapped(1024)
    cfg.agents_per_game, cfg.num_envs = 2, 16
    out = str(tmp_path / "a")
    assert Trainer(duel, cfg, out_dir=out).train().steps == 1024
    cfg2 = overlapped(1024)
    cfg2.agents_per_game, cfg2.num_envs = 2, 16
    cfg2.opponents = [os.path.join(out, "agent.safetensors")]
    t = Trainer(duel, cfg2)
    r = t.train()
    assert t.learner_slots.tolist() == list(range(0, 16, 2))  # 8 copies a half, agent 0 of each learns
    assert r.steps == 1024 and "episode_return_mean" in r.history[-1]


def test_reward_scalers_are_per_half_saved_and_resumed(tmp_path):
    out = str(tmp_path / "run")
    cfg = overlapped(1024)
    cfg.ppo.scale_rewards = True
    t = Trainer(tg.two_types, cfg, out_dir=out)
    t.train()
    a, b = (g.reward_scaler for g in t.groups)
    assert a is not b and a.ret.shape == b.ret.shape == (16,)
    assert a.state() != b.state()  # different games, different statistics
    _, meta = read_safetensors(os.path.join(out, "optimizer.safetensors"), mmap=False)
    saved = json.loads(meta["reward_scaler"])
    assert saved["groups"] == [a.state(), b.state()]
    assert read_agent(os.path.join(out, "agent.safetensors")).info["train_config"]["overlap"] is True
    cfg2 = overlapped(2048)
    cfg2.ppo.scale_rewards = True
    t2 = Trainer(tg.two_types, cfg2, out_dir=out, resume=True)
    t2._setup()
    try:
        assert [g.reward_scaler.state() for g in t2.groups] == [a.state(), b.state()]
    finally:
        for env in t2.envs:
            env.close()
        t2.tb.close()
    r2 = Trainer(tg.two_types, cfg2, out_dir=out, resume=True).train()
    assert (r2.first_step, r2.steps) == (1024, 2048)


def flaky(agent, seed):
    """:func:`support.train_games.bandit` whose copies with a seed divisible by 4 raise at their third decision."""
    decisions = 0
    while True:
        decisions += 1
        if decisions == 3 and seed % 4 == 0:
            raise RuntimeError("flaky: planned crash")
        arm = agent.act(gl.Obs(score=0).actor(tg.Player(1.0)), tg.Arm)
        agent.game_over(gl.Obs(score=1.0 if arm is tg.Arm.C else 0.0))


def test_restarted_games_of_both_halves_are_counted(monkeypatch):
    spy = Spy(monkeypatch)
    cfg = overlapped(512)
    cfg.on_game_error = "restart"
    r = Trainer(flaky, cfg).train()
    per_env = [env.num_game_errors for env in spy.envs]
    assert min(per_env) > 0, per_env  # both halves had faults (seeds 0 and overlap_seed(0))
    assert r.history[-1]["game_errors"] == sum(per_env)


def test_a_game_error_closes_both_halves(monkeypatch, tmp_path):
    spy = Spy(monkeypatch)
    with pytest.raises(gl.GameError, match="planned crash"):
        Trainer(tg.bandit_crashes, overlapped(4096), out_dir=str(tmp_path / "run")).train()
    assert len(spy.envs) == 2 and all(env.closed for env in spy.envs)
    assert read_agent(str(tmp_path / "run" / "agent.safetensors")).info["update"] == 2  # the last completed update


def test_a_failed_start_closes_both_halves(monkeypatch, tmp_path):
    spy = Spy(monkeypatch)
    with pytest.raises(gl.CheckpointError, match="no checkpoint"):
        Trainer(tg.bandit, overlapped(1024), out_dir=str(tmp_path / "none"), resume=True).train()
    assert len(spy.envs) == 2 and all(env.closed for env in spy.envs)


@pytest.mark.slow
def test_process_backend_with_two_workers_runs(monkeypatch):
    spy = Spy(monkeypatch)
    cfg = overlapped(512)
    cfg.workers = 2
    r = Trainer(tg.bandit, cfg).train()
    assert r.steps == 512 and np.isfinite(r.history[-1]["loss/value"])
    assert [(k["workers"], k["backend"]) for k in spy.kwargs] == [(1, "process"), (1, "process")]
    assert all(env.closed for env in spy.envs)


def test_cli_overlap_flag(monkeypatch):
    from gymloop.cli import main

    seen = []

    def refuse(self, game, cfg, **kw):
        seen.append(cfg)
        raise gl.ConfigError("stop here")

    monkeypatch.setattr(ppo.Trainer, "__init__", refuse)
    assert main(["train", "support.train_games:bandit", "--overlap", "--quiet"]) == 2
    assert main(["train", "support.train_games:bandit", "--quiet"]) == 2
    assert [c.overlap for c in seen] == [True, False]
