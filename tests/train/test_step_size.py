"""The learning rate's factor that keeps each update's KL near ``ppo.target_kl`` (:class:`StepSize`):
its rule, its bounds, its checkpoint and resume, and the switch that turns it off."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")

from support import train_games as tg  # noqa: E402
from support.train_games import tiny  # noqa: E402

from gymloop.checkpoint import read_safetensors  # noqa: E402
from gymloop.errors import ConfigError  # noqa: E402
from gymloop.train import PPOConfig, TrainConfig  # noqa: E402
from gymloop.train.config import LR_SCALE_RANGE, MAX_ADAPTED_LR  # noqa: E402
from gymloop.train.normalize import StepSize  # noqa: E402
from gymloop.train.ppo import Trainer  # noqa: E402


def test_the_factor_grows_below_half_the_target_and_shrinks_above_twice_it():
    s = StepSize(0.01)
    s.observe(0.006)  # within [target / 2, 2 target]: unchanged
    assert s.scale == 1.0
    s.observe(0.004)
    assert s.scale == pytest.approx(1.5)
    s.observe(0.03)
    assert s.scale == pytest.approx(1.0)
    for kl in (None, float("nan")):  # an update without actors: nothing to go by
        s.observe(kl)
    assert s.scale == 1.0


def test_the_factor_stays_within_its_range_and_under_the_largest_adapted_rate():
    lo, hi = LR_SCALE_RANGE
    s = StepSize(0.01, lr=1e-4)
    for _ in range(50):
        s.observe(0.0)
    assert s.scale == pytest.approx(hi)
    for _ in range(50):
        s.observe(1.0)
    assert s.scale == pytest.approx(lo)
    s = StepSize(0.01, lr=MAX_ADAPTED_LR / 4)  # raised at most to MAX_ADAPTED_LR
    for _ in range(50):
        s.observe(0.0)
    assert s.scale == pytest.approx(4)
    s = StepSize(0.01, lr=MAX_ADAPTED_LR * 2)  # a rate set above it is never raised
    s.observe(0.0)
    assert s.scale == 1.0


def test_without_a_target_the_factor_stays_one():
    s = StepSize(None)
    s.observe(0.0)
    assert s.scale == 1.0


def test_a_run_records_the_adapted_rate_checkpoints_the_factor_and_resumes_it(tmp_path):
    out = str(tmp_path / "run")
    t1 = Trainer(tg.bandit, tiny(1024, lr=1e-4), out_dir=out)  # a rate this small moves the policy too little
    h = t1.train().history
    assert t1.step_size.scale > 1
    replay = StepSize(PPOConfig.target_kl, 1e-4)
    for i, row in enumerate(h):  # each update's rate: annealed, times the factor the KLs before it gave
        assert row["lr"] == pytest.approx(1e-4 * (1 - i / len(h)) * replay.scale)
        replay.observe(row["loss/approx_kl"])
    assert replay.scale == t1.step_size.scale
    _, meta = read_safetensors(os.path.join(out, "optimizer.safetensors"))
    assert json.loads(meta["step_size"]) == t1.step_size.state()
    h2 = Trainer(tg.bandit, tiny(2048, lr=1e-4), out_dir=out, resume=True).train().history
    assert h2[0]["lr"] == pytest.approx(1e-4 * (1 - 4 / 8) * t1.step_size.scale)  # the factor went on where it was


def test_target_kl_none_trains_at_the_annealed_rate():
    cfg = tiny(1024, lr=1e-4)
    cfg.ppo.target_kl = None
    h = Trainer(tg.bandit, cfg).train().history
    assert [r["lr"] for r in h] == pytest.approx([1e-4 * (1 - i / 4) for i in range(4)])


@pytest.mark.parametrize("bad", [0.0, -0.01, float("nan"), float("inf"), "0.01"])
def test_a_bad_target_kl_fails_at_start_naming_the_field(bad):
    cfg = TrainConfig(ppo=PPOConfig(target_kl=bad))
    with pytest.raises(ConfigError, match="ppo.target_kl"):
        cfg.check()
