"""The types a game declares or shows: entity classes, a globals class, action types.

:class:`~gymloop.spaces.DeclaredTypes` is what ``@gl.game(...)`` declares
(:func:`gymloop.spaces.declared_types`), what a game-loop shard discovers in its pending decisions,
and what every shard receives once the spaces are fixed; :func:`merge_types` is their union in
canonical order, so every layout of shards
compiles the same :class:`~gymloop.spaces.Spaces`.

Example:
    >>> from enum import Enum
    >>> from gymloop.runtime.declared import merge_types
    >>> class A: pass
    >>> class B: pass
    >>> class Move(Enum):
    ...     UP = 0
    >>> merged = merge_types([([B], [], [Move]), ([A, B], [], [Move])])
    >>> [c.__name__ for c in merged.entities], merged.globals, merged.actions
    (['A', 'B'], None, [<enum 'Move'>])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import SchemaError
from ..spaces import DeclaredTypes

__all__ = ["DeclaredTypes", "merge_types"]


def merge_types(parts: Iterable[tuple[Iterable[type], Iterable[type], Iterable[Any]]]) -> DeclaredTypes:
    """Union of ``(entity classes, globals classes, action types)`` parts, in canonical form.

    Entity classes come sorted by name, action types in first-seen order; at most one globals class.

    Raises:
        SchemaError: the parts use several globals classes.
    """
    ents: set[type] = set()
    glob: set[type] = set()
    acts: list[Any] = []
    seen: set[Any] = set()
    for e, g, a in parts:
        ents.update(e)
        glob.update(g)
        for x in a:
            if x not in seen:
                seen.add(x)
                acts.append(x)
    if len(glob) > 1:
        raise SchemaError(f"games used several globals classes {sorted(c.__name__ for c in glob)}; use one")
    return DeclaredTypes(sorted(ents, key=lambda c: c.__qualname__), (glob.pop() if glob else None), acts)
