"""Training: learning tests on trivial games, checkpoints, resume, bad configurations."""

from __future__ import annotations

import csv
import dataclasses
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import train_games as tg
from support.train_games import final_return, tiny

import gymloop as gl  # noqa: E402
from gymloop.checkpoint import read_agent  # noqa: E402
from gymloop.nn import NetConfig  # noqa: E402
from gymloop.train import TrainConfig  # noqa: E402
from gymloop.train.ppo import Rollout, Trainer, evaluate  # noqa: E402
from gymloop.train.rollout import gae  # noqa: E402


def gae_rollout(values, rewards, terminated, truncated, last_values, final_values=None) -> Rollout:
    """A rollout with only what :func:`~gymloop.train.rollout.gae` reads (no observations, actions or metrics)."""
    return Rollout(observations=[], actions=[], logprobs=[], values=values, rewards=rewards, terminated=terminated,
                   truncated=truncated, last_values=last_values, episode_metrics={}, final_values=final_values)


@pytest.mark.slow  # learning tests: a few seconds each
@pytest.mark.parametrize(
    "game, threshold",
    # select: the best of 3-6 uniform values (often nearly tied); random picks it ~22% of the time,
    # and the plateau of this tiny config is ~0.8 give or take 0.04 per update. two types: random
    # scores 0.375; this tiny config's plateau is 0.87 to 1.0 depending on the seed. 12K steps: on
    # seeds 0-5 every game is at its plateau by then (at 24K, with the learning rate high for
    # longer, seed 0 of the masked game was still at 0.87)
    [(tg.bandit, 0.9), (tg.masked, 0.9), (tg.select, 0.75), (tg.two_types, 0.85)],
    ids=["bandit", "mask", "select-entity", "two-action-types"],
)
def test_tiny_config_learns_trivial_game(game, threshold):
    result = gl.train.train(game, tiny(12_288))
    assert final_return(result, last=4) >= threshold, [h.get("episode_return_mean") for h in result.history]


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_same_seed_same_learning_curve():
    a = gl.train.train(tg.bandit, tiny(4096))
    b = gl.train.train(tg.bandit, tiny(4096))
    c = gl.train.train(tg.bandit, tiny(4096, seed=1))
    key = lambda r: [(h["episode_return_mean"], h["loss/policy"]) for h in r.history]  # noqa: E731
    assert key(a) == key(b)
    assert key(a) != key(c)


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_checkpoint_files_metrics_and_resume(tmp_path):
    out = str(tmp_path / "run")
    cfg = tiny(2048)
    r1 = Trainer(tg.two_types, cfg, out_dir=out, game_name="two_types").train()
    assert r1.steps == 2048
    for f in ("agent.safetensors", "optimizer.safetensors", "metrics.csv"):
        assert os.path.exists(os.path.join(out, f)), f
    af = read_agent(os.path.join(out, "agent.safetensors"))
    assert af.info["step"] == 2048
    assert af.obs_space["entities"] == {"Signal": ["move", "shoot"]}
    assert af.action_space["Fire"]["labels"] == ["HOLD", "SHOOT"]
    assert af.info["net"]["d_model"] == 16
    assert any(k.startswith("norms.Signal") for k in af.tensors)
    # resume continues the step count and the metrics file
    cfg2 = tiny(4096)
    r2 = Trainer(tg.two_types, cfg2, out_dir=out, resume=True).train()
    assert r2.steps == 4096 and r2.first_step == 2048  # (the CLI's rate counts this run's steps only)
    with open(os.path.join(out, "metrics.csv")) as f:
        steps = [int(float(r["step"])) for r in csv.DictReader(f)]
    assert steps == sorted(steps) and steps[-1] == 4096 and 2048 in steps
    from gymloop.train.tensorboard import read_scalars

    tb = sorted((os.path.join(out, "tb", f) for f in os.listdir(os.path.join(out, "tb"))), key=os.path.getmtime)
    assert len(tb) == 2  # one event file per run
    first, second = read_scalars(tb[0]), read_scalars(tb[1])
    assert [s for s, _ in first["episode_return_mean"]] == list(range(256, 2049, 256))
    assert second["update"][0] == (2304, 9.0)
    # a new run into the same folder replaces the earlier run's curves: one event file, this run's steps only
    Trainer(tg.two_types, tiny(512), out_dir=out).train()
    tb = os.listdir(os.path.join(out, "tb"))
    assert len(tb) == 1
    assert max(s for s, _ in read_scalars(os.path.join(out, "tb", tb[0]))["update"]) == 512


def test_resume_refuses_checkpoint_of_another_game(tmp_path):
    out = str(tmp_path / "run")
    Trainer(tg.bandit, tiny(512), out_dir=out).train()
    with pytest.raises(gl.CheckpointError, match=r"different game.*Player.*Signal|different game.*Signal.*Player"):
        Trainer(tg.two_types, tiny(1024), out_dir=out, resume=True).train()


def test_resume_without_checkpoint_is_an_error(tmp_path):
    with pytest.raises(gl.CheckpointError, match="no checkpoint"):
        Trainer(tg.bandit, tiny(512), out_dir=str(tmp_path), resume=True).train()


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(num_envs=0), r"num_envs=0 is out of range: expected >= 1, or None \(automatic\)"),
        (dict(rollout_steps=2), "larger than the rollout"),
        (dict(rollout_steps=7), "must divide the rollout size"),
        (dict(steps=-5), r"steps=-5 is out of range: expected \[1, 2\*\*63 - 1\]"),
    ],
)
def test_bad_config_fails_at_start_with_the_fix(change, match):
    cfg = tiny(1024)
    for k, v in change.items():
        setattr(cfg, k, v)
    with pytest.raises(gl.ConfigError, match=match):
        Trainer(tg.bandit, cfg)


def test_bad_network_config():
    with pytest.raises(gl.ConfigError, match="must divide d_model"):
        Trainer(tg.bandit, tiny(1024, d_model=10, n_head=3) if False else _with_net(NetConfig(d_model=10, n_head=3)))


def _with_net(net):
    cfg = tiny(1024)
    cfg.net = net
    return cfg


def test_nan_loss_stops_with_update_number_and_saves_last_good(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(2048), out_dir=out)
    orig = Trainer._update
    calls = {"n": 0}

    def poisoned(self, r, ent):
        calls["n"] += 1
        if calls["n"] == 3:
            r.rewards[:] = np.nan
            r = dataclasses.replace(r, advantages=r.advantages * np.nan, returns=r.returns * np.nan)
        return orig(self, r, ent)

    monkeypatch.setattr(Trainer, "_update", poisoned)
    with pytest.raises(gl.TrainingError, match=r"at update 3 .*last good checkpoint was saved"):
        t.train()
    af = read_agent(os.path.join(out, "agent.safetensors"))
    assert all(np.isfinite(np.asarray(v)).all() for v in af.tensors.values())
    assert af.info["update"] == 2


def test_evaluate_random_and_trained():
    r = evaluate(tg.bandit, None, episodes=400, num_envs=16)
    assert 0.15 < r["episode_return"] < 0.35


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_self_play_shared_policy_and_frozen_opponent(tmp_path):
    from gymloop.games.duel import duel

    cfg = tiny(2048)
    cfg.agents_per_game = 2
    cfg.num_envs = 16
    out = str(tmp_path / "a")
    r = Trainer(duel, cfg, out_dir=out).train()
    assert r.steps == 2048  # both sides of every game are learner slots
    opp = os.path.join(out, "agent.safetensors")
    cfg2 = tiny(2048)
    cfg2.agents_per_game = 2
    cfg2.num_envs = 32
    cfg2.opponents = [opp]
    t = Trainer(duel, cfg2, out_dir=str(tmp_path / "b"))
    r2 = t.train()
    assert t.learner_slots.tolist() == list(range(0, 64, 2))
    assert r2.history and "episode_return_mean" in r2.history[-1]


def test_opponents_need_a_multi_agent_game(tmp_path):
    cfg = tiny(1024)
    cfg.opponents = ["x.safetensors"]
    with pytest.raises(gl.ConfigError, match="agents_per_game >= 2"):
        Trainer(tg.bandit, cfg)


def test_ctrl_c_saves_a_checkpoint_and_returns(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(8192), out_dir=out)
    orig = Trainer._collect
    calls = {"n": 0}

    def interrupted(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return orig(self)

    monkeypatch.setattr(Trainer, "_collect", interrupted)
    r = t.train()
    assert r.interrupted and r.updates == 1
    assert read_agent(os.path.join(out, "agent.safetensors")).info["update"] == 1
    assert t.env.closed


def test_cli_train_writes_everything(tmp_path, capsys):
    from gymloop.cli import main

    out = str(tmp_path / "cli")
    rc = main(["train", "support.train_games:bandit", "--steps", "2048", "--out", out, "--quiet", "--eval-episodes", "50",
               "--set", "num_envs=32", "--set", "rollout_steps=8", "--set", "ppo.minibatch_size=128", "--set", "threads=1"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "random agent" in text and "trained agent" in text
    for f in ("agent.safetensors", "optimizer.safetensors", "metrics.csv", "curve.png"):
        assert os.path.getsize(os.path.join(out, f)) > 0
    assert os.listdir(os.path.join(out, "tb"))


def test_cli_train_unknown_game_and_bad_override(capsys):
    from gymloop.cli import main

    assert main(["train", "no_such_game", "--steps", "10"]) == 2
    assert "unknown game 'no_such_game'" in capsys.readouterr().err
    assert main(["train", "support.train_games:bandit", "--set", "ppo.nope=1"]) == 2
    assert "unknown config field 'ppo.nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_tactics_policy_beats_random():
    from gymloop.games.tactics import tactics

    # one torch thread: the suite runs two test workers on two cores, and a second thread only contends with them
    # (30 CPU-s instead of 60; the trained agent beats random by 7.6 here, by 4.8 at 60K steps)
    cfg = TrainConfig(steps=100_000, num_envs=64, rollout_steps=16, threads=1, seed=0)
    cfg.ppo.minibatch_size = 1024
    cfg.ppo.epochs = 1  # the shape this test was calibrated with (the automatic one would make 3 passes)
    t = Trainer(tactics, cfg)
    t.train()
    random_score = evaluate(tactics, None, episodes=300)["episode_return"]
    trained = evaluate(tactics, t.policy, episodes=300)["episode_return"]
    assert trained > random_score + 3.0, (trained, random_score)


def test_gae_bootstraps_through_truncation_not_termination():
    t = Trainer(tg.bandit, tiny(1024))
    g, lam = t.cfg.ppo.gamma, t.cfg.ppo.gae_lambda
    V = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], dtype=np.float32)  # (T=2, S=3)
    R = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=np.float32)
    TERM = np.array([[False, False, False], [False, True, False]])
    TRUNC = np.array([[False, False, False], [False, False, True]])
    last_v = np.array([5.0, 5.0, 5.0], dtype=np.float32)
    r = gae(gae_rollout(V, R, TERM, TRUNC, last_v), t.cfg.ppo)
    adv, ret = r.advantages, r.returns
    # slot 0: no episode end: ordinary GAE with the bootstrap value after the rollout
    d1 = 1 + g * 5 - 2
    d0 = 0 + g * 2 - 1
    assert adv[1, 0] == pytest.approx(d1) and adv[0, 0] == pytest.approx(d0 + g * lam * d1)
    # slot 1: terminated: no bootstrap
    assert adv[1, 1] == pytest.approx(1 - 2)
    # slot 2: truncated: bootstraps with the value of the episode's last observation
    assert adv[1, 2] == pytest.approx(1 + g * 2 - 2)
    np.testing.assert_allclose(ret, adv + V, rtol=1e-6)


def test_policy_handles_absent_entity_and_action_types():
    from gymloop.batch import take
    from gymloop.games.tactics import tactics
    from gymloop.nn.torch_policy import Policy

    env = gl.VecEnv(tactics, num_envs=4, seed=0)
    try:
        b = env.reset()
        pol = Policy(env.obs_space, env.action_space)
        empty, _ = take(b, np.zeros(0, dtype=np.int64))
        out = pol(pol.pack(empty))
        assert out.value.shape == (0,) and all(v.numel() == 0 for v in out.actions.values())
        # a batch whose slots have entities but no actors
        sub, _ = take(b, np.array([0, 1]))
        for k in sub.actor_slot:
            sub.actor_slot[k] = sub.actor_slot[k][:0]
            sub.actor_index[k] = sub.actor_index[k][:0]
            sub.masks[k] = sub.masks[k][:0]
            if k in sub.num_candidates:
                sub.num_candidates[k] = sub.num_candidates[k][:0]
        out = pol(pol.pack(sub))
        assert out.value.shape == (2,) and torch.isfinite(out.value).all()
    finally:
        env.close()


def test_gae_bootstraps_truncation_with_the_final_observation_value():
    t = Trainer(tg.bandit, tiny(1024))
    g = t.cfg.ppo.gamma
    V = np.array([[1.0, 1.0], [2.0, 2.0]], dtype=np.float32)
    R = np.array([[0.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    TERM = np.zeros((2, 2), dtype=bool)
    TRUNC = np.array([[False, False], [True, True]])
    finals = np.array([[np.nan, np.nan], [7.0, np.nan]], dtype=np.float32)
    adv = gae(gae_rollout(V, R, TERM, TRUNC, np.zeros(2, np.float32), final_values=finals), t.cfg.ppo).advantages
    assert adv[1, 0] == pytest.approx(1 + g * 7.0 - 2)  # the final observation's value
    assert adv[1, 1] == pytest.approx(1 + g * 2.0 - 2)  # none given: the last observation's value


@pytest.mark.parametrize("workers", [0, 2])
def test_snake_truncation_carries_the_final_observation(monkeypatch, workers):
    from gymloop.checker import _same
    from gymloop.games import snake as snake_mod
    from gymloop.games.snake_envs import SnakeEnv

    monkeypatch.setattr(snake_mod, "MAX_STEPS", 6)
    env = gl.VecEnv(snake_mod.snake, num_envs=8, seed=0, workers=workers, start_method="fork")
    low = gl.VecEnv(__import__("functools").partial(SnakeEnv, max_steps=6), num_envs=8, seed=0)
    try:
        b, lb = env.reset(), low.reset()
        seen = 0
        for _ in range(30):
            a = {"Move": np.zeros(b.actor_slot["Move"].shape[0], dtype=np.int64) + 2 * (np.arange(b.actor_slot["Move"].shape[0]) % 2)}
            b, lb = env.step(a), low.step(a)
            if b.truncated.any():
                f = b.final
                assert f is not None
                np.testing.assert_array_equal(f.active, b.truncated)
                assert (f.counts["Head"][b.truncated] == 1).all() and (f.counts["Head"][~b.truncated] == 0).all()
                assert f.num_actors("Move") == 0
                seen += 1
            assert (b.final is None) == (lb.final is None)
            if b.final is not None:
                assert _same(b.final, lb.final)
        assert seen > 0
    finally:
        env.close()
        low.close()


def test_evaluate_is_not_biased_toward_short_episodes():
    """Half the episodes last 1 decision, half 20: the mean length is ~10.5, not the ~1-3 one gets
    by counting the first endings among many parallel copies."""
    import random

    from support.train_games import Arm, Player

    def coin_length(agent, seed):
        rng = random.Random(seed)
        while True:
            length = 1 if rng.random() < 0.5 else 20
            for _ in range(length):
                agent.act(gl.Obs(score=0).actor(Player(1.0)), Arm)
            agent.game_over(gl.Obs(score=0))

    r = evaluate(coin_length, None, episodes=64, num_envs=64)
    assert 7.5 < r["episode_length"] < 13.5, r
    with pytest.raises(gl.ConfigError, match="episodes >= 1"):
        evaluate(coin_length, None, episodes=0)


# ---------------------------------------------------------------------- curve.png and the progress line
def _metrics_csv(path, with_game_metrics=True):
    """A metrics.csv as the trainer writes it: episode metrics as <name>_count/_mean/..., other columns besides."""
    names = ["episode_return", "episode_length"] + (["length", "won"] if with_game_metrics else [])
    fields = ["step", "reward_mean", "loss/policy"] + [f"{n}_{s}" for n in names for s in ("count", "mean", "min", "max")]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i in range(1, 6):
            row = {"step": 256 * i, "reward_mean": 0.01 * i, "loss/policy": 0.1}
            if i != 3:  # no episode ended in the third update: empty cells
                row.update({f"{n}_{s}": float(i + k) for k, n in enumerate(names) for s in ("count", "mean", "min", "max")})
            w.writerow(row)


def test_plot_curve_draws_the_random_level_and_the_games_metrics(tmp_path):
    from gymloop.train.ppo import plot_curve

    csv_path, png = str(tmp_path / "metrics.csv"), str(tmp_path / "curve.png")
    _metrics_csv(csv_path)
    fig = plot_curve(csv_path, png, random_level={"episode_return": 0.25, "episode_length": 17.0, "length": 1.25})
    assert os.path.getsize(png) > 0
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["mean episode return (sum of rewards)", "mean episode length (decisions)", "mean length (game metric)",
                      "mean won (game metric)"]  # reward_mean and loss/* are no episode metrics
    for ax, level in zip(fig.axes, [0.25, 17.0, 1.25, None]):
        curve = ax.lines[0]
        assert curve.get_xdata().tolist() == [256.0, 512.0, 1024.0, 1280.0]  # the update without episodes is skipped
        dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
        if level is None:  # the random level of 'won' is not known
            assert not dashed and ax.get_legend() is None
        else:
            assert [ln.get_ydata()[0] for ln in dashed] == [level] and dashed[0].get_label() == "random agent"
    plain = plot_curve(csv_path, png)
    assert len(plain.axes) == 4 and not any(ln.get_linestyle() == "--" for ax in plain.axes for ln in ax.lines)


def test_plot_curve_without_game_metrics(tmp_path):
    from gymloop.train.ppo import plot_curve

    _metrics_csv(tmp_path / "metrics.csv", with_game_metrics=False)
    fig = plot_curve(str(tmp_path / "metrics.csv"), str(tmp_path / "curve.png"), random_level={"episode_return": 0.0})
    assert len(fig.axes) == 2


def test_progress_line_says_return_and_the_games_own_metrics(capsys):
    from gymloop.train.progress import Progress

    p = Progress(1000, enabled=True)
    p.update(1000, {"steps_per_second": 500.0, "reward_mean": 0.5, "episode_return_mean": 2.5, "episode_return_count": 4.0,
                    "episode_length_mean": 30.0, "episode_length_count": 4.0, "length_mean": 3.5, "length_count": 4.0})
    p.close()
    line = capsys.readouterr().err
    assert "return   2.50  ep.len   30.0  game: length=3.50" in line and "score" not in line and "reward" not in line


def test_progress_line_keeps_the_latest_episodes_through_updates_where_none_ended(capsys):
    """A fixed-length game whose copies all end together has no finished episode in most updates:
    the line shows the latest ones (about the last 100 episodes), never nan once one has ended."""
    from gymloop.train.progress import PROGRESS_EPISODES, Progress

    p = Progress(10_000, enabled=True)
    p.tty = True  # (every update rewrites the line, as on a terminal)
    none = {"steps_per_second": 500.0, "episode_return_mean": float("nan"), "episode_return_count": 0.0}
    p.update(100, none)
    assert "return      -  ep.len      -" in capsys.readouterr().err
    p.update(200, {"steps_per_second": 500.0, "episode_return_mean": 1.0, "episode_return_count": 60.0,
                   "episode_length_mean": 50.0, "episode_length_count": 60.0})
    for step in (300, 400, 500):
        p.update(step, none)
    line = capsys.readouterr().err.split("\r")[-1]
    assert "nan" not in line and "return   1.00  ep.len   50.0" in line
    p.update(600, {"steps_per_second": 500.0, "episode_return_mean": 3.0, "episode_return_count": 60.0})
    assert p.mean("episode_return") == pytest.approx(2.0)  # 60 old at 1.0 and 60 new at 3.0: both needed for 100
    p.update(700, {"steps_per_second": 500.0, "episode_return_mean": 5.0, "episode_return_count": PROGRESS_EPISODES})
    assert p.mean("episode_return") == pytest.approx(5.0)  # the latest 100 alone
    p.close()


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_cli_train_draws_the_random_agents_level(tmp_path, monkeypatch):
    from gymloop.cli import main
    from gymloop.train import run_dir

    calls = []
    real = run_dir.plot_curve

    def recording(csv_path, png_path, random_level=None):
        calls.append(random_level)
        return real(csv_path, png_path, random_level=random_level)

    monkeypatch.setattr(run_dir, "plot_curve", recording)
    out = str(tmp_path / "cli")
    assert main(["train", "snake", "--steps", "1024", "--out", out, "--quiet", "--eval-episodes", "20", "--set", "num_envs=32",
                 "--set", "rollout_steps=8", "--set", "ppo.minibatch_size=128", "--set", "threads=1", "--set", "net.d_model=16",
                 "--set", "net.n_head=2"]) == 0
    assert len(calls) == 1  # drawn once, at the end of the run, with the random agent's level
    assert set(calls[0]) == {"episode_return", "episode_length", "length"}
    assert os.path.getsize(os.path.join(out, "curve.png")) > 0


def test_resume_keeps_the_automatic_shape_the_run_was_trained_with(tmp_path):
    out = str(tmp_path / "run")
    first = TrainConfig(steps=2048, seed=0)
    first.net = NetConfig(d_model=16, n_head=2)
    r1 = Trainer(tg.bandit, first, out_dir=out, game_name="bandit")
    r1.train()
    assert (r1.cfg.num_envs, r1.cfg.ppo.epochs) == (128, 3)
    # a much larger budget would resolve to 512 copies and one pass; the resumed run keeps its shape
    more = TrainConfig(steps=3_000_000, seed=0)
    more.net = NetConfig(d_model=16, n_head=2)
    r2 = Trainer(tg.bandit, more, out_dir=out, game_name="bandit", resume=True)
    assert (r2.cfg.num_envs, r2.cfg.ppo.epochs, r2.cfg.ppo.minibatch_size, r2.cfg.ppo.lr) == (
        r1.cfg.num_envs, r1.cfg.ppo.epochs, r1.cfg.ppo.minibatch_size, r1.cfg.ppo.lr)
    assert TrainConfig(steps=3_000_000).resolved().num_envs == 512
    # a field set explicitly wins over the recorded one
    explicit = TrainConfig(steps=3_000_000, seed=0, num_envs=256)
    explicit.net = NetConfig(d_model=16, n_head=2)
    assert Trainer(tg.bandit, explicit, out_dir=out, game_name="bandit", resume=True).cfg.num_envs == 256


def test_resume_checks_the_recorded_shape_against_the_fields_given_now(tmp_path):
    out = str(tmp_path / "run")
    first = TrainConfig(steps=2048, seed=0)
    first.net = NetConfig(d_model=16, n_head=2)
    Trainer(tg.bandit, first, out_dir=out, game_name="bandit").train()  # records 128 copies x 16 steps
    bigger = TrainConfig(steps=3_000_000, seed=0)
    bigger.ppo.minibatch_size = 4096  # fits the 512 copies of a fresh 3M run, not the recorded 2,048-step rollout
    bigger.net = NetConfig(d_model=16, n_head=2)
    with pytest.raises(gl.ConfigError, match="larger than the rollout .* recorded by the run being resumed"):
        Trainer(tg.bandit, bigger, out_dir=out, game_name="bandit", resume=True)


def test_resume_takes_an_optimizer_state_written_by_torch_optim_adam(tmp_path):
    """Runs saved before gymloop had its own Adam wrote ``torch.optim.Adam``'s state: they resume."""
    out = str(tmp_path / "run")
    cfg = TrainConfig(steps=2048, seed=0, net=NetConfig(d_model=16, n_head=2))
    t = Trainer(tg.bandit, cfg, out_dir=out, game_name="bandit")
    t.train()
    params = list(t.policy.parameters())
    old = torch.optim.Adam(params, lr=1e-3, eps=1e-5, fused=True)  # what earlier versions trained with
    for _ in range(3):
        for p in params:
            p.grad = torch.randn_like(p)
        old.step()
    t.optim = old
    t.save()
    want = {i: (st["exp_avg"].clone(), float(st["step"])) for i, st in old.state_dict()["state"].items()}
    r = Trainer(tg.bandit, TrainConfig(steps=4096, seed=0, net=NetConfig(d_model=16, n_head=2)), out_dir=out, game_name="bandit",
                resume=True)
    r._setup()
    try:
        got = r.optim.state_dict()["state"]
        assert set(got) == set(want)
        for i, (m, step) in want.items():
            assert float(got[i]["step"]) == step
            assert torch.equal(got[i]["exp_avg"], m)
    finally:
        r.env.close()
        if r.tb is not None:
            r.tb.close()


def test_a_config_error_names_the_automatic_values_it_came_from():
    cfg = TrainConfig(steps=49_152)
    cfg.ppo.minibatch_size = 4096  # larger than the automatic rollout (128 copies x 16 steps)
    with pytest.raises(gl.ConfigError, match=r"larger than the rollout .*chosen automatically for steps=49152: num_envs=128"):
        cfg.check()


def test_set_auto_returns_an_automatic_field_to_automatic_but_keeps_string_values():
    from gymloop.cli import _parse_overrides

    cfg = TrainConfig(steps=49_152, num_envs=256)
    _parse_overrides(cfg, ["num_envs=auto", "ppo.lr=1e-3", "ppo.epochs=2"])
    assert (cfg.num_envs, cfg.ppo.lr, cfg.ppo.epochs) == (None, 1e-3, 2)
    _parse_overrides(cfg, ["ppo.lr=auto", "ppo.epochs=none", "net.relpos=none", "net.relpos=auto"])
    assert (cfg.ppo.lr, cfg.ppo.epochs, cfg.net.relpos) == (None, None, "auto")  # relpos: "auto" is its own value
    assert cfg.resolved().ppo.lr == 3e-3
    with pytest.raises(gl.ConfigError, match="config field 'ppo.epochs' expects an int, got 'many'"):
        _parse_overrides(cfg, ["ppo.epochs=many"])


@pytest.mark.slow  # two CLI training runs, ~3 s: out of the fast tier, which must stay under a minute
def test_cli_resume_keeps_the_random_agents_level(tmp_path, capsys):
    from gymloop.cli import main
    from gymloop.train.run_dir import RANDOM_LEVEL_FILE

    out = str(tmp_path / "run")
    small = ["--set", "net.d_model=16", "--set", "num_envs=16", "--eval-episodes", "8", "--quiet", "--out", out]
    assert main(["train", "snake", "--steps", "512", *small]) == 0
    with open(os.path.join(out, RANDOM_LEVEL_FILE)) as f:
        level = json.load(f)
    assert level["episode_return"] == pytest.approx(evaluate(gl.games.snake.snake, None, episodes=8, seed=1)["episode_return"])
    capsys.readouterr()
    assert main(["train", "snake", "--steps", "1024", "--resume", *small]) == 0
    out_text = capsys.readouterr().out
    # the summary compares against the level measured before the first run
    assert f"episode_return       random agent {level['episode_return']:8.2f}" in out_text
    assert RANDOM_LEVEL_FILE in out_text
    # a new run without an evaluation leaves no earlier run's level behind
    assert main(["train", "snake", "--steps", "512", *small[:4], "--eval-episodes", "0", "--quiet", "--out", out]) == 0
    assert not os.path.exists(os.path.join(out, RANDOM_LEVEL_FILE))


def test_the_progress_line_counts_to_the_steps_the_run_makes(capsys):
    """A budget that is not a whole number of rollouts is rounded up: the line counts to that, not past the budget."""
    cfg = tiny(1000)  # rounded up to whole rollouts
    r = Trainer(tg.bandit, cfg, progress=True).train()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert r.steps > 1000 and f"{r.steps}/{r.steps} steps" in last


def test_a_results_repr_is_one_line_that_counts_the_history():
    from gymloop.train.ppo import TrainResult

    r = TrainResult(4096, 2, 1.25, False, None, [{"episode_return_mean": 0.5}, {"episode_return_mean": 1.0}])
    assert repr(r) == ("TrainResult(steps=4096, updates=2, seconds=1.2, interrupted=False, out_dir=None, history=[2 rows], "
                       "first_step=0, stop_signal=None, final_score=0.75)")
