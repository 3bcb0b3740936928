"""The normalizers of a PPO run: rewards scaled by the running deviation of the return
(:class:`RewardScaler`, ``PPOConfig.scale_rewards``) and advantages normalized as ``PPOConfig.adv_norm``
says (:class:`AdvantageNormalizer`). Both carry state across rollouts, which a checkpoint saves
(:meth:`state`, :meth:`load`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from .config import ADV_NORMS, LR_SCALE_RANGE, MAX_ADAPTED_LR

__all__ = ["AdvantageNormalizer", "RewardScaler", "StepSize"]


class RewardScaler:
    """Running standard deviation of each slot's discounted return, to scale rewards by.

    The return is accumulated per slot as the agent sees it (``ret = ret * gamma + reward``,
    reset at episode ends); its second moment over every slot and step so far (Welford's
    parallel update) gives the scale. Scaled rewards are clipped to ``[-clip, clip]`` so the
    first rewards of a game that was silent until then cannot explode.
    """

    def __init__(self, num_slots: int, gamma: float, clip: float = 10.0) -> None:
        self.gamma, self.clip = gamma, clip
        self.ret = np.zeros(num_slots, dtype=np.float64)
        self.count, self.mean, self.var = 0.0, 0.0, 0.0

    def update(self, rewards: np.ndarray, done: np.ndarray) -> None:
        """Fold one step of rewards (and which slots' episodes ended) into the statistics."""
        self.ret = self.ret * self.gamma + rewards
        n = float(self.ret.size)
        if n:
            m, v = float(self.ret.mean()), float(self.ret.var())
            total = self.count + n
            delta = m - self.mean
            self.mean += delta * n / total
            self.var = (self.var * self.count + v * n + delta**2 * self.count * n / total) / total
            self.count = total
        self.ret[done] = 0.0

    @property
    def scale(self) -> float:
        """The divisor: the return's standard deviation (1 until it has seen a non-zero reward)."""
        sd = math.sqrt(self.var)
        return sd if sd > 1e-8 else 1.0

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return np.clip(rewards / self.scale, -self.clip, self.clip).astype(np.float32)

    def state(self) -> dict[str, Any]:
        """The statistics and each slot's running return, as JSON values (what a checkpoint keeps)."""
        return {"ret": self.ret.tolist(), "count": self.count, "mean": self.mean, "var": self.var}

    def load(self, d: dict[str, Any]) -> None:
        """Take a :meth:`state` back (the running returns only when saved for as many slots)."""
        ret = np.asarray(d["ret"], dtype=np.float64)
        if ret.shape == self.ret.shape:
            self.ret = ret
        self.count, self.mean, self.var = float(d["count"]), float(d["mean"]), float(d["var"])


class AdvantageNormalizer:
    """Advantage normalization of one run (``PPOConfig.adv_norm``; see its docstring for the modes).

    :meth:`observe` takes each rollout's advantages once, before its update (the whole rollout's
    mean and variance; the running variance, an exponential average with bias correction);
    calling the normalizer on a minibatch's advantages returns them normalized (a new array).
    """

    def __init__(self, mode: str, decay: float = 0.9) -> None:
        self.mode, self.decay = mode, decay
        self.rollout_mean, self.rollout_std = 0.0, 1.0
        self.var_ema, self.weight = 0.0, 0.0  # the running variance is var_ema / weight

    def observe(self, adv: np.ndarray) -> None:
        """Fold one rollout's advantages (any shape) into the statistics."""
        if adv.size == 0:
            return
        a = adv.astype(np.float64, copy=False)
        mean, var = float(a.mean()), float(a.var())
        self.rollout_mean, self.rollout_std = mean, math.sqrt(var)
        self.var_ema = self.decay * self.var_ema + (1 - self.decay) * var
        self.weight = self.decay * self.weight + (1 - self.decay)

    @property
    def running_std(self) -> float:
        """The running standard deviation of the advantages (0 before the first rollout)."""
        return math.sqrt(self.var_ema / self.weight) if self.weight > 0 else 0.0

    def __call__(self, adv: np.ndarray) -> np.ndarray:
        mode = self.mode
        if mode == "none":
            return adv
        if mode == "rollout":
            return ((adv - self.rollout_mean) / (self.rollout_std + 1e-8)).astype(adv.dtype, copy=False)
        if adv.size <= 1:  # one slot-step: nothing to centre on
            return adv
        if mode == "minibatch":  # in the input's dtype, without a cast
            return (adv - adv.mean()) / (adv.std() + 1e-8)
        centred = adv - adv.mean()
        if mode == "running":
            scale = self.running_std
        elif mode == "max":
            scale = max(float(adv.std()), self.running_std)
        else:
            raise ConfigError(f"ppo.adv_norm={mode!r} is not one of the choices: {', '.join(map(repr, ADV_NORMS))}")
        return (centred / (scale + 1e-8)).astype(adv.dtype, copy=False)

    def state(self) -> dict[str, Any]:
        """The running statistics, as JSON values (what a checkpoint keeps)."""
        return {"var_ema": self.var_ema, "weight": self.weight}

    def load(self, d: dict[str, Any]) -> None:
        """Take a :meth:`state` back."""
        self.var_ema, self.weight = float(d["var_ema"]), float(d["weight"])


class StepSize:
    """The factor on the learning rate that keeps the policy's steps near ``PPOConfig.target_kl``.

    After each update, :meth:`observe` takes its mean ``approx_kl``: below half the target, the
    factor grows by 1.5; above twice the target, it shrinks by 1.5; within :data:`LR_SCALE_RANGE`,
    and never taking a learning rate ``lr`` above :data:`MAX_ADAPTED_LR` (a rate set above it
    only shrinks). Without a target (``None``) the factor stays 1.

    Example:
        >>> s = StepSize(0.01)
        >>> s.observe(0.001); s.observe(0.001); round(s.scale, 2)
        2.25
        >>> s.observe(0.05); s.scale
        1.5
    """

    def __init__(self, target: float | None, lr: float = 0.0) -> None:
        self.target = target
        self.scale = 1.0
        lo, hi = LR_SCALE_RANGE
        self.bounds = (lo, max(1.0, min(hi, MAX_ADAPTED_LR / lr)) if lr > 0 else hi)

    def observe(self, kl: float | None) -> None:
        """Fold one update's mean ``approx_kl`` in (``None`` or NaN: no actor acted; nothing changes)."""
        target = self.target
        if target is None or kl is None or not math.isfinite(kl):
            return
        lo, hi = self.bounds
        if kl < target / 2:
            self.scale = min(self.scale * 1.5, hi)
        elif kl > target * 2:
            self.scale = max(self.scale / 1.5, lo)

    def state(self) -> dict[str, Any]:
        """The factor, as JSON values (what a checkpoint keeps)."""
        return {"scale": self.scale}

    def load(self, d: dict[str, Any]) -> None:
        """Take a :meth:`state` back."""
        self.scale = float(d["scale"])
