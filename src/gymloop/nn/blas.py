"""numpy's BLAS held to one thread while a policy runs a batched pass.

numpy's BLAS (OpenBLAS in numpy's wheels) splits a matrix product over as many threads as the
machine has cores. The products of a small network's batched pass are small, so those threads spend
their time waiting for one another, and when another process (or the game's own work) keeps a core
busy they wait for that core too: the pass then takes 2-5 times as long. :func:`one_blas_thread`
sets BLAS to one thread for the duration of a pass and restores what it was afterwards, so the
game's own numpy keeps its threads. It uses `threadpoolctl <https://github.com/joblib/threadpoolctl>`_
(the library scikit-learn uses for the same purpose); without it, nothing changes.

Example:
    >>> import numpy as np
    >>> from gymloop.nn.blas import one_blas_thread
    >>> with one_blas_thread():
    ...     y = np.ones((64, 32), np.float32) @ np.ones((32, 32), np.float32)
    >>> float(y[0, 0])
    32.0
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["one_blas_thread", "single_blas_thread"]

_lock = threading.Lock()
_libs: list[Any] | None = None  # threadpoolctl's controllers of the BLAS libraries loaded (found on first use)
_depth = 0  # nested passes (the outermost restores)
_saved: list[int] = []

F = TypeVar("F", bound=Callable[..., Any])


def _blas_libraries() -> list[Any]:
    global _libs
    if _libs is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _libs = []
        else:
            _libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libs


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with numpy's BLAS on one thread; the thread counts come back afterwards."""
    global _depth, _saved
    libs = _blas_libraries()
    if not libs:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = [lib.get_num_threads() for lib in libs]
            for lib, n in zip(libs, _saved):
                if n != 1:
                    lib.set_num_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for lib, n in zip(libs, _saved):
                    if n != 1:
                        lib.set_num_threads(n)


def single_blas_thread(fn: F) -> F:
    """Decorate a batched pass to run under :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
