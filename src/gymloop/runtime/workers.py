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
"""

from __future__ import annotations

import gc
import logging
import multiprocessing as mp
import os
import pickle
import time
import traceback
from enum import IntEnum
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from ..batch import Batch
from ..errors import ConfigError, GymloopError
from ..spaces import Spaces
from .backend import Backend, BackendConfig, discover_spaces, make_executor, register_backend, shard_sizes

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

    The values are ASCII letters, which keeps the byte stream readable when debugging.
    """

    RESET = ord("R")
    SPACES = ord("P")
    STEP = ord("S")
    IN_SEGMENT = ord("N")
    OUT_SEGMENT = ord("M")
    CLOSE = ord("C")
    DISCOVERED = ord("D")
    BATCH = ord("B")
    GROW = ord("G")
    ERROR = ord("E")
    CLOSED = ord("K")

    @property
    def tag(self) -> bytes:
        """The one-byte message prefix."""
        return bytes((self.value,))


# message prefixes and plain-int opcodes for the per-step path (no enum lookups per message)
_T_RESET, _T_SPACES, _T_IN_SEGMENT, _T_OUT_SEGMENT, _T_CLOSE = (
    Op.RESET.tag, Op.SPACES.tag, Op.IN_SEGMENT.tag, Op.OUT_SEGMENT.tag, Op.CLOSE.tag,
)
_T_DISCOVERED, _T_BATCH, _T_GROW, _T_ERROR, _T_CLOSED = (
    Op.DISCOVERED.tag, Op.BATCH.tag, Op.GROW.tag, Op.ERROR.tag, Op.CLOSED.tag,
)
_T_STEP_HEAD = Op.STEP.tag + b"\x00" * 7  # the action lengths that follow are 8-byte aligned
_OP_STEP, _OP_RESET, _OP_IN_SEGMENT, _OP_CLOSE = int(Op.STEP), int(Op.RESET), int(Op.IN_SEGMENT), int(Op.CLOSE)
_OP_BATCH, _OP_GROW, _OP_ERROR = int(Op.BATCH), int(Op.GROW), int(Op.ERROR)

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
def _flatten(b: Batch) -> tuple[list[np.ndarray], list[str]]:
    arrays = _flatten_core(b)
    arrays.append(np.array([b.final is not None], dtype=np.int64))
    if b.final is not None:
        arrays += _flatten_core(b.final)
    names = list(b.metrics)
    arrays += [b.metrics[k] for k in names]
    return arrays, names


def _flatten_core(b: Batch) -> list[np.ndarray]:
    arrays = [b.reward, b.terminated, b.truncated, b.active, b.globals]
    for k in b.entities:
        arrays.append(b.counts[k])
        arrays.append(b.entities[k])
    for k in b.actor_slot:
        arrays += [b.actor_slot[k], b.actor_index[k], b.masks[k]]
        if k in b.num_candidates:
            arrays.append(b.num_candidates[k])
    return arrays


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


def _unflatten(arrays: list[np.ndarray], names: list[str], spaces: Any, n: int) -> Batch:
    it = iter(arrays)
    b = _unflatten_core(it, spaces, n)
    if int(next(it)[0]):
        b.final = _unflatten_core(it, spaces, n)
    b.metrics = {k: next(it) for k in names}
    return b


def _unflatten_core(it: Any, spaces: Spaces, n: int) -> Batch:
    reward, term, trunc, active, globs = next(it), next(it), next(it), next(it), next(it)
    entities, counts = {}, {}
    for k in spaces.obs.entities:
        counts[k] = next(it)
        entities[k] = next(it)
    actor_slot, actor_index, masks, ncand, cand_types = {}, {}, {}, {}, {}
    for k, d in spaces.actions.items():
        actor_slot[k], actor_index[k], masks[k] = next(it), next(it), next(it)
        if d.kind.selects_entities:
            ncand[k] = next(it)
            cand_types[k] = d.among
    return Batch(
        num_slots=n, entities=entities, counts=counts, globals=globs, actor_slot=actor_slot,
        actor_index=actor_index, masks=masks, num_candidates=ncand, reward=reward, terminated=term,
        truncated=trunc, active=active, metrics={}, candidate_types=cand_types,
    )


# ---------------------------------------------------------------------- worker process
def _worker_main(
    conn: Any, game: Any, env_lo: int, n: int, apg: int, seed: int, declared: Any, is_env: bool, in_name: str, out_name: str,
    spin_s: float = 0.0,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    ex = make_executor(game, env_lo, n, apg, seed, declared, is_env)
    in_shm = _attach(in_name)
    out_shm = _attach(out_name)

    def send_batch(b: Batch) -> None:
        nonlocal out_shm
        arrays, names = _flatten(b)
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
                        conn.send_bytes(_T_DISCOVERED + pickle.dumps(ex.discover()))
                        reply = conn.recv_bytes()
                        ex.set_spaces(pickle.loads(reply[1:]))
                        send_batch(ex.build())
                    else:
                        send_batch(ex.reset())
                    # the games' long-lived objects need no more collection passes in this process
                    gc.collect()
                    gc.freeze()
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
class _Worker:
    def __init__(self, ctx: Any, game: Any, env_lo: int, n: int, apg: int, seed: int, declared: Any, is_env: bool, spin_s: float) -> None:
        self.env_lo = env_lo
        self.n_slots = n * apg
        self.in_shm = shared_memory.SharedMemory(create=True, size=max(4096, 64 * n * apg))
        self.out_shm = shared_memory.SharedMemory(create=True, size=max(1 << 16, 512 * n * apg))
        self.owned = [self.in_shm, self.out_shm]
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(
            target=_worker_main,
            args=(child, game, env_lo, n, apg, seed, declared, is_env, self.in_shm.name, self.out_shm.name, spin_s),
            daemon=True,
            name=f"gymloop-worker-{env_lo}",
        )
        self.heard = False  # has the worker sent anything yet?
        self.proc.start()
        child.close()

    def recv(self) -> bytes:
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            self.proc.join(timeout=1)
            if not self.heard:  # it died before its first message: it could not even start
                raise GymloopError(
                    f"worker process for game copies from {self.env_lo} died while starting (exit code "
                    f"{self.proc.exitcode}); its traceback is on stderr. Workers are started fresh (spawn) and "
                    "import the game by reference: define the game at module level, and in a script run the "
                    "VecEnv under `if __name__ == \"__main__\":` so that workers importing the script do not "
                    "run it again"
                ) from None
            raise GymloopError(
                f"worker process for game copies from {self.env_lo} died (exit code {self.proc.exitcode}); "
                "a game may have crashed the interpreter or run out of memory; its traceback, if any, is on stderr"
            ) from None
        self.heard = True
        return data

    def new_segment(self, size: int) -> shared_memory.SharedMemory:
        shm = shared_memory.SharedMemory(create=True, size=size)
        self.owned.append(shm)
        return shm

    def read_batch(self, msg: bytes, spaces: Any) -> Batch:
        while msg[0] == _OP_GROW:
            need = int(np.frombuffer(msg, dtype=np.int64, offset=1)[0])
            old = self.out_shm
            self.out_shm = self.new_segment(need * 2)
            self.conn.send_bytes(_T_OUT_SEGMENT + self.out_shm.name.encode())
            msg = self.recv()
            self._drop(old)
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
        return _unflatten(arrays, names, spaces, self.n_slots)

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


class ProcessBackend(Backend):
    """Runs the game copies in ``workers`` processes: this one and ``workers - 1`` children.

    The calling process steps the first share of the games itself while the children step the
    others, so ``workers`` busy processes use ``workers`` cores and none idles (a main process that
    only waits would leave a core idle or, spinning, fight the workers for it).

    Batches are read out of shared memory and copied (``Batch.concat(copy=True)``), so a returned
    batch never aliases a segment. A failed :meth:`reset` closes the backend (workers may be left
    mid-protocol); a game error in :meth:`step` is raised once every worker has answered.
    """

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        if config.workers < 1:
            raise ConfigError(
                f"backend='process' needs workers >= 1 (the number of processes, this one included), got "
                f"workers={config.workers}; use workers=N, or backend='local' for everything in this process"
            )

    def __init__(self, config: BackendConfig) -> None:
        c = config
        self.spaces: Any = None
        self.workers: list[_Worker] = []
        self.local: Any = None
        self.is_env = c.is_env
        if getattr(mp.current_process(), "_inheriting", False):
            raise ConfigError(
                "a VecEnv with workers was created while a worker process was importing the main script: guard the "
                "script's top level with `if __name__ == \"__main__\":` (workers are started fresh and import it)"
            )
        try:
            ctx = mp.get_context(c.start_method)
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
        self.local = make_executor(c.game, 0, sizes[0], apg, c.seed, c.declared, c.is_env)
        lo = sizes[0]
        try:
            for n in sizes[1:]:
                self.workers.append(_Worker(ctx, c.game, lo, n, apg, c.seed, c.declared, c.is_env, c.spin_s))
                lo += n
        except BaseException:
            self.close()
            raise

    def _gather(self, local: Batch | None, local_error: BaseException | None) -> Batch:
        parts: list[Batch] = [local] if local is not None else []
        errors: list[BaseException] = [local_error] if local_error is not None else []
        for w in self.workers:
            try:
                parts.append(w.read_batch(w.recv(), self.spaces))
            except GymloopError as e:
                errors.append(e)
        if errors:
            raise errors[0]
        self._last_counts = [
            np.concatenate([[0], np.cumsum([p.actor_slot[name].shape[0] for p in parts])]).tolist()
            for name in self.spaces.actions
        ]
        return Batch.concat(parts, copy=True)

    def reset(self) -> tuple[Batch, Any]:
        try:
            return self._reset()
        except BaseException:
            self.close()
            raise

    def _reset(self) -> tuple[Batch, Any]:
        for w in self.workers:
            w.conn.send_bytes(_T_RESET)
        local_error: BaseException | None = None
        local = None
        if self.spaces is None:
            found = []
            errors: list[BaseException] = []
            try:
                self.local.start()
                found.append(self.local.discover())
            except GymloopError as e:
                errors.append(e)
            for w in self.workers:
                msg = w.recv()
                if msg[0] == _OP_ERROR:
                    errors.append(pickle.loads(msg[1:]))
                else:
                    found.append(pickle.loads(msg[1:]))
            if errors:
                raise errors[0]
            fixed, spaces = discover_spaces(found, self.is_env)
            blob = _T_SPACES + pickle.dumps(fixed)
            for w in self.workers:
                w.conn.send_bytes(blob)
            self.spaces = spaces
            self.local.set_spaces(fixed)
            try:
                local = self.local.build()
            except GymloopError as e:
                local_error = e
        else:
            try:
                local = self.local.reset()
            except GymloopError as e:
                local_error = e
        return self._gather(local, local_error), self.spaces

    def step(self, actions: list[np.ndarray]) -> Batch:
        n_types = len(self.spaces.actions)
        b_prev = self._last_counts
        for wi, w in enumerate(self.workers, start=1):
            lens = []
            parts = []
            for a in range(n_types):
                lo, hi = b_prev[a][wi], b_prev[a][wi + 1]
                parts.append(actions[a][lo:hi])
                lens.append(hi - lo)
            need = 8 * sum(lens)
            if need > w.in_shm.size:
                old = w.in_shm
                w.in_shm = w.new_segment(max(need * 2, 4096))
                w.conn.send_bytes(_T_IN_SEGMENT + w.in_shm.name.encode())
                w._drop(old)
            off = 0
            buf = w.in_shm.buf
            for p in parts:
                if p.size:
                    np.ndarray((p.size,), np.int64, buffer=buf, offset=off)[...] = p
                off += p.size * 8
            w.conn.send_bytes(_T_STEP_HEAD + np.array(lens, dtype=np.int64).tobytes())
        # step this process's own share while the workers step theirs
        local, local_error = None, None
        try:
            local = self.local.step([actions[a][b_prev[a][0] : b_prev[a][1]] for a in range(n_types)])
        except GymloopError as e:
            local_error = e
        return self._gather(local, local_error)

    def close(self) -> None:
        local = getattr(self, "local", None)
        if local is not None:
            try:
                local.close_games()
            except Exception:  # pragma: no cover
                log.exception("closing the games of the main process failed")
        workers = getattr(self, "workers", None) or []
        for w in workers:
            try:
                if w.proc.is_alive():
                    w.conn.send_bytes(_T_CLOSE)
            except (OSError, ValueError, BrokenPipeError):
                pass
        for w in workers:
            try:
                if w.conn.poll(10):
                    while True:
                        m = w.conn.recv_bytes()
                        if m[:1] == _T_CLOSED:
                            break
                        if not w.conn.poll(10):
                            break
            except (EOFError, OSError):
                pass
            w.proc.join(timeout=10)
            if w.proc.is_alive():  # pragma: no cover
                log.warning("worker %s did not exit; terminating it", w.proc.name)
                w.proc.terminate()
                w.proc.join(timeout=5)
            try:
                w.conn.close()
            except OSError:  # pragma: no cover
                pass
            w.release()
        self.workers = []


def _op_name(msg: bytes) -> str:
    """An opcode by name, for error messages."""
    try:
        return Op(msg[0]).name
    except (ValueError, IndexError):
        return repr(msg[:1])


register_backend("process", ProcessBackend)
