"""From a :class:`~gymloop.batch.Batch` to padded network inputs (numpy, shared by torch and numpy).

Entities of one slot become one sequence (types in observation-space order, then rows), padded
to the longest slot. Everything is computed with a handful of vectorized numpy calls.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from ..batch import Batch

__all__ = ["Packed", "pack"]


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


def pack(
    b: Batch,
    entity_names: list[str],
    position_idx: dict[str, list[int]] | None = None,
    slot_offset: int = 0,
    summary_actions: Collection[str] = (),
) -> Packed:
    """Pack a batch for the network.

    Args:
        b: the batch.
        entity_names: entity types in network order (the observation space's).
        position_idx: per entity type, the column indices of the position features (relpos).
        slot_offset: subtracted from ``actor_slot`` (for batches whose slots do not start at 0).
        summary_actions: action types whose kind is not actor-bound (global decisions): their
            ``actors`` are slots, answered from a summary of the whole observation.
    """
    S = b.num_slots
    T = len(entity_names)
    C = np.stack([b.counts[n] for n in entity_names]) if T else np.zeros((0, S), dtype=np.int64)
    totals = C.sum(axis=0) if T else np.zeros(S, dtype=np.int64)
    L = int(max(1, totals.max(initial=0)))
    starts = np.cumsum(C, axis=0) - C
    g = b.globals
    feats, dest = {}, {}
    P = len(next(iter(position_idx.values()))) if position_idx else 0
    positions = np.zeros((S * L, P), dtype=np.float32) if position_idx else None
    for t, name in enumerate(entity_names):
        c = C[t]
        n = int(c.sum())
        rows = b.entities[name]
        slot = np.repeat(np.arange(S), c)
        rank = np.arange(n) - (np.cumsum(c) - c)[slot]
        d = slot * L + starts[t][slot] + rank
        dest[name] = d
        feats[name] = np.concatenate([rows, g[slot]], axis=1) if g.shape[1] else rows
        if positions is not None and n:
            positions[d] = rows[:, position_idx[name]]
    valid = np.arange(L)[None, :] < totals[:, None]
    p = Packed(
        S=S, L=L, feats=feats, dest=dest, valid=valid, lengths=totals,
        positions=None if positions is None else positions.reshape(S, L, P),
    )
    for name, sl in b.actor_slot.items():
        local = sl - slot_offset
        p.actors[name] = local if name in summary_actions else local * L + b.actor_index[name]
        p.masks[name] = b.masks[name]
        if name in b.num_candidates:
            nc = b.num_candidates[name]
            seg = np.repeat(np.arange(nc.size), nc)
            p.n_cand[name] = nc
            p.cand_seg[name] = seg
            p.cand[name] = local[seg] * L + b.candidate_index(name)
    return p
