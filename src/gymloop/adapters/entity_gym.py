"""entity-gym, both ways: its environments run in gymloop, gymloop games run in enn-trainer.

- :class:`EntityGymEnv` wraps any ``entity_gym.env.Environment`` as a :class:`gymloop.Environment`,
  so :class:`gymloop.VecEnv`, the trainer and ``gymloop train module:Class`` run it:
  categorical, select-entity (the actees chosen per step become a mask over the candidates) and
  global categorical actions, masks, entity types without features, entities hidden from the
  policy (``Observation.visible``) and entity ids (mapped to indices and back, whether or not
  every type has ids).
- :class:`GymloopVecEnv` (in :mod:`gymloop.adapters.entity_gym_vec`) runs any gymloop game or
  environment as an ``entity_gym.env.VecEnv``, so enn-trainer can train it.

entity-gym's examples draw their randomness from the global :mod:`random` and ``numpy.random``
generators and take no seed. :class:`EntityGymEnv` gives each copy its own streams of both
(:mod:`gymloop.adapters._streams`, public APIs only): an episode's first call seeds them from the
copy's episode seed (``reset(seed)``) as ``random.seed`` and ``np.random.seed`` do, and every call
of the copy draws from its own streams, the caller's states taken out of the global generators once
per executor batch and put back when it ends (about 6 µs a call, 8 µs an episode's first; the
adapter's page has the figures). A copy's episodes then depend on its seed only (not on the other
copies stepped before it, nor on how copies are split among worker processes, nor on what the
caller draws), and a fault is reproduced by the seed its :class:`~gymloop.errors.GameError` names.
``isolate_random=False`` leaves the generators alone (the games draw from one shared stream, as
under entity-gym's own vector environments).

A class that overrides ``reset_filter``/``act_filter`` (most examples do: their ``reset``/``act``
build ``obs_space()`` anew to call them) is called through them with the space it declared, as
entity-gym's own vector environments call it. The last observation of an episode (``done``) gives
its reward, end and metrics; its entities are not read (entity-gym has no truncation, so nothing
evaluates them), nor checked against the spaces.

Installing entity-gym 0.1.10 on Python 3.11 needs ``pip install --ignore-requires-python
--prefer-binary entity-gym==0.1.10 "numpy<2"`` (its metadata says < 3.11; ragged-buffer needs
numpy < 2). This module imports ``entity_gym`` when it is imported; ``import gymloop`` does not.

Example:
    >>> import gymloop as gl
    >>> from gymloop.adapters.entity_gym import from_entity_gym
    >>> from entity_gym.examples import Xor                       # doctest: +SKIP
    >>> env = gl.VecEnv(from_entity_gym(Xor), num_envs=4, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..env import Environment, EnvObservation
from ..errors import InvalidObservationError, SchemaError
from ..runtime.envexec import end_flag
from ..spaces import ActionDesc, ObsSpace
from ._entity_gym_lib import eg
from ._streams import Streams, as_caller

__all__ = ["EntityGymEnv", "from_entity_gym", "is_entity_gym_env"]

#: up to this many actor (or actee) ids are looked up by searching each type's ids, more through a map of every id
_FEW_IDS = 4


def is_entity_gym_env(obj: Any) -> bool:
    """True for an ``entity_gym.env.Environment`` subclass (or a ``functools.partial`` of one)."""
    target = obj.func if isinstance(obj, functools.partial) else obj
    return isinstance(target, type) and issubclass(target, eg.Environment)


def from_entity_gym(make: Callable[..., Any], *args: Any, isolate_random: bool = True, **kwargs: Any) -> Callable[[], EntityGymEnv]:
    """A factory for :class:`gymloop.VecEnv` and the trainer: ``make(*args, **kwargs)`` wrapped.

    Args:
        make: an ``entity_gym.env.Environment`` subclass, or any function returning an instance.
        isolate_random: give each copy its own streams of the global :mod:`random` /
            ``numpy.random`` generators, started from its episode seed (see the module docstring).

    Example:
        >>> import gymloop as gl
        >>> from entity_gym.examples import Count                         # doctest: +SKIP
        >>> gl.train.train(from_entity_gym(Count), gl.train.TrainConfig(steps=4096))  # doctest: +SKIP
    """
    factory = functools.partial(EntityGymEnv, make, *args, isolate_random=isolate_random, **kwargs)
    factory.__name__ = getattr(make, "__name__", "entity_gym_env")  # type: ignore[attr-defined]  # the trainer's game name
    return factory


class EntityGymEnv(Environment):
    """One ``entity_gym.env.Environment`` as a gymloop :class:`~gymloop.Environment`.

    Args:
        make: an entity-gym environment class (or a function returning an instance); called with
            ``*args`` and ``**kwargs``.
        isolate_random: give this copy its own streams of the global :mod:`random` and
            ``numpy.random`` generators, started from its episode seed (see the module docstring).

    Its spaces: entity types and their features in the environment's order, its global features;
    a ``CategoricalActionSpace`` is a categorical action, a ``GlobalCategoricalActionSpace`` a
    global decision, a ``SelectEntityActionSpace`` a select-entity action whose candidates are
    every (visible) entity, of any type, with a mask allowing the actees that step's
    ``SelectEntityActionMask`` names.

    Raises:
        SchemaError: an action space of a kind entity-gym 0.1.10 does not have.
        InvalidObservationError: an observation that breaks the environment's own spaces (an
            entity type it does not declare, rows with the wrong number of features, an actor or
            actee id that no entity has, ids and features of different lengths); the message
            names the environment, the type and the id.
    """

    def __init__(self, make: Callable[..., Any], *args: Any, isolate_random: bool = True, **kwargs: Any) -> None:
        self._streams = Streams() if isolate_random else None
        as_caller(self._make, make, args, kwargs)  # (drawing from the caller's streams, also inside the executor's batch)

    def _make(self, make: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.env = make(*args, **kwargs)
        if not isinstance(self.env, eg.Environment):
            raise SchemaError(f"{make!r} made {self.env!r}, not an entity_gym.env.Environment")
        self.name = type(self.env).__name__
        space = self.env.obs_space()
        if not isinstance(space, eg.ObsSpace):
            raise SchemaError(f"entity-gym environment {self.name}: obs_space() returned {type(space).__name__}, expected an "
                              "entity_gym.env.ObsSpace")
        # entity-gym's own vector environments call reset_filter/act_filter with the space; a class that
        # overrides them (most examples) has its reset/act call obs_space() again each time to do the same
        cls = type(self.env)
        plain_reset, plain_act = cls.reset_filter is eg.Environment.reset_filter, cls.act_filter is eg.Environment.act_filter
        self._reset = functools.partial(_reset, self.env) if plain_reset else functools.partial(_reset_filter, self.env, space)
        self._act = functools.partial(_act, self.env) if plain_act else functools.partial(_act_filter, self.env, space)
        self._types = list(space.entities)
        self._feats = {t: tuple(e.features) for t, e in space.entities.items()}
        self._globals = tuple(space.global_features)
        self._obs_space = ObsSpace(entities=dict(self._feats), globals=self._globals)
        self._actions: dict[str, ActionDesc] = {}
        self._eg_actions = self.env.action_space()
        if not isinstance(self._eg_actions, Mapping):
            raise SchemaError(f"entity-gym environment {self.name}: action_space() returned {type(self._eg_actions).__name__}, "
                              "expected a dict of action name -> action space")
        for name, a in self._eg_actions.items():
            if isinstance(a, eg.CategoricalActionSpace):
                self._actions[name] = ActionDesc(name, "categorical", tuple(a.index_to_label))
            elif isinstance(a, eg.GlobalCategoricalActionSpace):
                self._actions[name] = ActionDesc(name, "global_categorical", tuple(a.index_to_label))
            elif isinstance(a, eg.SelectEntityActionSpace):
                self._actions[name] = ActionDesc(name, "select_entity", among=tuple(self._types))
            else:
                raise SchemaError(
                    f"{self.name}: action {name!r} has space {type(a).__name__}; supported: CategoricalActionSpace, "
                    "GlobalCategoricalActionSpace, SelectEntityActionSpace"
                )
        self._labels = {name: list(d.labels) for name, d in self._actions.items()}
        # per action: "global", "categorical" or "select" (plain strings: compared on every step)
        self._kind = {name: "global" if not d.kind.actor_bound else "select" if d.kind.selects_entities else "categorical"
                      for name, d in self._actions.items()}
        self._nf = [(t, len(f)) for t, f in self._feats.items()]
        self._last: Any = None
        self._rows: list[tuple[str, int, int, Any, Any]] = []
        self._offset: dict[str, tuple[int, int]] = {}
        self._total = 0
        self._to_id: list[Any] | None = None
        self._to_index: dict[Any, int] | None = None
        self._actor_ids: dict[str, Any] = {}
        self._actor_index: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ gl.Environment
    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> dict[str, ActionDesc]:
        return dict(self._actions)

    def reset(self, seed: int) -> EnvObservation:
        return self._convert(self._reset() if self._streams is None else self._streams.call(self._reset, seed=seed))

    def act(self, actions: Mapping[str, np.ndarray]) -> EnvObservation:
        eg_actions: dict[str, Any] = {}
        for name in self._last.actions:
            kind = self._kind[name]
            arr = actions.get(name)
            if type(arr) is not np.ndarray or arr.dtype != np.int64 or arr.ndim != 1:
                arr = np.asarray(() if arr is None else arr, dtype=np.int64).reshape(-1)
            if kind == "categorical":
                eg_actions[name] = eg.CategoricalAction(actors=self._ids_of_actors(name), indices=arr, index_to_label=self._labels[name])
            elif kind == "global":
                i = int(arr[0])
                eg_actions[name] = eg.GlobalCategoricalAction(index=i, label=self._labels[name][i])
            else:
                to_id = self._index_to_id()
                eg_actions[name] = eg.SelectEntityAction(actors=self._ids_of_actors(name), actees=[to_id[c] for c in arr.tolist()])
        o = self._act(eg_actions) if self._streams is None else self._streams.call(self._act, eg_actions)
        if type(o) is eg.Observation and (o.done if type(o.done) is bool else self._done(o.done)):
            # the episode's last observation: only its reward, end and metrics are used (entity-gym has no
            # truncation, whose last observation would be evaluated), so its entities are not converted
            return EnvObservation(entities={}, actors={}, masks={}, reward=o.reward, terminated=True, metrics=o.metrics)
        return self._convert(o)

    def close(self) -> None:
        as_caller(self.env.close)

    # ------------------------------------------------------------------ helpers
    def _done(self, done: Any) -> bool:
        """``Observation.done`` that is not a Python bool: a numpy bool, 0 or 1 (as the executor takes an end)."""
        try:
            return end_flag(done, "done")
        except InvalidObservationError as e:
            raise self._bad(str(e)) from None

    def _bad(self, msg: str) -> InvalidObservationError:
        return InvalidObservationError(f"entity-gym environment {self.name}: {msg}")

    def _index_to_id(self) -> list[Any]:
        """The last observation's entity ids by index (``None`` for an entity without id)."""
        if self._to_id is None:
            to_id: list[Any] = []
            for _t, _off, n, keep, ids in self._rows:
                if ids is None:
                    to_id += [None] * n
                elif keep is None:
                    to_id += ids
                else:
                    to_id += [ids[r] for r in keep]
            named = [eid for eid in to_id if eid is not None]
            try:
                unique = len(set(named)) == len(named)
            except TypeError:  # (an unhashable id: named below)
                unique = False
            seen: set[Any] = set()
            for t, off, n, _keep, _ids in () if unique else self._rows:  # ids name entities in act(): one given twice is ambiguous
                for eid in to_id[off : off + n]:
                    if eid is not None:
                        try:
                            hash(eid)
                        except TypeError:
                            raise self._bad(f"entity type {t!r}: id {_short([eid])[1:-1]} is a {type(eid).__name__}; ids must be "
                                            "hashable (a str, an int, a tuple, ...)") from None
                        if eid in seen:
                            raise self._bad(f"entity type {t!r}: id {eid!r} is given to two entities; ids must be unique")
                        seen.add(eid)
            self._to_id = to_id
        return self._to_id

    def _id_to_index(self) -> dict[Any, int]:
        if self._to_index is None:
            to_id = self._index_to_id()
            to_index = {eid: j for j, eid in enumerate(to_id) if eid is not None}
            if len(to_index) != len(to_id) - to_id.count(None):  # an id given twice: name it and its type
                seen: set[Any] = set()
                for t, _off, _n, keep, ids in self._rows:
                    for eid in () if ids is None else ids if keep is None else [ids[r] for r in keep]:
                        if eid in seen:
                            raise self._bad(f"entity type {t!r}: id {eid!r} is given to two entities; ids must be unique")
                        seen.add(eid)
            self._to_index = to_index
        return self._to_index

    def _search(self, ids: Sequence[Any]) -> list[int] | None:
        """Entity indices of ``ids``, found in each type's id list; ``None`` for anything but the plain case
        (hidden entities, ids not in a list or tuple, an id missing or given twice): :meth:`_id_to_index` then
        answers, or names the problem."""
        out = []
        for eid in ids:
            at = -1
            for _t, off, _n, keep, tids in self._rows:
                if tids is None:
                    continue
                if keep is not None or not isinstance(tids, (list, tuple)):
                    return None
                if eid in tids:
                    if at >= 0 or tids.count(eid) > 1:
                        return None
                    at = off + tids.index(eid)
            if at < 0:
                return None
            out.append(at)
        return out

    def _ids_of_actors(self, name: str) -> Sequence[Any]:
        ids = self._actor_ids[name]
        if ids is None:
            to_id = self._index_to_id()
            ids = [to_id[j] for j in self._actor_index[name]]
        return ids

    def _indices(self, name: str, ids: Sequence[Any] | None, types: Sequence[str] | None, role: str) -> list[int]:
        """Entity indices of the actors (or actees) a mask names by id, by type, or all."""
        if ids is not None:
            if len(ids) > 1 and len(set(ids)) != len(ids):
                twice = next(eid for k, eid in enumerate(ids) if eid in list(ids)[:k])
                raise self._bad(f"action {name!r} names {role} id {twice!r} twice; each {role} once")
            if len(ids) <= _FEW_IDS:  # a few ids (often one actor): a search in each type's ids is cheaper than a map of all
                found = self._search(ids)
                if found is not None:
                    return found
            to_index = self._id_to_index()  # (also names what the search could not resolve)
            try:
                return [to_index[eid] for eid in ids]
            except KeyError as e:
                hidden = sorted(t for t, _off, _n, keep, _ids in self._rows if keep is not None)
                where = f" (types with hidden entities: {hidden})" if hidden else ""
                raise self._bad(f"action {name!r} names {role} id {e.args[0]!r}, which no visible entity has{where}") from None
        if types is not None:
            out: list[int] = []
            for t in types:
                if t not in self._feats:
                    raise self._bad(f"action {name!r} names {role} type {t!r}, which obs_space() does not declare {self._types}")
                row = self._offset.get(t)
                if row is not None:
                    out += range(row[0], row[0] + row[1])
            return out
        return list(range(self._total))

    def _bad_rows(self, t: str, raw: Any, ids: Any, nf: int) -> None:
        """Raise the error naming the first row of type ``t`` that is not ``nf`` numbers."""
        for i, r in enumerate(raw):
            k = len(r) if hasattr(r, "__len__") else None
            if k != nf:
                got = f"{k} features" if k is not None else f"{r!r}, not a row of numbers"
                raise self._bad(f"entity type {t!r}, {_who(ids, i)}: {got}, expected {nf}: features {list(self._feats[t])} "
                                "as obs_space() declares")

    def _convert(self, o: Any) -> EnvObservation:
        """An entity-gym ``Observation`` as an :class:`EnvObservation` (ids become indices)."""
        if not isinstance(o, eg.Observation):
            raise self._bad(f"reset/act returned {type(o).__name__}, expected an entity_gym Observation")
        feats = o.features
        if type(feats) is not dict or type(o.ids) is not dict or type(o.actions) is not dict:  # (the usual case: one check)
            for field, what in (("features", "entity type -> rows"), ("ids", "entity type -> ids"), ("actions", "action name -> mask")):
                if not isinstance(getattr(o, field), Mapping):
                    raise self._bad(f"Observation.{field} is {type(getattr(o, field)).__name__}, expected a dict of {what}")
        if not self._feats.keys() >= feats.keys() >= o.ids.keys():  # (declared types hold the featured ones, which hold those with ids)
            for t in (*feats, *o.ids):
                if t not in self._feats:
                    raise self._bad(f"the observation has entity type {t!r}, which obs_space() does not declare {self._types}")
            t = next((t for t in o.ids.keys() - feats.keys() if len(o.ids[t])), None)  # (no ids for no entities is fine)
            if t is not None:
                raise self._bad(f"entity type {t!r} has ids {_short(o.ids[t])} but no features; give its rows in "
                                "Observation.features (an (n, 0) array for a type without features)")
        if o.visible and not self._feats.keys() >= o.visible.keys():
            t = next(t for t in o.visible if t not in self._feats)
            raise self._bad(f"visible names entity type {t!r}, which obs_space() does not declare {self._types}")
        entities: dict[str, Any] = {}
        rows: list[tuple[str, int, int, Any, Any]] = []  # (type, offset, count, kept rows or None, ids)
        offset_of: dict[str, tuple[int, int]] = {}
        offset = 0
        visible = o.visible
        all_ids = o.ids
        for t, nf in self._nf:
            raw = feats.get(t)
            if raw is None:
                continue
            ids = all_ids.get(t)
            if isinstance(raw, np.ndarray):
                shape = raw.shape
                if len(shape) != 2 or shape[1] != nf:
                    if raw.ndim == 1 and raw.size == 0:
                        raw = raw.reshape(0, nf)
                    else:
                        raise self._bad(f"entity type {t!r}, {_who(ids, 0)}: features of shape {raw.shape}, expected (n, {nf}): "
                                        f"features {list(self._feats[t])} as obs_space() declares")
                n = shape[0] if len(shape) == 2 else 0
            else:
                n = len(raw)
                try:
                    ok = not any(map(nf.__ne__, map(len, raw)))
                except TypeError:
                    ok = False
                if not ok:
                    self._bad_rows(t, raw, ids, nf)
            if ids is not None and len(ids) != n:
                raise self._bad(f"entity type {t!r} has {n} rows of features but {len(ids)} ids {_short(ids)}; give one id per row")
            keep = None
            vis = visible.get(t) if visible else None
            if vis is not None:
                if isinstance(vis, (list, tuple)):  # (a short list: plain Python is several times faster than numpy here)
                    if len(vis) != n:
                        raise self._bad(f"entity type {t!r}: visible has {len(vis)} entries for {n} entities")
                    if not all(vis):
                        keep = [i for i, x in enumerate(vis) if x]
                else:
                    v = np.asarray(vis, dtype=bool).reshape(-1)
                    if v.size != n:
                        raise self._bad(f"entity type {t!r}: visible has {v.size} entries for {n} entities")
                    if not v.all():
                        keep = np.flatnonzero(v).tolist()
                if keep is not None:
                    raw = np.asarray(raw, dtype=np.float32).reshape(n, nf)[keep] if keep else np.zeros((0, nf), dtype=np.float32)
                    n = len(keep)
            entities[t] = raw
            rows.append((t, offset, n, keep, ids))
            offset_of[t] = (offset, n)
            offset += n
        self._rows, self._offset, self._total = rows, offset_of, offset
        self._to_id, self._to_index = None, None
        actors: dict[str, Sequence[int]] = {}
        masks: dict[str, Any] = {}
        self._actor_ids = actor_ids = {}
        self._actor_index = actor_index = {}
        kinds = self._kind
        for name, m in o.actions.items():
            kind = kinds.get(name)
            if kind is None:
                raise self._bad(f"the observation asks for action {name!r}, which action_space() does not declare {list(self._actions)}")
            mask_type = _MASKS[kind]
            if type(m) is not mask_type and not isinstance(m, mask_type):
                raise self._bad(f"action {name!r} is a {type(self._eg_actions[name]).__name__}: its mask must be a "
                                f"{mask_type.__name__}, got {type(m).__name__}")
            if kind == "global":
                actors[name] = ()
                if getattr(m, "mask", None) is not None:
                    masks[name] = np.asarray(m.mask, dtype=bool).reshape(1, -1)
                continue
            ids = m.actor_ids
            idx = self._indices(name, ids, m.actor_types, "actor")
            actors[name] = actor_index[name] = idx
            actor_ids[name] = ids
            if kind == "categorical":
                if m.mask is not None:
                    masks[name] = m.mask
            else:
                actee_types = m.actee_types
                actees = self._indices(name, m.actee_ids, actee_types, "actee")
                if m.actee_ids is None and actees:  # the chosen entity reaches act() by its id: every candidate needs one
                    for t, _off, k, _keep, tids in rows:
                        if tids is None and k and (actee_types is None or t in actee_types):
                            raise self._bad(f"action {name!r} may select entities of type {t!r}, which have no ids: act() names "
                                            "the chosen entity by its id; give that type ids (Observation.ids) or leave it out "
                                            "of actee_types")
                if m.mask is None and len(actees) == offset:
                    continue  # every entity may be chosen: no mask
                mask = np.zeros((len(idx), offset), dtype=bool)
                if m.mask is not None:
                    sub = np.asarray(m.mask, dtype=bool)
                    if sub.shape != (len(idx), len(actees)):
                        raise self._bad(f"action {name!r}: mask has shape {sub.shape}, expected (actors, actees) = {(len(idx), len(actees))}")
                    mask[:, actees] = sub
                else:
                    mask[:, actees] = True
                masks[name] = mask.reshape(-1)
        gf = o.global_features
        if not self._globals:
            if gf is not None and len(gf):
                raise self._bad(f"the observation has {len(gf)} global features, but obs_space() declares none; "
                                "declare them in ObsSpace(global_features=[...]) or leave them out")
        elif type(gf) is not list and (not hasattr(gf, "__len__") or isinstance(gf, str)):
            raise self._bad(f"global_features is {gf!r}, expected a list of {len(self._globals)} numbers {list(self._globals)}")
        if self._globals and len(o.global_features) != len(self._globals):
            raise self._bad(f"the observation has {len(o.global_features)} global features, expected {len(self._globals)}: "
                            f"{list(self._globals)} as obs_space() declares")
        self._last = o
        return EnvObservation(
            entities=entities, actors=actors, masks=masks, reward=o.reward,
            terminated=o.done if type(o.done) is bool else self._done(o.done),
            globals=o.global_features if self._globals else None, metrics=o.metrics,
        )


# (the environment's methods are looked up at each call, not bound once: a test or a wrapper may replace them)
def _reset(env: Any) -> Any:
    return env.reset()


def _reset_filter(env: Any, space: Any) -> Any:
    return env.reset_filter(space)


def _act(env: Any, actions: Any) -> Any:
    return env.act(actions)


def _act_filter(env: Any, space: Any, actions: Any) -> Any:
    return env.act_filter(actions, space)


#: the mask class entity-gym gives each kind of action
_MASKS: dict[str, Any] = {"global": eg.GlobalCategoricalActionMask, "categorical": eg.CategoricalActionMask,
                           "select": eg.SelectEntityActionMask}


def _who(ids: Sequence[Any] | None, row: int) -> str:
    """Entity ``row`` of a type, for a message: by its id when it has one."""
    return f"entity id {ids[row]!r}" if ids is not None and row < len(ids) else f"row {row} (no ids)"


def _short(xs: Any, n: int = 8) -> str:
    """``xs`` for a message, its first ``n`` items when it is long."""
    xs = list(xs)
    return repr(xs) if len(xs) <= n else repr(xs[:n])[:-1] + f", ... ({len(xs)} in all)]"
