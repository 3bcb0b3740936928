"""The batch format: a struct of numpy arrays describing one decision of every slot.

A *slot* is one agent in one game copy: ``num_envs * agents_per_game`` slots, slot
``env * agents_per_game + agent``. Every array has a fixed dtype.

Entities are ragged. For each entity type ``name``:

* ``entities[name]``: ``(total, n_features)`` float32, rows grouped by slot (slot 0's first);
* ``counts[name]``: ``(num_slots,)`` int64, how many rows each slot has.

Within one slot, entities are numbered (the *entity index* of that slot) type by type in the order
of ``obs_space.entities``; within one type, actors come first, then entities in observation order.

For each action type ``name`` the actors are listed in slot order:

* ``actor_slot[name]``: ``(n_actors,)`` int64, the slot of each actor;
* ``actor_index[name]``: ``(n_actors,)`` int64, the actor's entity index within its slot;
* categorical: ``masks[name]`` ``(n_actors, n_choices)`` bool (all True when the game set no mask);
* global decision (``global_categorical``, one choice per observation): one row per slot that
  asked for it, ``actor_index`` ``-1`` (no actor entity), ``masks[name]`` ``(n_rows, n_choices)``;
* select-entity: ``num_candidates[name]`` ``(n_actors,)`` int64 and ``masks[name]``
  ``(num_candidates.sum(),)`` bool, actor after actor; ``candidate_index(name)`` gives each
  candidate's entity index within the actor's slot;
* global select-entity (``global_select_entity``, one entity chosen per observation): the rows of
  a global decision (one per slot that asked for it, ``actor_index`` ``-1``) with the candidates
  and masks of a select-entity action, row after row.

Per slot: ``reward`` float32, ``terminated`` / ``truncated`` bool (the episode that ended since the
last batch; the slot's entities already belong to the next episode), ``active`` bool (False when a
slot of a multi-agent game has no decision to take this step), ``globals`` ``(num_slots, n)``
float32, and ``metrics[name]`` float64 with NaN where a slot reported nothing. Built-in metrics:
``episode_return`` and ``episode_length`` at the end of each episode.

``final`` (or ``None``): for slots whose episode was *truncated* since the last batch and whose
game passed a full observation to ``game_over``, that observation's entities and global features
(counts are zero for the other slots, ``active`` marks the slots that have one; no actors). A
trainer bootstraps the truncated episode's return from its value.

**Aliasing.** Every array of a batch is newly allocated for that batch; nothing is overwritten by a
later ``step``, so a trainer may keep batches in a rollout buffer without copying.

**The layout** is one table, :data:`FIELDS`: each :class:`Field` names an attribute, what indexes its
rows (slot, entity row, actor, select-entity candidate), what keys it (entity type, action type) and
its dtype. Empty batches, :meth:`Batch.concat` (the shards of one step), :func:`stack` (independent
batches, slots renumbered), :func:`take` (some slots), :func:`relayout` (the types of other spaces),
:class:`SlotRanges` (one slot), the worker's flat arrays (:meth:`Batch.to_flat`), the trace file's
tensors (:meth:`Batch.to_tensors`) and the comparisons (:meth:`Batch.equal`) all read it: a new
field is one row of the table, one attribute of :class:`Batch`, and the builders that fill it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .spaces import Spaces

__all__ = [
    "ACTION_TYPE", "ACTOR", "CANDIDATE", "CHOICE", "ENTITY_TYPE", "FIELDS", "ROW", "SELECT_TYPE", "SLOT",
    "Batch", "Field", "SlotRanges", "relayout", "stack", "take",
]

# What indexes the first axis of a field's arrays.
SLOT = "slot"  # one row per slot
ROW = "row"  # one row per entity (rows of ``entities[type]``, slot after slot)
ACTOR = "actor"  # one row per actor of an action type (the rows of ``actor_slot[name]``; a global kind: per deciding slot)
CANDIDATE = "candidate"  # one row per candidate of a select-entity action type, actor after actor
CHOICE = "choice"  # ACTOR rows, or CANDIDATE rows when the action type selects entities (the masks)

# What keys a field's dict (``None``: the field is one array).
ENTITY_TYPE = "entity type"
ACTION_TYPE = "action type"
SELECT_TYPE = "select-entity action type"  # actor-bound or global


@dataclass(frozen=True)
class Field:
    """One entry of the batch layout (:data:`FIELDS`): an array, or one array per type, of a :class:`Batch`.

    Attributes:
        name: the :class:`Batch` attribute (and the trace file's tensor name, ``name/<type>`` per type).
        index: what indexes the first axis (``"slot"``, ``"row"``, ``"actor"``, ``"candidate"``, or
            ``"choice"``: actors, candidates for a select-entity action type).
        per: ``None`` (one array, slot-indexed), or what keys its dict: ``"entity type"``,
            ``"action type"`` or ``"select-entity action type"``. Every dict of a batch lists its
            types in the order of the spaces (``obs.entities``, ``actions``).
        dtype: the arrays' dtype.
        width: the shape after the first axis for the given spaces and type (``None``: ``()``).
        values: ``"slot"`` when the values are slot numbers (renumbered by :func:`stack` and
            :func:`take`), ``"row"`` when they are entity indices within the slot (``-1``: none;
            renumbered by :func:`relayout`), else ``None``.
        saved: whether trace files keep it (the others load as zeros).
    """

    name: str
    index: str
    per: str | None
    dtype: np.dtype
    width: Callable[[Spaces, str], tuple[int, ...]] | None = None
    values: str | None = None
    saved: bool = True

    def shape(self, spaces: Spaces, key: str) -> tuple[int, ...]:
        """The shape after the first axis of this field's array for ``key`` (a type name or ``""``)."""
        return self.width(spaces, key) if self.width is not None else ()


def _features(sp: Spaces, key: str) -> tuple[int, ...]:
    return (len(sp.obs.entities[key]),)


def _globals(sp: Spaces, key: str) -> tuple[int, ...]:
    return (len(sp.obs.globals),)


def _choices(sp: Spaces, key: str) -> tuple[int, ...]:
    d = sp.actions[key]
    return d.kind.empty_masks(d.n).shape[1:]  # (the kind owns its masks' shape)


_I64, _F32, _BOOL = np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.bool_)

#: The batch layout, in dependency order: ``counts`` number the rows, ``actor_slot`` the actors and
#: ``num_candidates`` the candidates of the fields after them. Every operation on batches (empty
#: batches, :meth:`Batch.concat`, :func:`stack`, :func:`take`, :func:`relayout`, :class:`SlotRanges`,
#: the worker's flat arrays, the trace file's tensors, the checker's comparisons) reads this table.
FIELDS: tuple[Field, ...] = (
    Field("counts", SLOT, ENTITY_TYPE, _I64),
    Field("entities", ROW, ENTITY_TYPE, _F32, _features),
    Field("globals", SLOT, None, _F32, _globals),
    Field("actor_slot", ACTOR, ACTION_TYPE, _I64, values=SLOT),
    Field("actor_index", ACTOR, ACTION_TYPE, _I64, values=ROW),
    Field("num_candidates", ACTOR, SELECT_TYPE, _I64),
    Field("masks", CHOICE, ACTION_TYPE, _BOOL, _choices),
    Field("reward", SLOT, None, _F32, saved=False),
    Field("terminated", SLOT, None, _BOOL, saved=False),
    Field("truncated", SLOT, None, _BOOL, saved=False),
    Field("active", SLOT, None, _BOOL, saved=False),
)

# the field that numbers each index (its own length is free)
_NUMBERED_BY = {ROW: "counts", ACTOR: "actor_slot", CANDIDATE: "num_candidates"}


def _keys(b: Batch, per: str) -> Iterable[str]:
    """The types keying a field of ``b`` (in the order of its spaces)."""
    if per == ENTITY_TYPE:
        return b.counts
    if per == ACTION_TYPE:
        return b.actor_slot
    return [k for k in b.actor_slot if k in b.num_candidates]


def _space_keys(sp: Spaces, per: str) -> Iterable[str]:
    """The types keying a field of a batch laid out for ``sp``."""
    if per == ENTITY_TYPE:
        return sp.obs.entities
    if per == ACTION_TYPE:
        return sp.actions
    return [k for k, d in sp.actions.items() if d.kind.selects_entities]


def _index(b: Batch, f: Field, key: str) -> str:
    """The index of ``f``'s array for ``key`` (``"choice"`` resolved)."""
    if f.index != CHOICE:
        return f.index
    return CANDIDATE if key in b.num_candidates else ACTOR


_PLANS: dict[type, tuple[tuple[str, str | None], ...]] = {}


def _plan(cls: type[Batch]) -> tuple[tuple[str, str | None], ...]:
    """``(name, per)`` of each field of a batch class (read on every flat (de)serialization)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple((f.name, f.per) for f in cls.FIELDS)
    return plan


def _length(b: Batch, index: str, key: str) -> int:
    """How many rows an index has in ``b`` (for ``key``), read from the field that numbers it."""
    if index == SLOT:
        return b.num_slots
    if index == ROW:
        return int(b.counts[key].sum())
    if index == ACTOR:
        return int(b.actor_slot[key].shape[0])
    return int(b.num_candidates[key].sum())


@dataclass
class Batch:
    """One step of a vectorized environment, as numpy arrays (see the module docstring)."""

    FIELDS: ClassVar[tuple[Field, ...]] = FIELDS

    num_slots: int
    entities: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    globals: np.ndarray
    actor_slot: dict[str, np.ndarray]
    actor_index: dict[str, np.ndarray]
    masks: dict[str, np.ndarray]
    num_candidates: dict[str, np.ndarray]
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    active: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    candidate_types: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    final: Batch | None = field(default=None, repr=False)

    @classmethod
    def empty(cls, spaces: Spaces, num_slots: int = 0) -> Batch:
        """A batch of ``num_slots`` inactive slots with no entities and no actors, laid out for ``spaces``.

        Every slot's counts, reward, ends and ``active`` are zero; each action type has the empty
        masks of its kind (:meth:`~gymloop.kinds.ActionKind.empty_masks`) and, when its kind selects
        entities, empty ``num_candidates`` and its ``candidate_types``. Used wherever an empty batch
        or the empty parts of a ``final`` batch are made.

        Example:
            >>> import gymloop as gl
            >>> sp = gl.Spaces.from_json({"entities": {"Head": ["x", "y"]}, "globals": []},
            ...                          {"Move": {"kind": "categorical", "labels": ["UP", "DOWN"]}})
            >>> b = Batch.empty(sp, 3)
            >>> b.entities["Head"].shape, b.masks["Move"].shape, b.active.tolist()
            ((0, 2), (0, 2), [False, False, False])
        """
        return cls._zeros(
            num_slots, lambda per: _space_keys(spaces, per), lambda f, k: f.shape(spaces, k),
            {name: d.among for name, d in spaces.actions.items() if d.kind.selects_entities},
        )

    def no_final(self) -> Batch:
        """An empty ``final`` for this batch's slots (what :meth:`concat` fills gaps with).

        The same as :meth:`empty` for this batch's spaces, read from its arrays (a batch does not
        keep its :class:`~gymloop.spaces.Spaces`).
        """
        def width(f: Field, k: str) -> tuple[int, ...]:
            a = getattr(self, f.name)
            return (a if f.per is None else a[k]).shape[1:]

        return self._zeros(self.num_slots, lambda per: _keys(self, per), width, self.candidate_types)

    @classmethod
    def _zeros(
        cls, n: int, keys: Callable[[str], Iterable[str]], width: Callable[[Field, str], tuple[int, ...]],
        candidate_types: dict[str, tuple[str, ...]],
    ) -> Batch:
        """The one constructor of empty batches: ``n`` slots, no rows, actors or candidates."""
        kw: dict[str, Any] = {}
        for f in cls.FIELDS:  # a fresh array each (no two arrays of a batch share memory)
            rows = n if f.index == SLOT else 0
            if f.per is None:
                kw[f.name] = np.zeros((rows, *width(f, "")), dtype=f.dtype)
            else:
                kw[f.name] = {k: np.zeros((rows, *width(f, k)), dtype=f.dtype) for k in keys(f.per)}
        return cls(num_slots=n, candidate_types=candidate_types, **kw)

    @property
    def done(self) -> np.ndarray:
        """``terminated | truncated``."""
        return self.terminated | self.truncated

    def num_actors(self, action: str) -> int:
        """Number of actors of an action type in this batch."""
        return int(self.actor_slot[action].shape[0])

    def entity_offsets(self) -> np.ndarray:
        """``(num_types, num_slots)`` int64: where each type starts in each slot's entity index."""
        names = list(self.counts)
        if not names:
            return np.zeros((0, self.num_slots), dtype=np.int64)
        c = np.stack([self.counts[n] for n in names])
        return np.cumsum(c, axis=0) - c

    def candidate_index(self, action: str) -> np.ndarray:
        """Entity index (within the actor's slot) of every candidate of a select-entity action.

        Returns an int64 array aligned with ``masks[action]``.
        """
        names = list(self.counts)
        starts = self.entity_offsets()
        slots = self.actor_slot[action]
        parts_per_actor = []
        for tname in self.candidate_types[action]:
            t = names.index(tname)
            parts_per_actor.append((starts[t][slots], self.counts[tname][slots]))
        total = int(self.num_candidates[action].sum())
        out = np.empty(total, dtype=np.int64)
        if total == 0:
            return out
        # Build per actor: concatenation over among-types of arange(start, start + count).
        seg_start = np.stack([p[0] for p in parts_per_actor], axis=1).reshape(-1)
        seg_len = np.stack([p[1] for p in parts_per_actor], axis=1).reshape(-1)
        pos = np.cumsum(seg_len) - seg_len
        rep_start = np.repeat(seg_start - pos, seg_len)
        out[:] = rep_start + np.arange(total)
        return out

    def arrays(self) -> Iterator[tuple[Field, str, np.ndarray]]:
        """Every array of the layout: ``(field, type name or "", array)``, in :data:`FIELDS` order."""
        for f in self.FIELDS:
            a = getattr(self, f.name)
            if f.per is None:
                yield f, "", a
            else:
                yield from ((f, k, v) for k, v in a.items())

    @staticmethod
    def concat(parts: list[Batch], copy: bool = False) -> Batch:
        """The batch of one step from its shards: batches of consecutive slot ranges whose
        ``actor_slot`` already count from the first shard's slot 0 (what the backends gather).

        Metrics are joined (NaN where a shard lacks one) and so are the ``final`` batches. With
        ``copy=True`` the result never shares memory with the parts. To join independent batches,
        renumbering their slots, use :func:`stack`.
        """
        if len(parts) == 1 and not copy:
            return parts[0]
        first = parts[0]
        single = len(parts) == 1

        def cat(xs: list[np.ndarray]) -> np.ndarray:
            return xs[0].copy() if single else np.concatenate(xs)
        kw: dict[str, Any] = {}
        dicts = [vars(p) for p in parts]
        for name, per in _plan(type(first)):
            if per is None:
                kw[name] = cat([d[name] for d in dicts])
            else:
                kw[name] = {k: cat([d[name][k] for d in dicts]) for k in dicts[0][name]}
        metrics: dict[str, np.ndarray] = {}
        keys = sorted(set().union(*(p.metrics.keys() for p in parts)))
        for k in keys:
            metrics[k] = cat([p.metrics[k] if k in p.metrics else np.full(p.num_slots, np.nan) for p in parts])
        final = None
        if any(p.final is not None for p in parts):
            final = Batch.concat([p.final if p.final is not None else p.no_final() for p in parts], copy=copy)
        return type(first)(
            num_slots=sum(p.num_slots for p in parts), metrics=metrics, candidate_types=first.candidate_types,
            final=final, **kw,
        )

    def to_flat(self) -> list[np.ndarray]:
        """The layout's arrays in :data:`FIELDS` order, types in the order of the spaces (what a worker
        writes to shared memory; :meth:`from_flat` reads them back). Metrics and ``final`` are not included."""
        d = vars(self)
        out: list[np.ndarray] = []
        for name, per in _plan(type(self)):
            if per is None:
                out.append(d[name])
            else:
                out += d[name].values()
        return out

    def to_wire(self) -> tuple[list[np.ndarray], list[str]]:
        """The whole batch as arrays and metric names, what crosses to another process (shared memory,
        Ray): :meth:`to_flat`, a flag and ``final``'s :meth:`to_flat` when there is one, then the
        metrics in the order of the names. :meth:`from_wire` reads it back."""
        arrays = self.to_flat()
        arrays.append(np.array([self.final is not None], dtype=np.int64))
        if self.final is not None:
            arrays += self.final.to_flat()
        names = list(self.metrics)
        arrays += [self.metrics[k] for k in names]
        return arrays, names

    @classmethod
    def from_wire(cls, arrays: Iterable[np.ndarray], names: Iterable[str], spaces: Spaces, n: int) -> Batch:
        """The batch of ``n`` slots that :meth:`to_wire` gave as ``arrays`` and ``names`` (not copied)."""
        it = iter(arrays)
        b = cls.from_flat(it, spaces, n)
        if int(next(it)[0]):
            b.final = cls.from_flat(it, spaces, n)
        b.metrics = {k: next(it) for k in names}
        return b

    @classmethod
    def from_flat(cls, arrays: Iterator[np.ndarray], spaces: Spaces, n: int) -> Batch:
        """The batch of ``n`` slots whose :meth:`to_flat` arrays come next from ``arrays`` (not copied)."""
        acts = spaces.actions
        cand = {k: a.among for k, a in acts.items() if a.kind.selects_entities}
        keys: dict[str, Iterable[str]] = {ENTITY_TYPE: spaces.obs.entities, ACTION_TYPE: acts, SELECT_TYPE: cand}
        kw: dict[str, Any] = {}
        for name, per in _plan(cls):
            if per is None:
                kw[name] = next(arrays)
            else:
                x: dict[str, np.ndarray] = {}
                kw[name] = x
                for k in keys[per]:
                    x[k] = next(arrays)
        return cls(num_slots=n, candidate_types=cand, **kw)

    def to_tensors(self) -> dict[str, np.ndarray]:
        """The saved fields by tensor name (``globals``, ``entities/<type>``, ...), as trace files hold them."""
        return {f.name + (f"/{k}" if f.per is not None else ""): a for f, k, a in self.arrays() if f.saved}

    @classmethod
    def from_tensors(
        cls, spaces: Spaces, n: int, read: Callable[[str, np.dtype, tuple[int | None, ...]], np.ndarray],
        check: Callable[[Batch, str, str], None] | None = None,
    ) -> Batch:
        """The batch of ``n`` slots laid out for ``spaces`` whose saved fields ``read(name, dtype, shape)``
        returns (names as in :meth:`to_tensors`; ``None`` in ``shape``: any length); the fields that are
        not saved are zeros. ``read`` checks each array's dtype and shape; ``check(batch, field, type)``,
        called after each saved array of a type is read, its values (before the fields it numbers)."""
        b = cls.empty(spaces, 0)
        b.num_slots = n  # the slot-indexed arrays read first; the zeros are made once they fixed n
        for saved in (True, False):
            for f in cls.FIELDS:
                if f.saved is not saved:
                    continue
                if f.per is None:
                    shape = (n if f.index == SLOT else 0, *f.shape(spaces, ""))
                    setattr(b, f.name, read(f.name, f.dtype, shape) if saved else np.zeros(shape, dtype=f.dtype))
                    continue
                d = getattr(b, f.name)
                for k in d:
                    index = _index(b, f, k)
                    rows = None if _NUMBERED_BY.get(index) == f.name else _length(b, index, k)
                    if not saved:
                        d[k] = np.zeros((rows or 0, *f.shape(spaces, k)), dtype=f.dtype)
                        continue
                    d[k] = read(f"{f.name}/{k}", f.dtype, (rows, *f.shape(spaces, k)))
                    if check is not None:
                        check(b, f.name, k)
        return b

    def equal(self, other: Batch) -> bool:
        """Whether two batches hold the same arrays, metrics and ``final`` (NaN equal to NaN)."""
        def eq(x: Any, y: Any) -> bool:
            if isinstance(x, dict):
                return x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
            return np.array_equal(x, y, equal_nan=x.dtype.kind == "f")

        fa, fb = self.final, other.final
        if fa is None or fb is None:
            if fa is not fb:
                return False
        elif not fa.equal(fb):
            return False
        return all(eq(getattr(self, f.name), getattr(other, f.name)) for f in self.FIELDS) and eq(self.metrics, other.metrics)

    def layout_problem(self, spaces: Spaces) -> str | None:
        """The first array whose dtype or shape disagrees with :data:`FIELDS` laid out for ``spaces``,
        in words (``None``: none)."""
        for f, k, a in self.arrays():
            name = f"{f.name}[{k!r}]" if k else f.name
            index = _index(self, f, k)
            rows = a.shape[0] if _NUMBERED_BY.get(index) == f.name and a.ndim else _length(self, index, k)
            want = (rows, *f.shape(spaces, k))
            if a.dtype != f.dtype or a.shape != want:
                per = {ROW: "entity"}.get(index, index)
                return f"{name} is {a.dtype} of shape {a.shape}, expected {f.dtype} of shape {want} (one row per {per})"
        return None


def stack(batches: list[Batch]) -> Batch:
    """Independent batches one after another, their slots renumbered: slot ``s`` of the ``t``-th
    batch becomes slot ``s`` plus the slots of the batches before it (for batches of the same slots
    over time, ``t * S + s``).

    Metrics and ``final`` are dropped; the result never shares memory with the inputs. (To join the
    shards of one step, whose slots are already numbered, use :meth:`Batch.concat`.)
    """
    shifted, o = [], 0
    for b in batches:
        kw: dict[str, Any] = {}
        for f in b.FIELDS:
            a = getattr(b, f.name)
            if f.values == SLOT:
                a = a + o if f.per is None else {k: v + o for k, v in a.items()}
            kw[f.name] = a
        shifted.append(type(b)(num_slots=b.num_slots, candidate_types=b.candidate_types, **kw))
        o += b.num_slots
    return Batch.concat(shifted, copy=True)


def take(b: Batch, slots: np.ndarray) -> tuple[Batch, dict[str, np.ndarray]]:
    """The sub-batch of the given slots (sorted ascending), renumbered ``0..len(slots)-1``.

    Returns the sub-batch (no metrics, no ``final``) and, per action type, the boolean selection of
    its actors (to select per-actor data such as actions and log-probabilities the same way).
    """
    keep_slot = np.zeros(b.num_slots, dtype=bool)
    keep_slot[slots] = True
    remap = np.cumsum(keep_slot) - 1
    sel = {k: keep_slot[sl] for k, sl in b.actor_slot.items()}
    cand = {k: np.repeat(sel[k], nc) for k, nc in b.num_candidates.items()}
    picks = {ROW: {k: np.repeat(keep_slot, c) for k, c in b.counts.items()}, ACTOR: sel, CANDIDATE: cand, CHOICE: {**sel, **cand}}
    kw: dict[str, Any] = {}
    for f in b.FIELDS:
        a = getattr(b, f.name)
        if f.per is None:  # (one array: slot-indexed)
            v = a[slots]
        elif f.index == SLOT:
            v = {k: x[slots] for k, x in a.items()}
        else:
            p = picks[f.index]
            v = {k: x[p[k]] for k, x in a.items()}
        if f.values == SLOT:
            v = remap[v] if f.per is None else {k: remap[x] for k, x in v.items()}
        kw[f.name] = v
    return type(b)(num_slots=int(slots.size), candidate_types=b.candidate_types, **kw), sel


class SlotRanges:
    """Where each slot's rows, actors and candidates lie in a batch whose actors are in slot order,
    for O(1) slicing of one slot (:meth:`slot`)."""

    def __init__(self, b: Batch) -> None:
        self.batch = b
        S = b.num_slots
        self.rows = {n: np.concatenate([[0], np.cumsum(c)]) for n, c in b.counts.items()}
        self.actors = {n: np.searchsorted(sl, np.arange(S + 1)) for n, sl in b.actor_slot.items()}
        self.candidates = {n: np.concatenate([[0], np.cumsum(nc)]) for n, nc in b.num_candidates.items()}

    def span(self, index: str, key: str, k: int) -> tuple[int, int]:
        """Slot ``k``'s rows ``[lo, hi)`` of an index (for ``key``)."""
        if index == SLOT:
            return k, k + 1
        if index == ROW:
            e = self.rows[key]
            return int(e[k]), int(e[k + 1])
        a = self.actors[key]
        if index == ACTOR:
            return int(a[k]), int(a[k + 1])
        c = self.candidates[key]
        return int(c[a[k]]), int(c[a[k + 1]])

    def slot(self, k: int) -> Batch:
        """Slot ``k`` as a one-slot batch (views into the batch; no metrics, no ``final``)."""
        b = self.batch
        kw: dict[str, Any] = {}
        for f in b.FIELDS:
            a = getattr(b, f.name)
            if f.per is None:
                lo, hi = self.span(f.index, "", k)
                kw[f.name] = np.zeros(hi - lo, dtype=f.dtype) if f.values == SLOT else a[lo:hi]
                continue
            d = kw[f.name] = {}
            for n, v in a.items():
                lo, hi = self.span(_index(b, f, n), n, k)
                d[n] = np.zeros(hi - lo, dtype=f.dtype) if f.values == SLOT else v[lo:hi]
        return type(b)(num_slots=1, candidate_types=b.candidate_types, **kw)


def relayout(b: Batch, src: Spaces, dst: Spaces) -> Batch:
    """The batch ``b`` (laid out for the spaces ``src``) laid out for the spaces ``dst``.

    ``dst`` may have more entity and action types (they get zero rows / no actors); types of
    ``src`` that ``dst`` lacks must be absent from ``b`` and the types both have must agree (what
    :func:`gymloop.trace.relayout` checks). Entity indices are renumbered for ``dst``'s type order.
    """
    so, do = src.obs, dst.obs
    if so == do and src.actions == dst.actions:
        return b
    S = b.num_slots
    src_names = list(so.entities)
    dst_names = list(do.entities)
    zi = np.zeros(S, dtype=np.int64)
    C_src = np.stack([b.counts[n] for n in src_names]) if src_names else np.zeros((0, S), dtype=np.int64)
    C_dst = np.stack([b.counts.get(n, zi) for n in dst_names]) if dst_names else np.zeros((0, S), dtype=np.int64)
    end_src = np.cumsum(C_src, axis=0)
    off_src = end_src - C_src
    off_dst = np.cumsum(C_dst, axis=0) - C_dst
    pos = np.array([dst_names.index(n) if n in do.entities else 0 for n in src_names], dtype=np.int64)

    def renumber(sl: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Entity indices within their slots, for ``dst``'s type order (``-1``, no entity, kept)."""
        if not idx.size or idx[0] < 0:  # a global decision's rows have no actor entity: nothing to renumber
            return idx
        t = (end_src[:, sl] <= idx).sum(axis=0)
        return off_dst[pos[t], sl] + idx - off_src[t, sl]

    out = type(b).empty(dst, S)
    for f in out.FIELDS:
        a, z = getattr(b, f.name), getattr(out, f.name)
        if f.per is None:
            if a.shape[1:] == z.shape[1:]:
                setattr(out, f.name, a)
            continue
        for k in z:
            if k in a:
                z[k] = renumber(b.actor_slot[k], a[k]) if f.values == ROW else a[k]
    return out
