"""How a training budget becomes a rollout shape: the automatic ``num_envs``, minibatch, epochs and
learning rate of :meth:`gymloop.train.TrainConfig.resolved`.

The rules (the reasoning and the measurements behind them are in ``docs/training.md``):

- ``num_envs``: about :data:`TARGET_UPDATES` PPO updates over ``steps``, as a power of two in
  ``[MIN_ENVS, MAX_ENVS]``: a small budget gets small rollouts and many updates, a large one the
  widest rollouts (the fastest steps per second).
- ``ppo.minibatch_size``: a quarter of the rollout, at most :data:`MAX_MINIBATCH`.
- ``ppo.epochs``: :data:`MAX_EPOCHS` at :data:`MIN_ENVS` copies, scaled down as the rollout widens
  (2 at 256 copies, 1 at 512): the smaller the budget, the more each sample is reused; the larger,
  the more the run is about steps per second.
- ``ppo.lr``: :data:`BASE_LR` for one pass per rollout or a short run; a multi-pass run longer than
  :data:`SHORT_RUN_PASSES` passes gets ``BASE_LR * sqrt(72 / passes)`` (1e-3 at 400K steps), since
  its many passes over many rollouts compound.

Example:
    >>> from gymloop.train.budget import auto_shape
    >>> auto_shape(steps=49_152, per_env=16)
    (128, 512, 3, 0.003)
"""

from __future__ import annotations

import math

__all__ = ["BASE_LR", "MAX_ENVS", "MAX_EPOCHS", "MAX_MINIBATCH", "MIN_ENVS", "SHORT_RUN_PASSES", "TARGET_UPDATES", "auto_shape",
           "divisor_near"]

#: PPO updates the automatic ``num_envs`` aims at over a run.
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


def auto_shape(steps: int, per_env: int, num_envs: int | None = None, minibatch_size: int | None = None,
               epochs: int | None = None, lr: float | None = None) -> tuple[int, int, int, float]:
    """``(num_envs, minibatch_size, epochs, lr)`` for a run of ``steps`` slot-steps whose game copy
    gives ``per_env`` slot-steps a rollout (``rollout_steps * agents_per_game``): each ``None``
    chosen by the rules above, the others kept as given.
    """
    if num_envs is None:
        want = steps / (per_env * TARGET_UPDATES)
        num_envs = int(min(MAX_ENVS, max(MIN_ENVS, 2 ** round(math.log2(max(want, 1.0))))))
    rollout = num_envs * per_env
    if minibatch_size is None:
        minibatch_size = divisor_near(rollout, min(MAX_MINIBATCH, max(1, rollout // 4)))
    if epochs is None:  # 3 at the fewest copies, falling to 1 as the rollout widens
        epochs = min(MAX_EPOCHS, max(1, round(MAX_EPOCHS * MIN_ENVS / num_envs)))
    if lr is None:
        passes = epochs * max(1, math.ceil(steps / rollout))
        lr = BASE_LR if epochs == 1 else BASE_LR * min(1.0, math.sqrt(SHORT_RUN_PASSES / passes))
    return num_envs, minibatch_size, epochs, lr


def divisor_near(n: int, target: int) -> int:
    """The divisor of ``n`` nearest ``target`` (the smaller one on a tie); O(sqrt(n)).

    Example:
        >>> divisor_near(1024, 300), divisor_near(96, 40), divisor_near(7, 3)
        (256, 32, 1)
    """
    divisors: set[int] = set()
    k = 1
    while k * k <= n:
        if n % k == 0:
            divisors.update((k, n // k))
        k += 1
    return min(divisors, key=lambda d: (abs(d - target), d))
