"""Typed training configuration; relationships are checked at start-up."""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError
from ..nn.config import NetConfig

__all__ = ["PPOConfig", "TrainConfig"]

#: PPO updates the automatic ``num_envs`` aims at over a run (see :meth:`TrainConfig.resolved`).
TARGET_UPDATES = 256
#: bounds of the automatic ``num_envs``.
MIN_ENVS, MAX_ENVS = 128, 512
#: the automatic minibatch is a quarter of the rollout, at most this.
MAX_MINIBATCH = 2048
#: automatic ``ppo.epochs`` at :data:`MIN_ENVS` copies (fewer as ``num_envs`` grows, at least 1).
MAX_EPOCHS = 3
#: the automatic learning rate of a one-pass run or a short multi-pass one ...
BASE_LR = 3e-3
#: ... where short means at most this many passes (epochs x updates); beyond, it shrinks with their square root.
SHORT_RUN_PASSES = 72


@dataclass
class PPOConfig:
    """PPO hyperparameters.

    Attributes:
        lr: Adam learning rate; ``None``: chosen from the run's shape (see :meth:`TrainConfig.resolved`).
        anneal_lr: decay the learning rate linearly to 0 over training.
        gamma: discount factor.
        gae_lambda: GAE lambda.
        clip_coef: policy ratio clipping.
        clip_vloss: clip the value loss around the old values.
        vf_coef: value loss weight.
        ent_coef: entropy bonus weight.
        anneal_entropy: decay the entropy bonus linearly to 0 over training.
        max_grad_norm: gradient norm clipping.
        norm_adv: normalize advantages per minibatch.
        epochs: passes over each rollout; ``None``: chosen from the budget (see
            :meth:`TrainConfig.resolved`).
        minibatch_size: slot-steps per minibatch (must divide the rollout, ``num_envs *
            agents_per_game * rollout_steps``); ``None``: chosen from the rollout (see
            :meth:`TrainConfig.resolved`).
        scale_rewards: divide rewards by a running estimate of the standard deviation of the
            discounted return before computing values and advantages (the reported returns stay
            the game's own). Off by default: on entity-gym's examples it learned less at 49K
            steps than unscaled rewards (docs/training.md); worth trying for a game whose rewards
            are very large or very small.
        chunk_size: a minibatch is run through the network in chunks of at most this many
            slot-steps, grouped by entity count to keep padding small.
    """

    lr: float | None = None
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    clip_vloss: bool = True
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    anneal_entropy: bool = True
    max_grad_norm: float = 2.0
    norm_adv: bool = True
    epochs: int | None = None
    minibatch_size: int | None = None
    chunk_size: int = 512
    scale_rewards: bool = False


@dataclass
class TrainConfig:
    """Everything a training run needs.

    Attributes:
        steps: total environment steps (decisions of all slots).
        num_envs: game copies; ``None``: chosen from the budget (see :meth:`resolved`).
        rollout_steps: steps per game copy between updates.
        workers: worker processes for the games (0: in the trainer's process).
        seed: root seed (environments, network init, sampling).
        threads: PyTorch threads (1 by default: with 2 on a loaded 2-core machine, some updates
            stalled for seconds while one thread waited for the other).
        ppo: PPO hyperparameters.
        net: network hyperparameters.
        agents_per_game: agents per game copy (2 for self-play).
        opponents: checkpoint paths of frozen opponents for self-play (empty: the learning policy
            plays every side).
        checkpoint_every: also save a checkpoint every this many updates (0: only at the end).
        init_from: warm-start from this older agent checkpoint (the network's sizes come from it;
            features the game added since start with zero weights, so the agent behaves exactly as
            before at step 0; see :mod:`gymloop.train.warmstart`).
    """

    steps: int = 1_000_000
    num_envs: int | None = None
    rollout_steps: int = 16
    workers: int = 0
    seed: int = 0
    threads: int = 1
    ppo: PPOConfig = field(default_factory=PPOConfig)
    net: NetConfig = field(default_factory=NetConfig)
    agents_per_game: int = 1
    opponents: list[str] = field(default_factory=list)
    checkpoint_every: int = 0
    init_from: str | None = None

    @property
    def batch_size(self) -> int:
        """Slot-steps per rollout (of the :meth:`resolved` configuration)."""
        return self.shape()[0] * self.agents_per_game * self.rollout_steps

    def resolved(self) -> TrainConfig:
        """A copy with every automatic (``None``) field chosen from the budget.

        The rules (the reasoning and the measurements behind them are in ``docs/training.md``):

        - ``num_envs``: about :data:`TARGET_UPDATES` PPO updates over ``steps``, as a power of two
          in ``[MIN_ENVS, MAX_ENVS]``: a small budget gets small rollouts and many updates, a
          large one the widest rollouts (the fastest steps per second).
        - ``ppo.minibatch_size``: a quarter of the rollout, at most :data:`MAX_MINIBATCH`.
        - ``ppo.epochs``: :data:`MAX_EPOCHS` at :data:`MIN_ENVS` copies, scaled down as the
          rollout widens (2 at 256 copies, 1 at 512): the smaller the budget, the more each
          sample is reused; the larger, the more the run is about steps per second.
        - ``ppo.lr``: :data:`BASE_LR` for one pass per rollout or a short run; a multi-pass run
          longer than :data:`SHORT_RUN_PASSES` passes gets ``BASE_LR * sqrt(72 / passes)``
          (1e-3 at 400K steps), since its many passes over many rollouts compound.

        Example:
            >>> from gymloop.train import TrainConfig
            >>> r = TrainConfig(steps=49_152).resolved()
            >>> r.num_envs, r.ppo.minibatch_size, r.ppo.epochs
            (128, 512, 3)
            >>> r = TrainConfig(steps=3_000_000).resolved()
            >>> r.num_envs, r.ppo.minibatch_size, r.ppo.epochs
            (512, 2048, 1)
        """
        r = copy.deepcopy(self)
        steps = self.steps if isinstance(self.steps, int) and self.steps > 0 else 1
        per_env = max(1, self.rollout_steps) * max(1, self.agents_per_game)
        if r.num_envs is None:
            want = steps / (per_env * TARGET_UPDATES)
            r.num_envs = int(min(MAX_ENVS, max(MIN_ENVS, 2 ** round(math.log2(max(want, 1.0))))))
        rollout = r.num_envs * per_env
        if r.ppo.minibatch_size is None:
            r.ppo.minibatch_size = _divisor_near(rollout, min(MAX_MINIBATCH, max(1, rollout // 4)))
        if r.ppo.epochs is None:  # 3 at the fewest copies, falling to 1 as the rollout widens
            r.ppo.epochs = min(MAX_EPOCHS, max(1, round(MAX_EPOCHS * MIN_ENVS / r.num_envs)))
        if r.ppo.lr is None:
            passes = r.ppo.epochs * max(1, math.ceil(steps / rollout))
            r.ppo.lr = BASE_LR if r.ppo.epochs == 1 else BASE_LR * min(1.0, math.sqrt(SHORT_RUN_PASSES / passes))
        return r

    def shape(self) -> tuple[int, int, int]:
        """``(num_envs, ppo.epochs, ppo.minibatch_size)`` of the :meth:`resolved` configuration."""
        r = self.resolved()
        if r.num_envs is None or r.ppo.epochs is None or r.ppo.minibatch_size is None:  # resolved() fills all three
            raise ConfigError(f"the automatic fields were not resolved: {r}")
        return r.num_envs, r.ppo.epochs, r.ppo.minibatch_size

    def check(self) -> None:
        """Raise :class:`ConfigError` with the fix if the configuration cannot work."""
        for name in ("steps", "num_envs", "rollout_steps", "threads", "agents_per_game"):
            v = getattr(self, name)
            if v is None and name == "num_envs":
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{name} must be a positive int{' or None (automatic)' if name == 'num_envs' else ''}, got {v!r}")
        for name in ("epochs", "minibatch_size"):
            v = getattr(self.ppo, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ConfigError(f"ppo.{name} must be a positive int or None (automatic), got {v!r}")
        if self.num_envs is None or self.ppo.minibatch_size is None or self.ppo.epochs is None or self.ppo.lr is None:
            r = self.resolved()
            try:
                r.check()
            except ConfigError as e:
                auto = [f"{k}={v}" for k, v, mine in (
                    ("num_envs", r.num_envs, self.num_envs), ("ppo.minibatch_size", r.ppo.minibatch_size, self.ppo.minibatch_size),
                    ("ppo.epochs", r.ppo.epochs, self.ppo.epochs), ("ppo.lr", r.ppo.lr, self.ppo.lr)) if mine is None]
                raise ConfigError(f"{e} (chosen automatically for steps={self.steps}: {', '.join(auto)})") from None
            return
        if self.workers < 0:
            raise ConfigError(f"workers must be >= 0, got {self.workers}")
        p = self.ppo
        _, _, mb = self.shape()
        if mb > self.batch_size:
            raise ConfigError(
                f"ppo.minibatch_size={p.minibatch_size} is larger than the rollout (num_envs * agents_per_game * "
                f"rollout_steps = {self.batch_size}); lower minibatch_size or raise num_envs/rollout_steps"
            )
        if self.batch_size % mb:
            raise ConfigError(
                f"ppo.minibatch_size={p.minibatch_size} must divide the rollout size {self.batch_size} "
                f"(num_envs * agents_per_game * rollout_steps); e.g. minibatch_size={_divisor_near(self.batch_size, mb)}"
            )
        if not 0 < p.gamma <= 1 or not 0 <= p.gae_lambda <= 1:
            raise ConfigError(f"ppo.gamma must be in (0, 1] and gae_lambda in [0, 1], got {p.gamma}, {p.gae_lambda}")
        if p.lr is None or p.lr <= 0:
            raise ConfigError(f"ppo.lr must be positive (or None: automatic), got {p.lr}")
        if self.opponents and self.agents_per_game < 2:
            raise ConfigError("opponents need a multi-agent game: set agents_per_game >= 2")
        if self.init_from is not None and not isinstance(self.init_from, str):
            raise ConfigError(f"init_from must be a checkpoint path, got {self.init_from!r}")
        self.net.check()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["net"] = self.net.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        d["ppo"] = PPOConfig(**d.get("ppo", {}))
        d["net"] = NetConfig.from_dict(d.get("net", {}))
        return cls(**d)


def _divisor_near(n: int, target: int) -> int:
    best = 1
    for k in range(1, n + 1):
        if n % k == 0 and abs(k - target) < abs(best - target):
            best = k
    return best


#: The meaningful values of each field, as :mod:`gymloop.train.reference` shows them in ``docs/config.md``
#: (``{class name: {field: range}}``). Every field needs one: the reference refuses to generate without it.
RANGES: dict[str, dict[str, str]] = {
    "TrainConfig": {
        "steps": ">= 1 (rounded up to whole rollouts)",
        "num_envs": ">= 1, or None (automatic)",
        "rollout_steps": ">= 1",
        "workers": ">= 0",
        "seed": ">= 0",
        "threads": ">= 1",
        "ppo": "the `ppo.` fields below",
        "net": "the `net.` fields below",
        "agents_per_game": ">= 1, the game's number of agents; >= 2 with opponents",
        "opponents": "agent checkpoint paths of this game; non-empty needs agents_per_game >= 2",
        "checkpoint_every": ">= 0",
        "init_from": "an agent checkpoint path of this game, or None",
    },
    "PPOConfig": {
        "lr": "> 0, or None (automatic)",
        "anneal_lr": "True, False",
        "gamma": "(0, 1]",
        "gae_lambda": "[0, 1]",
        "clip_coef": "> 0 (0.1 to 0.3 is usual)",
        "clip_vloss": "True, False",
        "vf_coef": ">= 0",
        "ent_coef": ">= 0",
        "anneal_entropy": "True, False",
        "max_grad_norm": "> 0",
        "norm_adv": "True, False",
        "epochs": ">= 1, or None (automatic)",
        "minibatch_size": ">= 1 and a divisor of the rollout (num_envs * agents_per_game * rollout_steps), or None (automatic)",
        "chunk_size": ">= 1",
        "scale_rewards": "True, False",
    },
}
