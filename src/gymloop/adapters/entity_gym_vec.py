"""Any gymloop game as an ``entity_gym.env.VecEnv``, so enn-trainer (or any entity-gym trainer) runs it.

:class:`GymloopVecEnv` is a :class:`gymloop.VecEnv` seen through entity-gym's vectorized interface:
``obs_space()``, ``action_space()``, ``reset(obs_space)`` and ``act(actions, obs_space)`` returning
a ``VecObs`` of ragged buffers. Each gymloop *slot* is one entity-gym environment (``len(env) ==
num_envs * agents_per_game``); the batch arrays become ragged buffers without a Python object per
entity.

=============================  ====================================================================
gymloop                        entity-gym
=============================  ====================================================================
entity type, feature names     ``ObsSpace.entities[type] = Entity(features)``, in the same order
global features                ``ObsSpace.global_features``; the ``"__global__"`` entity (one row
                               per environment) whenever there are global features or a global
                               decision, as entity-gym's own ``batch_obs`` makes it
categorical                    ``CategoricalActionSpace(labels)``; actors are entity indices, the
                               mask ``(actors, labels)`` (``None`` when every choice is allowed)
global decision                ``GlobalCategoricalActionSpace(labels)``; its actor is the
                               ``"__global__"`` entity (index = the environment's entity count)
select-entity                  ``SelectEntityActionSpace()``; the actees are the entity indices of
                               the legal candidates, and the chosen actee index is mapped back to
                               the candidate (see below)
global select-entity           not expressible (entity-gym's select-entity needs an actor entity):
                               a :class:`~gymloop.errors.ConfigError` names the fix (a field-less
                               actor entity and a plain ``gl.SelectEntity``)
reward                         ``VecObs.reward``
terminated or truncated        ``VecObs.done`` (entity-gym has no truncation: the last
                               observation of a truncated episode is not passed on)
episode and game metrics       ``VecObs.metrics`` (a ``Metric`` per name, over the slots that
                               reported it)
=============================  ====================================================================

**Select-entity.** entity-gym has one actee list per environment, shared by its actors; gymloop
has a mask per actor over its candidates. The actees are the candidates the slot's first actor
may choose. Actors of one slot whose masks differ cannot be expressed:
:class:`~gymloop.errors.InvalidObservationError` says so (one actor per slot, or masks that
depend only on the slot, always work). enn-trainer answers with an index into the actee list; it
is mapped back to the candidate index gymloop expects.

**The observation filter** (``obs_space`` of ``reset`` / ``act``) is applied as entity-gym
documents it: features are taken by name, in the filter's order (a subset or a reordering);
entity types the filter leaves out are removed, and the remaining entities renumbered. An actor
of a removed type is an error; a candidate of a removed type cannot be selected. Feature or type
names the game does not have are a :class:`~gymloop.errors.ConfigError`.

**Multi-agent games** (``agents_per_game > 1``): each agent's slot is its own environment; a slot
without a decision this step has no actors.

Example:
    >>> from gymloop.adapters.entity_gym_vec import GymloopVecEnv
    >>> from gymloop.games.snake import snake
    >>> env = GymloopVecEnv(snake, num_envs=4, seed=0)
    >>> obs = env.reset(env.obs_space())
    >>> obs.features["Head"].size1().tolist(), obs.action_masks["Move"].actors.size1().tolist()
    ([1, 1, 1, 1], [1, 1, 1, 1])
    >>> obs = env.act(env.sample_actions(), env.obs_space())
    >>> obs.reward.shape, obs.done.dtype
    ((4,), dtype('bool'))
    >>> env.close()

With enn-trainer (``enn_trainer.train.train(state_manager, env_factory(snake))``), see
:func:`env_factory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._ranges import _short
from ..batch import Batch
from ..errors import ConfigError, EnvStateError, InvalidActionError, InvalidObservationError
from ..games.registry import game_name
from ..spaces import ActionDesc, Spaces
from ..vector import VecEnv
from ._entity_gym_lib import RaggedBufferBool, RaggedBufferF32, RaggedBufferI64, eg

__all__ = ["GymloopVecEnv", "entity_gym_spaces", "env_factory"]

GLOBAL_ENTITY = "__global__"  # entity-gym's name for the one-row entity that carries global features


def entity_gym_spaces(spaces: Spaces) -> tuple[eg.ObsSpace, dict[str, Any]]:
    """gymloop :class:`~gymloop.spaces.Spaces` as entity-gym's ``(ObsSpace, {name: ActionSpace})``."""
    obs = eg.ObsSpace(
        global_features=list(spaces.obs.globals),
        entities={t: eg.Entity(features=list(f)) for t, f in spaces.obs.entities.items()},
    )
    return obs, {name: _action_space(d) for name, d in spaces.actions.items()}


def _action_space(d: ActionDesc) -> Any:
    if d.kind.selects_entities and not d.kind.actor_bound:
        among = d.among[0] if len(d.among) == 1 else "(" + ", ".join(d.among) + ")"
        raise ConfigError(
            f"action type {d.name!r} is a global select-entity (one entity chosen per observation, no actor entity), which "
            "entity-gym cannot express: its select-entity actions are chosen by an actor entity (enn-trainer's network "
            "embeds the '__global__' entity only for global categorical actions); for entity-gym, make the chooser an "
            f"entity: a class without fields given with obs.actor(...), and {d.name} = gl.SelectEntity({d.name!r}, "
            f"among={among}) without gl.global_decision; or train it with gymloop (gymloop train)"
        )
    if d.kind.selects_entities:
        return eg.SelectEntityActionSpace()
    if not d.kind.actor_bound:
        return eg.GlobalCategoricalActionSpace(index_to_label=list(d.labels))
    return eg.CategoricalActionSpace(index_to_label=list(d.labels))


def env_factory(game: Callable[..., Any] | type, seed: int = 0, **options: Any) -> Callable[..., GymloopVecEnv]:
    """enn-trainer's environment factory for a gymloop game: ``enn_trainer.train.train(sm, env_factory(game))``.

    enn-trainer calls it as ``factory(env_config, num_envs, processes, first_env_index)``; ``processes
    > 1`` becomes ``workers``, ``first_env_index`` is added to ``seed`` (each rank of a distributed
    run gets other seeds). ``env_config`` (enn-trainer's ``EnvConfig``, made for its own registry)
    is not used. ``options`` go to :class:`GymloopVecEnv`.
    """

    def make(cfg: Any, num_envs: int, processes: int, first_env_index: int) -> GymloopVecEnv:
        workers = processes if processes > 1 else 0
        return GymloopVecEnv(game, num_envs, seed=seed + first_env_index, workers=min(workers, num_envs), **options)

    make.__name__ = game_name(game)
    return make


@dataclass
class _Filter:
    """A compiled ``obs_space`` filter: the kept entity types and per-type feature columns."""

    types: list[str]  # kept entity types, in the game's order
    columns: dict[str, np.ndarray | None]  # feature columns per kept type (None: all, in order)
    globals: np.ndarray | None  # global feature columns (None: all, in order)
    drops: bool  # some entity type is left out: entity indices change


@dataclass
class _Actees:
    """What decoding a select-entity action needs: per slot, the candidate index of each actee."""

    cand: np.ndarray  # candidate index (within the actor's candidates) of every actee, slot after slot
    offset: np.ndarray  # (num_slots + 1,) where each slot's actees start in ``cand``


class GymloopVecEnv(eg.VecEnv):
    """A gymloop game (or :class:`gymloop.Environment`) as an ``entity_gym.env.VecEnv``.

    Args:
        game: a game loop or a :class:`gymloop.Environment` class, as for :class:`gymloop.VecEnv`.
        num_envs: game copies; entity-gym sees ``num_envs * agents_per_game`` environments.
        seed: root seed (copy ``i`` gets a seed derived from it and ``i``).
        workers: worker processes, as for :class:`gymloop.VecEnv`.
        **options: the other :class:`gymloop.VecEnv` arguments (``agents_per_game``,
            ``entity_types``, ``action_types``, ``checked``, ``backend``, ...).

    The spaces are fixed at construction (the games are started then; the first ``reset`` returns
    those first observations). See the module docstring for the mapping.

    Raises:
        InvalidObservationError: from ``reset`` / ``act``, a batch entity-gym cannot express
            (actors of one slot with different select-entity masks).
        InvalidActionError: from ``act``, actions of the wrong shape, out of range or masked out.
        ConfigError: an ``obs_space`` filter naming types or features the game does not have, or
            leaving out the type of an actor.
    """

    def __init__(self, game: Callable[..., Any] | type, num_envs: int, seed: int = 0, workers: int = 0, **options: Any) -> None:
        self.env = VecEnv(game, num_envs, workers=workers, seed=seed, **options)
        try:
            self._pending: Batch | None = self.env.reset()
            self.spaces = self.env.spaces
            self._obs_space, self._action_space = entity_gym_spaces(self.spaces)
        except BaseException:
            self.env.close()
            raise
        self.name = game_name(game)
        acts = self.spaces.actions.values()
        self._global_entity = bool(self.spaces.obs.globals) or any(not d.kind.actor_bound for d in acts)
        self._batch: Batch | None = None
        self._actees: dict[str, _Actees] = {}
        self._filter_key: Any = None
        self._filter: _Filter | None = None

    # ------------------------------------------------------------------ entity_gym.env.VecEnv
    def obs_space(self) -> eg.ObsSpace:
        return self._obs_space

    def action_space(self) -> dict[str, Any]:
        return dict(self._action_space)

    def __len__(self) -> int:
        return self.env.num_slots

    def reset(self, obs_space: eg.ObsSpace | None = None) -> eg.VecObs:
        """Restart every game (the first call returns the games started by the constructor)."""
        flt = self._compile(obs_space)
        b = self._pending if self._pending is not None else self.env.reset()
        self._pending = None
        return self._vec_obs(b, flt)

    def act(self, actions: Mapping[str, Any], obs_space: eg.ObsSpace | None = None) -> eg.VecObs:
        """Apply the actions (a ``RaggedBufferI64`` per action type, one row per actor) and step every game."""
        if self._batch is None:
            raise EnvStateError(f"{self.name}: act() before reset(); call reset(obs_space) first")
        flt = self._compile(obs_space)
        return self._vec_obs(self.env.step(self._decode(actions)), flt)

    def sample_actions(self) -> dict[str, Any]:
        """Uniformly random legal actions for the last observation, as ``act`` takes them (``RaggedBufferI64``)."""
        b = self._batch
        if b is None:
            raise EnvStateError(f"{self.name}: sample_actions() before reset(); call reset(obs_space) first")
        out = {}
        for name, arr in self.env.sample_actions().items():
            slots = b.actor_slot[name]
            if self.spaces.actions[name].kind.selects_entities and arr.size:
                a = self._actees[name]  # candidate index -> its place among the slot's actees
                big = int(a.cand.max(initial=0)) + 1
                keys = np.repeat(np.arange(b.num_slots), np.diff(a.offset)) * big + a.cand
                arr = np.searchsorted(keys, slots * big + arr) - a.offset[slots]
            lengths = np.bincount(slots, minlength=b.num_slots).astype(np.int64)
            out[name] = RaggedBufferI64.from_flattened(np.asarray(arr, dtype=np.int64).reshape(-1, 1), lengths)
        return out

    def render(self, **kwargs: Any) -> np.ndarray:
        raise NotImplementedError("GymloopVecEnv does not render; use gymloop play / gymloop record on the game")

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ the observation filter
    def _compile(self, flt: eg.ObsSpace | None) -> _Filter:
        if flt is None:
            flt = self._obs_space
        if self._filter is not None and (flt is self._filter_key or flt == self._filter_key):
            return self._filter
        ours = self.spaces.obs
        unknown = [t for t in flt.entities if t not in ours.entities]
        if unknown:
            raise ConfigError(f"{self.name}: the obs_space filter names entity type(s) {unknown} that the game does not have "
                              f"{list(ours.entities)}")

        def columns(have: tuple[str, ...], want: list[str], what: str) -> np.ndarray | None:
            missing = [f for f in want if f not in have]
            if missing:
                raise ConfigError(f"{self.name}: the obs_space filter asks {what} for feature(s) {missing}; it has {list(have)}")
            if list(want) == list(have):
                return None
            return np.array([have.index(f) for f in want], dtype=np.int64)

        types = [t for t in ours.entities if t in flt.entities]
        compiled = _Filter(
            types=types,
            columns={t: columns(ours.entities[t], list(flt.entities[t].features), f"entity type {t!r}") for t in types},
            globals=columns(ours.globals, list(flt.global_features), "the global features"),
            drops=len(types) != len(ours.entities),
        )
        self._filter_key, self._filter = flt, compiled
        return compiled

    def _renumber(self, b: Batch, flt: _Filter, slots: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Entity indices ``idx`` of ``slots`` once the left-out types are removed (-1: in a left-out type)."""
        names = list(b.counts)
        counts = np.stack([b.counts[t] for t in names]) if names else np.zeros((0, b.num_slots), dtype=np.int64)
        kept = np.array([t in flt.types for t in names], dtype=bool)
        starts = np.cumsum(counts, axis=0) - counts
        gone = counts * ~kept[:, None]
        gone_before = np.cumsum(gone, axis=0) - gone
        st, n = starts[:, slots], counts[:, slots]
        of_type = ((st <= idx) & (idx < st + n)).argmax(axis=0)
        out = idx - gone_before[of_type, slots]
        out[~kept[of_type]] = -1
        return out

    # ------------------------------------------------------------------ batch -> VecObs
    def _vec_obs(self, b: Batch, flt: _Filter) -> eg.VecObs:
        """The ``VecObs`` of a batch; a batch that cannot be converted leaves no batch to act on (reset first)."""
        self._batch = None
        return self._convert(b, flt)

    def _convert(self, b: Batch, flt: _Filter) -> eg.VecObs:
        n = b.num_slots
        features: dict[str, Any] = {}
        for t in flt.types:
            cols = flt.columns[t]
            rows = b.entities[t] if cols is None else b.entities[t][:, cols]
            features[t] = RaggedBufferF32.from_flattened(np.ascontiguousarray(rows, dtype=np.float32), b.counts[t])
        total = sum((b.counts[t] for t in flt.types), np.zeros(n, dtype=np.int64))
        if self._global_entity:
            g = b.globals if flt.globals is None else b.globals[:, flt.globals]
            features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(np.ascontiguousarray(g, dtype=np.float32), np.ones(n, dtype=np.int64))
        masks: dict[str, Any] = {}
        actees: dict[str, _Actees] = {}
        for name, d in self.spaces.actions.items():
            slots = b.actor_slot[name]
            lengths = np.bincount(slots, minlength=n).astype(np.int64)
            if d.kind.selects_entities:
                masks[name], actees[name] = self._select(b, flt, name, slots, lengths)
                continue
            if not d.kind.actor_bound:
                idx = total[slots].reshape(-1, 1)  # the "__global__" entity comes after every other one
            else:
                idx = self._actor_indices(b, flt, name, slots)
            m = b.masks[name]
            mask = None if m.all() else RaggedBufferBool.from_flattened(np.ascontiguousarray(m), lengths)
            masks[name] = eg.VecCategoricalActionMask(RaggedBufferI64.from_flattened(idx, lengths), mask)
        metrics: dict[str, eg.Metric] = {}
        for k, v in b.metrics.items():
            vals = v[~np.isnan(v)]
            if vals.size:
                metrics[k] = eg.Metric(count=int(vals.size), sum=float(vals.sum()), min=float(vals.min()), max=float(vals.max()))
        self._batch, self._actees = b, actees
        return eg.VecObs(
            features=features, visible={}, action_masks=masks, reward=b.reward.astype(np.float32),
            done=b.terminated | b.truncated, metrics=metrics,
        )

    def _select(self, b: Batch, flt: _Filter, name: str, slots: np.ndarray, lengths: np.ndarray) -> tuple[Any, _Actees]:
        """The ``VecSelectEntityActionMask`` of a select-entity action, and how to decode its answers."""
        n = b.num_slots
        nc = b.num_candidates[name]
        m = b.masks[name]
        ent = b.candidate_index(name)
        A = slots.size
        per_actor = np.repeat(np.arange(A), nc)
        if flt.drops and ent.size:
            ent = self._renumber(b, flt, slots[per_actor], ent)
            m = m & (ent >= 0)
        start = np.cumsum(nc) - nc
        pos = np.arange(ent.size) - np.repeat(start, nc)  # candidate index within its actor
        first = np.ones(A, dtype=bool)
        first[1:] = slots[1:] != slots[:-1]
        lead = np.maximum.accumulate(np.where(first, np.arange(A), 0)) if A else np.zeros(0, dtype=np.int64)
        same = m == m[start[lead][per_actor] + pos]
        if not same.all():
            j = int(per_actor[np.flatnonzero(~same)[0]])
            raise InvalidObservationError(
                f"{self.name}: slot {int(slots[j])} has actors of select-entity action {name!r} with different masks; "
                "entity-gym's select-entity actions have one list of actees per observation, shared by its actors "
                "(give the actors of one observation the same mask, or one actor per observation)"
            )
        legal = m & first[per_actor]
        if flt.drops and A:
            none = np.bincount(per_actor[legal], minlength=A)[first] == 0
            if none.any():
                s = int(slots[np.flatnonzero(first)[np.flatnonzero(none)[0]]])
                raise ConfigError(f"{self.name}: the obs_space filter leaves out every legal candidate of select-entity "
                                  f"action {name!r} in slot {s}; keep their types")
        n_actees = np.zeros(n, dtype=np.int64)
        n_actees[slots[first]] = np.bincount(per_actor[legal], minlength=A)[first]
        offset = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(n_actees, out=offset[1:])
        mask = eg.VecSelectEntityActionMask(
            actors=RaggedBufferI64.from_flattened(self._actor_indices(b, flt, name, slots), lengths),
            actees=RaggedBufferI64.from_flattened(ent[legal].reshape(-1, 1).astype(np.int64), n_actees),
        )
        return mask, _Actees(cand=pos[legal], offset=offset)

    def _actor_indices(self, b: Batch, flt: _Filter, name: str, slots: np.ndarray) -> np.ndarray:
        """``(actors, 1)`` entity indices of the actors of an actor-bound action type, after the filter."""
        idx = b.actor_index[name]
        if flt.drops:
            idx = self._renumber(b, flt, slots, idx)
            if (idx < 0).any():
                j = int(np.flatnonzero(idx < 0)[0])
                raise ConfigError(f"{self.name}: the obs_space filter leaves out the entity type of an actor of "
                                  f"action {name!r} (slot {int(slots[j])}); keep that type")
        return idx.reshape(-1, 1).astype(np.int64)

    # ------------------------------------------------------------------ actions -> gymloop
    def _decode(self, actions: Mapping[str, Any]) -> dict[str, np.ndarray]:
        b = self._batch
        assert b is not None
        if not isinstance(actions, Mapping):
            raise InvalidActionError(f"{self.name}: act expects a dict of RaggedBufferI64 by action name, got {type(actions).__name__}")
        extra = set(actions) - set(self.spaces.actions)
        if extra:
            raise InvalidActionError(f"{self.name}: unknown action type(s) {sorted(extra)}; the action space has {list(self.spaces.actions)}")
        out: dict[str, np.ndarray] = {}
        for name, d in self.spaces.actions.items():
            slots = b.actor_slot[name]
            raw = actions.get(name)
            if raw is None:
                if slots.size:
                    raise InvalidActionError(f"{self.name}: no actions for action type {name!r}, which has {slots.size} actor(s)")
                out[name] = np.zeros(0, dtype=np.int64)
                continue
            lengths = np.bincount(slots, minlength=b.num_slots)
            per_env = None  # the given rows per environment, where the form says
            if hasattr(raw, "as_array"):
                full = np.asarray(raw.as_array())
                if full.ndim == 2 and full.shape[1] != 1:
                    raise InvalidActionError(f"{self.name}: actions for {name!r} have {full.shape[1]} columns; expected 1 "
                                             "(one index per actor)")
                arr = full.reshape(-1)
                per_env = raw.size1() if hasattr(raw, "size1") else None
            elif isinstance(raw, (list, tuple)) and any(isinstance(x, (list, tuple, np.ndarray)) for x in raw):
                # one list per environment: its rows counted, then flattened
                if len(raw) != b.num_slots or not all(isinstance(x, (list, tuple, np.ndarray)) for x in raw):
                    raise InvalidActionError(f"{self.name}: actions for {name!r} given per environment must be {b.num_slots} lists "
                                             f"(one per environment), got {_short(raw)}")
                per_env = np.array([len(x) for x in raw])
                flat = [v for x in raw for v in np.asarray(x).reshape(-1).tolist()]
                arr = np.asarray(flat) if flat else np.zeros(0, dtype=np.int64)
            else:
                try:
                    arr = np.asarray(raw).reshape(-1)
                except (ValueError, TypeError):
                    raise InvalidActionError(f"{self.name}: actions for {name!r} must be a RaggedBufferI64 or integers, got "
                                             f"{_short(raw)}") from None
            if arr.shape[0] != slots.size or (per_env is not None and not np.array_equal(per_env, lengths)):
                raise InvalidActionError(
                    f"{self.name}: actions for {name!r} must have one row per actor, per environment {lengths.tolist()}, "
                    f"got {np.asarray(per_env).tolist() if per_env is not None else arr.shape[0]}"
                )
            if arr.dtype.kind not in "iu":
                raise InvalidActionError(f"{self.name}: actions for {name!r} must be integers, got dtype {arr.dtype}")
            if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
                raise InvalidActionError(f"{self.name}: action {int(arr.max())} for {name!r} is out of range (beyond int64)")
            arr = arr.astype(np.int64)
            if d.kind.selects_entities and arr.size:
                a = self._actees[name]
                have = a.offset[1:][slots] - a.offset[:-1][slots]
                bad = (arr < 0) | (arr >= have)
                if bad.any():
                    j = int(np.flatnonzero(bad)[0])
                    raise InvalidActionError(
                        f"{self.name}: action type {name!r}, actor {j} (environment {int(slots[j])}): actee {int(arr[j])} is out of "
                        f"range [0, {int(have[j])})"
                    )
                arr = a.cand[a.offset[slots] + arr]
            out[name] = arr
        return out

