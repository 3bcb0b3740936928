"""One observation → a one-slot :class:`~gymloop.batch.Batch`, for recording and replaying traces.

:class:`OneSlotFeaturizer` lays out one decision exactly as a :class:`~gymloop.VecEnv` batch holds
it, with the executor's own :class:`~gymloop.runtime.builder.BatchBuilder`, so a trace recorded from
``gl.run`` and one collected by a ``VecEnv`` hold the same numbers. Its spaces are the game's
declared types plus every type seen so far: they grow when an observation brings a new type.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import Head, Move, snake
    >>> from gymloop.spaces import declared_types
    >>> from gymloop.featurize import OneSlotFeaturizer
    >>> f = OneSlotFeaturizer(declared_types(snake))
    >>> b, space = f.batch(gl.Obs(score=1).actor(Head(2, 3)), (Move,))
    >>> b.entities["Head"].tolist(), sorted(space.obs.entities)
    ([[2.0, 3.0]], ['Body', 'Food', 'Head'])
"""

from __future__ import annotations

from typing import Any

from .batch import Batch
from .errors import InvalidObservationError
from .obs import Obs
from .spaces import Spaces

__all__ = ["OneSlotFeaturizer"]


class OneSlotFeaturizer:
    """One observation → a one-slot :class:`Batch`, built by the executor's own batch builder.

    The spaces are the game's declared types plus every type seen so far; they grow when an
    observation brings a new type (a trace re-lays out its earlier decisions when it is built).

    Args:
        declared: ``(entity classes, globals class, action types)`` declared on the game
            (:func:`~gymloop.spaces.declared_types`), or ``None``.

    Attributes:
        space: the spaces of the last batch built (``None`` before the first).
    """

    def __init__(self, declared: tuple[list[type], type | None, list[Any]] | None) -> None:
        self.parts: list[tuple[Any, Any, Any]] = []
        if declared:
            e, g, a = declared
            self.parts.append((list(e), [g] if g is not None else [], list(a)))
        self.known: set[Any] = set()
        self.space: Spaces | None = None
        self.builder: Any = None

    def batch(self, obs: Obs, types: tuple) -> tuple[Batch, Spaces]:
        """The one-slot batch of ``obs`` asked for ``types``, and the spaces it is laid out in.

        Raises:
            InvalidObservationError: ``obs`` is not a ``gl.Obs``, brings globals when the earlier
                observations had none, or fails the batch builder's checks.
        """
        from .runtime.builder import BatchBuilder
        from .runtime.executor import merge_types

        if type(obs) is not Obs:
            raise InvalidObservationError(f"act expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        known = self.known
        ents = obs.entity_types()
        g = obs.global_features
        glob = [type(g)] if g is not None else []
        new = [c for c in ents if c not in known] + [g for g in glob if g not in known] + [t for t in types if t not in known]
        if new or self.builder is None:
            self.parts.append((ents, glob, list(types)))
            sp = Spaces.build(*merge_types(self.parts))
            if self.space is not None and sp.globals_schema is not None and not self.space.obs.globals:
                name = sp.globals_schema.name
                raise InvalidObservationError(
                    f"this observation brings the globals {name!r}, but the earlier ones had none; give obs.globals(...) on "
                    f"every observation from the first, or declare it with @gl.game(globals={name})"
                )
            self.space = sp
            known.update(s.cls for s in sp.entity_schemas)
            known.update(s.key for s in sp.action_specs)
            if sp.globals_schema is not None:
                known.add(sp.globals_schema.cls)
            self.builder = BatchBuilder(sp, 1)  # one slot; no episode state: zero rewards, no ends
        assert self.space is not None  # set with the builder
        return self.builder.build([obs], [types]), self.space
