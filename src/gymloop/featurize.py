"""One observation → a one-slot :class:`~gymloop.batch.Batch`: traces and ``gl.run``'s checks.

:class:`OneSlotFeaturizer` lays out one decision exactly as a :class:`~gymloop.VecEnv` batch holds
it, with the executor's own :class:`~gymloop.runtime.builder.BatchBuilder`, so a trace recorded from
``gl.run`` and one collected by a ``VecEnv`` hold the same numbers, and an observation that
:class:`ObsValidator` accepts is one a ``VecEnv`` accepts. Its spaces are the game's declared types
plus every type seen so far: they grow when an observation brings a new type.

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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .batch import Batch
from .errors import InvalidObservationError, SchemaError
from .obs import FLOAT32_MAX, Obs, check_score
from .spaces import DeclaredTypes, Spaces

if TYPE_CHECKING:
    from .runtime.builder import BatchBuilder

__all__ = ["ObsValidator", "OneSlotFeaturizer"]

_FLOAT64_MAX = float(np.finfo(np.float64).max)


class OneSlotFeaturizer:
    """One observation → a one-slot :class:`Batch`, built by the executor's own batch builder.

    The spaces are the game's declared types plus every type seen so far; they grow when an
    observation brings a new type (a trace re-lays out its earlier decisions when it is built).

    Args:
        declared: ``(entity classes, globals class, action types)`` declared on the game
            (:func:`~gymloop.spaces.declared_types`), or ``None``.
        late_globals: accept globals that appear after observations without them (the
            validator's case); a trace refuses them (its earlier decisions have no globals).

    Attributes:
        space: the spaces of the last batch built (``None`` before the first).
        builder: the one-slot :class:`~gymloop.runtime.builder.BatchBuilder` of ``space``.
    """

    def __init__(self, declared: DeclaredTypes | None, late_globals: bool = False) -> None:
        self.late_globals = late_globals
        e, g, a = declared if declared else ([], None, [])
        self.ents: set[type] = set(e)
        self.glob: type | None = g
        self.acts: list[Any] = list(a)
        self.known: set[Any] = set()
        self.space: Spaces | None = None
        self.builder: BatchBuilder | None = None

    def batch(self, obs: Obs, types: tuple) -> tuple[Batch, Spaces]:
        """The one-slot batch of ``obs`` asked for ``types``, and the spaces it is laid out in.

        Raises:
            InvalidObservationError: ``obs`` is not a ``gl.Obs``, brings globals when the earlier
                observations had none, or fails the batch builder's checks.
        """
        if type(obs) is not Obs:
            raise InvalidObservationError(f"act expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        b = self.builder_for(obs, types)
        assert self.space is not None  # set with the builder
        return b.build([obs], [types]), self.space

    def builder_for(self, obs: Obs, types: Sequence[Any] = ()) -> BatchBuilder:
        """The one-slot builder of spaces that hold every type of ``obs`` and ``types`` (grown
        when one is new)."""
        from .runtime.builder import BatchBuilder

        known = self.known
        ents = obs.entity_types()
        g = obs.global_features
        gcls = type(g) if g is not None else None
        new = [c for c in ents if c not in known] + [t for t in types if t not in known]
        if gcls is not None and gcls not in known:
            new.append(gcls)
        if new or self.builder is None:
            if gcls is not None and self.glob is not None and gcls is not self.glob:
                raise SchemaError(f"games used several globals classes {sorted(c.__name__ for c in (gcls, self.glob))}; use one")
            self.ents |= ents
            self.glob = self.glob or gcls
            self.acts += [t for t in types if t not in self.acts]
            sp = Spaces.build(self.ents, self.glob, self.acts)
            if not self.late_globals and self.space is not None and sp.globals_schema is not None and not self.space.obs.globals:
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
        return self.builder


class ObsValidator:
    """Checks observations one at a time with the batch builder's checks (``gl.run`` uses it).

    Each observation is built into a one-slot batch by a :class:`OneSlotFeaturizer`, so it is
    refused exactly where a :class:`~gymloop.VecEnv` would refuse it: entity, globals and action
    types compiled by the same schemas (unsupported field types and undeclared classes are
    :class:`~gymloop.errors.SchemaError`), features and scores finite numbers (no strings), masks of
    the right shape and type that leave a legal choice, an actor for actor-bound action types. The
    spaces grow as types appear (a single game need not declare them up front).

    The first ``full_checks`` decisions get every check; after that each observation gets cheap
    ones (a few microseconds): the score a finite int or float, every type known, and the sum of
    the magnitudes of each object's features finite and within float32 (so NaN and infinity are
    always refused, and so are strings and other non-numbers); an observation that fails them, or
    has a type never seen or masks of global decisions, gets the full checks, which name the
    problem. Actors' masks are then checked against the agent's answers (``gl.run(check=True)``).

    Args:
        declared: ``(entity classes, globals class, action types)`` declared on the game, or ``None``.
        full_checks: how many decisions to check fully.

    Example:
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> from gymloop.games.snake import Move
        >>> @dataclass
        ... class P:
        ...     x: float
        >>> v = ObsValidator()
        >>> v.check(gl.Obs().actor(P(1.0)), (Move,))
        >>> v.check(gl.Obs().actor(P(float("nan"))), (Move,))
        Traceback (most recent call last):
        ...
        gymloop.errors.InvalidObservationError: entity type 'P', feature 'x' is nan in env 0 (slot 0); features must be finite numbers
    """

    def __init__(self, declared: DeclaredTypes | None = None, full_checks: int = 100) -> None:
        self.glob: type | None = declared[1] if declared else None
        self.featurizer = OneSlotFeaturizer(declared, late_globals=True)
        self.full_checks = full_checks
        self.decisions = 0

    def _builder(self, obs: Obs, action_types: Sequence[Any] = ()) -> BatchBuilder:
        g = obs.global_features
        if g is not None and type(g) is not self.glob:
            if self.glob is not None:
                raise InvalidObservationError(
                    f"the observation's globals are a {type(g).__qualname__}, but earlier observations gave a "
                    f"{self.glob.__qualname__}; a game uses one globals class"
                )
            self.glob = type(g)
        return self.featurizer.builder_for(obs, action_types)

    def check(self, obs: Any, action_types: Sequence[Any]) -> None:
        """Check the observation of one decision (``agent.act(obs, *action_types)``)."""
        if type(obs) is not Obs:
            raise InvalidObservationError(
                f"agent.act expects a gl.Obs as its first argument, got {obs!r} of type {type(obs).__name__}"
            )
        self.decisions += 1
        if not action_types:
            return  # the agent itself reports that (act needs an action type)
        if self.decisions > self.full_checks and self._cheap(obs, action_types):
            return
        pt = tuple(action_types)
        self._builder(obs, pt).build([obs], [pt])

    def _cheap(self, obs: Obs, action_types: Sequence[Any]) -> bool:
        """The cheap checks after the first decisions: True when the score and every feature are
        numbers with a finite sum of magnitudes within float32, every type is known and no
        observation-level mask is set; False sends the observation through the full checks (which
        name the problem). Masks of actors are checked against the agent's answer by ``gl.run``."""
        b = self.featurizer.builder
        if b is None or obs.has_masks:
            return False
        aindex = b.spaces.action_index
        for t in action_types:
            if t not in aindex:
                return False
        return self._cheap_values(b, obs)

    def _cheap_values(self, b: BatchBuilder, obs: Obs) -> bool:
        """The cheap checks of the score, the types and the feature values (see :meth:`_cheap`)."""
        sp = b.spaces
        sc = obs.score
        if type(sc) is not float and type(sc) is not int or not abs(sc) <= _FLOAT64_MAX:
            return False
        schemas = sp.entity_schemas
        tindex = sp.entity_index
        actors, chunks, g, *_ = obs.view()
        try:
            for x in actors:
                i = tindex.get(type(x))
                if i is None or not sum(map(abs, schemas[i].flat((x,)))) <= FLOAT32_MAX:
                    return False
            for ch in chunks:
                first = type(ch[0])
                i = tindex.get(first)
                if i is None or not all(type(o) is first for o in ch):
                    return False
                if not sum(map(abs, schemas[i].flat(ch))) <= FLOAT32_MAX:
                    return False
            gs = sp.globals_schema
            if gs is None:
                return g is None
            if type(g) is not gs.cls or not sum(map(abs, gs.flat((g,)))) <= FLOAT32_MAX:
                return False
        except Exception:  # anything odd: the full checks say what
            return False
        return True

    def check_final(self, obs: Any) -> None:
        """Check the observation given to ``game_over``: its score, features and globals."""
        if type(obs) is not Obs:
            raise InvalidObservationError(f"game_over expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        check_score(obs.score, "game_over: ")
        b = self.featurizer.builder
        if self.decisions > self.full_checks and b is not None and self._cheap_values(b, obs):
            return
        self._builder(obs).build_final({0: obs})  # (entities and globals, featurized)
