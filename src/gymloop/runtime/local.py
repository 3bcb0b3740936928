"""The in-process backend (``"local"``, the default for ``workers <= 1``): one executor for every game copy."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import ConfigError
from .backend import Backend, BackendConfig, discover_spaces, make_executor, register_backend

__all__ = ["LocalBackend", "make_executor"]


class LocalBackend(Backend):
    """Every game copy in this process, stepped by one :class:`~gymloop.runtime.backend.ShardExecutor`.

    Batches are the executor's own, built afresh every step (nothing is reused). A failed
    :meth:`reset` leaves the backend usable: the next reset restarts every game. The step timeout
    is the executor's alarm (:mod:`gymloop.runtime.alarm`): it works when the VecEnv is stepped
    from the main thread.
    """

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        if config.workers > 1:
            raise ConfigError(
                f"backend='local' runs every game in this process, but workers={config.workers} asks for "
                f"{config.workers} processes; use backend='process' (or backend=None) for workers > 1, or workers=0"
            )

    def __init__(self, config: BackendConfig) -> None:
        c = config
        self.is_env = c.is_env
        self.ex = make_executor(
            c.game, 0, c.num_envs, c.agents_per_game, c.seed, c.declared, c.is_env,
            step_timeout=c.step_timeout, on_game_error=c.on_game_error,
        )
        self.spaces: Any = None
        #: the executor's own list of restarted copies' errors (the VecEnv drains it)
        self.faults: list[Any] = self.ex.faults

    def reset(self) -> tuple[Batch, Any]:
        ex = self.ex
        ex.start()
        if self.spaces is None:
            fixed, _ = discover_spaces([ex.discover()], self.is_env)
            ex.set_spaces(fixed)
            self.spaces = ex.spaces  # the executor's own compiled spaces: one value in this process
        return ex.build(), self.spaces

    def step(self, actions: list[np.ndarray]) -> Batch:
        return self.ex.step(actions)

    def close(self) -> None:
        self.ex.close_games()


register_backend("local", LocalBackend)
