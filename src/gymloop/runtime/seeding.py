"""Seeds of game copies: copy ``env``'s ``restart``-th run after its ``generation``-th reset.

A seed depends on the root seed, the copy's env index, the generation and the restart count
alone (never on the layout of shards), so any ``workers`` gives the same games. Executors compute
one :func:`seed_base` per copy and generation and :func:`seed_of_run` per (re)start.

Example:
    >>> from gymloop.runtime.seeding import derive_seed, seed_base, seed_of_run
    >>> derive_seed(0, 3, 1) == seed_of_run(seed_base(0, 3), 1)
    True
    >>> 0 <= derive_seed(7, 0, 0) < 2**32
    True
"""

from __future__ import annotations

__all__ = ["derive_seed", "seed_base", "seed_of_run"]

_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finalizer: a fast, well-distributed 64-bit mix."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def derive_seed(seed: int, env: int, restart: int, generation: int = 0) -> int:
    """Seed (32 bits) of game copy ``env``'s ``restart``-th run after its ``generation``-th reset.

    It depends on nothing else (not on the worker layout), so any ``workers`` gives the same games.
    """
    return seed_of_run(seed_base(seed, env, generation), restart)


def seed_base(seed: int, env: int, generation: int = 0) -> int:
    """The part of :func:`derive_seed` that a copy's restarts share (computed once per generation)."""
    return _mix(_mix(_mix(seed & _M64) ^ env) ^ generation)


def seed_of_run(base: int, restart: int) -> int:
    """:func:`derive_seed` from its :func:`seed_base`: ``seed_of_run(seed_base(s, e, g), r) == derive_seed(s, e, r, g)``."""
    return _mix(base ^ restart) & 0xFFFFFFFF
