"""Each game copy its own streams of the process's global ``random`` and ``numpy.random`` generators.

Games written for entity-gym draw from the global generators (``random.randint``,
``np.random.normal``) and take no seed. :meth:`Streams.call` runs one of a copy's calls with the
copy's own generator states in the global generators and takes them out afterwards, putting the
caller's states back; an episode's first call starts new states from its seed. A copy's draws then
depend on its episode seed and its own calls alone, whatever the other copies and the caller draw.
The executor steps a shard's copies inside :func:`held`, which takes the caller's states out once
for the whole batch instead of once per call (a game's constructor, run there, draws from the
caller's streams through :func:`as_caller`).

A generator's state is a Mersenne Twister's 624 words and position (2,500 bytes) plus its cached
normal deviate (``random``'s ``gauss_next``; numpy's legacy generator keeps one in the
``RandomState`` object), so a call copies about 5 KB in and out per generator: about 2 µs a call
in all (about 1.4 µs inside :func:`held`). An episode's first call seeds both generators instead
(about 5 µs: the C seeding behind ``random.seed`` and ``np.random.seed``, called without their
Python wrappers, checked once to leave the same states), as the slow path seeds it, so both paths
draw the same numbers in that call: a game that draws only when an episode starts, as most of
entity-gym's examples, plays the same episodes on either.
numpy's words are reached through its public ``ctypes.state_address``; ``random``'s words and
numpy's cached deviate through the objects' memory, whose layouts :func:`fast_path` finds and
checks once on objects of its own (read against ``getstate()``/``get_state()``, written, then
drawn from). Where a check fails (another interpreter or layout, a free-threaded build, numpy's
global generator not an MT19937), or when the process's global generators were replaced since
(``np.random.set_bit_generator``, a reloaded ``random``), :class:`Streams` seeds both generators
before each call from the episode seed and the call's number instead: as reproducible, about 6 µs
slower a call, other numbers after an episode's first call, and the caller's generators are left
seeded by the last call rather than put back.

Limits: one thread at a time may draw from the global generators while copies step (another
thread would draw from, and be rewound with, a copy's stream); a copy's call must not call the same
copy again (the inner call would start from the outer call's state).
"""

from __future__ import annotations

import ctypes
import platform
import random
import struct
import sysconfig
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Streams", "as_caller", "fast_path", "held", "in_bookkeeping"]

_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: bytes of a Mersenne Twister's state in both layouts: 624 uint32 words and an int position
_STATE_BYTES = 624 * 4 + 4
_WORDS = 624 * 4
#: numpy's cached deviate: an int flag, then (8-aligned) the double
_GAUSS_BYTES = 16


class _Views:
    """The process's global generators and writable views of their state memory."""

    def __init__(self, inst: random.Random, rs: np.random.RandomState, py: memoryview, npy: memoryview, gauss: memoryview) -> None:
        self.inst: Any = inst  # random._inst (kept: the views point into it); its gauss_next is an attribute, not memory
        self.rs = rs  # np.random.mtrand._rand (kept, with its bit generator)
        self.bg: Any = rs._bit_generator
        self.seed_py = _c_seed()
        self.py = py  # random's: the position (int), then the 624 words
        self.npy = npy  # numpy's: the 624 words, then the position (int)
        self.gauss = gauss  # numpy's cached deviate: has_gauss (int), padding, gauss (double)
        #: inside :func:`held`: how deeply, and the caller's states it took out (put back when the outermost ends)
        self.depth = 0
        self.outside: tuple[bytes, bytes, bytes, Any] | None = None

    def take_out(self) -> tuple[bytes, bytes, bytes, Any]:
        """The caller's states (a copy of each generator's bytes and ``random``'s cached deviate)."""
        return bytes(self.py), bytes(self.npy), bytes(self.gauss), self.inst.gauss_next

    def put_back(self, outside: tuple[bytes, bytes, bytes, Any]) -> None:
        self.py[:] = outside[0]
        self.npy[:] = outside[1]
        self.gauss[:] = outside[2]
        self.inst.gauss_next = outside[3]

    def current(self) -> bool:
        """Whether the global generators are still the ones viewed."""
        return random._inst is self.inst and np.random.mtrand._rand is self.rs and self.rs._bit_generator is self.bg


def _view(address: int, size: int) -> memoryview:
    return memoryview((ctypes.c_char * size).from_address(address)).cast("B")


def _py_view(r: Any) -> memoryview | None:
    """The position and words of a ``random.Random``'s state, as bytes of its memory (``None``: not that layout)."""
    if platform.python_implementation() != "CPython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    import _random

    off = object.__basicsize__
    if not isinstance(r, _random.Random) or _random.Random.__basicsize__ < off + _STATE_BYTES:
        return None
    return _view(id(r) + off, _STATE_BYTES)


def _py_layout_ok() -> bool:
    """Whether :func:`_py_view` reads and writes ``random.Random`` states (checked on objects of its own)."""
    a, b = random.Random(20261204), random.Random(7)
    a.random()
    va, vb = _py_view(a), _py_view(b)
    if va is None or vb is None:
        return False
    words = np.frombuffer(va, dtype=np.uint32)
    state = a.getstate()[1]  # 624 words, then the position
    if words[0] != state[624] or words[1:].tolist() != list(state[:624]):
        return False
    vb[:] = va
    return b.getstate() == a.getstate() and [b.random() for _ in range(700)] == [a.random() for _ in range(700)]


def _np_view(rs: Any) -> memoryview | None:
    """The key and position of a legacy ``RandomState``'s MT19937 state (``None``: not an MT19937)."""
    bg = getattr(rs, "_bit_generator", None)
    if not isinstance(bg, np.random.MT19937):
        return None
    return _view(bg.ctypes.state_address, _STATE_BYTES)


def _np_layout_ok() -> bool:
    """Whether :func:`_np_view` reads and writes MT19937 states (checked on objects of its own)."""
    a, b = np.random.RandomState(20261204), np.random.RandomState(7)
    a.random_sample(3)
    va, vb = _np_view(a), _np_view(b)
    if va is None or vb is None:
        return False
    state: Any = a.get_state()  # ("MT19937", key, position, has_gauss, cached_gaussian)
    key, pos = np.asarray(state[1]), int(state[2])
    if np.frombuffer(va, dtype=np.uint32, count=624).tolist() != key.tolist() or int.from_bytes(va[_WORDS:], "little", signed=True) != pos:
        return False
    vb[:] = va
    return bool(np.array_equal(b.random_sample(700), a.random_sample(700)))


def _gauss_offset() -> int | None:
    """Where a ``RandomState`` keeps its cached normal deviate (flag, then the double 8 bytes on), found and checked
    on objects of its own; ``None`` if not found."""
    if platform.python_implementation() != "CPython":
        return None
    size = type(np.random.mtrand._rand).__basicsize__
    a = np.random.RandomState(20261204)
    before = ctypes.string_at(id(a), size)
    a.standard_normal()  # caches the second deviate of a pair
    after = ctypes.string_at(id(a), size)
    state: Any = a.get_state()
    if int(state[3]) != 1:
        return None
    at = after.find(struct.pack("=d", float(state[4])))
    off = at - 8
    if at < 8 or at % 8 or at + 8 > size or after.find(struct.pack("=d", float(state[4])), at + 1) >= 0:
        return None
    if struct.unpack_from("=i", after, off)[0] != 1 or struct.unpack_from("=i", before, off)[0] != 0:
        return None
    b = np.random.RandomState(7)  # write the cache into another object: it must draw it next
    gb = _view(id(b) + off, _GAUSS_BYTES)
    gb[:] = after[off : off + _GAUSS_BYTES]
    sb: Any = b.get_state()
    if int(sb[3]) != 1 or float(sb[4]) != float(state[4]) or float(b.standard_normal()) != float(state[4]):
        return None
    gb[:] = before[off : off + _GAUSS_BYTES]  # ... and without it, none
    return off if int(b.get_state()[3]) == 0 else None  # type: ignore[index]


def _seeding_ok(off: int) -> bool:
    """Whether seeding through the C methods the fast path calls (``_random.Random.seed``, ``MT19937._legacy_seeding``
    and zeros for the cached deviate at ``off``) leaves the states ``random.seed`` and ``np.random.seed`` leave
    (checked on objects of its own, each with a cached deviate before)."""
    x = 0x0123_4567_89AB_CDEF
    a: Any = random.Random(3)  # (Any: the stubs leave out gauss_next and _legacy_seeding)
    b: Any = random.Random(4)
    a.gauss(0.0, 1.0), b.gauss(0.0, 1.0)
    a.seed(x)
    _c_seed()(b, x)
    b.gauss_next = None
    if a.getstate() != b.getstate():
        return False
    ra, rb = np.random.RandomState(3), np.random.RandomState(4)
    ra.standard_normal(), rb.standard_normal()
    ra.seed(x & _M32)
    bg: Any = rb._bit_generator
    bg._legacy_seeding(x & _M32)
    _view(id(rb) + off, _GAUSS_BYTES)[:] = _NO_GAUSS
    sa: Any = ra.get_state()
    sb: Any = rb.get_state()
    return sa[0] == sb[0] and np.array_equal(sa[1], sb[1]) and sa[2:] == sb[2:] and np.array_equal(ra.random_sample(700), rb.random_sample(700))


def _c_seed() -> Any:
    """``random.Random.seed``'s C seeding (``_random.Random.seed``): what it calls for an int, without its Python
    wrapper (the caller then clears ``gauss_next``, as the wrapper does)."""
    import _random

    return _random.Random.seed


#: a ``RandomState``'s cached-deviate bytes after seeding: none cached (``has_gauss`` 0, ``gauss`` 0.0)
_NO_GAUSS = bytes(_GAUSS_BYTES)

_FAST: list[_Views | None] = []  # [views or None] once fast_path() has looked


def fast_path() -> bool:
    """Whether copies' states move in and out of the global generators (else: both are seeded before each call).

    Checked once per process (see the module's docstring).

    Example:
        >>> from gymloop.adapters._streams import fast_path
        >>> isinstance(fast_path(), bool)
        True
    """
    if not _FAST:
        views = None
        try:
            inst, rs = random._inst, np.random.mtrand._rand  # (the instances behind the modules' functions)
            off = _gauss_offset()
            if off is not None and _py_layout_ok() and _np_layout_ok() and _seeding_ok(off):
                py, npy = _py_view(inst), _np_view(rs)
                if py is not None and npy is not None:
                    views = _Views(inst, rs, py, npy, _view(id(rs) + off, _GAUSS_BYTES))
        except (AttributeError, TypeError, ValueError, OverflowError, ImportError, struct.error):  # (other internals)
            views = None
        _FAST.append(views)
    return _FAST[0] is not None


def in_bookkeeping(frame: Any) -> bool:
    """Whether ``frame`` (where a signal interrupted) is :meth:`Streams.call`, :func:`held` or :func:`as_caller` moving states, not a
    copy's own call: an exception raised there could leave the caller holding a copy's state (the step alarm waits instead)."""
    return frame.f_code in _BOOKKEEPING


class Streams:
    """One game copy's streams of the global ``random`` and ``numpy.random`` generators.

    Args:
        fast: move states in and out (``None``: where :func:`fast_path` allows); ``False``: seed
            both generators before each call from the episode seed and the call's number.

    Example:
        >>> import random
        >>> from gymloop.adapters._streams import Streams
        >>> a, b = Streams(), Streams()
        >>> x = a.call(random.random, seed=1)
        >>> y = b.call(random.random, seed=1)  # b's episode seeded alike: the same stream
        >>> x == y and a.call(random.random) == b.call(random.random)
        True
    """

    def __init__(self, fast: bool | None = None) -> None:
        self._views = _FAST[0] if fast is not False and fast_path() else None
        self._py = bytearray(_STATE_BYTES)  # this copy's states (the fast path)
        self._np = bytearray(_STATE_BYTES)
        self._np_gauss = bytearray(_GAUSS_BYTES)
        self._gauss: Any = None
        self._seed: int | None = None  # the episode's seed (None: no episode yet) and its calls so far
        self._calls = 0

    def __getstate__(self) -> dict[str, Any]:  # (the views are this process's memory: found again on unpickling)
        state = dict(self.__dict__)
        state["_views"] = self._views is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views = _FAST[0] if state["_views"] and fast_path() else None

    @property
    def fast(self) -> bool:
        """Whether this copy's states move in and out (see :func:`fast_path`)."""
        return self._views is not None

    def call(self, fn: Callable[..., Any], *args: Any, seed: int | None = None) -> Any:
        """``fn(*args)`` drawing from this copy's streams; ``seed``: start new ones first (an episode's first call).

        Before the first seeded call the copy has no streams of its own and ``fn`` draws from the
        global generators as they are (the caller's).
        """
        if seed is None and self._seed is None:
            return as_caller(fn, *args)
        v = self._views
        if v is None or not v.current():
            return self._seeded_call(fn, args, seed)
        gpy, gnp, ggs, inst = v.py, v.npy, v.gauss, v.inst
        outside = v.take_out() if v.depth == 0 else None  # (inside held(): the caller's states are out already)
        loaded = False
        try:
            if seed is not None:  # an episode's first call: seeded as the slow path seeds it
                self._seed, self._calls = seed, 1
                x = _mix(seed, 1)
                v.seed_py(inst, x)  # random.seed(x) and np.random.seed(x & _M32) without their Python wrappers
                inst.gauss_next = None
                v.bg._legacy_seeding(x & _M32)
                ggs[:] = _NO_GAUSS
            else:
                self._calls += 1
                gpy[:] = self._py
                gnp[:] = self._np
                ggs[:] = self._np_gauss
                inst.gauss_next = self._gauss
            loaded = True
            return fn(*args)
        finally:
            if loaded:
                self._py[:] = gpy
                self._np[:] = gnp
                self._np_gauss[:] = ggs
                self._gauss = inst.gauss_next
            if outside is not None:
                v.put_back(outside)

    def _seeded_call(self, fn: Callable[..., Any], args: tuple[Any, ...], seed: int | None) -> Any:
        if seed is not None:
            self._seed, self._calls = seed, 0
        if self._seed is not None:
            self._calls += 1
            x = _mix(self._seed, self._calls)
            random.seed(x)
            np.random.seed(x & _M32)
        return fn(*args)


def held() -> _Held:
    """A batch of :meth:`Streams.call` calls, one after another: the caller's states are taken out once.

    Outside it every call takes the caller's states out and puts them back (four copies of each
    generator's state a call); inside it a call moves only its copy's states in and out, and the
    caller's states come back when the outermost ``held`` ends, however it ends. Nothing else may
    draw from the global generators inside it (they hold the last copy's states between calls). The
    executor steps a shard's copies inside one. Without the fast path it does nothing.

    Example:
        >>> import random
        >>> from gymloop.adapters._streams import Streams, held
        >>> random.seed(5); before = random.getstate()
        >>> copies = [Streams(), Streams()]
        >>> with held():
        ...     draws = [c.call(random.random, seed=i) for i, c in enumerate(copies)]
        >>> random.getstate() == before
        True
    """
    return _Held()


def as_caller(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` drawing from the caller's states, also inside :func:`held` (a game's constructor, say).

    Example:
        >>> import random
        >>> from gymloop.adapters._streams import as_caller, held
        >>> random.seed(5); expected = random.random(); random.seed(5)
        >>> with held():
        ...     x = as_caller(random.random)
        >>> x == expected
        True
    """
    v = _FAST[0] if _FAST else None
    if v is None or v.outside is None:
        return fn(*args)
    v.put_back(v.outside)
    try:
        return fn(*args)
    finally:
        v.outside = v.take_out()


class _Held:
    """The context of :func:`held`."""

    __slots__ = ("_views",)

    def __enter__(self) -> _Held:
        v = _FAST[0] if _FAST else None
        self._views = v
        if v is not None:
            if v.depth == 0:
                v.outside = v.take_out()
            v.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        v = self._views
        if v is not None:
            v.depth -= 1
            if v.depth == 0:
                outside, v.outside = v.outside, None
                if outside is not None:
                    v.put_back(outside)


#: code that moves states in and out (the step alarm waits there: see :func:`in_bookkeeping`)
_BOOKKEEPING = frozenset(
    {Streams.call.__code__, as_caller.__code__, _Held.__enter__.__code__, _Held.__exit__.__code__,
     _Views.take_out.__code__, _Views.put_back.__code__}
)


def _mix(seed: int, k: int) -> int:
    """A 64-bit mix of a seed and a call number (splitmix64's finalizer)."""
    z = (seed * 0x9E3779B97F4A7C15 + k * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)

