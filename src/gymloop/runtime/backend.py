"""The backend interface: how a :class:`~gymloop.vector.VecEnv` runs its game copies.

A backend owns ``num_envs`` game copies and hands their decisions over as one
:class:`~gymloop.batch.Batch` per step. Every backend steps its games with the same *shard
executors* (:class:`~gymloop.runtime.shard.ShardExecutor`: one per share of the games, made by
:func:`make_executor`), and fixes the spaces with the same shared step (:func:`discover_spaces`);
what differs between backends is only where the shards run and how batches and actions travel:

- ``"local"`` (:mod:`gymloop.runtime.local`): one executor in this process;
- ``"process"`` (:mod:`gymloop.runtime.workers`): this process and ``workers - 1`` child processes,
  batches through shared memory;
- ``"ray"`` (:mod:`gymloop.runtime.ray_backend`): ``workers`` Ray actors, on this machine or a cluster.

Backends are chosen by name (``gl.VecEnv(game, n, backend="process")``). A new backend is one file
that subclasses :class:`Backend` and calls :func:`register_backend`; a built-in one that should
load only when asked for is also named in ``_LAZY`` below (``"name": "module:attribute"``), so that
:mod:`gymloop.vector` never imports it (nor what it needs, e.g. ``ray``) until it is used.

The reset protocol of a backend, whatever its transport::

    for each shard:  ex.start()                 # every game runs to its first decision
                     found.append(ex.discover())  # declared + seen types of this shard
    fixed, spaces = discover_spaces(found, config.is_env)   # once, at the first reset only
    for each shard:  ex.set_spaces(fixed); part = ex.build()
    batch = Batch.concat(parts)                 # shards in env order

later resets are ``ex.reset()`` on every shard (the spaces stay fixed), and a step is
``ex.step(that shard's slice of every action array)`` on every shard, then ``Batch.concat``.
"""

from __future__ import annotations

import difflib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import ConfigError, SchemaError
from ..spaces import Spaces
from .declared import DeclaredTypes, merge_types
from .shard import ShardExecutor

__all__ = [
    "Backend",
    "BackendConfig",
    "ShardExecutor",
    "backend_names",
    "check_backend_config",
    "default_backend",
    "discover_spaces",
    "make_executor",
    "register_backend",
    "resolve_backend",
    "shard_sizes",
]


@dataclass(frozen=True)
class BackendConfig:
    """What a :class:`~gymloop.vector.VecEnv` asks of its backend (validated by the VecEnv).

    Attributes:
        game: the game loop function, or the :class:`gl.Environment` class (or a partial of one).
        num_envs: number of game copies.
        agents_per_game: agents (batch slots) per game copy.
        seed: root seed; copy ``i`` derives its seeds from it and ``i`` alone (not the layout).
        declared: the types declared up front (:class:`~gymloop.runtime.declared.DeclaredTypes`), or ``None``.
        is_env: ``game`` is a low-level :class:`gl.Environment`.
        workers: the ``workers`` the VecEnv was given (0 or more).
        start_method: multiprocessing start method (backends with processes).
        spin_s: seconds a worker polls before it blocks (backends with processes).
        step_timeout: seconds a step (or reset) may take before it fails with
            :class:`~gymloop.errors.GameTimeoutError` (a game that does not ask for its next decision)
            or :class:`~gymloop.errors.WorkerError` (a worker that does not answer); ``None``: no limit.
        on_game_error: ``"raise"`` (a faulting game copy fails the step) or ``"restart"`` (the copy
            restarts with a fresh seed, the fault is counted and logged, and stepping goes on).
        restart_workers: a worker that died is replaced (with its games) instead of failing every later call.
        options: the backend's own options (``VecEnv(backend_options=...)``), by name; a backend
            declares the names it takes in :attr:`Backend.option_names`.
    """

    game: Any
    num_envs: int
    agents_per_game: int
    seed: int
    declared: DeclaredTypes | None
    is_env: bool
    workers: int = 0
    start_method: str = "spawn"
    spin_s: float = 0.002
    step_timeout: float | None = 60.0
    on_game_error: str = "raise"
    restart_workers: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """Runs the game copies of one VecEnv; made by its registered factory from a :class:`BackendConfig`.

    The contract:

    - Construction starts nothing that runs games (it may start processes or actors); the first
      :meth:`reset` does.
    - :meth:`reset` (re)starts every game copy and returns the first batch and the spaces. The
      spaces are fixed at the first reset with :func:`discover_spaces` over what every shard found,
      and every later reset returns the same value.
    - :meth:`step` takes one ``int64`` array per action type, in ``spaces.actions`` order,
      with one entry per actor of that type in the last batch, in batch order (the VecEnv has
      validated them). It must not keep or write into them after it returns.
    - Ownership of batches: the caller owns every array of a returned batch; a backend may reuse
      arrays of its own only if they are never handed out again (a batch read out of shared memory
      is copied). A batch stays valid after later steps and after :meth:`close`.
    - Errors: a game that raises (anything but ``KeyboardInterrupt``) surfaces as
      :class:`~gymloop.errors.GameError` (with env index and seed) from :meth:`reset` or
      :meth:`step`, after every shard has finished its part of the call (so no shard is left
      mid-protocol); the first error in env order is raised. After an error in :meth:`step` only
      :meth:`reset` or :meth:`close` may follow. When :meth:`reset` raises, the VecEnv closes the
      backend and makes a new one for its next reset if ``workers > 0`` (a failed start may leave
      workers mid-protocol; a backend may also close itself first); with ``workers=0`` it calls
      :meth:`reset` again on the same backend, which must then restart every game afresh.
    - ``step_timeout`` (the shard executors enforce it for games; see
      :mod:`gymloop.runtime.alarm`): a call never waits longer than about that for a process or
      actor that does not answer; it fails with :class:`~gymloop.errors.WorkerError` naming it
      and its copies, as does a call that finds one dead, unless ``restart_workers`` lets the
      backend start it again (its copies' open episodes end as truncated).
    - ``on_game_error="restart"``: the executors restart faulting copies themselves; the backend
      collects their errors (and a :class:`~gymloop.errors.WorkerError` per restarted worker) in
      an attribute ``faults`` (a list it only appends to, never rebinds), which the VecEnv drains
      after every call to count, log and rate-limit them. A backend without ``faults`` reports none.
    - :meth:`close` ends every game (``GreenletExit`` at its ``act`` call, so its ``finally``
      blocks run), stops processes and frees shared resources, within about 2 s whatever state
      they are in. It is idempotent, never raises for an already closed or half-constructed
      backend, and may be called from a finalizer.
    - :meth:`step_async` then :meth:`step_wait` is :meth:`step` in two halves (the caller works
      in between while the games step elsewhere); the default does the work in :meth:`step_wait`.
    - The per-step path adds no per-step Python work beyond the hand-off itself (and O(1) cheap
      work per batch for the deadlines).
    """

    #: the name this backend is registered under (set by :func:`register_backend`)
    name: str = ""
    #: the names of the options it takes (``VecEnv(backend_options=...)``); others are refused
    option_names: tuple[str, ...] = ()

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        """Raise :class:`ConfigError` if this backend cannot run ``config`` (called by VecEnv's constructor).

        The default accepts every configuration.
        """
        return None

    @abstractmethod
    def reset(self) -> tuple[Batch, Any]:
        """(Re)start every game copy; returns ``(first batch, spaces)``."""

    @abstractmethod
    def step(self, actions: list[np.ndarray]) -> Batch:
        """Apply one action per actor (one ``int64`` array per action type); returns the next batch."""

    def step_async(self, actions: list[np.ndarray]) -> None:
        """The first half of :meth:`step`: hand the actions over and return (a backend whose games run
        elsewhere starts stepping them now). Exactly one :meth:`step_wait` follows.

        The default keeps the actions and does the whole step in :meth:`step_wait`; faults and
        errors are those of :meth:`step` either way (raised by :meth:`step_wait`).
        """
        self._async_actions = actions

    def step_wait(self) -> Batch:
        """The second half of :meth:`step`: the next batch of the actions given to :meth:`step_async`."""
        actions = self.__dict__.pop("_async_actions")
        return self.step(actions)

    @abstractmethod
    def close(self) -> None:
        """End every game, stop processes, free shared resources. Idempotent."""


def make_executor(
    game: Any, env_lo: int, n: int, apg: int, seed: int, declared: DeclaredTypes | None, is_env: bool, spaces: Any = None,
    *, step_timeout: float | None = None, on_game_error: str = "raise",
) -> ShardExecutor:
    """The executor for game copies ``[env_lo, env_lo + n)``: the same stepping code in every backend.

    ``step_timeout`` and ``on_game_error`` are the :class:`BackendConfig` fields of those names.
    """
    if is_env:
        from .envexec import EnvExecutor

        return EnvExecutor(game, env_lo, n, seed, spaces, declared, step_timeout=step_timeout, on_game_error=on_game_error)
    from .executor import Executor

    return Executor(game, env_lo, n, apg, seed, spaces, declared, step_timeout=step_timeout, on_game_error=on_game_error)


def shard_sizes(num_envs: int, shards: int) -> list[int]:
    """How many game copies each of ``shards`` shards runs: contiguous, as even as can be, larger first."""
    base, extra = divmod(num_envs, shards)
    return [base + (1 if w < extra else 0) for w in range(shards)]


def discover_spaces(found: Sequence[Any], is_env: bool) -> tuple[Any, Any]:
    """Fix the spaces of a VecEnv from what each shard discovered; the one shared discovery step.

    Args:
        found: one :meth:`ShardExecutor.discover` value per shard, in env order.
        is_env: the shards run low-level environments (each found value is their :class:`~gymloop.spaces.Spaces`).

    Returns:
        ``(fixed, spaces)``: ``fixed`` is the picklable value every shard receives through
        :meth:`ShardExecutor.set_spaces`; ``spaces`` is what the backend's :meth:`Backend.reset`
        returns. For game loops, ``fixed`` is the union ``(entity classes, globals class,
        action types)`` in canonical order (so every layout of shards gives the same spaces) and
        ``spaces`` the :class:`~gymloop.spaces.Spaces` compiled from it. For environments both are
        the environments' own spaces, which every shard must agree on.

    Raises:
        SchemaError: games used several globals classes, two types share a name, or environment
            copies report different spaces.
    """
    if not found:
        raise ValueError("discover_spaces needs what at least one shard found")
    if is_env:
        first = found[0]
        for other in found[1:]:
            if other.obs != first.obs or other.actions != first.actions:
                raise SchemaError(
                    "environment copies report different spaces (obs_space()/action_space()); every copy must "
                    "report the same"
                )
        return first, first
    fixed = merge_types((e, [g] if g is not None else [], a) for e, g, a in found)
    return fixed, Spaces.build(*fixed)


# ---------------------------------------------------------------------- registry
_REGISTRY: dict[str, Callable[[BackendConfig], Backend]] = {}
# built-in backends, imported on first use only ("module:attribute" of their Backend class)
_LAZY: dict[str, str] = {
    "local": "gymloop.runtime.local:LocalBackend",
    "process": "gymloop.runtime.workers:ProcessBackend",
    "ray": "gymloop.runtime.ray_backend:RayBackend",
}


def register_backend(name: str, factory: Callable[[BackendConfig], Backend] | str) -> None:
    """Make ``factory`` the backend called ``name``; ``VecEnv(..., backend=name)`` then uses it.

    Args:
        name: the backend's name.
        factory: a :class:`Backend` subclass (called with the :class:`BackendConfig`; its
            :meth:`Backend.check_config` runs in VecEnv's constructor) or any callable
            ``factory(config) -> Backend``; or ``"module:attribute"`` to import it on first use.

    Example:
        >>> from gymloop.runtime.backend import register_backend, backend_names
        >>> "local" in backend_names() and "process" in backend_names()
        True
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a backend name must be a non-empty string, got {name!r}")
    if isinstance(factory, str):
        if ":" not in factory:
            raise ConfigError(f"a lazy backend is given as 'module:attribute', got {factory!r}")
        _REGISTRY.pop(name, None)
        _LAZY[name] = factory
        return
    if not callable(factory):
        raise ConfigError(f"backend {name!r}: the factory must be callable, got {factory!r}")
    _LAZY.pop(name, None)
    _REGISTRY[name] = factory
    if isinstance(factory, type) and issubclass(factory, Backend) and not factory.name:
        factory.name = name


def backend_names() -> list[str]:
    """Names of every known backend (registered or loaded on first use), sorted."""
    return sorted(set(_REGISTRY) | set(_LAZY))


def resolve_backend(name: str) -> Callable[[BackendConfig], Backend]:
    """The factory of the backend called ``name`` (importing it on first use).

    Raises:
        ConfigError: no backend has that name (the message lists the known ones).
    """
    f = _REGISTRY.get(name) if isinstance(name, str) else None
    if f is not None:
        return f
    if isinstance(name, str) and name in _LAZY:
        mod, _, attr = _LAZY[name].partition(":")
        try:
            f = getattr(importlib.import_module(mod), attr)
        except ImportError as e:
            raise ConfigError(f"backend {name!r} could not be loaded ({mod}): {e}") from None
        register_backend(name, f)
        return f
    known = backend_names()
    hint = ""
    if isinstance(name, str):
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            hint = f"; did you mean {close[0]!r}?"
    raise ConfigError(f"unknown backend {name!r}; the known backends are {known}{hint}")


def check_backend_config(factory: Callable[[BackendConfig], Backend], config: BackendConfig) -> None:
    """Refuse options the backend does not take, then run the factory's :meth:`Backend.check_config`
    (a factory without one accepts every configuration)."""
    if config.options:
        if not isinstance(config.options, Mapping):
            raise ConfigError(f"backend_options must be a dict of option name -> value, got {config.options!r}")
        takes = tuple(getattr(factory, "option_names", ()))
        unknown = sorted(str(k) for k in config.options if k not in takes)
        if unknown:
            name = getattr(factory, "name", "") or getattr(factory, "__name__", repr(factory))
            raise ConfigError(
                f"backend {name!r} takes no option {', '.join(map(repr, unknown))}; "
                + (f"it takes {', '.join(map(repr, takes))}" if takes else "it takes no backend_options")
            )
    check = getattr(factory, "check_config", None)
    if check is not None:
        check(config)


def default_backend(workers: int) -> str:
    """The backend ``VecEnv(backend=None)`` uses: everything in this process for ``workers <= 1``."""
    return "local" if workers <= 1 else "process"
