"""Process workers: N processes, each hosting many game copies, batches through shared memory.

Per step the main process writes every worker's slice of the actions into that worker's input
segment and sends it a few bytes (the slice lengths); the worker resumes its games, writes its
part of the batch into its output segment and answers with the array shapes. Nothing is pickled
per step. Both sides block on their pipe while waiting (no busy-waiting), so ``workers=2`` uses
two cores for game stepping.

Segments are created and unlinked by the main process; a worker whose batch outgrows its output
segment asks for a bigger one.

A worker that has just answered spins for up to ``spin_s`` (yielding its core with
``sched_yield`` on every turn, so the main process is never starved) before it blocks: the next
step usually arrives within that window, and a process that sleeps between steps comes back to
cold caches (measured here: a step after a 1 ms sleep took ~1.7x as long).

Nothing hangs: each worker runs its games under a step deadline; this process waits for every
answer with a deadline too and kills a worker that misses it; a dead worker is a
:class:`~gymloop.errors.WorkerError` (or is started again, ``restart_workers=True``); ``close()``
asks, then terminates, then kills, within about 2 s; an ``atexit`` handler closes what is still
open so the interpreter always exits. See :class:`ProcessBackend`.
"""

from __future__ import annotations

import atexit
import logging
import math
import multiprocessing as mp
import os
import pickle
import select
import signal
import time
import traceback
import weakref
from enum import IntEnum
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import ConfigError, GymloopError, WorkerError
from .backend import Backend, BackendConfig, make_executor, register_backend, shard_sizes
from .declared import DeclaredTypes
from .shard import ShardExecutor
from .sharded import STARTUP_TIMEOUT_S, Call, ShardedBackend, ShardHandle, answer_grace, remote_executor, settle

log = logging.getLogger("gymloop.workers")


class Op(IntEnum):
    """The opcodes of the pipe between the main process and a worker: the first byte of every message.

    Main process -> worker:

    - ``RESET``: restart every game. At the first reset the worker answers ``DISCOVERED`` and waits
      for ``SPACES``; then (and at later resets at once) it answers with a batch.
    - ``SPACES`` + pickled fixed spaces (from :func:`~gymloop.runtime.backend.discover_spaces`).
    - ``STEP`` + 7 bytes of padding + the int64 length of every action array; the arrays themselves
      are in the worker's input segment, back to back. The worker answers with a batch.
    - ``IN_SEGMENT`` + name: the input segment was replaced by a bigger one (no answer).
    - ``OUT_SEGMENT`` + name: the bigger output segment the worker asked for with ``GROW``.
    - ``CLOSE``: close every game and exit; the worker answers ``CLOSED``.

    Worker -> main process:

    - ``DISCOVERED`` + pickled :meth:`~gymloop.runtime.backend.ShardExecutor.discover` value.
    - ``BATCH`` + int64 header length + header (dtype, ndim, shape of every array) + metric names
      joined by NUL; the arrays are in the worker's output segment.
    - ``GROW`` + int64 size: the batch needs a bigger output segment; the answer is ``OUT_SEGMENT``.
    - ``ERROR`` + pickled exception, in place of the expected answer; the worker keeps serving.
    - ``CLOSED``: the answer to ``CLOSE``.
    - ``ALIVE``: not an answer: sent once when the worker has started, and whenever one of its games
      timed out (the rest of its step has a fresh budget); the main process moves its deadline on.
    - ``FAULTS`` + pickled list of :class:`~gymloop.errors.GameError`: not an answer: the copies
      restarted (``on_game_error="restart"``) during this call, sent just before the answer.

    The values are ASCII letters, which keeps the byte stream readable when debugging.
    """

    # main process -> worker
    RESET, SPACES, STEP, IN_SEGMENT, OUT_SEGMENT, CLOSE = b"RPSNMC"
    # worker -> main process
    DISCOVERED, BATCH, GROW, ERROR, CLOSED, ALIVE, FAULTS = b"DBGEKAF"

    @property
    def tag(self) -> bytes:
        """The one-byte message prefix."""
        return bytes((self.value,))


# message prefixes and plain-int opcodes for the per-step path (no enum lookups per message)
_T_RESET, _T_SPACES, _T_IN_SEGMENT, _T_OUT_SEGMENT, _T_CLOSE = (
    Op.RESET.tag, Op.SPACES.tag, Op.IN_SEGMENT.tag, Op.OUT_SEGMENT.tag, Op.CLOSE.tag,
)
_T_DISCOVERED, _T_BATCH, _T_GROW, _T_ERROR, _T_CLOSED, _T_ALIVE, _T_FAULTS = (
    Op.DISCOVERED.tag, Op.BATCH.tag, Op.GROW.tag, Op.ERROR.tag, Op.CLOSED.tag, Op.ALIVE.tag, Op.FAULTS.tag,
)
_T_STEP_HEAD = Op.STEP.tag + b"\x00" * 7  # the action lengths that follow are 8-byte aligned
_OP_STEP, _OP_RESET, _OP_IN_SEGMENT, _OP_CLOSE = int(Op.STEP), int(Op.RESET), int(Op.IN_SEGMENT), int(Op.CLOSE)
_OP_BATCH, _OP_GROW, _OP_ERROR, _OP_ALIVE, _OP_FAULTS = (
    int(Op.BATCH), int(Op.GROW), int(Op.ERROR), int(Op.ALIVE), int(Op.FAULTS),
)

_ALIGN = 64
_DTYPES = [np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_), np.dtype(np.float64)]
_DCODE = {d: i for i, d in enumerate(_DTYPES)}


def _attach(name: str) -> shared_memory.SharedMemory:
    """Attach to a segment the main process owns (and will unlink).

    Worker processes share the main process's resource tracker, so attaching registers nothing
    new; the main process's ``unlink`` unregisters the segment.
    """
    return shared_memory.SharedMemory(name=name)


# ---------------------------------------------------------------------- batch <-> flat arrays
def _layout(arrays: list[np.ndarray]) -> tuple[np.ndarray, int]:
    head: list[int] = [len(arrays)]
    off = 0
    for a in arrays:
        head += [_DCODE[a.dtype], a.ndim, *a.shape]
        off += -(-a.nbytes // _ALIGN) * _ALIGN
    return np.array(head, dtype=np.int64), off


def _write(buf: memoryview, arrays: list[np.ndarray]) -> None:
    off = 0
    for a in arrays:
        n = a.nbytes
        if n:
            np.ndarray(a.shape, a.dtype, buffer=buf, offset=off)[...] = a
        off += -(-n // _ALIGN) * _ALIGN


def _read(buf: memoryview, head: np.ndarray) -> list[np.ndarray]:
    h = head.tolist()
    count = h[0]
    i = 1
    off = 0
    out = []
    for _ in range(count):
        dt = _DTYPES[h[i]]
        nd = h[i + 1]
        shape = tuple(h[i + 2 : i + 2 + nd])
        i += 2 + nd
        a = np.ndarray(shape, dt, buffer=buf, offset=off)
        off += -(-a.nbytes // _ALIGN) * _ALIGN
        out.append(a)
    return out


# ---------------------------------------------------------------------- worker process
def _worker_main(
    conn: Any, game: Any, env_lo: int, n: int, apg: int, seed: int, declared: DeclaredTypes | None, is_env: bool,
    in_name: str, out_name: str, spin_s: float = 0.0, step_timeout: float | None = None, on_game_error: str = "raise",
    fixed: Any = None, generation: int = 0, restart_base: int = 0,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    # Ctrl-C reaches the whole process group: the main process decides (it closes the workers)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a game that timed out gave the rest of the step a fresh budget: tell the main process so
    ex = remote_executor(
        game, env_lo, n, apg, seed, declared, is_env, step_timeout, on_game_error, fixed, generation, restart_base,
        on_timeout=lambda: conn.send_bytes(_T_ALIVE),
    )
    in_shm = _attach(in_name)
    out_shm = _attach(out_name)
    faults = ex.faults
    conn.send_bytes(_T_ALIVE)  # started (imports done): from now on the usual step_timeout applies

    def send_faults() -> None:
        conn.send_bytes(_T_FAULTS + pickle.dumps(list(faults)))
        faults.clear()

    def send_batch(b: Batch) -> None:
        nonlocal out_shm
        if faults:
            send_faults()
        arrays, names = b.to_wire()
        head, size = _layout(arrays)
        if size > out_shm.size:
            conn.send_bytes(_T_GROW + np.array([size], dtype=np.int64).tobytes())
            msg = conn.recv_bytes()
            out_shm.close()
            out_shm = _attach(msg[1:].decode())
        buf = out_shm.buf
        assert buf is not None  # our segment, open until the worker exits
        _write(buf, arrays)
        hb = head.tobytes()
        conn.send_bytes(_T_BATCH + np.array([len(hb)], dtype=np.int64).tobytes() + hb + "\x00".join(names).encode())

    spin = spin_s
    try:
        while True:
            try:
                if spin > 0 and not conn.poll(0):
                    # Stay hot for a short while: a worker that sleeps between steps comes back to
                    # cold caches (measured: a step after a 1 ms sleep is ~1.7x slower). Yielding
                    # lets the main process (or the other worker) run on this core meanwhile.
                    deadline = time.perf_counter() + spin
                    while not conn.poll(0) and time.perf_counter() < deadline:
                        os.sched_yield()
                msg = conn.recv_bytes()
            except (EOFError, OSError):
                break
            op = msg[0]
            try:
                if op == _OP_STEP:
                    lens = np.frombuffer(msg, dtype=np.int64, offset=8)
                    actions = []
                    off = 0
                    for L in lens.tolist():
                        actions.append(np.ndarray((L,), np.int64, buffer=in_shm.buf, offset=off))
                        off += L * 8
                    send_batch(ex.step(actions))
                elif op == _OP_RESET:
                    if ex.spaces is None:
                        ex.start()
                        if faults:
                            send_faults()
                        conn.send_bytes(_T_DISCOVERED + pickle.dumps(ex.discover()))
                        reply = conn.recv_bytes()
                        ex.set_spaces(pickle.loads(reply[1:]))
                        send_batch(ex.build())
                    else:
                        send_batch(ex.reset())
                    settle()
                elif op == _OP_IN_SEGMENT:
                    in_shm.close()
                    in_shm = _attach(msg[1:].decode())
                elif op == _OP_CLOSE:
                    ex.close_games()
                    conn.send_bytes(_T_CLOSED)
                    break
            except BaseException as e:  # report, keep serving (close must still work)
                try:
                    payload = pickle.dumps(e)
                except Exception:
                    payload = pickle.dumps(GymloopError(f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
                if faults:
                    send_faults()
                conn.send_bytes(_T_ERROR + payload)
                if not isinstance(e, Exception):
                    break
    finally:
        try:
            ex.close_games()
        except Exception:  # pragma: no cover
            pass
        in_shm.close()
        out_shm.close()
        conn.close()


# ---------------------------------------------------------------------- main-process side
#: close(): seconds the workers get to exit when asked, then after terminate(), then after kill()
CLOSE_WAIT_S, TERMINATE_WAIT_S, KILL_WAIT_S = 0.8, 0.3, 0.5


class _Worker(ShardHandle):
    """The main process's end of one worker process (its pipe, segments and state)."""

    def __init__(
        self, ctx: Any, index: int, c: BackendConfig, env_lo: int, n: int, sink: list[Any], fixed: Any = None,
        generation: int = 0, restart_base: int = 0,
    ) -> None:
        super().__init__(index, env_lo, n, c.agents_per_game)
        apg = c.agents_per_game
        self.sink = sink  # the backend's faults list
        self.step_timeout = c.step_timeout
        self.allow = None if c.step_timeout is None else c.step_timeout + answer_grace(c.step_timeout)
        self.owned: list[shared_memory.SharedMemory] = []
        self.in_shm = self.new_segment(max(4096, 64 * n * apg))
        self.out_shm = self.new_segment(max(1 << 16, 512 * n * apg))
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(
            target=_worker_main,
            args=(
                child, c.game, env_lo, n, apg, c.seed, c.declared, c.is_env, self.in_shm.name, self.out_shm.name,
                c.spin_s, c.step_timeout, c.on_game_error, fixed, generation, restart_base,
            ),
            daemon=True,
            name=f"gymloop-worker-{index}",
        )
        try:
            self.proc.start()
        except BaseException:
            self.conn.close()
            child.close()
            self.release()
            raise
        child.close()
        self.pid: int | None = self.proc.pid  # (kept: the Process object is closed once the worker is stopped)
        self.stopped = False
        self.t_start = time.monotonic()
        self.poller: Any = None
        if hasattr(select, "poll"):  # one cheap system call per wait (Connection.poll builds a selector each time)
            self.poller = select.poll()
            self.poller.register(self.conn.fileno(), select.POLLIN)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def where(self) -> str:
        return f"worker process {self.index} (game copies {self.envs.start}..{self.envs.stop - 1}, pid {self.pid})"

    def died(self) -> WorkerError:
        """It is gone (its pipe broke): the error that says so (kept in :attr:`lost`)."""
        if self.lost is not None:
            return self.lost
        self.proc.join(timeout=1)
        code = self.proc.exitcode
        how = f"exit code {code}"
        if code is not None and code < 0:
            try:
                how = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                pass
        return self.lose(self.died_message(
            how,
            if_starting="; its traceback is on stderr. Workers are started fresh (spawn) and import the game by "
            "reference: define the game at module level, and in a script run the VecEnv under "
            "`if __name__ == \"__main__\":` so that workers importing the script do not run it again",
            causes="or something killed it; its traceback, if any, is on stderr",
            a_shard="a worker",
        ))

    def timed_out(self) -> WorkerError:
        """It did not answer in time: kill it; the error that says so (kept in :attr:`lost`)."""
        try:
            self.proc.kill()  # SIGKILL also ends a stopped (SIGSTOP) process
            self.proc.join(timeout=1)
        except Exception:  # pragma: no cover
            log.exception("killing %s failed", self.where())
        return self.lose(self.unanswered_message(
            self.step_timeout, f"{STARTUP_TIMEOUT_S:g} s",
            "frozen (e.g. stopped with SIGSTOP), stuck in C code that its own step deadline cannot interrupt, or the "
            "machine is swapping",
        ))

    def send(self, data: bytes) -> None:
        """Send a message; a broken pipe raises :class:`WorkerError` (it died)."""
        if self.lost is not None:
            raise self.lost
        try:
            self.conn.send_bytes(data)
        except (OSError, ValueError):
            raise self.died() from None

    def recv(self, deadline: float | None) -> bytes:
        """The worker's next answer, by ``deadline`` (``time.monotonic()``; ``None``: no limit).

        ``ALIVE`` moves the deadline on by a full allowance, ``FAULTS`` go to the backend's list;
        neither is returned. Raises :class:`WorkerError` if the worker died, or did not answer in
        time (it is killed).
        """
        if self.lost is not None:
            raise self.lost
        conn = self.conn
        while True:
            if deadline is not None:
                if not self.heard:
                    deadline = max(deadline, self.t_start + STARTUP_TIMEOUT_S)
                left = deadline - time.monotonic()
                if self.poller is not None:
                    ready = self.poller.poll(max(0, math.ceil(left * 1000)))
                else:  # pragma: no cover - platforms without poll()
                    ready = conn.poll(max(0.0, left))
                if not ready:
                    raise self.timed_out()
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                raise self.died() from None
            op = data[0]
            if op == _OP_ALIVE:
                self.heard = True
                if deadline is not None:
                    deadline = time.monotonic() + (self.allow or 0.0)
                continue
            if op == _OP_FAULTS:
                self.sink.extend(pickle.loads(data[1:]))
                continue
            self.heard = True
            return data

    def ask(self, call: Call, arg: Any) -> Call:
        """Send a reset ``call`` (see :class:`~gymloop.runtime.sharded.Call`); a lost worker's answer is read as lost."""
        try:
            self.send(_T_SPACES + pickle.dumps(arg) if call is Call.BUILD else _T_RESET)
            self.busy = True
        except WorkerError:
            pass
        return call

    def ask_step(self, parts: list[np.ndarray]) -> None:
        """Write this worker's slice of every action array into its input segment and tell it their lengths
        (``Call.STEP``; its answer is read with ``None`` for the call)."""
        lens = [p.size for p in parts]
        try:
            need = 8 * sum(lens)
            if need > self.in_shm.size:
                old = self.in_shm
                self.in_shm = self.new_segment(max(need * 2, 4096))
                self.send(_T_IN_SEGMENT + self.in_shm.name.encode())
                self._drop(old)
            off = 0
            buf = self.in_shm.buf
            for p in parts:
                if p.size:
                    np.ndarray((p.size,), np.int64, buffer=buf, offset=off)[...] = p
                off += p.size * 8
            self.conn.send_bytes(_T_STEP_HEAD + np.array(lens, dtype=np.int64).tobytes())
            self.busy = True
        except (OSError, ValueError):
            self.died()  # found dead: its answer is read as lost (restarted, or an error)
        except WorkerError:
            pass  # (lost already: its answer is read as lost)

    def answer(self, call: Call | None, deadline: float | None, spaces: Any) -> Any:
        """The answer to ``call`` (``None``: a step): what it discovered (``START``), else its batch; raises its error."""
        if call is not None and call is Call.START:
            msg = self.recv(deadline)
            if msg[0] == _OP_ERROR:
                self.busy = False
                raise pickle.loads(msg[1:])
            return pickle.loads(msg[1:])
        return self.read_batch(self.recv(deadline), spaces, deadline)

    def new_segment(self, size: int) -> shared_memory.SharedMemory:
        shm = shared_memory.SharedMemory(create=True, size=size)
        self.owned.append(shm)
        return shm

    def read_batch(self, msg: bytes, spaces: Any, deadline: float | None) -> Batch:
        while msg[0] == _OP_GROW:
            need = int(np.frombuffer(msg, dtype=np.int64, offset=1)[0])
            old = self.out_shm
            self.out_shm = self.new_segment(need * 2)
            self.send(_T_OUT_SEGMENT + self.out_shm.name.encode())
            msg = self.recv(deadline)
            self._drop(old)
        self.busy = False
        if msg[0] == _OP_ERROR:
            raise pickle.loads(msg[1:])
        if msg[0] != _OP_BATCH:  # pragma: no cover
            raise GymloopError(f"unexpected message from worker: {_op_name(msg)}")
        hl = int(np.frombuffer(msg, dtype=np.int64, count=1, offset=1)[0])
        head = np.frombuffer(msg, dtype=np.int64, count=hl // 8, offset=9)
        names_b = msg[9 + hl :]
        names = names_b.decode().split("\x00") if names_b else []
        buf = self.out_shm.buf
        assert buf is not None  # closed only by _drop/close, never while in use
        arrays = _read(buf, head)
        return Batch.from_wire(arrays, names, spaces, self.n_slots)

    def _drop(self, shm: shared_memory.SharedMemory) -> None:
        try:
            self.owned.remove(shm)
        except ValueError:
            pass
        try:
            shm.close()
        except BufferError:
            pass
        try:
            shm.unlink()
        except FileNotFoundError:
            pass

    def release(self) -> None:
        for shm in list(self.owned):
            self._drop(shm)


class _LocalShard(ShardHandle):
    """The share of the copies this process steps itself: a call runs when its answer is read, after every
    worker has been sent its own (so this process steps while the workers do)."""

    remote = False

    def __init__(self, ex: ShardExecutor, n: int, apg: int) -> None:
        super().__init__(0, 0, n, apg)
        self.ex = ex
        self.heard = True

    def where(self) -> str:
        return f"this process (game copies {self.envs.start}..{self.envs.stop - 1})"

    def ask(self, call: Call, arg: Any) -> tuple[Call, Any]:
        return call, arg

    def ask_step(self, actions: list[np.ndarray]) -> tuple[None, list[np.ndarray]]:
        return None, actions

    def answer(self, sent: tuple[Call | None, Any], deadline: float | None, spaces: Any) -> Any:
        call, arg = sent
        ex = self.ex
        if call is None:
            return ex.step(arg)
        if call is Call.RESET:
            return ex.reset()
        if call is Call.START:
            ex.start()
            return ex.discover()
        ex.set_spaces(arg)
        return ex.build()


def _stop(workers: list[_Worker], grace: float) -> None:
    """End worker processes, free their pipes and segments; never raises.

    A worker still alive after ``grace`` seconds (the time they get to exit after ``CLOSE``) is
    terminated, and after :data:`TERMINATE_WAIT_S` more killed (``SIGKILL`` also ends a stopped
    process): at most ``grace + TERMINATE_WAIT_S + KILL_WAIT_S`` seconds in all.
    """
    workers = [w for w in workers if not w.stopped]
    started = [w for w in workers if w.pid is not None]
    for wait, action in ((grace, None), (TERMINATE_WAIT_S, "terminate"), (KILL_WAIT_S, "kill")):
        if action is not None:
            alive = [w for w in started if w.proc.is_alive()]
            if not alive:
                break
            for w in alive:
                if action == "terminate":
                    log.warning("%s did not exit when asked; terminating it", w.where())
                try:
                    getattr(w.proc, action)()
                except Exception:  # pragma: no cover
                    log.exception("%s %s failed", action, w.where())
        deadline = time.monotonic() + wait
        for w in started:
            try:
                w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # pragma: no cover
                pass
    for w in workers:
        if w.pid is not None and w.proc.is_alive():  # pragma: no cover - SIGKILL did not work
            log.error("%s is still alive after SIGKILL; it is abandoned", w.where())
        try:
            w.conn.close()
        except OSError:  # pragma: no cover
            pass
        if w.pid is not None and not w.proc.is_alive():
            w.proc.close()  # its sentinel fd now, not whenever the Process object is collected
        w.stopped = True
        w.release()


_live: weakref.WeakSet[ProcessBackend] = weakref.WeakSet()
_atexit_registered = False


def _close_live_backends() -> None:
    """At exit: close every open process backend (before multiprocessing's own exit handler, which
    would wait forever for a stopped worker)."""
    for b in list(_live):
        try:
            b.close()
        except Exception:  # pragma: no cover
            pass


class ProcessBackend(ShardedBackend):
    """Runs the game copies in ``workers`` processes: this one and ``workers - 1`` children.

    The calling process steps the first share of the games itself while the children step the
    others, so ``workers`` busy processes use ``workers`` cores and none idles (a main process that
    only waits would leave a core idle or, spinning, fight the workers for it).

    A :class:`~gymloop.runtime.sharded.ShardedBackend`: this process's share is the first shard,
    stepped when its answer is read, after every worker has been sent its call. Batches are read out of shared memory and copied
    (``Batch.concat(copy=True)``), so a returned batch never aliases a segment. A failed :meth:`reset` closes the backend (workers may be left
    mid-protocol); a game error in :meth:`step` is raised once every worker has answered.

    Faults. Each worker runs its games under its own step deadline (as this process does, see
    :mod:`gymloop.runtime.alarm`), so a game that loops or sleeps fails with
    :class:`~gymloop.errors.GameTimeoutError` naming it. This process waits for each answer with
    ``poll`` until ``step_timeout`` plus :func:`~gymloop.runtime.sharded.answer_grace` (a worker whose game timed out says
    so at once, which moves that deadline on; a worker's first answer may also take
    :data:`~gymloop.runtime.sharded.STARTUP_TIMEOUT_S` to start); a worker that has not answered by then (frozen, stuck in C
    code) is killed. A worker that died or was killed fails the call with
    :class:`~gymloop.errors.WorkerError` naming it and its copies, after every other worker has
    answered; with ``restart_workers=True`` it is started again with its games instead (fresh
    seeds: its copies' restart counters start at ``k << 32`` for its ``k``-th replacement), within
    the call that found it, and its slots come back with ``truncated`` set (the open episodes
    ended; no episode metrics) and a :class:`~gymloop.errors.WorkerError` goes to :attr:`faults`.
    At most :data:`~gymloop.runtime.sharded.MAX_WORKER_RESTARTS` restarts (or one per worker, if more) are made
    within :data:`~gymloop.runtime.sharded.RESTART_WINDOW_S`; one more fails the call. A worker whose loss has been raised is
    started again by the next :meth:`reset`; a death that no call has reported yet fails that reset.

    Attributes:
        faults: errors of game copies restarted with ``on_game_error="restart"`` (here and in the
            workers, which send theirs with their answers) and :class:`~gymloop.errors.WorkerError`
            of workers restarted; the VecEnv drains it after every call.
    """

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        if config.workers < 1:
            raise ConfigError(
                f"backend='process' needs workers >= 1 (the number of processes, this one included), got "
                f"workers={config.workers}; use workers=N, or backend='local' for everything in this process"
            )

    def __init__(self, config: BackendConfig) -> None:
        global _atexit_registered
        super().__init__(config)
        c = config
        self.local: Any = None
        if getattr(mp.current_process(), "_inheriting", False):
            raise ConfigError(
                "a VecEnv with workers was created while a worker process was importing the main script: guard the "
                "script's top level with `if __name__ == \"__main__\":` (workers are started fresh and import it)"
            )
        try:
            self._ctx = ctx = mp.get_context(c.start_method)
        except ValueError as e:
            raise ConfigError(f"unknown start_method {c.start_method!r}: {e}") from None
        if c.workers > 1 and c.start_method != "fork":
            try:
                pickle.dumps(c.game)
            except Exception as e:
                raise ConfigError(
                    f"with workers > 1 the game {c.game!r} must be picklable (a module-level function or class) "
                    f"so worker processes can import it: {e}"
                ) from None
        sizes = shard_sizes(c.num_envs, c.workers)
        apg = c.agents_per_game
        self.local = make_executor(
            c.game, 0, sizes[0], apg, c.seed, c.declared, c.is_env, step_timeout=c.step_timeout,
            on_game_error=c.on_game_error,
        )
        self.faults = self.local.faults  # one list: this process's restarted copies, the workers', the workers
        self.shards = [_LocalShard(self.local, sizes[0], apg)]
        if not _atexit_registered:  # registered after multiprocessing's own handler, so it runs before it
            atexit.register(_close_live_backends)
            _atexit_registered = True
        _live.add(self)
        lo = sizes[0]
        try:
            for i, n in enumerate(sizes[1:], start=1):
                self.shards.append(_Worker(ctx, i, c, lo, n, self.faults))
                lo += n
        except BaseException:
            self.close()
            raise

    # the whole step in step_wait (Backend's halves): this process's own share steps there anyway,
    # and workers stepping while the caller works would compete with it for the same cores
    step_async = Backend.step_async
    step_wait = Backend.step_wait

    @property
    def workers(self) -> list[_Worker]:
        """This process's end of each worker process (the shards after this process's own)."""
        return self.shards[1:]

    def _send(self, shard: Any, call: Call, arg: Any) -> Any:
        return shard.ask(call, arg)

    def _send_step(self, shard: Any, actions: list[np.ndarray]) -> Any:
        return shard.ask_step(actions)

    def _await(self, pending: Any) -> list[Any]:
        deadline = self._deadline()
        return [(sent, deadline) for _, sent in pending]

    def _receive(self, shard: Any, answer: Any) -> Any:
        sent, deadline = answer
        return shard.answer(sent, deadline, self.spaces)

    def _respawn(self, i: int, restart_base: int = 0) -> _Worker:
        """A new process in place of worker ``shards[i]`` (the old one is stopped), with the fixed spaces."""
        old = self.shards[i]
        _stop([old], grace=0.0)
        w = _Worker(
            self._ctx, old.index, self.config, old.envs.start, len(old.envs), self.faults, fixed=self._fixed,
            generation=self._generation, restart_base=restart_base,
        )
        self.shards[i] = w
        return w

    def close(self) -> None:
        """End every game and worker within about 2 s whatever their state; free shared memory. Never raises."""
        shards = getattr(self, "shards", None) or []
        workers, self.shards = shards[1:], shards[:1]
        _live.discard(self)
        try:
            asked = time.monotonic()
            for w in workers:  # ask first: they close their games while this process closes its own
                if w.lost is None and w.pid is not None:
                    try:
                        w.conn.send_bytes(_T_CLOSE)
                    except (OSError, ValueError):
                        pass
            local = getattr(self, "local", None)
            if local is not None:
                try:
                    local.close_games()
                except Exception:  # pragma: no cover
                    log.exception("closing the games of the main process failed")
            _stop(workers, grace=max(0.0, CLOSE_WAIT_S - (time.monotonic() - asked)))
        except Exception:  # pragma: no cover - close never raises
            log.exception("closing the worker processes failed")



def _op_name(msg: bytes) -> str:
    """An opcode by name, for error messages."""
    try:
        return Op(msg[0]).name
    except (ValueError, IndexError):
        return repr(msg[:1])


register_backend("process", ProcessBackend)
