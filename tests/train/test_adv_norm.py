"""Advantage normalization (``PPOConfig.adv_norm``): the values each mode gives, its validation, the
older ``norm_adv`` switch, and the running statistics through a checkpoint and ``--resume``."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import train_games as tg
from support.train_games import tiny

import gymloop as gl  # noqa: E402
from gymloop.checkpoint import read_safetensors  # noqa: E402
from gymloop.train import PPOConfig  # noqa: E402
from gymloop.train.ppo import AdvantageNormalizer, Trainer  # noqa: E402

F = np.float32


def test_minibatch_mode_centres_and_scales_each_minibatch():
    n = AdvantageNormalizer("minibatch")
    out = n(np.array([1, 2, 3, 4], dtype=F))
    sd = math.sqrt(1.25)
    np.testing.assert_allclose(out, [-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd], rtol=1e-6)
    assert out.dtype == F
    # one slot-step: nothing to centre on, it stays as it came
    np.testing.assert_array_equal(n(np.array([3.0], dtype=F)), [3.0])


def test_rollout_mode_uses_the_whole_rollouts_mean_and_spread():
    n = AdvantageNormalizer("rollout")
    n.observe(np.array([[0, 2], [4, 6]], dtype=F))  # mean 3, variance 5
    np.testing.assert_allclose(n(np.array([2, 4], dtype=F)), [-1 / math.sqrt(5), 1 / math.sqrt(5)], rtol=1e-6)
    # a minibatch of one is normalized too: the statistics are the rollout's
    np.testing.assert_allclose(n(np.array([8], dtype=F)), [5 / math.sqrt(5)], rtol=1e-6)


def test_running_mode_divides_by_the_bias_corrected_average_of_the_rollouts_variances():
    n = AdvantageNormalizer("running", decay=0.5)
    assert n.running_std == 0.0
    n.observe(np.array([-2, 2], dtype=F))  # variance 4; the first rollout counts fully
    assert n.running_std == pytest.approx(2.0)
    n.observe(np.array([-1, 1], dtype=F))  # variance 1: (0.5 * 0.5 * 4 + 0.5 * 1) / (0.5 * 0.5 + 0.5) = 2
    assert n.running_std == pytest.approx(math.sqrt(2))
    # centred on the minibatch's mean, but not stretched to unit scale: a minibatch of small advantages stays small
    np.testing.assert_allclose(n(np.array([0, 0.2], dtype=F)), [-0.1 / math.sqrt(2), 0.1 / math.sqrt(2)], rtol=1e-5)


def test_max_mode_takes_the_larger_of_the_minibatch_and_running_spread():
    n = AdvantageNormalizer("max", decay=0.5)
    n.observe(np.array([-2, 2], dtype=F))
    n.observe(np.array([-1, 1], dtype=F))  # running std sqrt(2), as above
    np.testing.assert_allclose(n(np.array([0, 10], dtype=F)), [-1, 1], rtol=1e-6)  # its own std 5 is larger
    np.testing.assert_allclose(n(np.array([0, 0.2], dtype=F)), [-0.1 / math.sqrt(2), 0.1 / math.sqrt(2)], rtol=1e-5)


def test_none_mode_and_the_state_round_trip():
    a = np.array([0.5, -3.0], dtype=F)
    assert AdvantageNormalizer("none")(a) is a
    n = AdvantageNormalizer("running")
    n.observe(np.array([1, 3, 7], dtype=F))
    m = AdvantageNormalizer("running")
    m.load(json.loads(json.dumps(n.state())))
    assert m.running_std == n.running_std > 0


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(adv_norm="batch"), r"ppo.adv_norm='batch' is not one of the choices: expected \"minibatch\", \"rollout\", "
                                 r"\"running\", \"max\", \"none\""),
        (dict(adv_norm=None), r"ppo.adv_norm=None is not accepted"),
        (dict(adv_decay=1.0), r"ppo.adv_decay=1.0 is out of range: expected \[0, 1\)"),
        (dict(norm_adv="yes"), r"ppo.norm_adv='yes' is a str, not True or False"),
        (dict(norm_adv=False, adv_norm="running"), r"ppo.norm_adv=False turns advantage normalization off, but "
                                                   r"ppo.adv_norm='running' asks for it; set only ppo.adv_norm"),
        (dict(norm_adv=True, adv_norm="none"), r"ppo.norm_adv=True asks for normalized advantages, but ppo.adv_norm='none'"),
    ],
)
def test_bad_adv_norm_settings_fail_at_start_with_the_fix(change, match):
    cfg = tiny(1024)
    for k, v in change.items():
        setattr(cfg.ppo, k, v)
    with pytest.raises(gl.ConfigError, match=match):
        Trainer(tg.bandit, cfg)


def test_the_older_norm_adv_switch_folds_into_adv_norm():
    default = PPOConfig.adv_norm
    assert PPOConfig().adv_mode() == default
    assert PPOConfig(norm_adv=False).adv_mode() == "none"
    assert PPOConfig(norm_adv=True, adv_norm="running").adv_mode() == "running"
    assert PPOConfig(norm_adv=False, adv_norm="none").adv_mode() == "none"


def _curve(**ppo) -> list[tuple[float, float]]:
    cfg = tiny(1024)
    for k, v in ppo.items():
        setattr(cfg.ppo, k, v)
    return [(h["episode_return_mean"], h["loss/policy"]) for h in gl.train.train(tg.bandit, cfg).history]


@pytest.mark.slow  # three short trainings (~1 s)
def test_norm_adv_spellings_train_exactly_as_their_adv_norm():
    assert _curve(norm_adv=True, adv_norm="minibatch") == _curve(adv_norm="minibatch")
    assert _curve(norm_adv=False) == _curve(adv_norm="none")
    assert _curve(adv_norm="running") != _curve(adv_norm="minibatch")


def test_running_statistics_are_checkpointed_and_resumed(tmp_path):
    out = str(tmp_path / "run")
    cfg = tiny(1024)
    cfg.ppo.adv_norm = "running"
    t1 = Trainer(tg.bandit, cfg, out_dir=out)
    t1.train()
    _, meta = read_safetensors(os.path.join(out, "optimizer.safetensors"))
    saved = json.loads(meta["adv_norm"])
    assert saved == t1.adv_norm.state() and saved["weight"] > 0
    assert saved["weight"] == pytest.approx(1 - 0.9**4)  # 4 rollouts of 32 copies x 8 steps
    cfg2 = tiny(2048)
    cfg2.ppo.adv_norm = "running"
    t2 = Trainer(tg.bandit, cfg2, out_dir=out, resume=True)
    t2.train()
    # 4 more rollouts on top of the saved statistics (a fresh start would be back at 1 - 0.9**4)
    assert t2.adv_norm.weight == pytest.approx(1 - 0.9**8)

