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
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .actions import ActionSpec, action_spec
from .errors import EnvStateError, InvalidObservationError, SchemaError
from .schema import _cache as _schema_cache
from .schema import schema_of

if TYPE_CHECKING:
    from .schema import EntitySchema

__all__ = ["Obs", "ObsView", "checked_features", "checked_score"]

_SEQ = (list, tuple)

#: What :meth:`Obs.view` returns: ``(actors, chunks, globals, masks, metrics, single)``.
ObsView = tuple[Sequence[Any], list[Sequence[Any]], Any, dict[Any, list[Any]] | None, dict[str, float] | None, bool]


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

    # The fields of :meth:`view` one by one, read-only, at the cost of an attribute (they are the slots
    # themselves, aliased after the class): for the batch builders' per-observation loops.
    view_actors: Sequence[Any]
    view_chunks: list[Sequence[Any]]
    view_masks: dict[Any, list[Any]] | None
    view_metrics: dict[str, float] | None
    view_single: bool

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
            self._add_masks({k: [v] for k, v in _mask_items(masks)})
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
        if type(xs) in _SEQ:  # exactly a list or tuple
            seq: Sequence[Any] = cast(Sequence[Any], xs)
        else:
            try:
                seq = list(xs)
            except TypeError:
                raise InvalidObservationError(
                    f"Obs.actors expects an iterable of actor entities, got {xs!r} of type {type(xs).__name__}; "
                    "for one actor use obs.actor(x)"
                ) from None
        self._actors = seq
        self._single = False
        if masks:
            m: dict[Any, list[Any]] = {}
            for k, v in _mask_items(masks):
                if isinstance(v, np.ndarray) and v.ndim != 2:
                    raise InvalidObservationError(
                        f"masks for action type {_type_name(k)!r} as an array must be 2-D (n_actors, n_choices), "
                        f"got shape {v.shape}; or give a list with one mask (or None) per actor"
                    )
                try:
                    v = list(v)
                except TypeError:
                    raise InvalidObservationError(
                        f"masks for action type {_type_name(k)!r} must have one mask (or None) per actor, got {v!r}"
                    ) from None
                if len(v) != len(seq):
                    name = _type_name(k)
                    one = v and all(not isinstance(e, (list, tuple, set, frozenset, np.ndarray)) and e is not None for e in v)
                    looks = (" (they look like ONE mask, the choices of one actor)" if one else "")
                    form = ", ".join(f"allowed_{i}" for i in range(min(len(seq), 3))) + (", ..." if len(seq) > 3 else "")
                    raise InvalidObservationError(
                        f"masks for action type {name!r} have {len(v)} entries{looks} but there are {len(seq)} actors; "
                        f"give one mask (or None) per actor, in the actors' order: masks={{{name}: [{form}]}}, each a list of "
                        f"the allowed choices or of booleans, one per choice"
                    )
                m[k] = v
            self._add_masks(m)
        return self

    def mask(self, action_type: Any, allowed: Any) -> Obs:
        """Mask a global decision (``@gl.global_decision``): one mask for the whole observation.

        Args:
            action_type: the global decision's type.
            allowed: a sequence of booleans (one per choice) or a collection of the allowed values
                (for a global select-entity: one boolean per candidate, or the allowed candidates).

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
        if isinstance(allowed, np.ndarray) and allowed.ndim != 1 and allowed.dtype != object:
            per = "one per candidate" if spec.kind.selects_entities else f"{spec.n} booleans, one per choice"
            raise InvalidObservationError(
                f"the mask of global decision {spec.name!r} must be one-dimensional ({per}), "
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
        """Observe global (non-entity) features: a dataclass instance, featurized like an entity.

        Raises:
            SchemaError: ``g`` is not an instance of a class that can be featurized (a dataclass or a
                class declared with ``gl.entity``).
        """
        if g is not None and type(g) not in _schema_cache:
            _globals_class(g)
        self._globals = g
        return self

    def metric(self, name: str, value: float) -> Obs:
        """Report a custom metric (e.g. at ``game_over``); it appears in ``batch.metrics[name]``.

        Raises:
            InvalidObservationError: ``name`` is not a non-empty string, or ``value`` is not a finite
                real number (a string such as ``'3'`` is not a number; NaN marks "no value" in a batch).
        """
        if type(name) is not str or not name:
            raise InvalidObservationError(
                f"Obs.metric: the metric name must be a non-empty string, got {name!r}; e.g. obs.metric('coins', 3)"
            )
        if type(value) is int and -(2**1000) < value < 2**1000:  # the common cases first (no ABC check)
            value = float(value)
        elif type(value) is not float or not math.isfinite(value):
            value = real_value(value, f"Obs.metric({name!r}, value)", "report a finite int or float")
        if self._metrics is None:
            self._metrics = {}
        self._metrics[name] = value
        return self

    # ------------------------------------------------------------------ reading
    def view(self) -> ObsView:
        """The observation as the library's builders read it: ``(actors, chunks, globals, masks,
        metrics, single)``, the containers themselves (no copies, one call), to be read, never changed.

        * ``actors``: the acting entities, in order (empty without actors);
        * ``chunks``: the entity sequences as observed, in order, each non-empty (the actors are
          not among them); one chunk may mix entity types (see :meth:`split_chunks_by_type`);
        * ``globals``: the object given to :meth:`globals`, or ``None``;
        * ``masks``: the masks as the game gave them, ``{action_type: [mask of actor 0, ...]}`` (a
          global decision's list holds one mask), or ``None`` when none was given;
        * ``metrics``: ``{name: value}`` reported with :meth:`metric`, or ``None``;
        * ``single``: built with :meth:`actor` (``act`` returns values, not lists).

        The same fields are the attributes ``view_actors``, ``view_chunks``, ``view_masks``,
        ``view_metrics`` and ``view_single`` (read them, never assign them), for loops over many
        observations where a method call per observation shows (the batch builder's).

        Example:
            >>> import gymloop as gl
            >>> from gymloop.games.snake import Food, Head
            >>> actors, chunks, g, masks, metrics, single = gl.Obs().entities([Food(1, 1)]).actor(Head(0, 0)).view()
            >>> actors, chunks, g, masks, metrics, single
            ((Head(x=0, y=0),), [[Food(x=1, y=1)]], None, None, None, True)
        """
        return self._actors, self._chunks, self._globals, self._masks, self._metrics, self._single

    def split_chunks_by_type(self) -> None:
        """Split every entity chunk that mixes types into one chunk per type (first appearance
        first), keeping the order of the objects within each type, as the batch builders need."""
        new: list[Sequence[Any]] = []
        for ch in self._chunks:
            first = type(ch[0])
            if all(type(o) is first for o in ch):
                new.append(ch)
                continue
            groups: dict[type, list[Any]] = {}
            for o in ch:
                groups.setdefault(type(o), []).append(o)
            new.extend(groups.values())
        self._chunks = new

    def entity_types(self) -> set[type]:
        """The classes of the actors and entities observed."""
        out = {type(x) for x in self._actors}
        for ch in self._chunks:
            out.update(map(type, ch))
        return out

    @property
    def has_entities(self) -> bool:
        """True when the observation holds an actor or an entity."""
        return bool(self._chunks or self._actors)

    @property
    def has_masks(self) -> bool:
        """True when a mask was given (to :meth:`actor`, :meth:`actors` or :meth:`mask`)."""
        return self._masks is not None

    @property
    def n_actors(self) -> int:
        """The number of actors."""
        return len(self._actors)

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
        else:
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


for _field in ("actors", "chunks", "masks", "metrics", "single"):  # the view_* aliases of the slots (see Obs.view)
    setattr(Obs, "view_" + _field, Obs.__dict__["_" + _field])
del _field


def no_actor_message(specs: Sequence[ActionSpec]) -> str:
    """Why an observation without actors cannot answer the actor-bound types among ``specs``."""
    bound = [s for s in specs if s.kind.actor_bound]
    how = "; ".join(
        f"{s.name} = gl.global_decision(gl.SelectEntity({s.name!r}, among={_among_text(s)}))" if s.kind.selects_entities
        else f"@gl.global_decision on class {s.name}"
        for s in bound
    )
    return (
        f"the observation has no actor, but action type(s) {[s.name for s in bound]} take one choice per actor; add "
        "actors with obs.actor(x) or obs.actors(xs), or make the type a global decision (one choice per observation, "
        f"no actor entity): {how}"
    )


def _among_text(spec: ActionSpec) -> str:
    names = [c.__name__ for c in spec.among]
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


def _type_name(k: Any) -> str:
    return str(getattr(k, "__name__", getattr(k, "name", k)))


def _mask_items(masks: Any) -> Any:
    if not isinstance(masks, Mapping):
        raise InvalidObservationError(
            f"masks must be a dict {{action_type: allowed}}, got {masks!r} of type {type(masks).__name__}; "
            "e.g. obs.actor(x, masks={Move: [Move.UP, Move.DOWN]})"
        )
    return masks.items()


def _globals_class(g: Any) -> None:
    try:
        schema_of(type(g))
    except SchemaError as e:
        raise SchemaError(
            f"Obs.globals expects an instance of a dataclass (or of a class declared with gl.entity), got {g!r} "
            f"of type {type(g).__name__}: {e}"
        ) from None


_REAL = (numbers.Real, np.bool_)
#: the largest finite float32, the dtype of every feature
FLOAT32_MAX = float(np.finfo(np.float32).max)


def real_value(v: Any, what: str, fix: str, limit: float | None = None) -> float:
    """``v`` as a finite float, or an :class:`InvalidObservationError` naming ``what``, ``v`` and ``fix``.

    Numbers are Python and numpy reals (``bool`` included) and 0-d numeric numpy arrays; strings
    such as ``'3'`` are not numbers (nothing is coerced). With ``limit``, ``|v|`` must not exceed it
    (features are float32: a larger value would become infinite).
    """
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "biuf":
        v0: Any = v[()]
    else:
        v0 = v
    if not isinstance(v0, _REAL):
        raise InvalidObservationError(
            f"{what} must be a number, got {v!r} of type {type(v).__name__}; {fix}"
        )
    try:
        f = float(v0)
    except OverflowError:
        raise InvalidObservationError(
            f"{what} must be a finite number, got an int of about 10**{int(math.log10(abs(v0)))}, too large for "
            f"a float; {fix}"
        ) from None
    if not math.isfinite(f):
        raise InvalidObservationError(f"{what} must be a finite number, got {v!r}; {fix}")
    if limit is not None and abs(f) > limit:
        raise InvalidObservationError(
            f"{what} is {v!r}, beyond the float32 range (±{limit:.3g}) it is stored in; {fix}"
        )
    return f


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
    if isinstance(raw, np.ndarray):
        if raw.ndim != 1:
            raise InvalidObservationError(
                f"mask for action type {spec.name!r} must be one-dimensional (one boolean per "
                f"{'candidate' if candidates is not None else 'choice'}), got an array of shape {raw.shape}; "
                "several actors take one mask each (obs.actors(xs, masks={T: [mask0, mask1, ...]}))"
            )
        if raw.dtype != np.bool_ and raw.dtype != object:
            raise InvalidObservationError(
                f"mask for action type {spec.name!r} must be a boolean array, got dtype {raw.dtype}; convert it "
                "with mask.astype(bool), or give a collection of the allowed values"
            )
    elif isinstance(raw, (str, bytes)):
        raise InvalidObservationError(
            f"mask for action type {spec.name!r} must be booleans or a collection of allowed values, got the string "
            f"{raw!r}; choices are values such as {spec.name}.X (not their labels)"
            if candidates is None else
            f"mask for select-entity action {spec.name!r} must be booleans or a collection of candidate objects, "
            f"got the string {raw!r}"
        )
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
                raise InvalidObservationError(_bad_mask_value(spec, a)) from None
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


def _bad_mask_value(spec: ActionSpec, a: Any) -> str:
    """Why ``a`` cannot be in a mask of ``spec``, and what to write instead."""
    values = [_value_name(v) for v in spec.values]
    shown = values if len(values) <= 8 else [*values[:8], "..."]
    takes = f"masks take the values of {spec.name}, e.g. [{', '.join(shown[:2])}]"
    if isinstance(a, str):
        if a in spec.labels:
            return (f"mask for action type {spec.name!r} allows the string {a!r}, but {takes}, not their labels as "
                    f"strings: write {values[spec.labels.index(a)]} instead of {a!r} (the choices: {', '.join(shown)})")
        return f"mask for action type {spec.name!r} allows the string {a!r}; {takes} (the choices: {', '.join(shown)})"
    hint = ""
    if isinstance(a, (int, float, np.integer, np.floating)):
        hint = "; a boolean mask must hold bools (True/False), not numbers"
    return (f"mask for action type {spec.name!r} allows {a!r}, which is not one of its choices [{', '.join(shown)}]; "
            f"{takes}{hint}")


def _value_name(v: Any) -> str:
    """How a user writes a choice: ``Move.UP`` for an Enum member, else its repr."""
    if isinstance(v, Enum):
        return f"{type(v).__name__}.{v.name}"
    return repr(v)


#: episodes in a row that a game may end without asking one decision before it is stopped (a game
#: that never asks would otherwise keep its caller waiting forever)
EMPTY_EPISODES = 1000


def empty_episodes_error(where: str) -> EnvStateError:
    """The error of a game that ended :data:`EMPTY_EPISODES` episodes in a row without a decision."""
    return EnvStateError(f"{where}: the game ended {EMPTY_EPISODES} episodes in a row without asking for a decision "
                         "(agent.act); an episode must ask at least once. Check the game's start conditions "
                         "(e.g. an option such as lives=0 that ends every episode at once)")


def check_score(score: Any, where: str = "") -> float:
    """A score as a float: a finite real number within float32's range, the dtype of rewards (an
    :class:`InvalidObservationError` otherwise)."""
    if (type(score) is float or type(score) is int) and -FLOAT32_MAX <= score <= FLOAT32_MAX:
        return float(score)  # (NaN fails the comparison; bool is not int here: it takes the path below)
    return real_value(
        score, f"{where}the observation's score", "pass gl.Obs(score=...) a finite int or float (nothing is coerced)",
        limit=FLOAT32_MAX,
    )


# ---------------------------------------------------------------------- checked features and scores
# A float64 feature vector whose sum of squares is at most this has every value finite and within
# the float32 range (|x| <= sqrt(q) < FLOAT32_MAX): one BLAS dot product checks both (np.vdot: it
# returns inf on overflow without a RuntimeWarning, and NaN propagates).
_SQ_LIMIT = FLOAT32_MAX * FLOAT32_MAX * 0.99
_FEATURE_FIX = "set it to a finite int, float or bool (convert text with float(...); nothing is coerced)"


def checked_features(sc: EntitySchema, objs: Sequence[Any], where: Callable[[int], str]) -> np.ndarray:
    """The features of ``objs`` (objects of ``sc``'s class) as ``(len(objs), n_features)`` float32.

    Every value must be a real number (Python or numpy; ``bool`` included; strings and ``None`` are
    not numbers: nothing is coerced), finite and within float32's range. The fast path converts the
    flat list once and proves finiteness and range with one dot product; only when that fails are
    the objects read one by one, to name the first bad one. ``where(i)`` says where object ``i`` is
    (``"env 3 (slot 5)"``); it is called only to word an error.

    Raises:
        InvalidObservationError: an object lacks a feature field, or a value is not a finite number
            within float32 (the message names the entity type, the object, the feature and ``where``).
    """
    nf = len(sc.features)
    n = len(objs)
    if not n:
        return np.zeros((0, nf), dtype=np.float32)
    try:
        flat = sc.flat(objs)
        raw = np.array(flat)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return _checked_features_slow(sc, objs, where)
    # numbers only (a string or an object makes another dtype), and for floats one dot product
    # proving every value finite and within float32 (only then-not is checked value by value)
    k = raw.dtype.kind
    if raw.shape != (n * nf,) or not (k in "biu" or (k == "f" and np.vdot(raw, raw) <= _SQ_LIMIT)):
        return _checked_features_slow(sc, objs, where)
    out = raw.astype(np.float32)
    return out[None] if n == 1 else out.reshape(n, nf)


def _checked_features_slow(sc: EntitySchema, objs: Sequence[Any], where: Callable[[int], str]) -> np.ndarray:
    """Slow path after the fast one refused: name the object, its field and where it is, or (all
    values being numbers after all, e.g. ints beyond int64) return the features."""
    nf = len(sc.features)
    out = np.empty((len(objs), nf), dtype=np.float32)
    for i, o in enumerate(objs):
        at = where(i)
        for f in sc.fields:
            if not hasattr(o, f):
                raise InvalidObservationError(
                    f"entity type {sc.name!r}: object {o!r} in {at} has no field {f!r}; every object of a type "
                    "must have every feature field"
                )
        try:
            vals = sc.flat([o])
        except Exception as e2:
            raise InvalidObservationError(
                f"entity type {sc.name!r}: cannot featurize {o!r} in {at}: {type(e2).__name__}: {e2}; "
                "every feature must be a number (an Enum field must hold one of its members)"
            ) from None
        for j, v in enumerate(vals):
            if type(v) is float and not math.isfinite(v) or isinstance(v, np.floating) and not np.isfinite(v):
                raise InvalidObservationError(
                    f"entity type {sc.name!r}, feature {sc.features[j]!r} is {v} in {at}; features must be finite numbers"
                )
            if not isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
                if not (isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "biuf"):
                    raise InvalidObservationError(
                        f"entity type {sc.name!r}: cannot featurize {o!r} in {at}: feature {sc.features[j]!r} "
                        f"must be a number, got {v!r} of type {type(v).__name__}; {_FEATURE_FIX}"
                    )
            out[i, j] = real_value(
                v, f"entity type {sc.name!r}, feature {sc.features[j]!r} of {o!r} in {at}", _FEATURE_FIX, FLOAT32_MAX
            )
    return out


def checked_score(v: Any, prefix: str) -> float:
    """A score as a float, checked as a batch checks it (a finite real number within float32's
    range; ``prefix`` starts the error message, e.g. ``"slot 3: "``)."""
    if isinstance(v, (float, np.floating)) and not math.isfinite(v):
        raise InvalidObservationError(f"{prefix}the score is not finite ({v}); the score must be a finite number")
    return check_score(v, prefix)
