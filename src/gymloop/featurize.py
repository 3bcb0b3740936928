"""One observation → network or batch inputs, checked as a :class:`~gymloop.VecEnv` checks them.

Every observation taken one at a time goes through :class:`OneObsBuilder`: the neural agent's
(:class:`~gymloop.neural.ObsEncoder`, bound to a checkpoint's types by name), traces and ``gl.run``'s
checks (:class:`OneSlotFeaturizer`, bound to the game's growing :class:`~gymloop.spaces.Spaces`).
It gathers the objects per entity type (actors first within a type, then the entities in observation
order, a chunk mixing types split by type), featurizes them with :func:`checked_features` (the one
featurization with checks, which the batch builder uses too: finite numbers within float32, nothing
coerced), locates the actors and the candidates of select-entity actions, and validates the masks
(shape and values, a legal choice for every actor, no mask for a type not asked); a *binding* says
which game class feeds which type (:class:`EntityBinding`) and how an action type maps on the
inputs' (:class:`ActionBinding`): :class:`SpaceBinding` for a game's spaces, the neural agent's
:class:`~gymloop.neural.ObsEncoder` for a checkpoint.

:class:`OneSlotFeaturizer` lays one decision out exactly as a :class:`~gymloop.VecEnv` batch holds it
(``BatchBuilder(spaces, 1).build([obs], [types])``, checked by a property test), so a trace recorded
from ``gl.run`` and one collected by a ``VecEnv`` hold the same numbers, and an observation that
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

import enum
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import numpy as np

from .batch import Batch
from .errors import InvalidObservationError, SchemaError
from .kinds import ActionKind
from .obs import FLOAT32_MAX, Obs, check_score, checked_features, checked_score, mask_vector, no_actor_message
from .runtime.builder import one_slot_batch
from .schema import EntitySchema, name_clash_message
from .spaces import DeclaredTypes, Spaces

__all__ = [
    "MISSING", "ActionBinding", "EntityBinding", "ObsValidator", "OneObs", "OneObsBuilder", "OneSlotFeaturizer", "SpaceBinding",
    "checked_features", "checked_score",
]

_F32 = np.float32
_FLOAT64_MAX = float(np.finfo(np.float64).max)
#: :meth:`OneObsBuilder.parts`'s joint check: a sum of squares at most this has every value finite
#: and at most 2**53 in magnitude (float64 holds every int there exactly, so the joint float64
#: array rounds to the float32 that each type's own array gives)
_JOINT_LIMIT = float(2**106)
#: ``[r]`` for each row ``r`` a single actor commonly has, read-only (:data:`OneObs`'s ``actor_rows``)
_ONE_ROW = tuple(np.array([r], dtype=np.intp) for r in range(1024))
for _a in _ONE_ROW:
    _a.flags.writeable = False
del _a


# ---------------------------------------------------------------------- bindings
class EntityBinding:
    """How one game class feeds one entity type of the inputs.

    Attributes:
        t: the type's index (network or space order); ``name`` its name; ``schema`` the class's
            :class:`~gymloop.schema.EntitySchema`; ``nf`` the class's feature count.
        cols: the class's columns of the type's features (``None``: all, in order).
        featureless: the inputs take the type's row count, not its features.
    """

    __slots__ = ("t", "name", "schema", "nf", "cols", "featureless")

    def __init__(self, t: int, name: str, schema: EntitySchema, cols: np.ndarray | None, featureless: bool) -> None:
        self.t = t
        self.name = name
        self.schema = schema
        self.nf = len(schema.features)
        self.cols = cols
        self.featureless = featureless


class ActionBinding:
    """How one game action type maps onto an action type of the inputs.

    Attributes:
        name, kind, key, spec: the action type's name, kind, the key ``act`` is asked with and its
            :class:`~gymloop.actions.ActionSpec`.
        perm: the game's choice of each of the inputs' choices (categorical); ``identity`` when
            they are the same; ``values`` the inputs' choices as game values.
        selects: the kind selects entities; then ``among_t`` and ``among_cls`` are the entity types
            whose objects are candidates and their game classes, and ``partial`` says that some of
            the game's candidate classes are not.
    """

    __slots__ = ("name", "kind", "key", "spec", "perm", "values", "identity", "selects", "among_t", "among_cls", "partial")

    def __init__(self, name: str, kind: ActionKind, key: Any, spec: Any) -> None:
        self.name = name
        self.kind = kind
        self.key = key
        self.spec = spec
        self.perm: np.ndarray | None = None
        self.values: list[Any] = []
        self.identity = True
        self.selects = kind.selects_entities
        self.among_t: list[int] = []
        self.among_cls: list[type] = []
        self.partial = False


class _Missing(enum.Enum):
    """The type of the "not bound yet" sentinel (``None`` is a binding: a class not fed)."""

    MISSING = enum.auto()


#: the "not bound yet" sentinel of the binding caches (``None`` is a binding: a class not fed)
MISSING: Final = _Missing.MISSING


#: One observation's inputs, as :meth:`OneObsBuilder.one` gives them (a plain tuple: it is made
#: once per decision): ``(per, parts, globals, starts, actor_rows, asked, masks)``.
#:
#: * ``per``: per entity type (the binding's order) its objects, actors first, or ``None`` when absent;
#: * ``parts``: per present type ``(type index, (n, n_features) float32 checked features in the
#:   binding's columns)``, or ``(type index, n)`` for a featureless type;
#: * ``globals``: the global features in the binding's columns, ``(n_globals,)`` float32, or ``None``;
#: * ``starts``: each type's first row in the observation's sequence (the present types' objects
#:   one type after another, in the binding's order);
#: * ``actor_rows``: ``(n_actors,)`` intp, each actor's row in that sequence (read it, never write it:
#:   a single actor's is shared);
#: * ``asked``: per asked action type its :class:`ActionBinding`;
#: * ``masks``: per asked action type its validated mask, ``(n_rows, n)`` bool in the binding's
#:   choice order (one row per actor, one for a global decision; select-entity: one column per
#:   candidate), or ``None`` when the observation gave none (every choice legal).
OneObs = tuple[
    list["list[Any] | None"], list[tuple[int, Any]], "np.ndarray | None", list[int], np.ndarray, list[ActionBinding],
    list["np.ndarray | None"],
]


def _joint_features(present: list[tuple[int, list[Any], EntityBinding]]) -> list[np.ndarray] | None:
    """Every present type's features ``(n, n_features)`` float32, converted and checked together
    (one array, one dot product), or ``None`` when the joint check refuses (a value that is not a
    number, not finite, or beyond 2**53 in magnitude: see :data:`_JOINT_LIMIT`)."""
    flat: list[Any] = []
    try:
        for _, lst, b in present:
            flat += b.schema.flat(lst)
        raw = np.array(flat)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None
    k = raw.dtype.kind
    # (every object gives its feature count of values: a value that is a sequence shows in the shape)
    if raw.shape != (len(flat),) or not (k in "biu" or (k == "f" and np.vdot(raw, raw) <= _JOINT_LIMIT)):
        return None
    arr = raw.astype(_F32)
    out = []
    i = 0
    for _, lst, b in present:
        n = len(lst)
        j = i + n * b.nf
        out.append(arr[i:j].reshape(n, b.nf))
        i = j
    return out


class OneObsBuilder:
    """The single-observation builder: one observation → :data:`OneObs`, checked like a batch.

    A subclass binds game classes (:meth:`bind_entity`, :meth:`bind_action`,
    :meth:`globals_binding`); the bindings are cached per class in :attr:`ents` and :attr:`acts`.

    Args:
        names: the names of the inputs' entity types, in order.
        slot: how messages name the observation's slot (``"slot 0"``), or ``""``.
        where: how messages place an object (``"env 0 (slot 0)"``, ``"the observation"``).
    """

    def __init__(self, names: Sequence[str], slot: str, where: str) -> None:
        self.names = list(names)
        self.T = len(self.names)
        self.ents: dict[type, EntityBinding | None] = {}
        self.acts: dict[Any, ActionBinding] = {}
        self.slot = slot
        self.prefix = f"{slot}: " if slot else ""
        self._at: Callable[[int], str] = lambda i: where
        #: whether the inputs take global features (else :meth:`globals_binding` is not asked)
        self.takes_globals = True

    # ------------------------------------------------------------------ the binding (subclasses)
    def bind_entity(self, cls: type) -> EntityBinding | None:
        """The binding of a game class (``None``: the inputs do not take it); cached in :attr:`ents`."""
        raise NotImplementedError

    def bind_action(self, key: Any) -> ActionBinding:
        """The binding of an action type; cached in :attr:`acts`."""
        raise NotImplementedError

    def globals_binding(self, g: Any) -> tuple[EntitySchema, np.ndarray | None] | None:
        """The schema of the observation's globals ``g`` and its columns the inputs take (``None``:
        all), or ``None`` when the inputs take no globals."""
        raise NotImplementedError

    def unknown_actor(self, cls: type) -> NoReturn:
        """An actor's class is not bound (:meth:`bind_entity` gave ``None``)."""
        raise InvalidObservationError(f"{self.prefix}an actor is of class {cls.__qualname__}, which is not an entity type of the inputs")

    # ------------------------------------------------------------------ one observation
    def one(self, obs: Obs, action_types: Sequence[Any]) -> OneObs:
        """The inputs of ``obs`` asked for ``action_types`` (:data:`OneObs`), every value and mask checked.

        Raises:
            InvalidObservationError: no actor for an actor-bound type, a bad feature, global
                feature or mask (or one for a type not asked), no legal choice, no candidate.
        """
        actors, chunks, glob, masks, _, _ = obs.view()
        acts = self.acts
        asked = []
        for k in action_types:
            ab = acts.get(k)
            asked.append(ab if ab is not None else self.bind_action(k))
        if not actors and any(ab.kind.actor_bound for ab in asked):
            raise InvalidObservationError(self.prefix + no_actor_message([ab.spec for ab in asked]))
        per, binds, actor_loc = self.gather(actors, chunks)
        parts, starts = self.parts(per, binds)
        if len(actor_loc) == 1 and (r := starts[actor_loc[0][0]] + actor_loc[0][1]) < len(_ONE_ROW):
            rows = _ONE_ROW[r]  # (the common single actor: no numpy call)
        else:
            rows = np.array([starts[t] + r for t, r in actor_loc], dtype=np.intp)
        g = self.globals_of(glob) if self.takes_globals else None
        out_masks: list[np.ndarray | None] = [None] * len(asked)
        if masks is not None:
            out_masks = [self.mask(obs, masks, ab) for ab in asked]
            unknown = [k for k in masks if k not in action_types]
            if unknown:
                raise InvalidObservationError(
                    f"{self.prefix}the observation has masks for {unknown!r}, which act() was not asked for "
                    f"(asked: {list(action_types)!r}); a mask must belong to a requested action type"
                )
        for ab in asked:
            if ab.selects and not any(per[t] for t in ab.among_t):
                self.no_candidate(ab)
        return per, parts, g, starts, rows, asked, out_masks

    def gather(self, actors: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> tuple[list, list, list[tuple[int, int]]]:
        """Objects per entity type (actors first, then chunk after chunk, a mixed chunk split by
        type), their bindings, and each actor's ``(type, rank)``. Classes not bound are skipped
        (an actor's is an error)."""
        per: list[list[Any] | None] = [None] * self.T
        binds: list[EntityBinding | None] = [None] * self.T
        ents = self.ents
        actor_loc = []
        for x in actors:
            c = type(x)
            b = ents.get(c, MISSING)
            if b is MISSING:
                b = self.bind_entity(c)
            if b is None:
                self.unknown_actor(c)
            t = b.t
            lst = per[t]
            if lst is None:
                lst = per[t] = []
                binds[t] = b
            elif binds[t] is not b:
                self._two_classes(binds[t], b)
            actor_loc.append((t, len(lst)))
            lst.append(x)
        for chunk in chunks:
            if not chunk:  # a list the game emptied after observing it
                continue
            # a chunk mixing types is taken object by object (the order within each type is kept)
            for ch in (chunk,) if len(chunk) == 1 or len(set(map(type, chunk))) == 1 else [[o] for o in chunk]:
                c = type(ch[0])
                b = ents.get(c, MISSING)
                if b is MISSING:
                    b = self.bind_entity(c)
                if b is None:
                    continue
                t = b.t
                lst = per[t]
                if lst is None:
                    per[t] = list(ch)
                    binds[t] = b
                elif binds[t] is b:
                    lst += ch
                else:
                    self._two_classes(binds[t], b)
        return per, binds, actor_loc

    @staticmethod
    def _two_classes(a: Any, b: EntityBinding) -> NoReturn:  # (a: the binding already in the slot of b.t)
        raise InvalidObservationError(name_clash_message(a.schema.cls, b.schema.cls, a.name, " in one observation"))

    def parts(self, per: list, binds: list) -> tuple[list[tuple[int, Any]], list[int]]:
        """Per present type ``(t, checked features (n, n_features) float32 in the binding's columns)``,
        or ``(t, n)`` for a featureless type; and each type's first row in the observation's
        sequence (the types' objects one type after another).

        Every type's features are converted and checked together (one array, one dot product);
        when that refuses, type by type (:func:`checked_features`, which names the bad value). The
        numbers are those :func:`checked_features` gives type by type: the joint check admits
        floats only up to 2**53 in magnitude, where a float64 holds every int exactly.
        """
        starts: list[int] = []
        present = []
        o = 0
        for t, lst in enumerate(per):
            starts.append(o)
            if lst is not None:
                o += len(lst)
                present.append((t, lst, binds[t]))
        arrays = _joint_features(present)
        if arrays is None:  # type by type: checked_features names the first bad value
            at = self._at
            arrays = [checked_features(b.schema, lst, at) for _, lst, b in present]
        out: list[tuple[int, Any]] = []
        for (t, lst, b), arr in zip(present, arrays):
            if b.featureless:
                out.append((t, len(lst)))
            elif b.cols is None:
                out.append((t, arr))
            else:
                out.append((t, arr[:, b.cols]))
        return out, starts

    def globals_of(self, g: Any) -> np.ndarray | None:
        """The checked global features of ``g`` in the binding's columns, or ``None``."""
        bound = self.globals_binding(g)
        if bound is None:
            return None
        sc, cols = bound
        arr = checked_features(sc, (g,), self._at)[0]
        return arr if cols is None else arr[cols]

    def mask(self, obs: Obs, masks: dict[Any, list[Any]], ab: ActionBinding) -> np.ndarray | None:
        """The validated ``(n_rows, n)`` mask of one asked action type in the binding's choice order
        (``None``: the observation gave none). Checked as a batch checks it: each mask's shape and
        values (:func:`~gymloop.obs.mask_vector`), then a legal choice for every row."""
        raw_list = masks.get(ab.key)
        if raw_list is None:
            return None
        spec = ab.spec
        kind = ab.kind
        cands = obs.entities_of(spec.among) if kind.selects_entities else None
        n = len(cands) if cands is not None else spec.n
        m = np.ones((len(raw_list), n), dtype=bool)
        for i, raw in enumerate(raw_list):
            if raw is None:
                continue
            try:
                m[i] = mask_vector(raw, spec, n, cands)
            except InvalidObservationError as e:
                who = f"actor {i}" if kind.actor_bound else "the observation"
                raise InvalidObservationError(f"{self.slot + ', ' if self.slot else ''}{who}: {e}") from None
        if not n and kind.selects_entities:
            return m  # no candidate at all: said by one()
        bad = ~m.any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            who = f"an actor of {self.slot} (env 0)" if self.slot else f"actor {i}"
            raise InvalidObservationError(
                f"action type {ab.name!r}: {who} has a mask that leaves no legal choice; every mask must allow at least one choice"
            )
        return self.inputs_mask(obs, ab, m)

    def inputs_mask(self, obs: Obs, ab: ActionBinding, m: np.ndarray) -> np.ndarray:
        """The game's validated mask ``m`` in the inputs' choice order (here: as it is; a checkpoint's
        binding reorders labels and drops candidates it does not know)."""
        return m

    def no_candidate(self, ab: ActionBinding) -> NoReturn:
        """A select-entity action asked with no candidate among the bound types."""
        of = f" of {self.slot}" if self.slot else ""
        names = tuple(self.names[t] for t in ab.among_t)
        raise InvalidObservationError(
            f"select-entity action {ab.name!r}: the actor{of} has no candidate (no entity of type {names} was "
            "observed); observe at least one candidate or do not ask for this action type"
        )



# ---------------------------------------------------------------------- bound to a game's spaces
class SpaceBinding(OneObsBuilder):
    """The single-observation builder bound to a :class:`~gymloop.spaces.Spaces`: every class of
    its entity types with all its features, every action type as it is; :meth:`batch` lays the
    result out as a one-slot :class:`~gymloop.batch.Batch` (what ``BatchBuilder(spaces, 1)``
    builds). Messages name slot 0 and env 0, as a one-env ``VecEnv``'s do."""

    def __init__(self, sp: Spaces) -> None:
        super().__init__([s.name for s in sp.entity_schemas], "slot 0", "env 0 (slot 0)")
        self.spaces = sp
        self.takes_globals = sp.globals_schema is not None
        for t, sc in enumerate(sp.entity_schemas):
            self.ents[sc.cls] = EntityBinding(t, sc.name, sc, None, False)
        tindex = sp.entity_index
        for spec in sp.action_specs:
            ab = ActionBinding(spec.name, spec.kind, spec.key, spec)
            ab.values = list(spec.values)
            if spec.kind.selects_entities:
                ab.among_cls = list(spec.among)
                ab.among_t = [tindex[c] for c in spec.among]
            self.acts[spec.key] = ab

    def bind_entity(self, cls: type) -> EntityBinding | None:
        raise InvalidObservationError(
            f"entity type {cls.__qualname__!r} is not in the observation space (its types: {self.names})"
        )

    def bind_action(self, key: Any) -> ActionBinding:
        raise InvalidObservationError(
            f"action type {getattr(key, '__name__', key)!r} is not in the action space (its types: "
            f"{[s.name for s in self.spaces.action_specs]})"
        )

    def globals_binding(self, g: Any) -> tuple[EntitySchema, np.ndarray | None] | None:
        gs = self.spaces.globals_schema
        if gs is None:  # (not asked then: takes_globals is False)
            return None
        if g is None or type(g) is not gs.cls:
            raise InvalidObservationError(
                f"slot 0: the observation space has globals of type {gs.name!r} but the observation gave {g!r}; call "
                f"obs.globals({gs.name}(...)) on every observation"
            )
        return gs, None

    def batch(self, r: OneObs) -> Batch:
        """The one-slot batch of :meth:`one`'s result (zero reward, no ends, no metrics), laid out
        by :func:`~gymloop.runtime.builder.one_slot_batch` beside the many-slot builder."""
        return one_slot_batch(self, r)

    def check_entities(self, obs: Obs) -> None:
        """Check the entities and globals of an observation without a decision (``game_over``'s):
        globals of another class than the space's (or none) are not checked."""
        actors, chunks, g, *_ = obs.view()
        per, binds, _ = self.gather(actors, chunks)
        self.parts(per, binds)
        gs = self.spaces.globals_schema
        if gs is not None and type(g) is gs.cls:
            checked_features(gs, (g,), self._at)


class OneSlotFeaturizer:
    """One observation → a one-slot :class:`Batch`, laid out and checked as a ``VecEnv`` batch.

    The spaces are the game's declared types plus every type seen so far; they grow when an
    observation brings a new type (a trace re-lays out its earlier decisions when it is built).

    Args:
        declared: ``(entity classes, globals class, action types)`` declared on the game
            (:func:`~gymloop.spaces.declared_types`), or ``None``.
        late_globals: accept globals that appear after observations without them (the
            validator's case); a trace refuses them (its earlier decisions have no globals).

    Attributes:
        space: the spaces of the last batch built (``None`` before the first).
        binding: the :class:`SpaceBinding` of ``space``.
    """

    def __init__(self, declared: DeclaredTypes | None, late_globals: bool = False) -> None:
        self.late_globals = late_globals
        e, g, a = declared if declared else ([], None, [])
        self.ents: set[type] = set(e)
        self.glob: type | None = g
        self.acts: list[Any] = list(a)
        self.known: set[Any] = set()
        self.space: Spaces | None = None
        self.binding: SpaceBinding | None = None

    def batch(self, obs: Obs, types: tuple) -> tuple[Batch, Spaces]:
        """The one-slot batch of ``obs`` asked for ``types``, and the spaces it is laid out in.

        Raises:
            InvalidObservationError: ``obs`` is not a ``gl.Obs``, brings globals when the earlier
                observations had none, or fails a batch's checks.
        """
        if type(obs) is not Obs:
            raise InvalidObservationError(f"act expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        b = self.binding_for(obs, types)
        checked_score(obs.score, "slot 0: ")
        return b.batch(b.one(obs, types)), b.spaces

    def binding_for(self, obs: Obs, types: Sequence[Any] = ()) -> SpaceBinding:
        """The binding of spaces that hold every type of ``obs`` and ``types`` (grown when one is new)."""
        known = self.known
        ents = obs.entity_types()
        g = obs.global_features
        gcls = type(g) if g is not None else None
        new = [c for c in ents if c not in known] + [t for t in types if t not in known]
        if gcls is not None and gcls not in known:
            new.append(gcls)
        if new or self.binding is None:
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
            self.binding = SpaceBinding(sp)
        return self.binding


class ObsValidator:
    """Checks observations one at a time with the batch builder's checks (``gl.run`` uses it).

    Each observation goes through the single-observation builder bound to the game's spaces (a
    :class:`OneSlotFeaturizer`'s), so it is refused exactly where a :class:`~gymloop.VecEnv` would refuse it: entity, globals and action
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

    def _binding(self, obs: Obs, action_types: Sequence[Any] = ()) -> SpaceBinding:
        g = obs.global_features
        if g is not None and type(g) is not self.glob:
            if self.glob is not None:
                raise InvalidObservationError(
                    f"the observation's globals are a {type(g).__qualname__}, but earlier observations gave a "
                    f"{self.glob.__qualname__}; a game uses one globals class"
                )
            self.glob = type(g)
        return self.featurizer.binding_for(obs, action_types)

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
        b = self._binding(obs, action_types)
        checked_score(obs.score, "slot 0: ")
        b.one(obs, action_types)

    def _cheap(self, obs: Obs, action_types: Sequence[Any]) -> bool:
        """The cheap checks after the first decisions: True when the score and every feature are
        numbers with a finite sum of magnitudes within float32, every type is known and no
        observation-level mask is set; False sends the observation through the full checks (which
        name the problem). Masks of actors are checked against the agent's answer by ``gl.run``."""
        b = self.featurizer.binding
        if b is None or obs.has_masks:
            return False
        aindex = b.spaces.action_index
        for t in action_types:
            if t not in aindex:
                return False
        return self._cheap_values(b, obs)

    def _cheap_values(self, b: SpaceBinding, obs: Obs) -> bool:
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
        b = self.featurizer.binding
        if self.decisions > self.full_checks and b is not None and self._cheap_values(b, obs):
            return
        self._binding(obs).check_entities(obs)
