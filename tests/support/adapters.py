"""Helpers of the adapter tests (Gymnasium, Stable-Baselines3, PettingZoo).

Nothing here imports an adapter's library: the tests pass the classes in, so that this module
imports where those libraries are missing (pytest imports every module of ``tests/`` for doctests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest


def _close_vec(env: Any) -> None:
    env._vec.close()


def closes_every_env(*classes: type, close: Callable[[Any], None] = _close_vec) -> Any:
    """An autouse fixture that closes every instance of ``classes`` a test made, with ``close``
    (default: the instance's executor), once the test is over: games are closed in this thread,
    not by a finalizer later. A test module binds it to a name::

        close_every_env = closes_every_env(GymloopEnv, GymloopVectorEnv)
    """

    @pytest.fixture(autouse=True)
    def close_every_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        made: list = []
        for cls in classes:
            def init(self, *args, _orig=cls.__init__, **kwargs):
                made.append(self)
                _orig(self, *args, **kwargs)

            monkeypatch.setattr(cls, "__init__", init)
        yield
        for env in made:
            if hasattr(env, "_vec"):
                close(env)

    return close_every_env


def legal_actions(masks: np.ndarray, nvec: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``(S, C)`` uniformly random legal choices for flat masks ``(S, sum(nvec))``."""
    start = np.cumsum(nvec) - nvec
    out = np.zeros((masks.shape[0], nvec.size), dtype=np.int64)
    for s in range(masks.shape[0]):
        for c, (a, n) in enumerate(zip(start, nvec)):
            out[s, c] = rng.choice(np.flatnonzero(masks[s, a:a + n]))
    return out
