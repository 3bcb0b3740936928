"""A :class:`gymloop.VecEnv` driven with random actions: the batches it gives, for comparing backends."""

from __future__ import annotations

from typing import Any

import numpy as np

import gymloop as gl


def trajectory(game: Any, steps: int, n: int = 6, seed: int = 3, again: int = 0, **kw: Any) -> list[gl.Batch]:
    """The batches of ``gl.VecEnv(game, num_envs=n, seed=seed, **kw)`` over a reset and ``steps``
    steps of random legal actions (drawn from ``default_rng(0)``); with ``again``, then a second reset
    (a new generation of seeds) and ``again`` steps more. The VecEnv is closed."""
    env = gl.VecEnv(game, num_envs=n, seed=seed, **kw)
    rng = np.random.default_rng(0)
    try:
        out = [env.reset()]
        for _ in range(steps):
            out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))
        if again:
            out.append(env.reset())
            for _ in range(again):
                out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))
    finally:
        env.close()
    return out


def steps(env: gl.VecEnv, k: int) -> gl.Batch | None:
    """Step ``env`` ``k`` times with ``env.sample_actions()``; the last batch (``None`` when ``k`` is 0)."""
    b = None
    for _ in range(k):
        b = env.step(env.sample_actions())
    return b
