"""The observation builder a game hands to ``agent.act``.

Example:
    >>> from dataclasses import dataclass
    >>> from enum import Enum
    >>> import gymloop as gl
    >>> @dataclass
    ... class Head:
    ...     x: int
    ...     y: int
    >>> @dataclass
    ... class Food:
    ...     x: int
    ...     y: int
    >>> class Move(Enum):
    ...     UP = 0
    ...     DOWN = 1
    >>> head = Head(1, 2)
    >>> obs = gl.Obs(score=3).entities([Food(0, 0), Food(4, 4)]).actor(head, masks={Move: [Move.UP]})
    >>> obs.legal(head, Move)
    [<Move.UP: 0>]
    >>> len(obs.entities_of(Food))
    2
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from .actions import ActionSpec, action_spec
from .errors import InvalidObservationError

__all__ = ["Obs"]

_SEQ = (list, tuple)


class Obs:
    """One observation: entities, the actors that must act, masks, globals, score and metrics.

    Every method returns the observation itself, so calls chain. Building an observation is cheap;
    a game makes a new one for every decision. It holds references to the game's own objects and
    lists (no copies), read when the decision is taken; a recorder that keeps observations must
    featurize or copy them at once.

    Args:
        score: the game's score; the reward of a decision is the change of score until the next
            one (or until ``game_over``).

    Example:
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> @dataclass
        ... class Unit:
        ...     x: int
        ...     hp: float
        >>> units = [Unit(0, 1.0), Unit(3, 0.5)]
        >>> obs = gl.Obs(score=2).entities(units[1]).actor(units[0]).metric("alive", 2)
        >>> obs.score, obs.entities_of(Unit) == units   # the actor first, then the other entities
        (2, True)
    """

    __slots__ = ("score", "_chunks", "_actors", "_masks", "_globals", "_metrics", "_single")

    def __init__(self, score: float = 0.0) -> None:
        self.score = score
        self._chunks: list[Sequence[Any]] = []
        self._actors: Sequence[Any] = ()
        self._masks: dict[Any, list[Any]] | None = None
        self._globals: Any = None
        self._metrics: dict[str, float] | None = None
        self._single = False

    # ------------------------------------------------------------------ building
    def entities(self, objs: Any) -> Obs:
        """Observe entities: one object, or an iterable of objects (of one or several types)."""
        if type(objs) in _SEQ:
            if objs:
                self._chunks.append(objs)
        elif dataclasses.is_dataclass(objs) or hasattr(type(objs), "__gymloop_entity__"):
            self._chunks.append((objs,))
        else:
            try:
                objs = list(objs)
            except TypeError:
                raise InvalidObservationError(
                    f"Obs.entities expects an entity object or an iterable of them, got {objs!r} "
                    f"of type {type(objs).__name__}"
                ) from None
            if objs:
                self._chunks.append(objs)
        return self

    def actor(self, x: Any, masks: Mapping[Any, Any] | None = None) -> Obs:
        """Observe ``x`` as the single actor: ``act`` then returns one action per action type.

        Args:
            x: the acting entity (observed as an entity too; do not also pass it to ``entities``).
            masks: optional ``{action_type: allowed}``; ``allowed`` is a sequence of booleans (one
                per choice, or per candidate for select-entity) or a collection of the allowed
                values (Enum members, composite instances, candidate objects).
        """
        if self._actors:
            raise InvalidObservationError("Obs.actor/actors called twice; pass all actors in one .actors([...]) call")
        self._actors = (x,)
        self._single = True
        if masks:
            self._add_masks({k: [v] for k, v in masks.items()})
        return self

    def actors(self, xs: Iterable[Any], masks: Mapping[Any, Any] | None = None) -> Obs:
        """Observe several actors: ``act`` then returns a list per action type, in actor order.

        Args:
            xs: the acting entities.
            masks: optional ``{action_type: per_actor}`` where ``per_actor`` has one entry per actor
                (each as in :meth:`actor`, or ``None`` for no mask), or is a 2-D boolean array
                ``(n_actors, n_choices)`` for a categorical action.
        """
        if self._actors:
            raise InvalidObservationError("Obs.actor/actors called twice; pass all actors in one .actors([...]) call")
        seq: Sequence[Any] = cast(Sequence[Any], xs) if type(xs) in _SEQ else list(xs)  # exactly a list or tuple
        self._actors = seq
        self._single = False
        if masks:
            m: dict[Any, list[Any]] = {}
            for k, v in masks.items():
                if isinstance(v, np.ndarray) and v.ndim == 2:
                    v = list(v)
                v = list(v)
                if len(v) != len(seq):
                    raise InvalidObservationError(
                        f"masks for action type {getattr(k, '__name__', getattr(k, 'name', k))!r} have "
                        f"{len(v)} entries but there are {len(seq)} actors; give one mask (or None) per actor"
                    )
                m[k] = v
            self._add_masks(m)
        return self

    def mask(self, action_type: Any, allowed: Any) -> Obs:
        """Mask a global decision (``@gl.global_decision``): one mask for the whole observation.

        Args:
            action_type: the global decision's type.
            allowed: a sequence of booleans (one per choice) or a collection of the allowed values.

        Example:
            >>> from enum import Enum
            >>> import gymloop as gl
            >>> @gl.global_decision
            ... class Phase(Enum):
            ...     BUILD = 0
            ...     FIGHT = 1
            >>> gl.Obs().mask(Phase, [False, True]).legal(None, Phase)
            [<Phase.FIGHT: 1>]
        """
        spec = action_spec(action_type)
        if spec.kind.actor_bound:
            raise InvalidObservationError(
                f"Obs.mask is for global decisions, and action type {spec.name!r} is {spec.kind.tag} (one choice per "
                f"actor); give its masks with obs.actor(x, masks={{{spec.name}: ...}}) or obs.actors(xs, masks=...)"
            )
        if isinstance(allowed, np.ndarray) and allowed.ndim != 1:
            raise InvalidObservationError(
                f"the mask of global decision {spec.name!r} must be one-dimensional ({spec.n} booleans, one per choice), "
                f"got an array of shape {allowed.shape}; a global decision has one mask per observation, not one per actor"
            )
        if self._masks is None:
            self._masks = {}
        self._masks[action_type] = [allowed]
        return self

    def _add_masks(self, m: dict[Any, list[Any]]) -> None:
        for k in m:
            try:
                spec = action_spec(k)
            except Exception:
                continue  # not an action type: reported when the decision is taken
            if not spec.kind.actor_bound:
                raise InvalidObservationError(
                    f"action type {spec.name!r} is a global decision (one choice per observation, not per actor): give its "
                    f"mask with obs.mask({spec.name}, allowed), not in the actors' masks"
                )
        if self._masks is None:
            self._masks = m
        else:
            self._masks.update(m)

    def globals(self, g: Any) -> Obs:
        """Observe global (non-entity) features: a dataclass instance, featurized like an entity."""
        self._globals = g
        return self

    def metric(self, name: str, value: float) -> Obs:
        """Report a custom metric (e.g. at ``game_over``); it appears in ``batch.metrics[name]``."""
        if self._metrics is None:
            self._metrics = {}
        self._metrics[name] = value
        return self

    # ------------------------------------------------------------------ reading
    @property
    def actor_list(self) -> list[Any]:
        """The actors, in order."""
        return list(self._actors)

    @property
    def is_single_actor(self) -> bool:
        """True when built with :meth:`actor` (``act`` returns values, not lists)."""
        return self._single

    @property
    def metrics(self) -> dict[str, float]:
        """The metrics reported on this observation."""
        return dict(self._metrics or {})

    @property
    def global_features(self) -> Any:
        """The object given to :meth:`globals`, or ``None``."""
        return self._globals

    def entity_list(self) -> list[Any]:
        """All observed objects, actors included, in the order a batch stores them per type."""
        out = list(self._actors)
        for ch in self._chunks:
            out.extend(ch)
        return out

    def entities_of(self, cls: type | tuple[type, ...]) -> list[Any]:
        """The observed objects of the given class(es), in candidate order.

        The order is: class by class as given; within a class, actors first, then entities in the
        order they were observed. Select-entity choices index into this list.
        """
        classes = cls if isinstance(cls, tuple) else (cls,)
        out: list[Any] = []
        for c in classes:
            out.extend(a for a in self._actors if type(a) is c)
            for ch in self._chunks:
                out.extend(o for o in ch if type(o) is c)
        return out

    def _actor_pos(self, actor: Any) -> int:
        if isinstance(actor, int) and not any(a is actor for a in self._actors):
            if not 0 <= actor < len(self._actors):
                raise InvalidObservationError(f"actor index {actor} out of range: the observation has {len(self._actors)} actors")
            return actor
        for i, a in enumerate(self._actors):
            if a is actor:
                return i
        raise InvalidObservationError(f"{actor!r} is not an actor of this observation")

    def mask_of(self, actor: Any, action_type: Any) -> np.ndarray:
        """Boolean mask of the choices of ``actor`` (an actor object or its index) for an action type.

        A global decision has one mask for the observation: ``actor`` is ignored (pass ``None``).
        """
        spec = action_spec(action_type)
        if not spec.kind.actor_bound:
            raw = None if self._masks is None else self._masks.get(action_type, [None])[0]
            return mask_vector(raw, spec, spec.n, None)
        i = self._actor_pos(actor)
        raw = None if self._masks is None else self._masks.get(action_type, [None] * len(self._actors))[i]
        if spec.kind.selects_entities:
            cands = self.entities_of(spec.among)
            return mask_vector(raw, spec, len(cands), cands)
        return mask_vector(raw, spec, spec.n, None)

    def legal(self, actor: Any, action_type: Any) -> list[Any]:
        """The legal values for ``actor`` and an action type (members, instances or objects)."""
        spec = action_spec(action_type)
        m = self.mask_of(actor, action_type)
        if spec.kind.selects_entities:
            cands = self.entities_of(spec.among)
            return [c for c, ok in zip(cands, m) if ok]
        return [v for v, ok in zip(spec.values, m) if ok]

    def __repr__(self) -> str:
        n = sum(len(c) for c in self._chunks) + len(self._actors)
        return f"Obs(score={self.score!r}, entities={n}, actors={len(self._actors)})"


def _is_bool_seq(raw: Any) -> bool:
    if isinstance(raw, np.ndarray):
        return raw.dtype == np.bool_
    if type(raw) in _SEQ and raw:
        return all(type(v) is bool or type(v) is np.bool_ for v in raw)
    return False


def mask_vector(raw: Any, spec: ActionSpec, n: int, candidates: Sequence[Any] | None) -> np.ndarray:
    """Turn a mask as the game gave it into a boolean vector of length ``n``."""
    if raw is None:
        return np.ones(n, dtype=bool)
    if _is_bool_seq(raw):
        v = np.asarray(raw, dtype=bool).reshape(-1)
        if v.shape[0] != n:
            what = "candidates" if candidates is not None else "choices"
            raise InvalidObservationError(
                f"mask for action type {spec.name!r} has {v.shape[0]} entries, expected {n} (one per {what[:-1]}); "
                f"give a boolean per {what[:-1]} or a collection of the allowed values"
            )
        return v
    v = np.zeros(n, dtype=bool)
    try:
        allowed = list(raw)
    except TypeError:
        raise InvalidObservationError(
            f"mask for action type {spec.name!r} must be booleans or a collection of allowed values, got {raw!r}"
        ) from None
    if candidates is None:
        for a in allowed:
            try:
                v[spec.index_of(a)] = True
            except Exception:
                raise InvalidObservationError(
                    f"mask for action type {spec.name!r} allows {a!r}, which is not one of its choices {list(spec.labels)}"
                ) from None
    else:
        for a in allowed:
            for j, c in enumerate(candidates):
                if c is a:
                    v[j] = True
                    break
            else:
                raise InvalidObservationError(
                    f"mask for select-entity action {spec.name!r} allows {a!r}, which is not among its "
                    f"{len(candidates)} candidates in this observation"
                )
    return v


def check_score(score: Any) -> float:
    """Validate a score value."""
    try:
        s = float(score)
    except (TypeError, ValueError):
        raise InvalidObservationError(f"Obs score must be a number, got {score!r}") from None
    if not math.isfinite(s):
        raise InvalidObservationError(f"Obs score must be finite, got {score!r}")
    return s
