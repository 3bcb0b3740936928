"""Python's cyclic garbage collector, tuned for the length of a training run.

A run allocates and frees millions of small containers (observations, dicts, lists, arrays) while
the process holds a few hundred thousand long-lived objects (PyTorch's and numpy's modules, the
network, the games). CPython's collector, left as it is, scans its youngest generation every 700
net allocations and, once in a while, every object the process holds: on entity-gym's examples
that is 4-9% of a run's CPU time (0.25 s of Count's 6 s, 0.5 s of MineSweeper's; a full scan of
the ~180,000 objects alive when training starts takes 80 ms). :func:`tuned_collector` freezes the
objects alive when the run starts out of the collector's scans (:func:`gc.freeze`, as a forking
server does) and collects the youngest generation every :data:`YOUNG_THRESHOLD` net allocations
instead of 700; both are put back when the run ends, however it ends.

Garbage in reference cycles is still collected: cycles made during the run raise the allocation
count that triggers a collection. What the run frees of the frozen objects waits for the end of
the run.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "tuned_collector"]

#: net allocations of tracked objects between two collections of the youngest generation while a run trains
#: (CPython's default is 700); a run's live objects stay below it, so a run without reference cycles collects
#: rarely or never
YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_depth = 0


@contextlib.contextmanager
def tuned_collector(enabled: bool = True) -> Iterator[None]:
    """Tune the garbage collector for a training run inside the ``with`` block (see the module's docstring).

    Nothing changes when ``enabled`` is False, when the collector is off (``gc.disable()``), or inside
    another such block. Objects the caller froze itself (``gc.freeze()`` before) stay frozen after it.

    Example:
        >>> import gc
        >>> from gymloop._gc import YOUNG_THRESHOLD, tuned_collector
        >>> before = gc.get_threshold()
        >>> with tuned_collector():
        ...     gc.get_threshold()[0] >= YOUNG_THRESHOLD
        True
        >>> gc.get_threshold() == before
        True
    """
    global _depth
    with _lock:
        outer = enabled and _depth == 0 and gc.isenabled()
        _depth += 1
        if outer:
            thresholds = gc.get_threshold()
            freeze = gc.get_freeze_count() == 0  # (a caller's own frozen objects: left to it)
            if freeze:
                gc.freeze()
            gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if outer:
                gc.set_threshold(*thresholds)
                if freeze:
                    gc.unfreeze()
