"""Each game copy its own streams of the process's global ``random`` and ``numpy.random`` generators.

Games written for entity-gym draw from the global generators (``random.randint``,
``np.random.normal``) and take no seed. :meth:`Streams.call` runs one of a copy's calls drawing from
the copy's own streams, through the generators' public APIs only:

- ``random``: seeded before each of the copy's calls, ``random.seed(x)`` with ``x`` mixed from the
  copy's episode seed and the call's number in the episode;
- ``numpy.random``: the copy has a bit generator of its own (an ``MT19937``), which the call puts
  into numpy's global generator (``np.random.set_bit_generator``); an episode's first call seeds it
  with ``np.random.seed(x & 0xFFFFFFFF)``, later calls go on with its stream.

An episode's first call thus starts both generators in the states ``random.seed(x)`` and
``np.random.seed(x & 0xFFFFFFFF)`` leave, and a copy's draws depend on its episode seed and its own
calls alone, whatever the other copies and the caller draw.

The caller's states (``random.getstate()``, numpy's bit generator and its cached normal deviate) are
taken out before a copy's call and put back after it. The executor steps a shard's copies inside
:func:`held` (registered with :mod:`gymloop.runtime.scopes` as the batch scope), which takes them out
at the batch's first call and puts them back when the batch ends; a copy's constructor, run there,
draws from the caller's streams through :func:`as_caller`. Taking out and putting back run inside
the step alarm's deferred sections (:func:`gymloop.runtime.alarm.deferred`): a deadline never
leaves the caller's states half moved.

Costs (CPU time; docs/adapters/entity-gym.md has the measurements): a call inside :func:`held`
about 6 µs (seeding ``random``; swapping numpy's bit generator costs 0.1 µs), an episode's first
call about 8 µs (numpy's seeding too); a batch's taking out and putting back about 57 µs (numpy's
``get_state``, which copies its 624 words one by one, is most of it), as much for a call outside
:func:`held`, which takes them out and puts them back itself.

Limits: numpy's legacy generator caches every second normal deviate outside its bit generator; a
copy's cache does not outlive its call (a call that draws an odd number of normal deviates leaves
one its next call does not get). With numpy older than 1.25 (no ``set_bit_generator``) numpy's
generator is seeded before each call too, as ``random`` is. One thread at a time may draw from the
global generators while copies step (another thread would draw from a copy's streams); a copy's
call must not call the same copy again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from ..runtime.alarm import deferred
from ..runtime.scopes import register_batch_scope

__all__ = ["Streams", "as_caller", "held"]

_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: numpy's global generator's bit generator, read and replaced (numpy 1.25+; ``None`` before: numpy is then reseeded
#: per call). (Looked up by name: numpy's stubs leave them out of ``numpy.random``'s exports.)
_get_bg: Any = getattr(np.random, "get_bit_generator", None)
_set_bg: Any = getattr(np.random, "set_bit_generator", None)
_SWAP = _set_bg is not None

#: the caller's states while they are out: ``random``'s, numpy's bit generator (``None``: not swapped) and numpy's state
_Outside = tuple[Any, Any, dict[str, Any]]


def _take_out() -> _Outside:
    """The caller's states (nothing is changed: the copy's call then loads its own)."""
    with deferred():
        bg = _get_bg() if _SWAP else None
        return random.getstate(), bg, np.random.get_state(legacy=False)


def _put_back(outside: _Outside) -> None:
    """Put the caller's states back (called inside an alarm-deferred section, entered in the caller's own frame: the
    first check for the alarm's signal in a Python call comes before the call's first line)."""
    py, bg, state = outside
    random.setstate(py)
    if bg is None:
        np.random.set_state(state)
    else:
        _set_bg(bg)  # (the bit generator's own state went out with it, untouched)
        if state["has_gauss"]:  # ... but its cached deviate stayed in numpy's generator, which the swap cleared
            np.random.set_state(state)


class Streams:
    """One game copy's streams of the global ``random`` and ``numpy.random`` generators.

    Example:
        >>> import random
        >>> from gymloop.adapters._streams import Streams
        >>> a, b = Streams(), Streams()
        >>> x = a.call(random.random, seed=1)
        >>> y = b.call(random.random, seed=1)  # b's episode seeded alike: the same stream
        >>> x == y and a.call(random.random) == b.call(random.random)
        True
    """

    def __init__(self) -> None:
        self._bg: Any = None  # this copy's numpy bit generator (made at its first episode)
        self._seed: int | None = None  # the episode's seed (None: no episode yet) and its calls so far
        self._calls = 0

    def call(self, fn: Callable[..., Any], *args: Any, seed: int | None = None) -> Any:
        """``fn(*args)`` drawing from this copy's streams; ``seed``: start new ones first (an episode's first call).

        Before the first seeded call the copy has no streams of its own and ``fn`` draws from the
        global generators as they are (the caller's).
        """
        if seed is None:
            if self._seed is None:
                return as_caller(fn, *args)
            self._calls += 1
        else:
            self._seed, self._calls = seed, 1
        if not _HELD.depth:
            return self._call_alone(fn, args, seed is not None)
        if _HELD.outside is None:
            _HELD.outside = _take_out()
        self._load(seed is not None)
        return fn(*args)

    def _call_alone(self, fn: Callable[..., Any], args: tuple[Any, ...], first: bool) -> Any:
        """:meth:`call` outside :func:`held`: the caller's states taken out and put back around it."""
        outside = _take_out()
        try:
            self._load(first)
            return fn(*args)
        finally:
            with deferred():
                _put_back(outside)

    def _load(self, first: bool) -> None:
        """Put this copy's streams into the global generators (its episode has a seed)."""
        x = _mix(self._seed, self._calls)  # type: ignore[arg-type]
        random.seed(x)
        if not _SWAP:
            np.random.seed(x & _M32)
        else:
            bg = self._bg
            if bg is None:
                bg = self._bg = np.random.MT19937(0)
            _set_bg(bg)
            if first:
                np.random.seed(x & _M32)


class _Held:
    """The batch scope :func:`held` returns (one object, reentrant)."""

    __slots__ = ("depth", "outside")

    def __init__(self) -> None:
        self.depth = 0
        self.outside: _Outside | None = None  # the caller's states while a call inside has taken them out

    def __enter__(self) -> _Held:
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0 and self.outside is not None:
            with deferred():
                _put_back(self.outside)
                self.outside = None


_HELD = _Held()
register_batch_scope(_HELD)


def held() -> _Held:
    """A batch of :meth:`Streams.call` calls, one after another: the caller's states are taken out once.

    Outside it every call takes the caller's states out and puts them back; inside it the first call
    takes them out and they come back when the outermost ``held`` ends, however it ends. Nothing
    else may draw from the global generators inside it but through :func:`as_caller` (they hold the
    last copy's streams between calls). The executor steps a shard's copies inside one
    (:func:`gymloop.runtime.scopes.batch_scope`).

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
    return _HELD


def as_caller(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` drawing from the caller's streams, also inside :func:`held` (a game's constructor, say).

    Example:
        >>> import random
        >>> from gymloop.adapters._streams import as_caller, held
        >>> random.seed(5); expected = random.random(); random.seed(5)
        >>> with held():
        ...     x = as_caller(random.random)
        >>> x == expected
        True
    """
    if _HELD.outside is not None:  # (the next copy's call takes them out again)
        with deferred():
            _put_back(_HELD.outside)
            _HELD.outside = None
    return fn(*args)


def _mix(seed: int, k: int) -> int:
    """A 64-bit mix of a seed and a call number (splitmix64's finalizer)."""
    z = (seed * 0x9E3779B97F4A7C15 + k * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)
