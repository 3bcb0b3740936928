"""From observations to padded network inputs (numpy, shared by torch and numpy).

:func:`pack_entities` decides the layout (one place); :func:`pack` packs a
:class:`~gymloop.batch.Batch` with it, and :func:`pack_observations` the inputs of single
observations (the neural agent's, as its single-observation builder
:class:`~gymloop.featurize.OneObsBuilder` checks and lays them out, and enn-trainer inference's) with it.

Entities of one slot become one sequence (types in observation-space order, then rows), padded
to the longest slot. Everything is computed with a handful of vectorized numpy calls.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..batch import Batch

if TYPE_CHECKING:
    from .config import FrameConfig

__all__ = ["FrameIndex", "ObsInputs", "Packed", "actor_rows", "pack", "pack_entities", "pack_observations", "add_choices", "add_select"]

_F32 = np.float32

#: One observation's network inputs, as :func:`pack_observations` takes them: ``(parts, globals,
#: requests)``. ``parts``: per present entity type ``(type index, (n, n_features) float32 raw
#: features)``, or ``(type index, n)`` for a type without features; ``globals``: ``(n_globals,)``
#: float32 or ``None``; ``requests``: per asked action type ``name: (actor_rows, mask,
#: candidate_rows)``, with ``actor_rows`` the actors' rows in the observation (``None``: one
#: decision from the observation summary), ``mask`` ``(n_actors, n)`` bool or ``None`` (all legal)
#: and ``candidate_rows`` the rows of a select-entity action's candidates (``None`` otherwise).
ObsInputs = tuple[
    list[tuple[int, Any]], "np.ndarray | None", Mapping[str, tuple["np.ndarray | None", "np.ndarray | None", "np.ndarray | None"]],
]


@dataclass(frozen=True)
class FrameIndex:
    """The columns an egocentric frame (:class:`~gymloop.nn.config.FrameConfig`) works on.

    Attributes:
        reference: the entity type at the origin; ``ref_cols`` its position columns,
            ``heading_col`` its heading column (radians) or ``None``.
        cols: per other entity type with the position features, their columns.
    """

    reference: str
    ref_cols: tuple[int, int]
    heading_col: int | None
    cols: dict[str, tuple[int, int]]

    @classmethod
    def of(cls, cfg: FrameConfig | None, entity_features: Mapping[str, Sequence[str]]) -> FrameIndex | None:
        """The columns of a resolved ``FrameConfig`` (``None`` for ``None``) in an observation space."""
        if cfg is None:
            return None
        px, py = cfg.position_features
        ref = list(entity_features[cfg.reference])
        cols = {t: (list(f).index(px), list(f).index(py)) for t, f in entity_features.items()
                if t != cfg.reference and px in f and py in f}
        return cls(cfg.reference, (ref.index(px), ref.index(py)),
                   ref.index(cfg.heading_feature) if cfg.heading_feature else None, cols)

    def origins(self, rows: Mapping[str, np.ndarray], counts: np.ndarray, t_ref: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per slot the origin ``(S, 2)`` and the heading's cosine and sine ``(S,)`` (identity where a
        slot has no reference entity; its first reference entity otherwise)."""
        S = counts.shape[0]
        origin = np.zeros((S, 2), dtype=np.float32)
        cos, sin = np.ones(S, dtype=np.float32), np.zeros(S, dtype=np.float32)
        c = counts[:, t_ref]
        has = c > 0
        if has.any():
            first = (np.cumsum(c) - c)[has]
            r = rows[self.reference]
            origin[has] = r[first][:, list(self.ref_cols)]
            if self.heading_col is not None:
                a = r[first, self.heading_col].astype(np.float64)
                cos[has], sin[has] = np.cos(a), np.sin(a)
        return origin, cos, sin

    def place(self, name: str, r: np.ndarray, ox: Any, oy: Any, cs: Any, sn: Any) -> np.ndarray:
        """Rows ``r`` of entity type ``name`` with their positions as offsets from ``(ox, oy)`` turned by the
        heading whose cosine and sine are ``cs`` and ``sn`` (scalars, or one per row): a copy, or ``r`` itself
        for a type without the position features."""
        cols = self.cols.get(name)
        if cols is None or not r.shape[0]:
            return r
        cx, cy = cols
        dx, dy = r[:, cx] - ox, r[:, cy] - oy
        r = r.copy()
        r[:, cx], r[:, cy] = cs * dx + sn * dy, cs * dy - sn * dx
        return r


@dataclass
class Packed:
    """Padded inputs for ``S`` slots of at most ``L`` entities.

    Attributes:
        S, L: slots and padded sequence length (``L >= 1``).
        feats: per entity type, ``(n_t, n_features + n_globals)`` float32 raw features (global
            features appended to every entity, as in rogue-net).
        dest: per entity type, ``(n_t,)`` int64 index into the flattened ``S * L`` sequence.
        valid: ``(S, L)`` bool, real entities.
        lengths: ``(S,)`` int64 entities per slot.
        positions: ``(S, L, P)`` float32 raw position features, or ``None``.
        actors: per action type, ``(n_actors,)`` int64 flat index of each actor; for an action type
            answered from the observation summary (a global decision: ``summary_actions`` of
            :func:`pack`), the slot of each decision instead.
        masks: per action type, the batch's masks.
        cand: per select-entity action, flat index of every candidate (actor after actor).
        cand_seg: per select-entity action, the actor each candidate belongs to.
        n_cand: per select-entity action, candidates per actor.
    """

    S: int
    L: int
    feats: dict[str, np.ndarray]
    dest: dict[str, np.ndarray]
    valid: np.ndarray
    lengths: np.ndarray
    positions: np.ndarray | None
    actors: dict[str, np.ndarray] = field(default_factory=dict)
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    cand: dict[str, np.ndarray] = field(default_factory=dict)
    cand_seg: dict[str, np.ndarray] = field(default_factory=dict)
    n_cand: dict[str, np.ndarray] = field(default_factory=dict)


def actor_rows(p: Packed, names: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The distinct flat rows of the actors of action types ``names`` (sorted: the rows a readout
    block computes, once each, however many action types an actor answers), and per action type
    each actor's index among them."""
    rows = [p.actors[n] for n in names]
    uniq, inv = np.unique(np.concatenate(rows) if rows else np.zeros(0, np.int64), return_inverse=True)
    where, o = {}, 0
    for n, r in zip(names, rows):
        where[n] = inv[o : o + r.size]
        o += r.size
    return uniq, where


def pack_entities(
    rows: Mapping[str, np.ndarray],
    counts: np.ndarray,
    globals_: np.ndarray,
    entity_names: Sequence[str],
    position_idx: Mapping[str, list[int]] | None = None,
    frame: FrameIndex | None = None,
) -> Packed:
    """The entity part of the network input: the one place the sequence layout is decided.

    Args:
        rows: per entity type, ``(n_t, n_features)`` float32 raw features, slot after slot.
        counts: ``(S, T)`` int64 rows of each type in each slot (types in ``entity_names`` order).
        globals_: ``(S, n_globals)`` float32 global features (appended to every entity's row).
        entity_names: entity types in network order.
        position_idx: per entity type, the column indices of the position features (relpos).
        frame: the egocentric frame's columns: other entities' positions become offsets from the
            slot's reference entity, rotated into its heading (relpos still sees the raw positions).
    """
    S = counts.shape[0]
    totals = counts.sum(axis=1) if counts.shape[1] else np.zeros(S, dtype=np.int64)
    L = int(max(1, totals.max(initial=0)))
    starts = np.cumsum(counts, axis=1) - counts
    g = globals_
    feats, dest = {}, {}
    P = len(next(iter(position_idx.values()))) if position_idx else 0
    positions = np.zeros((S * L, P), dtype=np.float32) if position_idx else None
    if frame is not None and frame.reference in entity_names:
        origin, cos, sin = frame.origins(rows, counts, list(entity_names).index(frame.reference))
    else:
        frame = None
    for t, name in enumerate(entity_names):
        c = counts[:, t]
        n = int(c.sum())
        r = rows[name]
        slot = np.repeat(np.arange(S), c)
        rank = np.arange(n) - (np.cumsum(c) - c)[slot]
        d = slot * L + starts[slot, t] + rank
        dest[name] = d
        if positions is not None and position_idx and n:  # (positions is set only with position_idx)
            positions[d] = r[:, position_idx[name]]
        if frame is not None and n and name in frame.cols:  # (origin, cos and sin are set with frame)
            r = frame.place(name, r, origin[slot, 0], origin[slot, 1], cos[slot], sin[slot])
        feats[name] = np.concatenate([r, g[slot]], axis=1) if g.shape[1] else r
    valid = np.arange(L)[None, :] < totals[:, None]
    return Packed(
        S=S, L=L, feats=feats, dest=dest, valid=valid, lengths=totals,
        positions=None if positions is None else positions.reshape(S, L, P),
    )


def add_choices(p: Packed, name: str, actors: np.ndarray, masks: np.ndarray) -> None:
    """Add an action type whose choices are labels: ``actors`` flat indices (slots for a global
    decision), ``masks`` ``(n_actors, n_choices)``."""
    p.actors[name] = actors
    p.masks[name] = masks


def add_select(p: Packed, name: str, actors: np.ndarray, cand: np.ndarray, n_cand: np.ndarray, masks: np.ndarray) -> None:
    """Add a select-entity action type: ``actors`` flat indices, ``cand`` the flat index of every
    candidate (actor after actor), ``n_cand`` candidates per actor, ``masks`` one per candidate."""
    p.actors[name] = actors
    p.masks[name] = masks
    p.n_cand[name] = n_cand
    p.cand_seg[name] = np.repeat(np.arange(n_cand.size), n_cand)
    p.cand[name] = cand


def pack_observations(
    observations: Sequence[ObsInputs],
    entity_names: Sequence[str],
    widths: Sequence[int],
    n_globals: int,
    actions: Mapping[str, Any],
    position_idx: Mapping[str, list[int]] | None = None,
    frame: FrameIndex | None = None,
) -> Packed:
    """Several observations' inputs (slot ``s`` = observation ``s``) laid out as :func:`pack` lays
    out a batch of them: the gl.load agents' ``act_all`` and enn-trainer inference use it.

    Args:
        observations: one :data:`ObsInputs` per slot.
        entity_names: entity types in network order; ``widths``: their feature counts.
        n_globals: the number of global features.
        actions: the network's action types (``kind``, ``n``), in network order.
        position_idx, frame: as :func:`pack_entities` takes them.
    """
    S = len(observations)
    T = len(entity_names)
    counts = np.zeros((S, T), dtype=np.int64)
    for s, (parts, _, _) in enumerate(observations):
        for t, f in parts:
            counts[s, t] = f if isinstance(f, int) else f.shape[0]
    offs = (np.cumsum(counts, axis=0) - counts).tolist()  # first row of each slot within its type
    rows = [np.zeros((int(counts[:, t].sum()), widths[t]), dtype=_F32) for t in range(T)]
    globs = np.zeros((S, n_globals), dtype=_F32)
    for s, (parts, g, _) in enumerate(observations):
        for t, f in parts:
            if not isinstance(f, int):
                o = offs[s][t]
                rows[t][o : o + f.shape[0]] = f
        if n_globals:
            globs[s] = g
    p = pack_entities(dict(zip(entity_names, rows)), counts, globs, entity_names, position_idx, frame)
    L = p.L
    for name, a in actions.items():
        actors: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        cand: list[np.ndarray] = []
        ncand: list[int] = []
        for s, (_, _, requests) in enumerate(observations):
            req = requests.get(name)
            if req is None:
                continue
            act_rows, mask, cand_rows = req
            if act_rows is None:  # answered from the observation summary: the slot, one row
                n_act = 1
                actors.append(np.array([s], dtype=np.int64))
            else:
                n_act = act_rows.shape[0]
                actors.append(act_rows + s * L)
            if cand_rows is None:
                masks.append(np.ones((n_act, a.n), dtype=bool) if mask is None else mask)
            else:
                nc = cand_rows.shape[0]
                masks.append(np.ones(n_act * nc, dtype=bool) if mask is None else mask.reshape(-1))
                cand.append(np.tile(cand_rows + s * L, n_act))
                ncand += [nc] * n_act
        act = np.concatenate(actors).astype(np.int64) if actors else np.zeros(0, np.int64)
        if not a.kind.selects_entities:
            add_choices(p, name, act, np.concatenate(masks) if masks else np.zeros((0, a.n), dtype=bool))
        else:
            add_select(
                p, name, act, np.concatenate(cand).astype(np.int64) if cand else np.zeros(0, np.int64),
                np.array(ncand, dtype=np.int64), np.concatenate(masks) if masks else np.zeros(0, dtype=bool),
            )
    return p


def pack(
    b: Batch,
    entity_names: list[str],
    position_idx: dict[str, list[int]] | None = None,
    slot_offset: int = 0,
    summary_actions: Collection[str] = (),
    frame: FrameIndex | None = None,
) -> Packed:
    """Pack a batch for the network (:func:`pack_entities`, then every action type).

    Args:
        b: the batch.
        entity_names: entity types in network order (the observation space's).
        position_idx: per entity type, the column indices of the position features (relpos).
        slot_offset: subtracted from ``actor_slot`` (for batches whose slots do not start at 0).
        summary_actions: action types whose kind is not actor-bound (global decisions): their
            ``actors`` are slots, answered from a summary of the whole observation.
        frame: the egocentric frame's columns (see :func:`pack_entities`).
    """
    S = b.num_slots
    C = np.stack([b.counts[n] for n in entity_names], axis=1) if entity_names else np.zeros((S, 0), dtype=np.int64)
    p = pack_entities(b.entities, C, b.globals, entity_names, position_idx, frame)
    L = p.L
    for name, sl in b.actor_slot.items():
        local = sl - slot_offset
        actors = local if name in summary_actions else local * L + b.actor_index[name]
        if name in b.num_candidates:
            nc = b.num_candidates[name]
            seg = np.repeat(np.arange(nc.size), nc)
            add_select(p, name, actors, local[seg] * L + b.candidate_index(name), nc, b.masks[name])
        else:
            add_choices(p, name, actors, b.masks[name])
    return p
