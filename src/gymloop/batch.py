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
  candidate's entity index within the actor's slot.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .spaces import Spaces

__all__ = ["Batch"]


@dataclass
class Batch:
    """One step of a vectorized environment, as numpy arrays (see the module docstring)."""

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

    @staticmethod
    def empty(spaces: Spaces, num_slots: int = 0) -> Batch:
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
        acts = spaces.actions
        return Batch._zeros(
            num_slots,
            {name: len(f) for name, f in spaces.obs.entities.items()},
            len(spaces.obs.globals),
            {name: d.kind.empty_masks(d.n) for name, d in acts.items()},
            {name: d.among for name, d in acts.items() if d.kind.selects_entities},
        )

    def no_final(self) -> Batch:
        """An empty ``final`` for this batch's slots (what :meth:`concat` fills gaps with).

        The same as :meth:`empty` for this batch's spaces, read from its arrays (a batch does not
        keep its :class:`~gymloop.spaces.Spaces`).
        """
        return Batch._zeros(
            self.num_slots,
            {k: v.shape[1] for k, v in self.entities.items()},
            self.globals.shape[1],
            {k: np.zeros((0,) + v.shape[1:], dtype=bool) for k, v in self.masks.items()},
            self.candidate_types,
            num_candidates=self.num_candidates,
        )

    @staticmethod
    def _zeros(
        n: int,
        features: Mapping[str, int],
        n_globals: int,
        masks: dict[str, np.ndarray],
        candidate_types: dict[str, tuple[str, ...]],
        num_candidates: Mapping[str, np.ndarray] | None = None,
    ) -> Batch:
        """The one constructor of empty batches: ``masks`` are the empty masks by action type."""
        def z() -> np.ndarray:  # a fresh array each (no two arrays of a batch share memory)
            return np.zeros(0, dtype=np.int64)

        return Batch(
            num_slots=n,
            entities={k: np.zeros((0, nf), dtype=np.float32) for k, nf in features.items()},
            counts={k: np.zeros(n, dtype=np.int64) for k in features},
            globals=np.zeros((n, n_globals), dtype=np.float32),
            actor_slot={k: z() for k in masks},
            actor_index={k: z() for k in masks},
            masks=masks,
            num_candidates={k: z() for k in (candidate_types if num_candidates is None else num_candidates)},
            reward=np.zeros(n, dtype=np.float32),
            terminated=np.zeros(n, dtype=bool),
            truncated=np.zeros(n, dtype=bool),
            active=np.zeros(n, dtype=bool),
            candidate_types=candidate_types,
        )

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

    @staticmethod
    def concat(parts: list[Batch], copy: bool = False) -> Batch:
        """Join the batches of consecutive slot ranges (their ``actor_slot`` already global).

        With ``copy=True`` the result never shares memory with the parts.
        """
        if len(parts) == 1 and not copy:
            return parts[0]
        first = parts[0]
        single = len(parts) == 1

        def cat(xs: list[np.ndarray]) -> np.ndarray:
            return xs[0].copy() if single else np.concatenate(xs)
        metrics: dict[str, np.ndarray] = {}
        keys = sorted(set().union(*(p.metrics.keys() for p in parts)))
        for k in keys:
            metrics[k] = cat([p.metrics[k] if k in p.metrics else np.full(p.num_slots, np.nan) for p in parts])
        final = None
        if any(p.final is not None for p in parts):
            final = Batch.concat([p.final if p.final is not None else p.no_final() for p in parts], copy=copy)
        return Batch(
            final=final,
            num_slots=sum(p.num_slots for p in parts),
            entities={k: cat([p.entities[k] for p in parts]) for k in first.entities},
            counts={k: cat([p.counts[k] for p in parts]) for k in first.counts},
            globals=cat([p.globals for p in parts]),
            actor_slot={k: cat([p.actor_slot[k] for p in parts]) for k in first.actor_slot},
            actor_index={k: cat([p.actor_index[k] for p in parts]) for k in first.actor_index},
            masks={k: cat([p.masks[k] for p in parts]) for k in first.masks},
            num_candidates={k: cat([p.num_candidates[k] for p in parts]) for k in first.num_candidates},
            reward=cat([p.reward for p in parts]),
            terminated=cat([p.terminated for p in parts]),
            truncated=cat([p.truncated for p in parts]),
            active=cat([p.active for p in parts]),
            metrics=metrics,
            candidate_types=first.candidate_types,
        )


def stack(batches: list[Batch]) -> Batch:
    """Stack batches of the same slots over time: slot ``t * S + s`` is slot ``s`` of batch ``t``.

    Metrics are dropped; the inputs are not modified.
    """
    S = batches[0].num_slots
    shifted = [
        Batch(
            num_slots=b.num_slots, entities=b.entities, counts=b.counts, globals=b.globals,
            actor_slot={k: v + t * S for k, v in b.actor_slot.items()}, actor_index=b.actor_index,
            masks=b.masks, num_candidates=b.num_candidates, reward=b.reward, terminated=b.terminated,
            truncated=b.truncated, active=b.active, metrics={}, candidate_types=b.candidate_types,
        )
        for t, b in enumerate(batches)
    ]
    return Batch.concat(shifted, copy=len(shifted) == 1)


def take(b: Batch, slots: np.ndarray) -> tuple[Batch, dict[str, np.ndarray]]:
    """The sub-batch of the given slots (sorted ascending), renumbered ``0..len(slots)-1``.

    Returns the sub-batch and, per action type, the boolean selection of its actors (to select
    per-actor data such as actions and log-probabilities the same way).
    """
    keep_slot = np.zeros(b.num_slots, dtype=bool)
    keep_slot[slots] = True
    remap = np.cumsum(keep_slot) - 1
    entities, counts = {}, {}
    for k, c in b.counts.items():
        entities[k] = b.entities[k][np.repeat(keep_slot, c)]
        counts[k] = c[slots]
    actor_slot, actor_index, masks, ncand, sel = {}, {}, {}, {}, {}
    for k, sl in b.actor_slot.items():
        keep = keep_slot[sl]
        sel[k] = keep
        actor_slot[k] = remap[sl[keep]]
        actor_index[k] = b.actor_index[k][keep]
        if k in b.num_candidates:
            nc = b.num_candidates[k]
            ncand[k] = nc[keep]
            masks[k] = b.masks[k][np.repeat(keep, nc)]
        else:
            masks[k] = b.masks[k][keep]
    sub = Batch(
        num_slots=int(slots.size), entities=entities, counts=counts, globals=b.globals[slots],
        actor_slot=actor_slot, actor_index=actor_index, masks=masks, num_candidates=ncand,
        reward=b.reward[slots], terminated=b.terminated[slots], truncated=b.truncated[slots],
        active=b.active[slots], metrics={}, candidate_types=b.candidate_types,
    )
    return sub, sel
