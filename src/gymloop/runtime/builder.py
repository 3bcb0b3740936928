"""The batch builder: pending decisions (``gl.Obs`` objects) → one :class:`~gymloop.batch.Batch`.

:class:`BatchBuilder` knows nothing of greenlets. It is given, per slot, the observation a game
passed to ``act`` and the action types it asked for (``None`` for a slot with no pending decision),
and builds the batch with one numpy call per entity type, never one per game. It keeps what is
needed to decode the next actions (:attr:`BatchBuilder.plan`, :meth:`BatchBuilder.decode`), builds
the ``final`` batch of truncated episodes (:meth:`BatchBuilder.build_final`), and raises every
:class:`~gymloop.errors.InvalidObservationError` about an observation (an unknown type, a bad
feature, score, mask or globals), naming the slot and the env.

:class:`~gymloop.runtime.episodes.EpisodeState` is the per-slot bookkeeping between two batches:
the reward accumulated from score changes, episode ends (terminated / truncated), the running episode return and length, the
metrics to report and the observations given to ``game_over`` on truncation. The greenlet
:class:`~gymloop.runtime.executor.Executor` updates it when a game ends an episode or returns, and
hands it to :meth:`BatchBuilder.build`, which folds the new scores in and empties it into the batch.
Without one a batch has zero rewards and no ends. Features are featurized and checked by
:func:`gymloop.obs.checked_features`, the function the single-observation builder
(:mod:`gymloop.featurize`: the neural agent, traces, ``gl.run``'s checks) uses too.

The low-level :class:`~gymloop.runtime.envexec.EnvExecutor` builds its batches from arrays an
:class:`~gymloop.env.Environment` returns, not from Python objects, so it has its own entity and mask
packing; what the two share is the batch layout's pieces: the empty batch and the empty parts of a
``final`` batch (:meth:`Batch.empty <gymloop.batch.Batch.empty>`) and each kind's masks
(:class:`~gymloop.kinds.ActionKind`).

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.grid import Move
    >>> from gymloop.games.snake import Head
    >>> from gymloop.spaces import Spaces
    >>> from gymloop.runtime.builder import BatchBuilder
    >>> from gymloop.runtime.episodes import EpisodeState
    >>> sp = Spaces.build([Head], None, [Move])
    >>> bb = BatchBuilder(sp, num_slots=2)
    >>> ep = EpisodeState(2)
    >>> pending = [gl.Obs(score=1).actor(Head(0, 1)), gl.Obs(score=2).actor(Head(3, 4))]
    >>> b = bb.build(pending, [(Move,), (Move,)], ep)
    >>> b.entities["Head"].tolist(), b.actor_slot["Move"].tolist()
    ([[0.0, 1.0], [3.0, 4.0]], [0, 1])
    >>> bb.decode([np.array([1, 0])])
    [[<Move.DOWN: 1>, <Move.UP: 0>]]
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import numpy as np

from ..batch import Batch
from ..errors import EnvStateError, InvalidObservationError, SchemaError
from ..obs import FLOAT32_MAX, Obs, checked_features, checked_score, mask_vector, no_actor_message
from ..schema import schema_of
from ..spaces import Spaces
from .episodes import EpisodeState

if TYPE_CHECKING:
    from ..featurize import OneObs, SpaceBinding

FLOAT32_MAX_SQUARED = FLOAT32_MAX * FLOAT32_MAX  # (finite in float64)

__all__ = ["BatchBuilder", "Plan", "one_slot_batch"]

_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class BatchBuilder:
    """Builds :class:`~gymloop.batch.Batch` es of slots ``[slot_lo, slot_lo + num_slots)`` from ``gl.Obs`` objects.

    Args:
        spaces: the compiled :class:`~gymloop.spaces.Spaces` (:meth:`Spaces.build
            <gymloop.spaces.Spaces.build>`): entity schemas and action specs.
        num_slots: how many slots each batch has.
        slot_lo: the global index of the first slot (a batch's ``actor_slot`` is global).
        env_lo, agents_per_game: the global index of the first env and the agents per game, for
            error messages (slot ``s`` is env ``env_lo + s // agents_per_game``).

    Only :meth:`build` and :meth:`decode` are on the hot path. The low-level
    :class:`~gymloop.runtime.envexec.EnvExecutor` is not built on this class (its observations are
    arrays, not objects); it shares :meth:`Batch.empty <gymloop.batch.Batch.empty>` and the kinds'
    masks with it (see the module docstring).
    """

    def __init__(self, spaces: Spaces, num_slots: int, slot_lo: int = 0, env_lo: int = 0, agents_per_game: int = 1) -> None:
        self.spaces = spaces
        self.n = num_slots
        self.slot_lo = slot_lo
        self.env_lo = env_lo
        self.apg = agents_per_game
        #: what :meth:`decode` needs from the last batch (``None`` before the first)
        self.plan: Plan | None = None
        self._bound = [spec.kind.actor_bound for spec in spaces.action_specs]
        # the action types not tied to an actor (global decisions); empty in most games, so the
        # single-actor fast path of _gather costs one truth test for them
        self.unbound = {spec.key for spec in spaces.action_specs if not spec.kind.actor_bound}

    # ------------------------------------------------------------------ building
    def build(self, pobs: list[Obs | None], ptypes: list[tuple | None], episodes: EpisodeState | None = None) -> Batch:
        """The batch of every pending decision (one numpy call per entity type).

        ``pobs[s]`` / ``ptypes[s]``: slot ``s``'s observation and the action types asked (``None``:
        no decision pending; that slot is inactive). With ``episodes`` the scores are folded into it
        and its rewards, ends, metrics and final observations are emptied into the batch; without,
        those are zero / empty. An observation that entities(...) gave with several types in one call
        is regrouped in place (its chunks split by type).

        Raises:
            InvalidObservationError: a bad observation; the message names the slot (and env).
        """
        sp = self.spaces
        n = self.n
        schemas = sp.entity_schemas
        T = len(schemas)
        specs = sp.action_specs
        mbuf = episodes.metrics if episodes is not None else {}
        objs, cnt, a_slot, a_t, a_rank, masked, simple, active = self._gather(pobs, ptypes, mbuf, episodes, True)
        for t, sc in enumerate(schemas):
            lst = objs[t]
            if lst and (type(lst[0]) is not sc.cls or len(set(map(type, lst))) != 1):
                self._regroup(pobs)
                objs, cnt, a_slot, a_t, a_rank, masked, simple, active = self._gather(pobs, ptypes, mbuf, episodes, False)
                break

        # ---- entities: one numpy call per type
        entities: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        C = np.array(cnt, dtype=np.int64).reshape(T, n)
        for t, sc in enumerate(schemas):
            entities[sc.name] = checked_features(sc, objs[t], partial(self._where, cnt[t]))
            counts[sc.name] = C[t]

        # ---- globals
        gs = sp.globals_schema
        if gs is not None:
            gl_objs = []
            for s in range(n):
                obs = pobs[s]
                if obs is None:
                    continue
                g = obs.global_features
                if g is None or type(g) is not gs.cls:
                    raise InvalidObservationError(
                        f"slot {self.slot_lo + s}: the observation space has globals of type {gs.name!r} but the "
                        f"observation gave {g!r}; call obs.globals({gs.name}(...)) on every observation"
                    )
                gl_objs.append(g)
            garr = checked_features(gs, gl_objs, partial(self._where, active.astype(np.int64).tolist()))
            if active.all():
                globs = garr
            else:
                globs = np.zeros((n, len(gs.features)), dtype=np.float32)
                globs[active] = garr
        else:
            globs = np.zeros((n, 0), dtype=np.float32)

        # ---- actors and masks
        tindex = sp.entity_index
        starts = np.cumsum(C, axis=0) - C
        actor_slot: dict[str, np.ndarray] = {}
        actor_index: dict[str, np.ndarray] = {}
        masks: dict[str, np.ndarray] = {}
        ncand: dict[str, np.ndarray] = {}
        among: list[tuple[int, ...]] = []
        cand_types: dict[str, tuple[str, ...]] = {}
        for a, spec in enumerate(specs):
            if simple and len(a_slot[a]) == n:  # one actor in every slot: slots 0..n-1 in order
                sl = np.arange(n, dtype=np.int64)
            else:
                sl = np.array(a_slot[a], dtype=np.int64)
            kind = spec.kind
            if not kind.actor_bound:
                ai = np.full(sl.size, -1, dtype=np.int64)
            elif sl.size:
                ta = a_t[a]
                if ta.count(ta[0]) == len(ta):  # one actor type (the common case): one row of starts
                    ai = starts[ta[0]][sl]
                else:
                    ai = starts[np.array(ta, dtype=np.int64), sl]
                if a_rank[a]:
                    pos, rank = zip(*a_rank[a])
                    ai[list(pos)] += rank
            else:
                ai = _EMPTY_I64.copy()
            actor_slot[spec.name] = sl + self.slot_lo
            actor_index[spec.name] = ai
            if kind.selects_entities:
                ts = tuple(tindex[c] for c in spec.among)
                among.append(ts)
                cand_types[spec.name] = tuple(schemas[t].name for t in ts)
                nc = C[list(ts)].sum(axis=0)[sl] if sl.size else _EMPTY_I64.copy()
                ncand[spec.name] = nc
                masks[spec.name] = kind.all_legal(sl.size, spec.n, int(nc.sum()))
            else:
                among.append(())
                masks[spec.name] = kind.all_legal(sl.size, spec.n)
        if masked:
            self._apply_masks(masked, masks, ncand, specs, ptypes)
        for a, spec in enumerate(specs):
            nc = ncand.get(spec.name)
            if nc is not None and (nc == 0).any():
                j = int(np.flatnonzero(nc == 0)[0])
                raise InvalidObservationError(
                    f"select-entity action {spec.name!r}: the actor of slot {self.slot_lo + a_slot[a][j]} has no "
                    f"candidate (no entity of type {cand_types[spec.name]} was observed); observe at least one "
                    "candidate or do not ask for this action type"
                )
            bad = spec.kind.no_legal(masks[spec.name], nc)
            if bad is not None:
                self._no_legal(spec, a_slot[a][bad])

        # ---- rewards, ends, metrics
        final = None
        if episodes is not None:
            reward, terminated, truncated, metrics = episodes.take()
        else:
            reward = np.zeros(n, dtype=np.float32)
            terminated = np.zeros(n, dtype=bool)
            truncated = np.zeros(n, dtype=bool)
            metrics = {}
        self.plan = Plan(simple, a_slot, among, objs, cnt)
        if episodes is not None and episodes.final_obs:
            final = self.build_final(episodes.final_obs)
            episodes.final_obs = {}
        return Batch(
            final=final,
            num_slots=n,
            entities=entities,
            counts=counts,
            globals=globs,
            actor_slot=actor_slot,
            actor_index=actor_index,
            masks=masks,
            num_candidates=ncand,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            active=active,
            metrics=metrics,
            candidate_types=cand_types,
        )

    def build_final(self, final_obs: dict[int, Obs]) -> Batch:
        """The observations given to ``game_over`` on truncation (``{slot: obs}``), as a batch without actors."""
        sp = self.spaces
        n = self.n
        schemas = sp.entity_schemas
        tindex = sp.entity_index
        objs: list[list[Any]] = [[] for _ in schemas]
        cnt = [[0] * n for _ in schemas]
        f = Batch.empty(sp, n)
        has = f.active
        gs = sp.globals_schema
        globs = f.globals
        for s in sorted(final_obs):
            obs = final_obs[s]
            has[s] = True
            for o in obs.entity_list():  # actors first within a type, as in every batch
                t = tindex.get(type(o))
                if t is None:
                    self._unknown_type(type(o))
                objs[t].append(o)
                cnt[t][s] += 1
            g = obs.global_features
            if gs is not None and type(g) is gs.cls:
                globs[s] = checked_features(gs, [g], partial(self._where, [1]))[0]
        f.entities = {sc.name: checked_features(sc, objs[t], partial(self._where, cnt[t])) for t, sc in enumerate(schemas)}
        f.counts = {sc.name: np.array(cnt[t], dtype=np.int64) for t, sc in enumerate(schemas)}
        return f

    # ------------------------------------------------------------------ decoding
    def decode(self, actions: Sequence[np.ndarray]) -> list[list[Any]]:
        """The chosen values (enum members, composites, entity objects) of the last batch's actors.

        ``actions``: one int array per action type, in space order, aligned with that batch's
        actors. Returns one list per action type, aligned with ``plan.a_slot``.
        """
        decoded: list[list[Any]] = []
        for a, spec in enumerate(self.spaces.action_specs):
            idx = actions[a].tolist()
            if spec.kind.selects_entities:
                decoded.append(self._decode_select(a, idx))
            else:
                vals = spec.values
                decoded.append([vals[i] for i in idx])
        return decoded

    def last_plan(self) -> Plan:
        """The decoding plan of the last batch built (an :class:`EnvStateError` before the first)."""
        if self.plan is None:
            raise EnvStateError("no batch was built yet, so there are no actions to decode; reset first")
        return self.plan

    def _decode_select(self, a: int, idx: list[int]) -> list[Any]:
        plan = self.last_plan()
        among_t = plan.among[a]
        objs = plan.objs
        offs = plan.offsets()
        cnt = plan.cnt
        out = []
        for s, k in zip(plan.a_slot[a], idx):
            for t in among_t:
                c = cnt[t][s]
                if k < c:
                    out.append(objs[t][offs[t][s] + k])
                    break
                k -= c
            else:  # pragma: no cover - VecEnv validates ranges first
                raise InvalidObservationError(f"select-entity index out of range for slot {s}")
        return out

    # ------------------------------------------------------------------ internals
    def _gather(self, pobs: list[Any], ptypes: list[Any], mbuf: dict[str, dict[int, float]], episodes: EpisodeState | None, rewards: bool) -> Gathered:
        """One pass over the pending observations: objects per type, counts, actors.

        With ``rewards`` it also checks each observation's score and folds its change into
        ``episodes`` (one numpy call for the whole batch).

        Returns what it found (:class:`Gathered`).
        """
        sp = self.spaces
        n = self.n
        T = len(sp.entity_schemas)
        tindex = sp.entity_index
        aindex = sp.action_index
        A = len(sp.action_specs)
        bound = self._bound
        unbound = self.unbound
        objs: list[list[Any]] = [[] for _ in range(T)]
        cnt = [[0] * n for _ in range(T)]
        a_slot: list[list[int]] = [[] for _ in range(A)]
        a_t: list[list[int]] = [[] for _ in range(A)]
        a_rank: list[list[tuple[int, int]]] = [[] for _ in range(A)]
        masked: list[tuple[int, int, int, Any]] = []  # (slot, action, first position in actor list, obs)
        simple = True
        idx: list[int] = []
        scores: list[Any] = []
        s = 0
        try:
            for s, obs in enumerate(pobs):
                if obs is None:
                    continue
                idx.append(s)
                scores.append(obs.score)
                pt = ptypes[s]
                acts, omasks = obs.view_actors, obs.view_masks
                if obs.view_single and len(pt) == 1 and (not unbound or pt[0] not in unbound):
                    x = acts[0]
                    t = tindex[type(x)]
                    objs[t].append(x)
                    cnt[t][s] = 1
                    a = aindex[pt[0]]
                    if omasks is not None:
                        masked.append((s, a, len(a_slot[a]), obs))
                    a_slot[a].append(s)
                    a_t[a].append(t)
                else:
                    simple = False
                    if not acts and any(bound[aindex[key]] for key in pt):
                        raise InvalidObservationError(
                            f"slot {self.slot_lo + s}: " + no_actor_message([sp.action_specs[aindex[key]] for key in pt])
                        )
                    ranks = []
                    for x in acts:
                        t = tindex[type(x)]
                        objs[t].append(x)
                        c = cnt[t]
                        ranks.append((t, c[s]))
                        c[s] += 1
                    for key in pt:
                        a = aindex[key]
                        sl_a, t_a, r_a = a_slot[a], a_t[a], a_rank[a]
                        if omasks is not None:
                            masked.append((s, a, len(sl_a), obs))
                        if not bound[a]:  # one decision for the observation: no actor entity
                            sl_a.append(s)
                            t_a.append(-1)
                            continue
                        for t, r in ranks:
                            if r:
                                r_a.append((len(sl_a), r))
                            sl_a.append(s)
                            t_a.append(t)
                for ch in obs.view_chunks:
                    t = tindex[type(ch[0])]
                    objs[t] += ch
                    cnt[t][s] += len(ch)
                ometrics = obs.view_metrics
                if ometrics:
                    for mname, mv in ometrics.items():
                        mbuf.setdefault(mname, {})[s] = mv
        except KeyError as e:
            key = e.args[0] if e.args else None
            self._unknown_type(key, is_action=any(p is not None and key in p for p in ptypes))
            raise  # pragma: no cover
        except TypeError as e:
            raise InvalidObservationError(f"slot {self.slot_lo + s}: invalid action type passed to act: {e}") from None
        if rewards and idx:
            sc = self._scores(idx, scores)
            if episodes is not None:
                episodes.fold(idx, sc)
        if len(idx) == n:
            active = np.ones(n, dtype=bool)
        else:
            active = np.zeros(n, dtype=bool)
            active[idx] = True
        return Gathered(objs, cnt, a_slot, a_t, a_rank, masked, simple, active)

    def _scores(self, idx: list[int], scores: list[Any]) -> np.ndarray:
        """The scores of slots ``idx`` as float64, each checked to be a finite real number (not a string)."""
        try:
            sc = np.array(scores)
        except (TypeError, ValueError, OverflowError):
            sc = None
        if sc is not None and sc.dtype.kind in "biuf" and sc.shape == (len(idx),):
            sc = sc.astype(np.float64)
            if np.vdot(sc, sc) <= FLOAT32_MAX_SQUARED:  # every |score| within float32's range (no NaN, no warning)
                return sc
        # slow path: name the first bad score
        out = np.empty(len(idx))
        for j, (s, v) in enumerate(zip(idx, scores)):
            out[j] = checked_score(v, f"slot {self.slot_lo + s}: ")
        return out

    def _no_legal(self, spec: Any, s: int) -> None:
        raise InvalidObservationError(
            f"action type {spec.name!r}: an actor of slot {self.slot_lo + s} (env {self.env_lo + s // self.apg}) has a mask "
            "that leaves no legal choice; every mask must allow at least one choice"
        )

    def _unknown_type(self, key: Any, is_action: bool = False) -> NoReturn:
        sp = self.spaces
        known_e = [s.name for s in sp.entity_schemas]
        known_a = [s.name for s in sp.action_specs]
        if not is_action:
            if isinstance(key, type):
                try:
                    schema_of(key)
                except SchemaError as e:
                    raise SchemaError(f"the observation holds a {key.__qualname__} where an entity was expected: {e}") from None
            raise InvalidObservationError(
                f"entity type {key.__qualname__!r} appeared after the observation space was fixed (known entity "
                f"types: {known_e}); declare every entity type up front: @gl.game(entities=[...]) on the game function, or "
                "gl.VecEnv(..., entity_types=[...])"
            )
        raise InvalidObservationError(
            f"action type {getattr(key, '__name__', key)!r} appeared after the action space was fixed (known action "
            f"types: {known_a}); declare every action type up front: @gl.game(actions=[...]) on the game function, or "
            "gl.VecEnv(..., action_types=[...])"
        )

    def _where(self, per_slot: list[int], row: int) -> str:
        s = int(np.searchsorted(np.cumsum(per_slot), row, side="right"))
        return f"env {self.env_lo + s // self.apg} (slot {self.slot_lo + s})"

    def _regroup(self, pobs: list[Any]) -> None:
        """Slow path: some ``entities(...)`` call mixed several types; split such chunks by type."""
        tindex = self.spaces.entity_index
        for obs in pobs:
            if obs is None:
                continue
            for ch in obs.view_chunks:
                first = type(ch[0])
                if all(type(o) is first for o in ch):
                    continue
                for o in ch:
                    if type(o) not in tindex:
                        self._unknown_type(type(o))
            obs.split_chunks_by_type()

    def _apply_masks(self, masked: list, masks: dict[str, np.ndarray], ncand: dict[str, np.ndarray], specs: list, ptypes: list[Any]) -> None:
        """Write the masks the games set (slow path, only for observations that have masks)."""
        ncand_cum = {k: np.cumsum(v) - v for k, v in ncand.items()}
        for s, a, pos, obs in masked:
            spec = specs[a]
            raw_list = obs.view_masks.get(spec.key)
            if raw_list is None:
                continue
            for i, raw in enumerate(raw_list):
                if raw is None:
                    continue
                j = pos + i
                try:
                    if spec.kind.selects_entities:
                        cands = obs.entities_of(spec.among)
                        start = int(ncand_cum[spec.name][j])
                        masks[spec.name][start : start + len(cands)] = mask_vector(raw, spec, len(cands), cands)
                    else:
                        masks[spec.name][j] = mask_vector(raw, spec, spec.n, None)
                except InvalidObservationError as e:
                    who = f"actor {i}" if spec.kind.actor_bound else "the observation"
                    raise InvalidObservationError(f"slot {self.slot_lo + s}, {who}: {e}") from None
        for s, _a, _pos, obs in masked:
            unknown = [k for k in obs.view_masks if k not in ptypes[s]]
            if unknown:
                raise InvalidObservationError(
                    f"slot {self.slot_lo + s}: the observation has masks for {unknown!r}, which act() was not asked for "
                    f"(asked: {list(ptypes[s])!r}); a mask must belong to a requested action type"
                )


def one_slot_batch(binding: SpaceBinding, r: OneObs) -> Batch:
    """The one-slot batch of a single observation built by :class:`~gymloop.featurize.OneObsBuilder`
    (:meth:`SpaceBinding.one <gymloop.featurize.OneObsBuilder.one>`), laid out as :meth:`BatchBuilder.build`
    lays out a slot: zero reward, no ends, no metrics. Traces and ``gl.run``'s checks use it; a new
    batch field is filled here and in :meth:`BatchBuilder.build`.
    """
    sp = binding.spaces
    per, parts, g, _, rows, asked, omasks = r
    entities: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    it = iter(parts)
    for t, sc in enumerate(sp.entity_schemas):
        lst = per[t]
        if lst is None:
            entities[sc.name] = np.zeros((0, len(sc.features)), dtype=np.float32)
            counts[sc.name] = np.zeros(1, dtype=np.int64)
        else:
            entities[sc.name] = next(it)[1]
            counts[sc.name] = np.array([len(lst)], dtype=np.int64)
    pos = {ab.key: i for i, ab in enumerate(asked)}
    n_act = len(rows)
    actor_slot: dict[str, np.ndarray] = {}
    actor_index: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    ncand: dict[str, np.ndarray] = {}
    cand_types: dict[str, tuple[str, ...]] = {}
    for spec in sp.action_specs:
        name, kind = spec.name, spec.kind
        i = pos.get(spec.key)
        m = None if i is None else omasks[i]
        if kind.selects_entities:
            ab = binding.acts[spec.key]
            cand_types[name] = tuple(binding.names[t] for t in ab.among_t)
        if i is None:
            actor_slot[name] = _EMPTY_I64.copy()
            actor_index[name] = _EMPTY_I64.copy()
            masks[name] = kind.empty_masks(spec.n)
            if kind.selects_entities:
                ncand[name] = _EMPTY_I64.copy()
        else:
            # one row per actor, or one for the observation (a global decision, actor index -1)
            n_rows = n_act if kind.actor_bound else 1
            actor_slot[name] = np.zeros(n_rows, dtype=np.int64)
            actor_index[name] = rows.astype(np.int64) if kind.actor_bound else np.full(1, -1, dtype=np.int64)
            if kind.selects_entities:
                nc = sum(len(per[t] or ()) for t in ab.among_t)
                ncand[name] = np.full(n_rows, nc, dtype=np.int64)
                masks[name] = m.reshape(-1) if m is not None else kind.all_legal(n_rows, spec.n, n_rows * nc)
            else:
                masks[name] = m if m is not None else kind.all_legal(n_rows, spec.n)
    gs = sp.globals_schema
    return Batch(
        num_slots=1,
        entities=entities,
        counts=counts,
        globals=g.reshape(1, -1) if g is not None else np.zeros((1, 0 if gs is None else len(gs.features)), dtype=np.float32),
        actor_slot=actor_slot,
        actor_index=actor_index,
        masks=masks,
        num_candidates=ncand,
        reward=np.zeros(1, dtype=np.float32),
        terminated=np.zeros(1, dtype=bool),
        truncated=np.zeros(1, dtype=bool),
        active=np.ones(1, dtype=bool),
        metrics={},
        candidate_types=cand_types,
    )


class Gathered(NamedTuple):
    """What one pass over the pending observations found (:meth:`BatchBuilder._gather`); unpacks as a tuple."""

    #: per entity type: its objects, slot after slot
    objs: list[list[Any]]
    #: per entity type: its count in each slot
    cnt: list[list[int]]
    #: per action type: the slot of each actor
    a_slot: list[list[int]]
    #: per action type: each actor's entity type (-1: a decision without an actor entity)
    a_t: list[list[int]]
    #: per action type: ``(position in a_slot, rank)`` of the actors whose rank within their entity type is
    #: not 0 (a single actor always has rank 0: actors come first within a type)
    a_rank: list[list[tuple[int, int]]]
    #: ``(slot, action type, first position in a_slot, obs)`` of each decision with masks
    masked: list[tuple[int, int, int, Any]]
    #: every pending decision asked one actor-bound action type for one actor
    simple: bool
    #: which slots have a pending decision
    active: np.ndarray


class Plan:
    """What decoding needs from the last batch: per action type the slot of each actor, the candidate
    entity types of select-entity actions, and the entity objects per type with their counts per slot.

    ``simple``: every pending decision asked one actor-bound action type for one actor.
    """

    __slots__ = ("simple", "a_slot", "among", "objs", "cnt", "_offs")

    def __init__(self, simple: bool, a_slot: list[list[int]], among: list[tuple[int, ...]], objs: list[list[Any]], cnt: list[list[int]]) -> None:
        self.simple = simple
        self.a_slot = a_slot
        self.among = among
        self.objs = objs
        self.cnt = cnt
        self._offs: list[list[int]] | None = None

    def offsets(self) -> list[list[int]]:
        if self._offs is None:
            self._offs = [(np.cumsum(c) - np.array(c)).tolist() for c in self.cnt]
        return self._offs

