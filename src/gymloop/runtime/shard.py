"""The shard executor: what every backend drives, and the state both kinds of shard share.

A shard covers game copies ``[env_lo, env_lo + n)`` of a vectorized environment and batches their
pending decisions. Two executors implement it: :class:`~gymloop.runtime.executor.Executor` (game
loops in greenlets) and :class:`~gymloop.runtime.envexec.EnvExecutor` (low-level
:class:`~gymloop.env.Environment` instances). What they share lives here: each copy's seeds
(:mod:`gymloop.runtime.seeding`: a new generation per :meth:`ShardExecutor.start`, a fresh seed per
restart), the step alarm (:mod:`gymloop.runtime.alarm`), the faults of copies restarted with
``on_game_error="restart"`` and the errors they become (:mod:`gymloop.runtime.faults`), and closing
the copies within :data:`~gymloop.runtime.faults.CLOSE_TIMEOUT_S`.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import EnvStateError, GameError
from . import alarm as _alarm_mod
from . import faults as _faults_mod
from . import seeding as _seeding_mod
from .alarm import StepAlarm, StepTimeout
from .faults import CLOSE_TIMEOUT_S, game_error
from .seeding import seed_base, seed_of_run

__all__ = ["ShardExecutor", "RUNTIME_FILES"]

log = logging.getLogger("gymloop.executor")

#: source files of the runtime's own code that runs while the step alarm is armed: the alarm never
#: raises in their frames (each executor adds its own module's file)
RUNTIME_FILES = frozenset(
    os.path.normcase(os.path.abspath(m.__file__ or "")) for m in (_alarm_mod, _faults_mod, _seeding_mod)
) | {os.path.normcase(os.path.abspath(__file__))}


class ShardExecutor(ABC):
    """Steps game copies ``[env_lo, env_lo + num_games)`` and batches their decisions.

    Every backend drives shards through these methods, with the same meaning for both executors;
    a shard's batch has its slots in order with ``actor_slot`` as global slot indices, so shard
    batches concatenate in env order into the batch of the whole VecEnv.

    Faults: whatever a copy raises becomes a :class:`~gymloop.errors.GameError` with its env index
    and seed (``KeyboardInterrupt`` passes through); a copy running past ``step_timeout`` fails
    with :class:`~gymloop.errors.GameTimeoutError`; with ``on_game_error="restart"`` the copy
    restarts with a fresh seed and its error goes to :attr:`faults` instead.

    Attributes:
        spaces: the fixed spaces, or ``None`` before :meth:`set_spaces` (or a first :meth:`reset`).
        declared: the VecEnv's declared types (:class:`~gymloop.runtime.declared.DeclaredTypes`), or ``None``.
        faults: errors of copies restarted (``on_game_error="restart"``), in order; the backend
            drains this list (the executor only appends to it, never rebinds it).
        on_timeout: called (if set) each time a copy timed out, before the call goes on; a worker
            process uses it to tell the main process that it is alive.
        generation: the generation of the last :meth:`start` (-1 before the first; each start adds one).
        restart_base: the restart counter every copy starts from at the next :meth:`start` (then 0
            again): a replacement worker's copies get seeds no earlier run had.
        seeds: each copy's seed of its current run.
    """

    #: how messages name one copy
    copy_word = "game copy"
    #: what a copy failed to do within step_timeout, in a timeout's message
    late = "ask for its next decision"

    spaces: Any

    def __init__(
        self, env_lo: int, num_games: int, seed: int, declared: Any, step_timeout: float | None, on_game_error: str,
    ) -> None:
        self.env_lo = env_lo
        self.n_games = num_games
        self.seed = seed
        self.declared = declared
        self.step_timeout = step_timeout
        self.restart_on_error = on_game_error == "restart"
        self.faults: list[GameError] = []
        self.on_timeout: Callable[[], None] | None = None
        self.restart_base = 0
        self.generation = -1  # incremented by every start(): reset k starts generation k
        self.restarts = [0] * num_games
        self.seeds = [0] * num_games
        self._seed_bases: list[int] = []  # per copy, for the current generation
        self.alarm = StepAlarm(self, step_timeout)

    # ------------------------------------------------------------------ the interface
    @abstractmethod
    def start(self) -> None:
        """(Re)start every copy of the shard (a new generation of seeds); each runs to its first decision.

        Raises :class:`~gymloop.errors.GameError` for a copy that failed to start.
        """

    @abstractmethod
    def discover(self) -> Any:
        """What this shard declares and has seen so far (after :meth:`start`), for
        :func:`~gymloop.runtime.backend.discover_spaces`."""

    @abstractmethod
    def set_spaces(self, fixed: Any) -> None:
        """Fix the spaces from the first value :func:`~gymloop.runtime.backend.discover_spaces` returns (it is picklable)."""

    @abstractmethod
    def build(self) -> Batch:
        """The batch of the copies' pending decisions (after :meth:`start` and with fixed spaces)."""

    @abstractmethod
    def step(self, actions: Sequence[np.ndarray]) -> Batch:
        """Resume every waiting copy with its action (this shard's slices); returns the next batch."""

    @abstractmethod
    def close_games(self) -> None:
        """End every copy of the shard (their ``finally`` blocks run). Idempotent."""

    @abstractmethod
    def alarm_may_raise(self, frame: Any) -> bool:
        """The step alarm fired in ``frame``: whether to raise there (only in a copy's own code)."""

    def reset(self) -> Batch:
        """:meth:`start`, then (if not fixed yet) discover and fix the spaces of this shard alone, then :meth:`build`."""
        self.start()
        if self.spaces is None:
            self.set_spaces(self.discover())
        return self.build()

    # ------------------------------------------------------------------ shared bookkeeping
    def _new_generation(self) -> None:
        """The next generation of seeds: each copy's restart counter starts again (from :attr:`restart_base`)."""
        self.generation += 1
        g = self.generation
        self._seed_bases = [seed_base(self.seed, self.env_lo + i, g) for i in range(self.n_games)]
        self.restarts = [self.restart_base] * self.n_games
        self.restart_base = 0

    def _next_seed(self, i: int) -> int:
        """Copy ``i``'s seed for its next run (each call a fresh one)."""
        seed = seed_of_run(self._seed_bases[i], self.restarts[i])
        self.restarts[i] += 1
        self.seeds[i] = seed
        return seed

    def _fault(self, i: int, e: BaseException) -> GameError:
        """Copy ``i``'s exception as a :class:`GameError` (``KeyboardInterrupt`` is raised again as itself).

        A timeout first calls :attr:`on_timeout` (a worker tells its parent that it is alive).
        """
        if isinstance(e, KeyboardInterrupt):
            raise e
        if isinstance(e, StepTimeout) and self.on_timeout is not None:
            self.on_timeout()
        return game_error(e, self.env_lo + i, self.seeds[i], self.copy_word, self.step_timeout, self.late)

    def _close_each(self, closers: Sequence[tuple[int, Callable[[], object]]]) -> None:
        """Call each ``(copy, close)``'s ``close``, logging what goes wrong; gives the alarm's signal handler back.

        With a ``step_timeout`` they get :data:`~gymloop.runtime.faults.CLOSE_TIMEOUT_S` seconds
        together (at most ``step_timeout``); a copy still closing then is abandoned.
        """
        token = None
        if closers and self.step_timeout is not None:
            token = self.alarm.arm(min(self.step_timeout, CLOSE_TIMEOUT_S))
        try:
            for i, close in closers:
                try:
                    close()
                except StepTimeout:
                    log.warning("%s %d did not finish closing in time; it is abandoned", self.copy_word, self.env_lo + i)
                except KeyboardInterrupt:
                    raise
                except BaseException:
                    log.exception("%s %d raised while being closed", self.copy_word, self.env_lo + i)
        finally:
            self.alarm.disarm(token)
            self.alarm.release()

    @staticmethod
    def _not_fixed() -> EnvStateError:
        return EnvStateError("the spaces are not fixed yet (no reset); call reset() first")
