"""Scopes an environment executor enters around each batch of calls into its copies.

Some state is process-wide and shared by every copy: the global ``random`` and ``numpy.random``
generators that entity-gym's games draw from. A module that gives each copy its own view of such
state (the entity-gym adapter's per-copy random streams) can register a *batch scope* here: a
reentrant context manager that :class:`~gymloop.runtime.envexec.EnvExecutor` enters around ``start`` and ``step``
(outside the step alarm), so that the caller's state is taken out once per batch rather than once
per call and put back when the batch ends, however it ends. The runtime knows nothing of who
registered what: with none registered a batch enters a scope that does nothing.

Example:
    >>> from gymloop.runtime.scopes import batch_scope
    >>> with batch_scope():  # what the executor does around a batch
    ...     pass
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["batch_scope", "register_batch_scope"]

_SCOPES: list[AbstractContextManager[Any]] = []
_NONE: AbstractContextManager[Any] = contextlib.nullcontext()


def register_batch_scope(scope: AbstractContextManager[Any]) -> None:
    """Have every environment executor of this process enter ``scope`` around each batch (once, however often
    registered). ``scope`` is one object entered again and again, nested when executors nest: it must be
    reentrant."""
    if not any(s is scope for s in _SCOPES):
        _SCOPES.append(scope)


def batch_scope() -> AbstractContextManager[Any]:
    """The scope an executor enters around a batch: the registered one (all of them, nested, when several are)."""
    if not _SCOPES:
        return _NONE
    if len(_SCOPES) == 1:
        return _SCOPES[0]
    return _nested(tuple(_SCOPES))


@contextlib.contextmanager
def _nested(scopes: tuple[AbstractContextManager[Any], ...]) -> Iterator[None]:
    """Several registered scopes entered as one, in the order they were registered."""
    with contextlib.ExitStack() as stack:
        for s in scopes:
            stack.enter_context(s)
        yield
