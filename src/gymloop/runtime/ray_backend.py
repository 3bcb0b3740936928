"""The Ray backend (``"ray"``): the game copies run in ``workers`` Ray actors, on one machine or a cluster.

Each actor hosts one shard of the copies and steps it with the same shard executor as a process
worker (:func:`~gymloop.runtime.backend.make_executor`); the spaces are fixed with the same
:func:`~gymloop.runtime.backend.discover_spaces`, so for the same seed the batches are bit-identical
to the ``"process"`` backend's (copy ``i`` derives its seeds from the root seed and ``i`` alone).
Per step this process sends every actor its slice of the actions (``actor.step.remote``: all
actors step at once) and gathers their batches with one ``ray.get``; a batch travels as the flat
list of arrays a process worker writes into shared memory (:meth:`gymloop.batch.Batch.to_wire`),
through Ray's object transfer.

Options (``VecEnv(..., backend="ray", backend_options={...})``, or ``gymloop train --backend ray
--address ADDR``):

- ``address``: ``None`` (default): the Ray instance this process is connected to, or else a new
  local one started here (``ray.init(address="local")``: ``RAY_ADDRESS`` and a ``ray start``
  cluster on this machine are *not* used; it is shut down when the last Ray backend that needed it
  closes); ``"auto"``: ``RAY_ADDRESS`` if set, else the cluster started on this machine with ``ray
  start``; ``"HOST:PORT"``: that cluster's head node; ``"ray://HOST:PORT"``: through Ray Client
  (``ray[client]``, part of the ``gymloop[ray]`` extra). A Ray instance this process had already
  initialised is used as it is (and never shut down here).
- ``num_cpus``: CPUs each actor reserves (default 1). A local instance started here with fewer
  CPUs than ``workers * num_cpus`` is refused; a cluster short of CPUs gets a warning and the
  actors wait for it to grow (bounded by ``startup_timeout``).
- ``connect_timeout``: seconds to connect to a cluster before failing with
  :class:`~gymloop.errors.ConfigError` naming the address (default 30): a TCP check of the host
  (``HOST:PORT``, ``ray://`` hosts, ``RAY_ADDRESS``), then ``ray.init`` itself, bounded by a
  thread joined with the timeout (Ray alone retries an unreachable address, or waits on a port
  that is not Ray's, for minutes).
- ``startup_timeout``: seconds an actor may take to start and answer its first call (default
  120), even when ``step_timeout`` is ``None``. The first call's deadline is the later of this and
  the step deadline (``step_timeout`` plus the grace), so a ``startup_timeout`` below
  ``step_timeout`` changes nothing; it bounds the start when starting is slower than a step may be.
- ``runtime_env``: Ray's runtime environment for the actors (e.g. ``{"working_dir": "."}`` to ship
  the game's source to the nodes of a cluster that do not have it).

The game travels to the actors by reference when plain :mod:`pickle` can name it (a function or
class of an importable module: the actors import it), else by value with cloudpickle (a lambda, a
closure, a function of ``__main__``); see :func:`ship_game`.

Faults, as in the process backend (:class:`~gymloop.runtime.workers.ProcessBackend`): games time
out inside the actors (their executor's alarm: Ray runs an actor's calls in its main thread); an
actor that does not answer within ``step_timeout`` plus :func:`~gymloop.runtime.sharded.answer_grace`
(its first answer: :data:`~gymloop.runtime.sharded.STARTUP_TIMEOUT_S`) is killed; a dead actor
fails the call with :class:`~gymloop.errors.WorkerError` naming it and its copies, or with
``restart_workers=True`` is replaced within the call (its copies' open episodes end as
truncated), at most as often as the process backend restarts workers. ``close()`` asks every
actor to close its games, then kills them all.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import ConfigError, GymloopError, WorkerError
from ..games.registry import game_name
from .backend import BackendConfig, register_backend, shard_sizes
from .declared import DeclaredTypes
from .sharded import STARTUP_TIMEOUT_S, Call, ShardedBackend, ShardHandle, remote_executor, settle

__all__ = ["RayBackend", "ship_game", "OPTION_DEFAULTS"]

log = logging.getLogger("gymloop.ray")

#: the options the Ray backend takes (``backend_options``), with their defaults
OPTION_DEFAULTS: dict[str, Any] = {
    "address": None, "num_cpus": 1.0, "connect_timeout": 30.0, "runtime_env": None, "startup_timeout": STARTUP_TIMEOUT_S,
}
#: close(): seconds the actors get to close their games before they are killed
CLOSE_WAIT_S = 0.8
#: close(): seconds it then waits for Ray to report the killed actors dead (``ray.kill`` only asks)
KILL_WAIT_S = 10.0
#: seconds to wait for the beat board's answer when an actor is late
BOARD_WAIT_S = 5.0
INSTALL_HINT = "pip install 'gymloop[ray]'"


def import_ray() -> Any:
    """``ray``, or a :class:`ConfigError` naming the extra to install."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(f"backend='ray' needs Ray, which is not installed ({e}); install it with {INSTALL_HINT}") from None
    return ray


def ship_game(game: Any, declared: DeclaredTypes | None) -> tuple[str, bytes]:
    """How the game (and the declared types) travel to the actors: ``("reference", pickle)`` or ``("value", cloudpickle)``.

    By reference when plain :mod:`pickle` can name everything and nothing lives in ``__main__``
    (the actors run another ``__main__``); else by value with Ray's cloudpickle.

    Raises:
        ConfigError: neither works (e.g. a closure over a lock), naming the game and the fix.
    """
    payload = (game, declared)
    try:
        blob = pickle.dumps(payload, protocol=5)
        if b"__main__" not in blob:
            return "reference", blob
    except Exception:
        pass
    from ray import cloudpickle

    try:
        return "value", cloudpickle.dumps(payload, protocol=5)
    except Exception as e:
        raise ConfigError(
            f"backend='ray' ships the game {game!r} to Ray actors, but it can be pickled neither by reference (a function "
            f"or class defined at module level in an importable module) nor by value (cloudpickle: {type(e).__name__}: {e}). "
            "Define the game at module level, or keep what cannot be pickled (locks, open files, sockets, threads) out of "
            "its closure and arguments: create it inside the game"
        ) from None


# ---------------------------------------------------------------------- owning the Ray instance
_owned = False  # the Ray instance this process runs was started (or connected) here
_local = False  # ... and it is a local instance started here (its CPUs will not grow)
_users = 0  # open Ray backends relying on it


def _check_reachable(address: str, timeout: float, what: str = "address") -> None:
    """A ``HOST:PORT`` that does not accept a TCP connection within ``timeout`` s: ConfigError naming it."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"backend_options {what}={address!r} is not 'auto', 'HOST:PORT' or 'ray://HOST:PORT' (e.g. '10.0.0.5:6379', "
            "the address `ray start --head` prints)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ConfigError(
            f"the Ray cluster at {what}={address!r} is unreachable ({type(e).__name__}: {e}; waited at most {timeout:g} s): "
            "start its head node there with `ray start --head --port=PORT`, check the host and port (and the firewall), "
            "or leave the address out to start a local Ray instance"
        ) from None


def _target(address: str | None) -> tuple[str, str] | None:
    """The ``(HOST:PORT, what names it)`` that connecting to ``address`` reaches, to pre-check; ``None``: a local start.

    ``"auto"`` means ``RAY_ADDRESS`` when it is set (else the cluster ``ray start`` left on this
    machine, found through its local file: nothing to pre-check); ``ray://HOST:PORT`` is its host.
    """
    if address is None:
        return None
    if address == "auto":
        env = os.environ.get("RAY_ADDRESS", "").strip()
        if not env or env in ("auto", "local"):
            return None
        return (env[len("ray://"):] if env.startswith("ray://") else env), "RAY_ADDRESS"
    if address.startswith("ray://"):
        return address[len("ray://"):], "address"
    return address, "address"


def _init_bounded(ray: Any, kw: dict[str, Any], address: str, timeout: float) -> None:
    """``ray.init(**kw)`` in a daemon thread joined with ``timeout``: Ray itself may wait minutes on a peer that is not Ray."""
    import threading

    out: list[BaseException | None] = []

    def run() -> None:
        try:
            ray.init(**kw)
            out.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            out.append(e)

    t = threading.Thread(target=run, name="gymloop-ray-connect", daemon=True)
    t.start()
    t.join(timeout)
    if not out:
        raise ConfigError(
            f"could not connect to the Ray cluster at address={address!r} within connect_timeout={timeout:g} s: something "
            "accepts TCP connections there but did not answer as a Ray head node (the port of another service? the head's "
            "GCS port is the one `ray start --head` prints); check the address, or raise backend_options connect_timeout"
        )
    if out[0] is not None:
        raise out[0]


def _connect(ray: Any, address: str | None, timeout: float) -> bool:
    """Make sure Ray is initialised; whether this backend holds a use of an instance started (or connected) here.

    ``address=None`` starts a new local instance (``ray.init(address="local")``: neither
    ``RAY_ADDRESS`` nor a cluster started with ``ray start`` on this machine is used).
    """
    global _owned, _users, _local
    if ray.is_initialized():
        if address is not None:
            log.warning("Ray is already initialised in this process; backend_options address=%r is not used", address)
        if _owned:
            _users += 1
        return _owned
    target = _target(address)
    if target is not None:
        _check_reachable(target[0], timeout, target[1])
    kw: dict[str, Any] = {"address": "local" if address is None else address}
    if address is None:
        kw["include_dashboard"] = False
    try:
        if address is None:
            ray.init(**kw)
        else:
            _init_bounded(ray, kw, address, timeout)
    except Exception as e:  # (Ray raises ConnectionError, RuntimeError, ValueError, ImportError, and bare Exception
        # when a local instance times out during startup)
        where = "a local Ray instance" if address is None else f"the Ray cluster at address={address!r}"
        text = str(e)
        if isinstance(e, ImportError) or "ray[client]" in text:
            missing = getattr(e, "name", None)
            fix = (
                f"Ray Client (ray://) needs the extra ray[client]{f' (missing module {missing!r})' if missing else ''}: "
                f"install it with {INSTALL_HINT} (which pulls ray[client]) or pip install 'ray[client]'"
            )
        elif address == "auto":
            fix = "start one with `ray start --head` on this machine (or pass its HOST:PORT)"
        elif address is None:
            fix = ("Ray could not start here (too little memory or /tmp space, a firewall on local ports, or a stale "
                   "session: try `ray stop`), or connect to a running cluster with backend_options address")
        else:
            fix = "check that its head node runs (`ray start --head`) and that this machine runs the same Ray and Python versions"
        raise ConfigError(f"could not connect to {where}: {type(e).__name__}: {text}; {fix}") from None
    _owned, _users, _local = True, 1, address is None
    return True


def _release(ray: Any) -> None:
    """One use of the Ray instance started here ends; the last one shuts it down."""
    global _owned, _users, _local
    _users = max(0, _users - 1)
    if _users == 0 and _owned:
        _owned = _local = False
        try:
            if ray.is_initialized():
                ray.shutdown()
        except Exception:  # pragma: no cover - close never raises
            log.exception("shutting Ray down failed")


# ---------------------------------------------------------------------- the actor
class ShardActor:
    """One shard of the game copies, in a Ray actor (made a Ray actor class by :func:`_actor_class`).

    Every call answers ``(tag, payload, faults, where)``: ``tag`` is ``"ok"`` or ``"error"``
    (``payload`` the exception: a game error is a value, not a Ray task failure), ``faults`` the
    copies restarted during the call (``on_game_error="restart"``), ``where`` the actor's ``(node IP,
    pid)`` in the answers of resets (``None`` in steps). A batch is ``(arrays, metric names)``.
    """

    def __init__(
        self, how: str, blob: bytes, game_name: str, env_lo: int, n: int, apg: int, seed: int, is_env: bool,
        step_timeout: float | None, on_game_error: str, fixed: Any, generation: int, restart_base: int, board: Any = None,
        name: str = "",
    ) -> None:
        import logging as _logging

        _logging.basicConfig(level=_logging.WARNING)
        self.ex: Any = None
        self.error: BaseException | None = None
        self.faults: list[Any] = []
        self.beats = 0
        self.board = board  # the backend's BeatBoard actor (None: beats are not reported)
        self.name = name
        self.where = (_node_ip(), os.getpid())
        try:
            game, declared = pickle.loads(blob)
        except BaseException as e:
            self.error = ConfigError(
                f"the Ray actor on node {self.where[0]} could not load the game {game_name} (shipped by {how}): "
                f"{type(e).__name__}: {e}. A game shipped by reference must be importable on every node: install its "
                "package there, or pass backend_options={'runtime_env': {'working_dir': '.'}} (or py_modules) to ship its "
                "source; gymloop itself must be installed on every node"
            )
            return
        try:
            ex = remote_executor(
                game, env_lo, n, apg, seed, declared, is_env, step_timeout, on_game_error, fixed, generation,
                restart_base, on_timeout=self._beat,
            )
        except BaseException as e:
            self.error = ConfigError(
                f"the Ray actor on node {self.where[0]} (pid {self.where[1]}) could not set up game copies {env_lo}..{env_lo + n - 1} "
                f"of {game_name}: {type(e).__name__}: {e}. The same gymloop (and game) versions must be installed on every "
                "node; the traceback is in the actor's log (ray logs)"
            )
            return
        self.ex = ex
        self.faults = ex.faults

    def _beat(self) -> None:
        """A game timed out (the rest of the call has a fresh budget): tell the caller, who reads it if it waits too long."""
        self.beats += 1
        if self.board is None:
            return
        try:
            self.board.beat.remote(self.name, self.beats)  # (not awaited: the caller reads the board when it waits)
        except Exception:  # pragma: no cover - the caller then only sees the answer
            pass

    def _answer(self, fn: Any, where: bool = True) -> tuple[str, Any, list[Any], Any]:
        if self.error is not None:
            return "error", self.error, [], self.where
        try:
            tag, out = "ok", fn()
        except BaseException as e:
            tag, out = "error", e
            try:
                pickle.dumps(e)
            except Exception:
                out = GymloopError(f"{type(e).__name__}: {e}")
        faults = list(self.faults)
        self.faults.clear()
        return tag, out, faults, self.where if where else None

    def where_is(self) -> tuple[str, int]:
        """``(node IP, pid)`` of this actor."""
        return self.where

    def start(self) -> tuple[str, Any, list[Any], Any]:
        """First reset, part one: start every game; answers what this shard discovered."""
        def run() -> Any:
            self.ex.start()
            return self.ex.discover()
        return self._answer(run)

    def build(self, fixed: Any) -> tuple[str, Any, list[Any], Any]:
        """First reset, part two: fix the spaces; answers the first batch."""
        def run() -> Any:
            self.ex.set_spaces(fixed)
            return self._settled(self.ex.build())
        return self._answer(run)

    def reset(self) -> tuple[str, Any, list[Any], Any]:
        """A later reset (or a replacement's first): answers the first batch."""
        return self._answer(lambda: self._settled(self.ex.reset()))

    def step(self, actions: list[np.ndarray]) -> tuple[str, Any, list[Any], Any]:
        """Resume every game with its action; answers the next batch."""
        return self._answer(lambda: self.ex.step(actions).to_wire(), where=False)

    def close(self) -> bool:
        """End every game (their ``finally`` blocks run)."""
        if self.ex is not None:
            self.ex.close_games()
        return True

    @staticmethod
    def _settled(b: Batch) -> Any:
        settle()
        return b.to_wire()


def _await_deaths(ray: Any, actors: list[_Actor], timeout: float) -> None:
    """Return once every one of ``actors`` (killed) is dead, or after ``timeout`` seconds.

    ``ray.kill`` only asks for the kill: until it lands an actor still answers calls and holds its
    CPUs. A call on a dead actor fails (``RayActorError``), so each actor is called until its call
    fails; one that answers is called again a little later.
    """
    deadline = time.monotonic() + timeout
    pending: dict[Any, _Actor] = {}

    def call(a: _Actor) -> None:
        try:
            pending[a.handle.where_is.remote()] = a
        except Exception:  # its handle cannot submit: nothing of it is left to wait for
            pass

    for a in actors:
        call(a)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            names = sorted(a.name for a in pending.values())
            log.warning("%d Ray actor(s) %s were still alive %.0f s after ray.kill", len(names), names, timeout)
            return
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
        for ref in ready:
            a = pending.pop(ref)
            try:
                ray.get(ref)
            except Exception:  # RayActorError: dead, as asked
                continue
            time.sleep(0.01)  # it answered: the kill has not landed yet
            call(a)


def _node_ip() -> str:
    try:
        import ray

        return str(ray.util.get_node_ip_address())
    except Exception:  # pragma: no cover
        return "?"


_ACTOR_CLASS: Any = None


def _actor_class(ray: Any) -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray.remote(ShardActor)
    return _ACTOR_CLASS


class BeatBoard:
    """A Ray actor holding each shard actor's count of game timeouts during its current call.

    A game that times out inside an actor gives the rest of that actor's call a fresh budget; the
    actor reports it here (:meth:`beat`, not awaited), and the backend, when an actor's answer is
    late, reads the count (:meth:`count`) before declaring the actor frozen. One board per backend,
    reserving no CPU.
    """

    def __init__(self) -> None:
        self.beats: dict[str, int] = {}

    def beat(self, name: str, n: int) -> None:
        self.beats[name] = max(n, self.beats.get(name, 0))

    def count(self, name: str) -> int:
        return self.beats.get(name, 0)

    def forget(self, name: str) -> None:
        self.beats.pop(name, None)


_BOARD_CLASS: Any = None


def _board_class(ray: Any) -> Any:
    global _BOARD_CLASS
    if _BOARD_CLASS is None:
        _BOARD_CLASS = ray.remote(num_cpus=0)(BeatBoard)
    return _BOARD_CLASS


# ---------------------------------------------------------------------- this process's side
class _Actor(ShardHandle):
    """This process's end of one actor: its handle and state."""

    def __init__(self, index: int, env_lo: int, n: int, apg: int, handle: Any, name: str) -> None:
        super().__init__(index, env_lo, n, apg)
        self.handle = handle
        self.name = name
        self.where_ip_pid: tuple[str, int] | None = None
        self.beats = 0

    def where(self) -> str:
        at = "" if self.where_ip_pid is None else f", node {self.where_ip_pid[0]}, pid {self.where_ip_pid[1]}"
        return f"Ray actor {self.index} '{self.name}' (game copies {self.envs.start}..{self.envs.stop - 1}{at})"


class RayBackend(ShardedBackend):
    """Runs the game copies in ``workers`` Ray actors (see the module docstring for options and faults).

    A :class:`~gymloop.runtime.sharded.ShardedBackend` whose shards are actors. Batches come back
    through Ray's object transfer and are copied into fresh arrays (``Batch.concat(copy=True)``), so a
    returned batch owns its memory.

    Attributes:
        faults: errors of game copies restarted in the actors (``on_game_error="restart"``) and a
            :class:`~gymloop.errors.WorkerError` per actor replaced (``restart_workers=True``); the
            VecEnv drains it after every call.
        actors: this process's end of each actor (``actors[i].handle`` is its Ray actor handle).
    """

    option_names = tuple(OPTION_DEFAULTS)

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        if config.workers < 1:
            raise ConfigError(
                f"backend='ray' runs the games in `workers` Ray actors, but workers={config.workers}; pass workers=N (N >= 1)"
            )
        import_ray()
        _options(config.options)
        ship_game(config.game, config.declared)

    shard_word = "actor"

    def __init__(self, config: BackendConfig) -> None:
        super().__init__(config)
        c = config
        self._closed = False
        self._holds = False
        self._spawned = 0  # actors started so far (their names are unique)
        self.ray = ray = import_ray()
        opts = self.options = _options(c.options)
        self._how, self._blob = ship_game(c.game, c.declared)
        self._game_name = game_name(c.game, qualified=True)
        self._id = uuid.uuid4().hex[:8]
        self._board: Any = None  # the BeatBoard actor
        self._holds = _connect(ray, opts["address"], opts["connect_timeout"])
        try:
            cpus = float(ray.cluster_resources().get("CPU", 0.0))
            need = c.workers * opts["num_cpus"]
            if cpus < need:
                msg = (
                    f"backend='ray': workers={c.workers} actors reserve {need:g} CPUs (num_cpus={opts['num_cpus']:g} each) "
                    f"but the Ray cluster has {cpus:g}"
                )
                if self._holds and _local:  # a local instance started here: nothing will add CPUs
                    raise ConfigError(f"{msg}; lower workers, or pass backend_options={{'num_cpus': {cpus / c.workers:g}}}")
                log.warning("%s: the actors wait until the cluster grows", msg)
            lo = 0
            for i, n in enumerate(shard_sizes(c.num_envs, c.workers)):
                self.shards.append(self._new_actor(i, lo, n))
                lo += n
        except BaseException:
            self.close()
            raise

    @property
    def actors(self) -> list[_Actor]:
        """This process's end of each actor (``actors[i].handle`` is its Ray actor handle)."""
        return self.shards

    # ------------------------------------------------------------------ actors
    def _new_actor(self, i: int, env_lo: int, n: int, fixed: Any = None, restart_base: int = 0) -> _Actor:
        c = self.config
        if self._board is None:  # (made with the first actor)
            board_opts: dict[str, Any] = {"name": f"gymloop-{self._id}-beats", "max_restarts": 0}
            if self.options["runtime_env"] is not None:
                board_opts["runtime_env"] = self.options["runtime_env"]
            self._board = _board_class(self.ray).options(**board_opts).remote()
        name = f"gymloop-{self._id}-{i}" + (f"-n{self._spawned}" if fixed is not None else "")  # a replacement: a new name
        self._spawned += 1
        opts: dict[str, Any] = {"num_cpus": self.options["num_cpus"], "name": name, "max_restarts": 0, "max_task_retries": 0}
        if self.options["runtime_env"] is not None:
            opts["runtime_env"] = self.options["runtime_env"]
        handle = _actor_class(self.ray).options(**opts).remote(
            self._how, self._blob, self._game_name, env_lo, n, c.agents_per_game, c.seed, c.is_env, c.step_timeout,
            c.on_game_error, fixed, self._generation, restart_base, self._board, name,
        )
        return _Actor(i, env_lo, n, c.agents_per_game, handle, name)

    def _forget_beats(self, a: _Actor) -> None:
        """Drop actor ``a``'s count from the beat board (it is replaced, or the backend closes)."""
        if self._board is None:
            return
        try:
            self._board.forget.remote(a.name)
        except Exception:  # pragma: no cover - Ray shut down meanwhile: the board went with it
            pass

    def _beats(self, a: _Actor) -> int:
        """How many of actor ``a``'s games timed out during its current call (0 if the board cannot tell)."""
        if self._board is None:
            return 0
        try:
            return int(self.ray.get(self._board.count.remote(a.name), timeout=BOARD_WAIT_S))
        except Exception:  # pragma: no cover - the board is gone or slow: the actor is judged by its answer alone
            return 0

    def _lose(self, a: _Actor, e: BaseException | None, timed_out: bool = False) -> WorkerError:
        """Actor ``a`` is lost (dead, or killed now for not answering): the error that says so (kept in ``a.lost``)."""
        if a.lost is not None:
            return a.lost
        try:
            self.ray.kill(a.handle, no_restart=True)
        except Exception:
            pass
        if timed_out and not a.heard and self.config.step_timeout is None:
            msg = (
                f"{a.where()} did not start within startup_timeout={self.options['startup_timeout']:g} s: it waits for "
                "cluster resources (num_cpus per actor), its node is unreachable, or its start (runtime_env, imports) is this "
                "slow; it was killed. Add CPUs to the cluster, lower num_cpus, or raise backend_options startup_timeout"
            )
        elif timed_out:
            msg = a.unanswered_message(
                self.config.step_timeout, f"startup_timeout={self.options['startup_timeout']:g} s",
                "frozen, stuck in C code that its own step deadline cannot interrupt, waiting for cluster resources, or its "
                "node is unreachable",
            )
        else:
            msg = a.died_message(
                _why(e),
                if_starting=". gymloop (and the game's module, if shipped by reference) must be installed on every node "
                f"of the cluster ({INSTALL_HINT})",
                causes="its node may have gone, or something killed it",
                a_shard="an actor",
            )
        return a.lose(msg)

    def _get(self, calls: list[tuple[_Actor, Any]]) -> list[Any]:
        """The answer of each call (or the :class:`WorkerError` of its lost actor), by each actor's deadline."""
        ray = self.ray
        now = time.monotonic()
        deadlines = [self._actor_deadline(a, now) for a, _ in calls]
        try:  # the usual case: every actor answers in time, one wait for all
            timeout = None if None in deadlines else max(0.0, max(d for d in deadlines if d is not None) - now)
            return ray.get([r for _, r in calls], timeout=timeout)
        except Exception:
            pass
        return [self._get_one(a, r, d) for (a, r), d in zip(calls, deadlines)]

    def _actor_deadline(self, a: _Actor, now: float) -> float | None:
        start = None if a.heard else a.t_start + self.options["startup_timeout"]
        if self._allow is None:
            return start  # no step_timeout: only an actor's start is bounded
        d = now + self._allow
        return d if start is None else max(d, start)

    def _get_one(self, a: _Actor, ref: Any, deadline: float | None) -> Any:
        ray = self.ray
        while True:
            try:
                return ray.get(ref, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                beats = self._beats(a)
                if beats > a.beats:  # one of its games timed out meanwhile: the rest of its call has a fresh budget
                    a.beats = beats
                    deadline = time.monotonic() + (self._allow or 0.0)
                    continue
                return self._lose(a, None, timed_out=True)
            except ray.exceptions.RayError as e:
                return self._lose(a, e)

    # ------------------------------------------------------------------ the transport (ShardedBackend's)
    def _send(self, shard: Any, call: Call, arg: Any) -> tuple[Call, Any]:
        h = shard.handle
        if call is Call.RESET:
            return call, h.reset.remote()
        if call is Call.START:
            return call, h.start.remote()
        return call, h.build.remote(arg)

    def _send_step(self, shard: Any, actions: list[np.ndarray]) -> tuple[None, Any]:
        return None, shard.handle.step.remote(actions)

    def _await(self, pending: Any) -> list[Any]:
        """Every answer at once (one ``ray.get`` when all come in time): ``(call, answer or WorkerError)``."""
        answers = self._get([(a, ref) for a, (_, ref) in pending])
        return [(call, ans) for (_, (call, _)), ans in zip(pending, answers)]

    def _receive(self, shard: Any, answer: Any) -> Any:
        call, ans = answer
        if isinstance(ans, WorkerError):
            raise ans
        shard.heard = True
        tag, payload, faults, where = ans
        if where is not None:
            shard.where_ip_pid = where
        if faults:
            self.faults.extend(faults)
        if tag == "error":
            raise payload
        if call is not None and call is Call.START:
            return payload
        arrays, names = payload
        return Batch.from_wire(arrays, names, self.spaces, shard.n_slots)

    def _respawn(self, i: int, restart_base: int = 0) -> _Actor:
        """A new actor in place of actor ``i`` (the old one is killed), with the fixed spaces."""
        old = self.shards[i]
        try:
            self.ray.kill(old.handle, no_restart=True)
        except Exception:
            pass
        self._forget_beats(old)
        a = self._new_actor(i, old.envs.start, len(old.envs), fixed=self._fixed, restart_base=restart_base)
        self.shards[i] = a
        return a

    def close(self) -> None:
        """Let every actor close its games (up to :data:`CLOSE_WAIT_S`), then kill them all; never raises."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        ray = self.ray
        actors, self.shards = list(self.shards), []
        if not ray.is_initialized():  # shut down already (by its owner, or at exit): the actors went with it
            if self._holds:
                self._holds = False
                _release(ray)
            return
        try:
            refs = []
            for a in actors:
                if a.lost is None:
                    try:
                        refs.append(a.handle.close.remote())
                    except Exception:
                        pass
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=CLOSE_WAIT_S)
            killed = []
            for a in actors:
                try:
                    ray.kill(a.handle, no_restart=True)
                    killed.append(a)
                except Exception:
                    pass
            if self._board is not None:
                try:
                    ray.kill(self._board, no_restart=True)
                except Exception:
                    pass
                self._board = None
            _await_deaths(ray, killed, KILL_WAIT_S)
        except Exception:  # pragma: no cover - close never raises
            log.exception("closing the Ray actors failed")
        if self._holds:
            self._holds = False
            _release(ray)


def _why(e: BaseException | None) -> str:
    if e is None:
        return "no reason given"
    text = str(e).strip()
    return f"{type(e).__name__}: {' '.join(text.split())[:400]}"


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Ray backend's options with their defaults; ConfigError for a bad value."""
    out = dict(OPTION_DEFAULTS)
    out.update(options or {})
    addr = out["address"]
    if addr is not None and (not isinstance(addr, str) or not addr.strip()):
        raise ConfigError(f"backend_options address must be None, 'auto', 'HOST:PORT' or 'ray://HOST:PORT', got {addr!r}")
    for name in ("num_cpus", "connect_timeout", "startup_timeout"):
        v = out[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ConfigError(f"backend_options {name} must be a positive number, got {v!r}")
        out[name] = float(v)
    env = out["runtime_env"]
    if env is not None:
        if not isinstance(env, Mapping):
            raise ConfigError(f"backend_options runtime_env must be a dict (Ray's runtime_env), got {env!r}")
        try:
            from ray.runtime_env import RuntimeEnv
        except ImportError:  # (a configuration checked without Ray: starting the backend says Ray is missing)
            return out
        try:
            RuntimeEnv(**{str(k): v for k, v in env.items()})  # Ray's own check of each field
        except Exception as e:  # (Ray raises TypeError or ValueError, and others for plugins' fields)
            raise ConfigError(
                f"backend_options runtime_env is not a valid Ray runtime_env: {type(e).__name__}: {e}; see Ray's runtime_env "
                "documentation (e.g. {'working_dir': '.'}, {'pip': ['package']})"
            ) from None
    return out


register_backend("ray", RayBackend)
