"""The base of backends whose shards run elsewhere: worker processes, Ray actors.

A :class:`ShardedBackend` holds this process's end of each shard (a :class:`ShardHandle`) and
drives them all through four calls (:class:`Call`): at the first reset ``START`` (every game to its
first decision; each shard answers what it discovered) then ``BUILD`` (the fixed spaces; the first
batch), at later resets ``RESET``, and ``STEP``. What a backend adds is only how it sends a call to
a shard and receives the answer (:meth:`ShardedBackend._send`, :meth:`ShardedBackend._send_step`,
:meth:`ShardedBackend._receive`, optionally :meth:`ShardedBackend._await`) and how it starts a shard
anew (:meth:`ShardedBackend._respawn`); the protocol, the faults and their messages are here:

- every call is sent to every shard before any answer is read, and answers are read in env order;
- a shard found lost (dead, or killed for not answering in time) fails the call with its
  :class:`~gymloop.errors.WorkerError` after every other shard has answered, or with
  ``restart_workers=True`` is started again within the call (:meth:`ShardedBackend._restart_lost`:
  fresh seeds, its slots ``truncated``), at most :data:`MAX_WORKER_RESTARTS` times (or once per
  shard, if more) within :data:`RESTART_WINDOW_S`;
- the first error of a call (in env order) is raised, naming the others (:func:`~gymloop.runtime.faults.first_error`);
- a later reset starts again every shard that is lost or was left mid-call, first failing with a loss
  no call has reported yet (unless ``restart_workers``).
"""

from __future__ import annotations

import collections
import gc
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import GymloopError, WorkerError
from .backend import Backend, BackendConfig, discover_spaces, make_executor
from .declared import DeclaredTypes
from .faults import first_error, restarted_shard
from .shard import ShardExecutor

__all__ = [
    "Call",
    "MAX_WORKER_RESTARTS",
    "RESTART_WINDOW_S",
    "STARTUP_TIMEOUT_S",
    "ShardHandle",
    "ShardedBackend",
    "answer_grace",
    "remote_executor",
    "settle",
]

#: seconds a worker may take to start (spawn, imports) before its first message
STARTUP_TIMEOUT_S = 120.0
#: restart_workers: at most this many restarts (or one per worker, if more) within RESTART_WINDOW_S
MAX_WORKER_RESTARTS, RESTART_WINDOW_S = 3, 60.0


def answer_grace(step_timeout: float) -> float:
    """Seconds a worker may answer after ``step_timeout`` before it counts as frozen: its own
    deadline fires first and names the game, then it still has to finish and send its batch."""
    return 0.5 + 0.25 * step_timeout


class Call(Enum):
    """What a backend asks of a shard (the argument each call carries, and the answer)."""

    #: first reset: start every game (no argument); answers what the shard discovered
    START = "start"
    #: first reset: the fixed spaces (``fixed`` of :func:`~gymloop.runtime.backend.discover_spaces`); answers a batch
    BUILD = "build"
    #: a later reset (no argument); answers a batch
    RESET = "reset"
    #: this shard's slice of every action array; answers a batch
    STEP = "step"


def remote_executor(
    game: Any, env_lo: int, n: int, apg: int, seed: int, declared: DeclaredTypes | None, is_env: bool,
    step_timeout: float | None, on_game_error: str, fixed: Any, generation: int, restart_base: int,
    on_timeout: Callable[[], None],
) -> ShardExecutor:
    """The executor of a shard running in a worker process or actor.

    ``on_timeout`` tells the backend that the shard is alive (one of its games timed out, the rest
    of the call has a fresh budget). A replacement (``fixed`` given) gets the fixed spaces, and its
    first reset starts ``generation`` with restart counters from ``restart_base``.
    """
    ex = make_executor(game, env_lo, n, apg, seed, declared, is_env, step_timeout=step_timeout, on_game_error=on_game_error)
    ex.on_timeout = on_timeout
    if fixed is not None:
        ex.set_spaces(fixed)
        ex.generation = generation - 1  # its first reset starts the current generation
        ex.restart_base = restart_base
    return ex


def settle() -> None:
    """After a reset in a worker process or actor: the games' long-lived objects need no more collection passes."""
    gc.collect()
    gc.freeze()


class ShardHandle:
    """This process's end of one shard (a worker process, an actor, or the share this process steps itself):
    which copies it runs and what is known of its state.

    Attributes:
        index: the shard's index (its place in env order).
        envs: its game copies' env indices.
        n_slots: its batch slots.
        heard: it has answered (or said it is alive) at least once: it started.
        busy: a call is out whose answer has not been read.
        lost: the :class:`~gymloop.errors.WorkerError` of its loss (dead, or killed for not answering).
        reported: its loss was raised to the caller.
    """

    #: it runs elsewhere: it can be lost and started again (a shard in this process cannot)
    remote = True

    def __init__(self, index: int, env_lo: int, n: int, apg: int) -> None:
        self.index = index
        self.envs = range(env_lo, env_lo + n)
        self.n_slots = n * apg
        self.heard = False
        self.busy = False
        self.lost: WorkerError | None = None
        self.reported = False
        self.t_start = time.monotonic()

    def where(self) -> str:
        """The shard and its copies, for messages."""
        return f"shard {self.index} (game copies {self.envs.start}..{self.envs.stop - 1})"

    def alive(self) -> bool:
        """Whether it still runs as far as this process can tell without waiting."""
        return True

    def died(self) -> WorkerError:
        """It is gone: the error that says so (kept in :attr:`lost`)."""
        return self.lost or self.lose(f"{self.where()} was lost")

    def lose(self, message: str) -> WorkerError:
        """Mark it lost with the :class:`~gymloop.errors.WorkerError` of ``message`` (naming it and its copies)."""
        self.lost = WorkerError(message, worker=self.index, env_indices=self.envs)
        return self.lost

    def died_message(self, how: str, if_starting: str, causes: str, a_shard: str) -> str:
        """The message of its death (``how``: the exit code or signal; ``causes``: what else may have ended it).

        ``if_starting``: what to check when it died before it started; ``a_shard``: "a worker", "an actor".
        """
        if not self.heard:
            return f"{self.where()} died while starting ({how}){if_starting}"
        return (
            f"{self.where()} died ({how}): a game may have crashed the interpreter or run out of memory, {causes}. Pass "
            f"restart_workers=True to start {a_shard} that died again with its games and go on; the next reset() starts it again"
        )

    def unanswered_message(self, step_timeout: float | None, startup: str, causes: str) -> str:
        """The message of a shard killed for not answering within ``step_timeout`` (plus :func:`answer_grace`).

        ``startup``: the startup timeout that also passed (for one not heard from yet); ``causes``: why it may be.
        """
        t = step_timeout or 0.0
        starting = "" if self.heard else f", nor start within {startup}"
        return (
            f"{self.where()} did not answer within step_timeout={t:g} s (+{answer_grace(t):g} s grace{starting}): it is "
            f"{causes}; it was killed. Pass restart_workers=True to start it again with its games and go on, or raise "
            "step_timeout if its steps are legitimately this slow"
        )


class ShardedBackend(Backend):
    """A backend of several shards (see the module docstring); subclasses say how a call travels.

    Attributes:
        shards: this process's end of each shard, in env order.
        faults: errors of game copies restarted in the shards (``on_game_error="restart"``) and a
            :class:`~gymloop.errors.WorkerError` per shard started again (``restart_workers=True``);
            the VecEnv drains it after every call.
    """

    #: how messages name a shard of this backend ("worker", "actor")
    shard_word = "worker"

    def __init__(self, config: BackendConfig) -> None:
        c = self.config = config
        self.shards: list[Any] = []
        self.faults: list[Any] = []
        self.spaces: Any = None
        self.is_env = c.is_env
        self._fixed: Any = None
        self._generation = -1
        self._replaced: dict[int, int] = {}  # shard index -> times started again within a call
        self._restart_times: collections.deque[float] = collections.deque()
        self._allow = None if c.step_timeout is None else c.step_timeout + answer_grace(c.step_timeout)
        self._last_counts: list[list[int]] = []  # per action type: each shard's first actor in the last batch
        self._pending: list[tuple[Any, Any]] = []

    # ------------------------------------------------------------------ the transport (subclasses)
    @abstractmethod
    def _send(self, shard: Any, call: Call, arg: Any) -> Any:
        """Send ``call`` to ``shard``; returns what :meth:`_receive` needs to read its answer. Never raises
        for a lost shard (its answer is then read as lost)."""

    @abstractmethod
    def _send_step(self, shard: Any, actions: list[np.ndarray]) -> Any:
        """:meth:`_send` of ``Call.STEP`` (the per-step path: no dispatch on the call)."""

    def _await(self, pending: Sequence[tuple[Any, Any]]) -> list[Any]:
        """Wait for the answers of ``pending`` ``(shard, sent)`` calls, or leave that to :meth:`_receive`
        (the default: it returns what each :meth:`_send` returned)."""
        return [sent for _, sent in pending]

    @abstractmethod
    def _receive(self, shard: Any, answer: Any) -> Any:
        """The payload of ``shard``'s answer (a :class:`Batch`, or what it discovered at ``START``);
        raises its error, or the :class:`~gymloop.errors.WorkerError` of its loss."""

    @abstractmethod
    def _respawn(self, i: int, restart_base: int = 0) -> Any:
        """A new shard in place of ``shards[i]`` (the old one is stopped), with the fixed spaces; its
        copies' restart counters start at ``restart_base``."""

    # ------------------------------------------------------------------ the protocol
    def _deadline(self) -> float | None:
        return None if self._allow is None else time.monotonic() + self._allow

    def _call(self, call: Call, arg: Any = None, truncate: bool = False, restart: bool = True) -> list[Any]:
        """``call`` to every shard (the same ``arg``); their payloads in env order (see :meth:`_collect`)."""
        return self._collect([(s, self._send(s, call, arg)) for s in self.shards], truncate, restart)

    def _collect(self, pending: Sequence[tuple[Any, Any]], truncate: bool, restart: bool = True) -> list[Any]:
        """The payloads of every ``(shard, sent)`` call in env order; raise the first error after all answered.

        A lost shard is started again (``restart_workers=True``, if ``restart``, and only one that
        had started) and its batch takes its place (``truncated`` in a step, when ``truncate``).
        """
        answers = self._await(pending)
        out: list[Any] = []
        errors: list[BaseException] = []
        for (s, _), ans in zip(pending, answers):
            try:
                try:
                    out.append(self._receive(s, ans))
                except WorkerError:
                    if not (restart and self.config.restart_workers and s.heard):
                        raise
                    out.append(self._restart_lost(self.shards.index(s), truncate))
            except GymloopError as e:
                if isinstance(e, WorkerError):  # (a replacement that failed is marked by its own _collect)
                    s.reported = True
                errors.append(e)
        if errors:
            raise first_error(errors)
        return out

    def _restart_lost(self, i: int, truncate: bool) -> Batch:
        """``shards[i]`` is lost (``restart_workers=True``): start it again, reset its games, return their batch.

        In a step (``truncate``) its copies get fresh seeds and their slots ``truncated``.
        """
        old = self.shards[i]
        why = old.lost.args[0] if old.lost is not None else f"{old.where()} was lost"
        now = time.monotonic()
        times = self._restart_times
        while times and times[0] < now - RESTART_WINDOW_S:
            times.popleft()
        if len(times) >= max(MAX_WORKER_RESTARTS, sum(s.remote for s in self.shards)):
            w = self.shard_word
            raise WorkerError(
                f"{why}\n(not started again: {len(times)} {w} restarts within {RESTART_WINDOW_S:g} s already, the "
                f"most restart_workers allows; {'an' if w[0] in 'aeiou' else 'a'} {w} that keeps dying needs fixing)",
                worker=old.index, env_indices=old.envs,
            )
        times.append(now)
        k = self._replaced.get(old.index, 0) + 1
        self._replaced[old.index] = k
        new = self._respawn(i, restart_base=(k << 32) if truncate else 0)
        (b,) = self._collect([(new, self._send(new, Call.RESET, None))], truncate=False, restart=False)
        if truncate:
            b.truncated = np.ones(new.n_slots, dtype=bool)
        self.faults.append(restarted_shard(why, new.index, new.envs, truncated=True))
        return b

    def _respawn_lost(self) -> None:
        """Before a later reset: start again every shard that is lost or was left mid-call.

        A loss no call has reported yet fails the reset (it is a fault instead with ``restart_workers=True``).
        """
        for i, s in enumerate(self.shards):
            if s.lost is None and not s.busy and s.alive():
                continue
            if not s.busy and not s.reported:
                err = s.lost or s.died()
                if not (self.config.restart_workers and s.heard):
                    s.reported = True
                    raise err
                self.faults.append(restarted_shard(err.args[0], s.index, s.envs, truncated=False))
            self._respawn(i)  # (one interrupted mid-call is out of step with the protocol: a new one)

    def _concat(self, parts: list[Batch]) -> Batch:
        """The shards' batches as one (copied: none aliases a transport's buffer); notes each shard's actors."""
        self._last_counts = [
            np.concatenate([[0], np.cumsum([p.actor_slot[name].shape[0] for p in parts])]).tolist()
            for name in self.spaces.actions
        ]
        return Batch.concat(parts, copy=True)

    # ------------------------------------------------------------------ the Backend interface
    def reset(self) -> tuple[Batch, Any]:
        """(Re)start every game copy; a failed reset closes the backend (shards may be left mid-protocol)."""
        try:
            return self._reset()
        except BaseException:
            self.close()
            raise

    def _reset(self) -> tuple[Batch, Any]:
        self._generation += 1
        if self.spaces is None:
            found = self._call(Call.START, restart=False)
            self._fixed, self.spaces = discover_spaces(found, self.is_env)
            parts = self._call(Call.BUILD, self._fixed)
        else:
            self._respawn_lost()
            parts = self._call(Call.RESET)
        return self._concat(parts), self.spaces

    def step(self, actions: list[np.ndarray]) -> Batch:
        self._send_actions(actions)
        return self._collect_step()

    def step_async(self, actions: list[np.ndarray]) -> None:
        """The first half of :meth:`step`: send every shard its actions and return (they step meanwhile).

        A caller with work that does not need the next batch (the policy of another group of
        copies) does it before :meth:`step_wait`. Exactly one :meth:`step_wait` must follow.
        """
        self._send_actions(actions)

    def step_wait(self) -> Batch:
        """The second half of :meth:`step`: wait for every shard's batch; the next batch."""
        return self._collect_step()

    def _send_actions(self, actions: list[np.ndarray]) -> None:
        """Send each shard its slice of every action array (``STEP``)."""
        counts = self._last_counts
        types = range(len(counts))
        self._pending = [
            (s, self._send_step(s, [actions[t][counts[t][j] : counts[t][j + 1]] for t in types]))
            for j, s in enumerate(self.shards)
        ]

    def _collect_step(self) -> Batch:
        """The batch of the step :meth:`_send_actions` sent."""
        pending, self._pending = self._pending, []
        return self._concat(self._collect(pending, truncate=True))
