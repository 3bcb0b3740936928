"""The in-process backend (``workers=0``): one executor for every game copy."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import Batch
from ..spaces import Spaces
from .executor import Executor


def make_executor(game: Any, env_lo: int, n: int, apg: int, seed: int, declared: Any, is_env: bool, spaces: Spaces | None = None) -> Any:
    if is_env:
        from .envexec import EnvExecutor

        return EnvExecutor(game, env_lo, n, seed, spaces, declared)
    return Executor(game, env_lo, n, apg, seed, spaces, declared)


class LocalBackend:
    def __init__(self, game: Any, num_envs: int, apg: int, seed: int, declared: Any, is_env: bool) -> None:
        self.ex = make_executor(game, 0, num_envs, apg, seed, declared, is_env)

    def reset(self) -> tuple[Batch, Spaces]:
        b = self.ex.reset()
        return b, self.ex.spaces

    def step(self, actions: list[np.ndarray]) -> Batch:
        return self.ex.step(actions)

    def close(self) -> None:
        self.ex.close_games()
