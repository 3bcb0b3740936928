"""Each game copy its own streams of the process's global ``random`` and ``numpy.random`` generators.

Games written for entity-gym draw from the global generators (``random.randint``,
``np.random.normal``) and take no seed. :meth:`Streams.call` runs one of a copy's calls with
the copy's own generator states in the global generators and takes them out afterwards, leaving
the caller's states as they were; an episode's first call starts new states from its seed. A
copy's draws then depend on its episode seed alone, whatever the other copies and the caller draw.

Both generators are Mersenne Twisters whose whole state is 2,500 bytes (624 words and a
position), so a call moves four copies of 2.5 KB per generator (about 2 µs a call in all) where
seeding both costs about 8 µs (which an episode's first call still pays). numpy's state is reached
through its public ``ctypes.state_address``; the state of CPython's ``random`` through its object's
memory, whose layout (an ``int`` position then 624 ``uint32`` words right after the object header,
the same since Python 3.0) :func:`fast_path` checks once on objects of its own: read against
``getstate()``, written, then drawn from. Where a check fails (another interpreter, another layout,
numpy's global generator not an MT19937), :class:`Streams` instead seeds both generators before
each call from the episode seed and the call's number: as isolated and reproducible, about 6 µs
slower a call, and other numbers after an episode's first call.

An episode's new states are seeded as the slow path seeds an episode's first call
(``random.seed`` and ``np.random.seed`` of a 64-bit mix of the episode seed), so both paths draw
the same numbers in that call: a game that draws only when an episode starts (most of
entity-gym's examples) plays the same episodes either way.

What moves with a copy besides the states: ``random``'s cached normal deviate (``gauss_next``).
numpy's legacy generator caches one outside the bit generator's state, where no public
interface reaches it cheaply; that cache is cleared instead (numpy's global generator reseeded,
then the states put back) whenever numpy's state changed during a copy's call or, for the
caller, between two calls, so no call starts with a deviate cached elsewhere. A deviate cached
that way (every second normal deviate drawn) is dropped, not reused: the streams stay
deterministic, and the caller's is left as it was apart from that.
"""

from __future__ import annotations

import ctypes
import platform
import random
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Streams", "fast_path"]

_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: bytes of a Mersenne Twister's state in both layouts: 624 uint32 words and an int position
_STATE_BYTES = 624 * 4 + 4
_WORDS = 624 * 4


class _Views:
    """Writable views of the two global generators' state memory, and numpy's legacy seeding."""

    def __init__(self, py: memoryview, npy: memoryview, seed_np: Callable[[int], Any]) -> None:
        self.py = py  # random's: the position (int), then the 624 words
        self.npy = npy  # numpy's: the 624 words, then the position (int)
        self.seed_np = seed_np  # np.random.seed's key and position (its cached deviate left alone where possible)


def _py_view(r: random.Random) -> memoryview | None:
    """The position and words of a ``random.Random``'s state, as bytes of its memory (``None``: not that layout)."""
    import _random

    off = object.__basicsize__
    if platform.python_implementation() != "CPython" or not isinstance(r, _random.Random):
        return None
    if _random.Random.__basicsize__ < off + _STATE_BYTES:
        return None
    return memoryview((ctypes.c_char * _STATE_BYTES).from_address(id(r) + off)).cast("B")


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


def _np_view(rs: np.random.RandomState) -> memoryview | None:
    """The key and position of a legacy ``RandomState``'s MT19937 state (``None``: not an MT19937)."""
    bg = getattr(rs, "_bit_generator", None)
    if not isinstance(bg, np.random.MT19937):
        return None
    return memoryview((ctypes.c_char * _STATE_BYTES).from_address(bg.ctypes.state_address)).cast("B")


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


def _legacy_seeding(glob: np.random.RandomState) -> Callable[[int], Any]:
    """The global bit generator's own legacy seeding (``np.random.seed`` without clearing the cached deviate) where
    it gives ``np.random.seed``'s key and position; else ``np.random.seed``."""
    a, b = np.random.RandomState(123456789), np.random.RandomState(7)
    seed = getattr(b._bit_generator, "_legacy_seeding", None)  # (not public: checked, with a fallback)
    if seed is None:
        return np.random.seed
    seed(123456789)
    if bytes(_np_view(a) or b"") != bytes(_np_view(b) or b"-"):
        return np.random.seed
    return glob._bit_generator._legacy_seeding  # type: ignore[attr-defined]


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
            glob = np.random.mtrand._rand
            if _py_layout_ok() and _np_layout_ok():
                py, npy = _py_view(random._inst), _np_view(glob)  # (random._inst: the instance behind random's functions)
                if py is not None and npy is not None:
                    views = _Views(py, npy, _legacy_seeding(glob))
        except (AttributeError, TypeError, ValueError, OverflowError):  # (an interpreter without these internals)
            views = None
        _FAST.append(views)
    return _FAST[0] is not None


#: numpy's global state as the last fast call left it (the caller drew from it since when it differs)
_LAST: list[bytes] = [b""]


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
        self._gauss: Any = None
        self._seed: int | None = None  # the episode's seed (None: no episode yet) and calls so far (the slow path)
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
        global generators as they are.
        """
        v = self._views
        if v is None:
            return self._seeded_call(fn, args, seed)
        if seed is None and self._seed is None:
            return fn(*args)
        gpy, gnp = v.py, v.npy
        inst: Any = random._inst  # (the instance behind random's functions; gauss_next is set in random.py)
        outside_py, outside_np, outside_gauss = bytes(gpy), bytes(gnp), inst.gauss_next
        fresh = outside_np != _LAST[0]  # the caller drew from numpy since the last call: clear a cached deviate
        if seed is not None:  # an episode's first call: new states, seeded as the slow path seeds its first call
            x = _mix(seed)
            random.seed(x)
            if fresh:
                np.random.seed(x & _M32)
            else:  # (the last call left no cached deviate)
                v.seed_np(x & _M32)
            self._seed = seed
            self._np[:] = gnp  # (to tell afterwards whether the call drew from numpy)
        else:
            if fresh:
                np.random.seed(0)
            gpy[:] = self._py
            gnp[:] = self._np
            inst.gauss_next = self._gauss
        try:
            return fn(*args)
        finally:
            self._py[:] = gpy
            self._gauss = inst.gauss_next
            after = bytes(gnp)
            if after != self._np:  # the call drew from numpy: keep its state, clear its cached deviate
                self._np[:] = after
                np.random.seed(0)
            gpy[:] = outside_py
            gnp[:] = outside_np
            inst.gauss_next = outside_gauss
            _LAST[0] = outside_np

    def _seeded_call(self, fn: Callable[..., Any], args: tuple[Any, ...], seed: int | None) -> Any:
        if seed is not None:
            self._seed, self._calls = seed, 0
        if self._seed is not None:
            self._calls += 1
            x = _mix(self._seed, self._calls)
            random.seed(x)
            np.random.seed(x & _M32)
        return fn(*args)


def _mix(seed: int, k: int = 1) -> int:
    """A 64-bit mix of a seed and a call number (splitmix64's finalizer)."""
    z = (seed * 0x9E3779B97F4A7C15 + k * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)
