"""``gl.VecEnv``: many copies of a game as one vectorized environment.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> env = gl.VecEnv(snake, num_envs=4, seed=0)
    >>> batch = env.reset()
    >>> sorted(env.obs_space.entities)
    ['Body', 'Food', 'Head']
    >>> batch = env.step(env.sample_actions())
    >>> batch.reward.shape
    (4,)
    >>> env.close()
"""

from __future__ import annotations

import collections
import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .batch import Batch
from .env import _is_environment
from .errors import ConfigError, EnvStateError, GameError, InvalidActionError, WorkerError
from .runtime.backend import Backend, BackendConfig, check_backend_config, default_backend, resolve_backend
from .runtime.declared import DeclaredTypes
from .spaces import ActionDesc, ObsSpace, Spaces, check_agents, declared_types

__all__ = ["VecEnv"]

log = logging.getLogger("gymloop.vector")

#: the window of ``game_error_limit``, in seconds
GAME_ERROR_WINDOW_S = 60.0


class _State:
    """Everything a VecEnv owns that must be released; kept apart so a finalizer can close it."""

    def __init__(self) -> None:
        self.backend: Any = None
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.backend is not None:
            try:
                self.backend.close()
            except Exception:  # close never raises (it may run in a finalizer or at exit)
                log.exception("closing the backend failed")
            self.backend = None


class VecEnv:
    """A vectorized environment over ``num_envs`` copies of a game.

    Args:
        game: a game loop ``game(agent, seed)`` (``game(agents, seed)`` with ``agents_per_game > 1``),
            or a :class:`gl.Environment` subclass (``functools.partial(EnvClass, ...)`` to pass
            constructor arguments).
        num_envs: number of game copies.
        workers: 0 runs every game in this process; N > 0 runs them in N processes, this one and
            N - 1 worker processes, that hand batches over through shared memory (no pickling per
            step). The batches are identical either way. Use as many as you have cores.
        seed: root seed; game copy ``i`` gets its own seed derived from ``seed`` and ``i``.
        agents_per_game: agents per game copy; each agent is its own slot in the batch.
        entity_types, action_types, globals_type: declare types up front. Undeclared types are
            discovered in the first batch; a type first seen later is an error.
        checked: validate every action in ``step`` (range, mask, shape); on by default since the
            checks are vectorized. ``False`` checks the first step only.
        start_method: multiprocessing start method for workers (default ``"spawn"``: the game
            function must be importable).
        spin_s: seconds a worker keeps polling (yielding its core each time) before it blocks
            while waiting for the next step; 0 blocks at once.
        backend: the backend that runs the games, by name: ``"local"`` (every game in this
            process), ``"process"`` (``workers`` processes), or any name given to
            :func:`gymloop.runtime.backend.register_backend`. ``None`` (default): ``"local"`` for
            ``workers <= 1``, else ``"process"``. ``"ray"``: ``workers`` Ray actors, on this machine
            or a cluster (``pip install 'gymloop[ray]'``; see ``docs/ray.md``).
        backend_options: the backend's own options, by name; the ``"ray"`` backend takes
            ``address`` (``None``: the Ray instance this process runs, or a local one; ``"auto"``;
            ``"HOST:PORT"``), ``num_cpus`` (per actor), ``connect_timeout`` and ``runtime_env``
            (:mod:`gymloop.runtime.ray_backend`). A backend refuses options it does not take.
        step_timeout: seconds a ``step`` or ``reset`` may take; past it the game that has not asked
            for its next decision fails with :class:`~gymloop.errors.GameTimeoutError` (its env
            index and seed; it is interrupted where it runs by a ``SIGALRM``, which needs the
            VecEnv to run in the main thread: stepped from another thread, games in this process
            have no deadline), and a worker process that has not answered a little later (frozen,
            or stuck in C code) is killed and fails the call with
            :class:`~gymloop.errors.WorkerError` naming it and its copies. Each copy that times out
            gives the rest of the step a fresh ``step_timeout``. The first reset also allows the
            workers time to start. ``None`` waits forever.
        on_game_error: ``"raise"`` (default): a game that raises (anything, ``SystemExit``
            included; ``KeyboardInterrupt`` passes through) or times out fails the step with
            :class:`~gymloop.errors.GameError` naming its env index and seed. ``"restart"``: that
            copy restarts with a fresh seed, its open episode ends as truncated in that batch, the
            fault is counted (:attr:`num_game_errors`) and logged (``logging.warning``) with the
            seed that replays it, and stepping goes on, up to ``game_error_limit``.
        restart_workers: a worker process that died (or was killed for not answering) is started
            again with its games (fresh seeds) within the call that found it, their open episodes
            end as truncated in that batch, and :attr:`num_worker_restarts` counts it. Without it
            that call fails with :class:`~gymloop.errors.WorkerError` (and the next ``reset()``
            starts the worker again).
        game_error_limit: with ``on_game_error="restart"``, the share of the copies that may fault
            within any 60 s (at least 3 faults): one fault more fails the call with
            :class:`~gymloop.errors.GameError` saying so (a game that fails this often needs
            fixing). ``None``: no limit.

    Attributes:
        num_envs: number of game copies.
        num_slots: ``num_envs * agents_per_game``.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> with gl.VecEnv(snake, num_envs=8, seed=0) as env:
        ...     batch = env.reset()
        ...     batch = env.step(env.sample_actions())       # {"Move": one choice per actor}
        >>> batch.num_slots, batch.counts["Head"].tolist() == [1] * 8, batch.reward.shape
        (8, True, (8,))
    """

    def __init__(
        self,
        game: Callable[..., Any] | type,
        num_envs: int,
        workers: int = 0,
        seed: int = 0,
        agents_per_game: int = 1,
        entity_types: Sequence[type] | None = None,
        action_types: Sequence[Any] | None = None,
        globals_type: type | None = None,
        checked: bool = True,
        start_method: str = "spawn",
        spin_s: float = 0.002,
        backend: str | None = None,
        step_timeout: float | None = 60.0,
        on_game_error: str = "raise",
        restart_workers: bool = False,
        game_error_limit: float | None = 0.5,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        for name, v, lo in (("num_envs", num_envs, 1), ("workers", workers, 0), ("agents_per_game", agents_per_game, 1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ConfigError(f"{name} must be an int >= {lo}, got {v!r}")
        if workers > num_envs:
            raise ConfigError(f"workers={workers} is more than num_envs={num_envs}; use at most one worker per game copy")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        if not callable(game):
            raise ConfigError(f"game must be a game loop function or a gl.Environment class, got {game!r}")
        self.game = game
        self.num_envs = int(num_envs)
        self.workers = int(workers)
        self.seed = int(seed)
        self.agents_per_game = int(agents_per_game)
        check_agents(game, self.agents_per_game, "vecenv")
        self.num_slots = self.num_envs * self.agents_per_game
        self.checked = checked
        self.start_method = start_method
        if not isinstance(spin_s, (int, float)) or spin_s < 0:
            raise ConfigError(f"spin_s must be a non-negative number of seconds, got {spin_s!r}")
        self.spin_s = float(spin_s)
        if step_timeout is not None and (
            isinstance(step_timeout, bool) or not isinstance(step_timeout, (int, float)) or not 0 < step_timeout < float("inf")
        ):
            raise ConfigError(f"step_timeout must be a positive finite number of seconds or None (no limit), got {step_timeout!r}")
        self.step_timeout = None if step_timeout is None else float(step_timeout)
        if on_game_error not in ("raise", "restart"):
            raise ConfigError(f"on_game_error must be 'raise' or 'restart', got {on_game_error!r}")
        self.on_game_error = on_game_error
        if not isinstance(restart_workers, bool):
            raise ConfigError(f"restart_workers must be True or False, got {restart_workers!r}")
        self.restart_workers = restart_workers
        if game_error_limit is not None and (
            isinstance(game_error_limit, bool) or not isinstance(game_error_limit, (int, float))
            or not 0 < game_error_limit < float("inf")
        ):
            raise ConfigError(
                f"game_error_limit must be a positive finite share of the copies (e.g. 0.5) or None (no limit), "
                f"got {game_error_limit!r}"
            )
        self.game_error_limit = game_error_limit
        #: most faults allowed within GAME_ERROR_WINDOW_S (None: no limit)
        self._max_faults = None if game_error_limit is None else max(3, math.ceil(game_error_limit * self.num_envs))
        self._fault_times: collections.deque[float] = collections.deque()
        self._faults: list[Any] = []
        #: game copies restarted after an error since construction (``on_game_error="restart"``)
        self.num_game_errors = 0
        #: worker processes started again after they died (``restart_workers=True``)
        self.num_worker_restarts = 0
        declared = None
        on_game = declared_types(game)
        if entity_types or action_types or globals_type or on_game:
            g_ents, g_glob, g_acts = on_game or ([], None, [])
            declared = DeclaredTypes(
                list(g_ents) + list(entity_types or ()), globals_type or g_glob, list(g_acts) + list(action_types or ()),
            )
        self._declared = declared
        self._spaces: Spaces | None = None
        self._batch: Batch | None = None
        self._steps = 0
        self._pending = False  # a step_async() awaits its step_wait()
        self._rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(2**31,)))
        self._state = _State()
        self._finalizer = weakref.finalize(self, _State.close, self._state)
        self._is_env = _is_environment(game)
        if self.agents_per_game > 1 and self._is_env:
            raise ConfigError("agents_per_game applies to game loops; a gl.Environment is one slot per copy")
        self.backend_name = default_backend(self.workers) if backend is None else backend
        self._backend_factory = resolve_backend(self.backend_name)
        self._backend_config = BackendConfig(
            game=game, num_envs=self.num_envs, agents_per_game=self.agents_per_game, seed=self.seed,
            declared=declared, is_env=self._is_env, workers=self.workers, start_method=start_method, spin_s=self.spin_s,
            step_timeout=self.step_timeout, on_game_error=self.on_game_error, restart_workers=self.restart_workers,
            options={} if backend_options is None else dict(backend_options) if isinstance(backend_options, Mapping) else backend_options,
        )
        check_backend_config(self._backend_factory, self._backend_config)

    # ------------------------------------------------------------------ spaces
    @property
    def obs_space(self) -> ObsSpace:
        """Entity types with feature names, and global features (fixed at the first ``reset``)."""
        return self._fixed().obs_space

    @property
    def action_space(self) -> dict[str, ActionDesc]:
        """Action types by name (fixed at the first ``reset``)."""
        return self._fixed().action_space

    @property
    def spaces(self) -> Spaces:
        """The compiled spaces (classes and schemas)."""
        return self._fixed()

    def _fixed(self) -> Spaces:
        if self._spaces is None:
            raise EnvStateError("the spaces are fixed by the first reset(); call env.reset() before reading them")
        return self._spaces

    # ------------------------------------------------------------------ lifecycle
    def _make_backend(self) -> Backend:
        b = self._backend_factory(self._backend_config)
        f = getattr(b, "faults", None)
        self._faults = f if isinstance(f, list) else []
        return b

    def _note_faults(self) -> None:
        """Count, log and rate-limit what the backend absorbed (restarted copies and workers)."""
        faults = self._faults
        items = list(faults)
        faults.clear()
        now = time.monotonic()
        times = self._fault_times
        last: GameError | None = None
        for f in items:
            if isinstance(f, WorkerError):
                self.num_worker_restarts += 1
                log.warning("%s", f.args[0] if f.args else f)
            elif isinstance(f, GameError):
                self.num_game_errors += 1
                times.append(now)
                last = f
                log.warning(
                    "%s copy %d failed and was restarted with a fresh seed (on_game_error='restart'); %s: %s",
                    "environment" if self._is_env else "game", f.env_index, self._replay(f.seed), str(f).split("\n", 1)[0],
                )
        if last is None or self._max_faults is None:
            return
        while times and times[0] < now - GAME_ERROR_WINDOW_S:
            times.popleft()
        if len(times) > self._max_faults:
            count = len(times)
            times.clear()
            raise GameError(
                f"{count} game faults within {GAME_ERROR_WINDOW_S:g} s, more than game_error_limit="
                f"{self.game_error_limit:g} of the {self.num_envs} copies allows ({self._max_faults}): the game fails too "
                f"often to go on. Fix it (the last: {'environment' if self._is_env else 'game'} copy {last.env_index}, "
                f"{self._replay(last.seed)}: {str(last).split(chr(10), 1)[0]}), or raise game_error_limit (None: no limit)",
                env_index=last.env_index, seed=last.seed, original_traceback=last.original_traceback,
            )

    def _replay(self, seed: int) -> str:
        """How to replay a copy's failure from its seed, for a message."""
        if self._is_env:  # an Environment (an adapter's, say) is made again and reset with the seed
            return f"replay the failure by making the environment and calling its reset({seed})"
        return f"replay the failure with gl.run(game, agent, seed={seed})"

    def reset(self) -> Batch:
        """Start (or restart) every game copy; returns the first batch.

        Raises:
            EnvStateError: after ``close()``.
            GameError: if a game raised (or timed out) before its first decision.
            WorkerError: a worker process died since the last call, or did not answer (without
                ``restart_workers``; the next ``reset()`` starts it again).
        """
        st = self._state
        if st.closed:
            raise EnvStateError("reset() after close(); make a new VecEnv")
        if st.backend is None:
            st.backend = self._make_backend()
        if self._pending:  # a step_async() nobody waited for: let it finish (its batch and errors are dropped)
            self._pending = False
            try:
                st.backend.step_wait()
            except Exception as e:  # the reset below restarts every game (and a lost worker)
                log.debug("the pending step_async() before reset() failed: %s", e)
            if self._faults:
                self._note_faults_quietly()
        try:
            batch, spaces = st.backend.reset()
            if self._faults:
                self._note_faults()
        except BaseException:
            if self._faults:
                self._note_faults_quietly()
            if self.workers:  # a failed start leaves workers mid-protocol: start afresh next time
                st.backend.close()
                st.backend = None
            raise
        self._spaces = spaces
        self._batch = batch
        self._steps = 0
        self._failed = False
        return batch

    def _note_faults_quietly(self) -> None:
        """Count what the backend absorbed during a call that fails anyway (no rate-limit error on top)."""
        try:
            self._note_faults()
        except GameError:
            pass

    def step(self, actions: Mapping[str, Any]) -> Batch:
        """Apply one action per actor and return the next batch.

        Args:
            actions: action type name → integer array with one entry per actor of that type in the
                current batch, in batch order: the choice index, or for select-entity the index
                among that actor's candidates.

        Raises:
            EnvStateError: before ``reset()``, after ``close()``, or after a ``GameError``.
            InvalidActionError: an action of the wrong shape or dtype, out of range, or masked out.
            GameError: a game raised; it carries the env index and seed
                (:class:`~gymloop.errors.GameTimeoutError`: it ran past ``step_timeout``). With
                ``on_game_error="restart"``: more faults than ``game_error_limit`` allows.
            WorkerError: a worker process died or did not answer (without ``restart_workers``).
        """
        arrays = self._step_arrays(actions, "step")  # (first: it refuses a closed VecEnv, whose backend is gone)
        return self._stepped(self._state.backend.step, arrays)

    def _stepped(self, run: Callable[..., Batch], *args: Any) -> Batch:
        """``run(*args)`` (the backend's step or step_wait), its faults noted; the VecEnv fails with it."""
        try:
            batch = run(*args)
            if self._faults:
                self._note_faults()
        except BaseException:
            self._failed = True
            if self._faults:
                self._note_faults_quietly()
            raise
        self._batch = batch
        self._steps += 1
        return batch

    def _step_arrays(self, actions: Mapping[str, Any], call: str) -> list[np.ndarray]:
        """The checks every step makes before it reaches the backend; the validated action arrays."""
        st = self._state
        if st.closed:
            raise EnvStateError(f"{call}() after close(); make a new VecEnv")
        if self._batch is None:
            raise EnvStateError(f"{call}() before reset(); call env.reset() first")
        if self._pending:
            raise EnvStateError(f"{call}() while a step_async() is pending; call env.step_wait() for its batch first")
        if getattr(self, "_failed", False):
            raise EnvStateError("a game raised in an earlier step; call env.reset() to restart every game")
        return self._validate(self._batch, actions) if (self.checked or self._steps == 0) else self._convert(actions)

    def step_async(self, actions: Mapping[str, Any]) -> None:
        """The first half of :meth:`step`: check the actions and hand them over, then return.

        With ``backend="ray"`` the actors start stepping at once, so the caller can work (e.g.
        compute the policy of another VecEnv's batch) before :meth:`step_wait` collects the batch;
        the local and process backends do the whole step in :meth:`step_wait`. Exactly one
        :meth:`step_wait` must follow (another :meth:`step` or :meth:`step_async` before it is an
        :class:`~gymloop.errors.EnvStateError`; :meth:`reset` waits for it and drops its batch).
        ``step_async(a)`` then ``step_wait()`` gives the same batch, faults and errors as ``step(a)``.

        Raises:
            EnvStateError, InvalidActionError: as :meth:`step` (bad actions are refused here).
        """
        arrays = self._step_arrays(actions, "step_async")
        try:
            self._state.backend.step_async(arrays)
        except BaseException:
            self._failed = True
            raise
        self._pending = True

    def step_wait(self) -> Batch:
        """The second half of :meth:`step`: wait for the batch of the actions given to :meth:`step_async`.

        Raises:
            EnvStateError: no :meth:`step_async` is pending.
            GameError, WorkerError: as :meth:`step`.
        """
        if not self._pending:
            raise EnvStateError("step_wait() without a pending step_async(); call env.step_async(actions) first")
        self._pending = False
        return self._stepped(self._state.backend.step_wait)

    def close(self) -> None:
        """Close every game (``GreenletExit`` at its ``act`` call), end workers, free shared memory.

        It returns within about 2 s whatever state the workers are in (a worker that does not
        exit when asked is terminated, then killed) and never raises. Closing twice is fine; it
        also happens when the VecEnv is garbage-collected or at exit.
        """
        self._finalizer()

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._state.closed

    # ------------------------------------------------------------------ actions
    def _convert(self, actions: Mapping[str, Any]) -> list[np.ndarray]:
        return [np.asarray(actions[n], dtype=np.int64) for n in self._fixed().actions]

    def _validate(self, b: Batch, actions: Mapping[str, Any]) -> list[np.ndarray]:
        specs = list(self._fixed().actions.values())
        if not isinstance(actions, Mapping):
            raise InvalidActionError(
                f"step expects a dict from action type name to an int array, got {type(actions).__name__}"
            )
        extra = set(actions) - {s.name for s in specs}
        if extra:
            raise InvalidActionError(
                f"unknown action type(s) {sorted(extra)}; the action space has {[s.name for s in specs]}"
            )
        out = []
        for spec in specs:
            name = spec.name
            n_act = b.actor_slot[name].shape[0]
            if name not in actions:
                if n_act == 0:
                    out.append(np.zeros(0, dtype=np.int64))
                    continue
                raise InvalidActionError(f"missing actions for action type {name!r}: expected an int array of shape ({n_act},)")
            raw = actions[name]
            try:
                arr = np.asarray(raw)
            except (ValueError, TypeError) as e:
                raise InvalidActionError(
                    f"actions for {name!r} must be an int array of shape ({n_act},), got {type(raw).__name__}: {e}"
                ) from None
            if arr.dtype == object:
                raise InvalidActionError(f"actions for {name!r} must be an int array of shape ({n_act},), got {raw!r}")
            if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
                raise InvalidActionError(
                    f"actions for {name!r} must be integers, got dtype {arr.dtype}; pass e.g. np.asarray(a, dtype=np.int64)"
                )
            if arr.shape != (n_act,):
                raise InvalidActionError(f"actions for {name!r} must have shape ({n_act},) (one per actor), got {arr.shape}")
            arr = arr.astype(np.int64, copy=False)
            bad = spec.kind.check_actions(b, name, spec.n, spec.labels, arr)
            if bad is not None:
                self._bad(b, name, bad[0], arr, bad[1])
            out.append(arr)
        return out

    def _bad(self, b: Batch, name: str, j: int, arr: np.ndarray, why: str) -> None:
        slot = int(b.actor_slot[name][j])
        raise InvalidActionError(
            f"action type {name!r}, actor {j} (env {slot // self.agents_per_game}, slot {slot}): "
            f"action {int(arr[j])} is {why}"
        )

    def sample_actions(self) -> dict[str, np.ndarray]:
        """Uniformly random legal actions for the current batch (masks respected)."""
        b = self._batch
        if b is None:
            raise EnvStateError("sample_actions() before reset(); call env.reset() first")
        return sample_legal(b, self._fixed(), self._rng)


def sample_legal(b: Batch, spaces: Spaces, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Uniform random legal actions for every actor of a batch (each kind samples its own)."""
    return {d.name: d.kind.sample(b, d.name, d.n, rng) for d in spaces.actions.values()}


