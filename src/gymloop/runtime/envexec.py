"""Executor for low-level :class:`~gymloop.env.Environment` instances (same batches as games).

Its observations are arrays, not Python objects, so it packs entities and masks itself rather than
through :class:`~gymloop.runtime.builder.BatchBuilder`; it shares the batch layout's pieces with it:
:meth:`Batch.empty <gymloop.batch.Batch.empty>` (the empty parts of a ``final`` batch) and each
kind's masks (:meth:`~gymloop.kinds.ActionKind.all_legal`).

Faults are handled as in every :class:`~gymloop.runtime.shard.ShardExecutor`: whatever an environment's constructor,
``reset`` or ``act`` raises (``SystemExit`` included; ``KeyboardInterrupt`` passes through) becomes
a :class:`~gymloop.errors.GameError` with the copy's env index and seed; one that does not return
within ``step_timeout`` fails with :class:`~gymloop.errors.GameTimeoutError`; with
``on_game_error="restart"`` the copy is made afresh (a new instance, the old one closed) and reset
with a fresh seed, its episode ends as truncated, and the error goes to :attr:`EnvExecutor.faults`.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._ranges import _short
from ..batch import Batch
from ..errors import GameError, InvalidObservationError, SchemaError
from ..spaces import ActionDesc, ObsSpace, Spaces
from .declared import DeclaredTypes
from .faults import MAX_START_FAILURES, gave_up
from .scopes import batch_scope
from .shard import RUNTIME_FILES, ShardExecutor

log = logging.getLogger("gymloop.executor")

_OUR_FILES = RUNTIME_FILES | {os.path.normcase(os.path.abspath(__file__))}


def env_spaces(obs_space: Any, action_space: Any) -> Spaces:
    """The :class:`Spaces` a low-level environment declares (names only), validated."""
    if not isinstance(obs_space, ObsSpace):
        raise SchemaError(f"Environment.obs_space() must return a gl.ObsSpace, got {obs_space!r}")
    if not isinstance(action_space, Mapping):
        raise SchemaError(f"Environment.action_space() must return a dict of gl.ActionDesc by name, got {action_space!r}")
    for name, d in action_space.items():
        if not isinstance(d, ActionDesc):
            raise SchemaError(f"action_space()[{name!r}] must be a gl.ActionDesc, got {d!r}")
    return Spaces(obs_space, action_space, where="Environment: ")


def _listed_masks(obs: list[Any], actor_counts: list[int], name: str, n: int) -> np.ndarray | None:
    """Every copy's mask of categorical action ``name`` given as a list of rows of booleans (or none: all allowed),
    converted at once: ``(actors, n)``; ``None`` when any is given otherwise (each is then checked and converted alone).

    One conversion of the batch's rows instead of one per copy (a third of the time a mask takes): a copy's
    mask is used as it is only when it has one row per actor and the rows together are booleans,
    ``n`` to a row.
    """
    rows: list[Any] = []
    ones = None
    for o, k in zip(obs, actor_counts):
        mm = o.masks.get(name)
        if mm is None:
            if k:
                ones = ones or [True] * n
                rows += [ones] * k
        elif type(mm) is list and len(mm) == k:
            rows += mm
        else:
            return None
    if not rows:
        return None
    try:
        a = np.array(rows)
    except (ValueError, TypeError):  # (ragged rows: the copy is named by the check of its own)
        return None
    return a if a.dtype == np.bool_ and a.shape == (len(rows), n) else None


def _joined_rows(rows: list[Any], nf: int) -> np.ndarray | None:
    """The copies' rows of one entity type concatenated at once as ``(total, nf)`` float32 (usually each an
    ``(n, nf)`` array); ``None`` when they do not join so (other shapes, not numbers: each copy's are then
    converted alone, and the first bad one named)."""
    try:
        arr = np.concatenate(rows)
    except (ValueError, TypeError):
        return None
    if arr.ndim != 2 or arr.shape[1] != nf or arr.dtype.kind not in "biuf":
        return None
    return arr if arr.dtype == np.float32 else arr.astype(np.float32)


class EnvExecutor(ShardExecutor):
    """Steps environment copies ``[env_lo, env_lo + num)`` and batches their observations.

    A :class:`~gymloop.runtime.shard.ShardExecutor` with the same meaning as the game-loop
    :class:`~gymloop.runtime.executor.Executor`: :meth:`start` (re)starts every copy
    (``Environment.reset`` with a new generation of seeds), :meth:`discover` reports the spaces,
    :meth:`set_spaces` fixes them, :meth:`build` batches the pending observations, :meth:`step`
    applies actions, :meth:`close_games` closes the environments.

    Args:
        declared: the VecEnv's declared ``(entity classes, globals class, action types)``. An
            environment declares its whole spaces itself (``obs_space()``/``action_space()``) and
            reports rows of numbers, not objects, so nothing is left to discover; declared types
            are a promise about those spaces and are checked against them by :meth:`discover`:
            each declared entity class must be an entity type of ``obs_space()`` with the same
            feature names, a declared globals class must have the global feature names, and each
            declared action type must be in ``action_space()`` with the same kind, labels and
            candidate types. A mismatch is a :class:`~gymloop.errors.SchemaError` naming it.
    """

    copy_word = "environment copy"
    late = "return"

    def __init__(
        self, factory: Any, env_lo: int, num: int, seed: int, spaces: Spaces | None = None,
        declared: DeclaredTypes | None = None, step_timeout: float | None = None, on_game_error: str = "raise",
    ) -> None:
        super().__init__(env_lo, num, seed, declared, step_timeout, on_game_error)
        self.factory = factory
        self.n = num
        self.slot_lo = env_lo
        self.envs: list[Any] = []
        self.obs: list[Any] = [None] * num
        self.spaces: Spaces | None = spaces
        self.ep_ret = [0.0] * num
        self.ep_len = [0] * num
        self._code_in_try = (
            EnvExecutor._act.__code__, EnvExecutor._reset_env.__code__, EnvExecutor._new_env.__code__,
            EnvExecutor._close_env.__code__,
        )

    def _new_env(self, i: int) -> None:
        """Make copy ``i``'s environment (closing the one it replaces)."""
        old = self.envs[i]
        self.envs[i] = None
        if old is not None:
            try:
                old.close()
            except Exception:
                log.exception("environment copy %d: close() raised", self.env_lo + i)
        self.envs[i] = self.factory()

    def _reset_env(self, i: int) -> Any:
        return self.envs[i].reset(self._next_seed(i))

    def _restart(self, i: int, err: GameError) -> Any:
        """Copy ``i`` failed with ``err`` (``on_game_error="restart"``): a new instance, a fresh seed.

        Returns its first observation; raises the last :class:`GameError` if it fails
        :data:`~gymloop.runtime.faults.MAX_START_FAILURES` times in a row.
        """
        for _ in range(MAX_START_FAILURES):
            self.faults.append(err)
            try:
                self._new_env(i)
                return self._reset_env(i)
            except BaseException as e:
                err = self._fault(i, e)
        raise gave_up(err, MAX_START_FAILURES + 1, before_first_decision=False)

    def alarm_may_raise(self, frame: Any) -> bool:
        """The step alarm fired in ``frame``: raise there only inside an environment's own code.

        That is code called from this executor where a ``try`` turns the exception into an error of
        that copy, never this module's own code.
        """
        f = frame
        while f is not None:
            if os.path.normcase(f.f_code.co_filename) in _OUR_FILES:
                return f is not frame and f.f_code in self._code_in_try
            f = f.f_back
        return False

    def start(self) -> None:
        """Make the environments (first time), then reset every one with a new generation of seeds.

        Raises:
            GameError: an environment's constructor or ``reset`` raised (the first one, in env order).
        """
        if not self.envs:
            self.envs = [None] * self.n
        self._new_generation()
        self.ep_ret = [0.0] * self.n
        self.ep_len = [0] * self.n
        obs = []
        with batch_scope():  # (outside the alarm: a scope's own bookkeeping is never interrupted)
            token = self.alarm.arm(check=True)
            try:
                for i in range(self.n):
                    try:
                        if self.envs[i] is None:
                            self._new_env(i)
                        o = self._reset_env(i)
                    except BaseException as e:
                        err = self._fault(i, e)
                        if not self.restart_on_error:
                            raise err from e  # (game_error set the same cause)
                        o = self._restart(i, err)
                    obs.append(o)
            finally:
                self.alarm.disarm(token)
        self.obs = obs

    def discover(self) -> Spaces:
        """The environments' own spaces, checked against the declared types (see the class docstring)."""
        sp = env_spaces(self.envs[0].obs_space(), self.envs[0].action_space())
        if self.declared:
            _check_declared(sp, self.declared)
        return sp

    def set_spaces(self, spaces: Spaces) -> None:
        """Fix the spaces (every shard gets the same, from :func:`~gymloop.runtime.backend.discover_spaces`)."""
        self.spaces = spaces

    def build(self) -> Batch:
        """The batch of the observations :meth:`start` got (no reward, no episode ends)."""
        done = [False] * self.n
        return self._build(self.obs, [0.0] * self.n, done, done, [None] * self.n)

    def _fixed(self) -> Spaces:
        if self.spaces is None:
            raise self._not_fixed()
        return self.spaces

    def step(self, actions: Sequence[np.ndarray]) -> Batch:
        names = self._fixed().action_names
        n = self.n
        per_env: list[dict[str, np.ndarray]] = [dict() for _ in range(n)]
        for a, name in enumerate(names):
            arr = actions[a]
            o = 0
            for d, k in zip(per_env, self._actor_counts[a]):
                d[name] = arr[o : o + k]
                o += k
        with batch_scope():  # (outside the alarm: see start())
            token = self.alarm.arm()
            try:
                obs, rew, term, trunc, mets, finals, errors = self._act(per_env)
            finally:
                self.alarm.disarm(token)
        if errors:
            raise errors[0]
        b = self._build(obs, rew, term, trunc, mets)
        if finals:
            b.final = self._final_batch(finals, b)
        return b

    def _act(self, per_env: list[dict[str, np.ndarray]]) -> tuple:
        """Every copy's ``act``: the lists of observations, rewards, ends, metrics, finals and errors."""
        obs: list[Any] = []
        rew: list[float] = []
        term: list[bool] = []
        trunc: list[bool] = []
        mets: list[Any] = []
        finals: dict[int, Any] = {}
        errors: list[GameError] = []
        for i, env in enumerate(self.envs):
            try:
                o = env.act(per_env[i])
                # (the usual types checked inline, the rest by the helpers: this runs once per copy and step)
                r, t1, t2 = o.reward, o.terminated, o.truncated
                if type(r) is not float or r - r != 0.0:
                    r = _reward(r)
                if type(t1) is not bool:
                    t1 = end_flag(t1, "terminated")
                if type(t2) is not bool:
                    t2 = end_flag(t2, "truncated")
                self.ep_ret[i] += r
                self.ep_len[i] += 1
                m = None
                if t1 or t2:
                    m = _metrics(o.metrics)
                    m["episode_return"] = self.ep_ret[i]
                    m["episode_length"] = self.ep_len[i]
                    self.ep_ret[i] = 0.0
                    self.ep_len[i] = 0
                    if t2 and not t1 and any(len(r) for r in o.entities.values()):
                        finals[i] = o
                    o = self._reset_env(i)
                elif o.metrics:
                    m = _metrics(o.metrics)
            except BaseException as e:
                err = self._fault(i, e)  # (KeyboardInterrupt passes through)
                r, t1, t2, m = 0.0, False, False, None
                if self.restart_on_error:
                    try:
                        o = self._restart(i, err)
                    except GameError as e2:
                        errors.append(e2)
                        o = self.obs[i]
                    else:  # its episode ends as truncated
                        t2 = True
                        m = {"episode_return": self.ep_ret[i], "episode_length": self.ep_len[i]}
                        self.ep_ret[i] = 0.0
                        self.ep_len[i] = 0
                else:
                    errors.append(err)
                    o = self.obs[i]
            obs.append(o)
            rew.append(r)
            term.append(t1)
            trunc.append(t2)
            mets.append(m)
        return obs, rew, term, trunc, mets, finals, errors

    def _final_batch(self, finals: dict[int, Any], b: Batch) -> Batch:
        """The last observations of truncated episodes, as a batch without actors."""
        sp = self._fixed()
        n = self.n
        f = Batch.empty(sp, n)
        for name, feats in sp.obs.entities.items():
            rows, cnt = [], np.zeros(n, dtype=np.int64)
            for i in sorted(finals):
                r = finals[i].entities.get(name)
                if r is not None and len(r):
                    rows.append(np.asarray(r, dtype=np.float32).reshape(len(r), len(feats)))
                    cnt[i] = rows[-1].shape[0]
            if rows:
                f.entities[name] = np.concatenate(rows)
            f.counts[name] = cnt
        for i, o in finals.items():
            f.active[i] = True
            if len(sp.obs.globals) and o.globals is not None:
                f.globals[i] = np.asarray(o.globals, dtype=np.float32)
        return f

    def _build(self, obs: list[Any], rew: list[float], term: list[bool], trunc: list[bool], mets: list[Any]) -> Batch:
        sp = self._fixed()
        n = self.n
        self.obs = obs
        entities: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        for name, feats in sp.obs.entities.items():
            nf = len(feats)
            rows_all: list[Any] = []
            cnt = []
            use_arrays = False
            for o in obs:
                rows = o.entities.get(name)
                if rows is None:
                    cnt.append(0)
                    continue
                if isinstance(rows, np.ndarray):
                    use_arrays = True
                cnt.append(len(rows))
                rows_all.append(rows)
            total = sum(cnt)
            if total == 0:
                arr = np.zeros((0, nf), dtype=np.float32)
            elif use_arrays:
                joined = _joined_rows(rows_all, nf)
                if joined is not None:
                    arr = joined
                else:  # (rows of other shapes or types: each converted, else the first bad one named)
                    try:
                        arr = np.concatenate([np.asarray(r, dtype=np.float32).reshape(len(r), nf) for r in rows_all])
                    except (ValueError, TypeError):
                        raise self._bad_rows(name, feats, obs) from None
            else:
                flat: list[Any] = []
                for r in rows_all:
                    flat += r
                try:
                    arr = np.array(flat, dtype=np.float32).reshape(total, nf)
                except (ValueError, TypeError) as e:
                    raise InvalidObservationError(f"entity type {name!r}: rows must have {nf} numbers each ({feats}): {e}") from None
            if not np.isfinite(arr).all():
                row = int(np.argwhere(~np.isfinite(arr))[0][0])
                col = int(np.argwhere(~np.isfinite(arr))[0][1])
                env = int(np.searchsorted(np.cumsum(cnt), row, side="right"))
                raise InvalidObservationError(
                    f"entity type {name!r}, feature {feats[col]!r} is {arr[row, col]} in env {self.env_lo + env}; features must be finite"
                )
            entities[name] = arr
            counts[name] = np.array(cnt, dtype=np.int64)
        unknown = {k for o in obs for k in o.entities} - set(sp.obs.entities)
        if unknown:
            raise InvalidObservationError(
                f"entity type(s) {sorted(unknown)} are not in the environment's obs_space {list(sp.obs.entities)}"
            )
        ng = len(sp.obs.globals)
        if ng:
            try:
                globs = np.array([o.globals for o in obs], dtype=np.float32).reshape(n, ng)
            except (ValueError, TypeError):
                raise self._bad_globals(obs, sp.obs.globals) from None
            if not np.isfinite(globs).all():
                env, col = (int(x) for x in np.argwhere(~np.isfinite(globs))[0])
                raise InvalidObservationError(
                    f"environment copy {self.env_lo + env}: global feature {sp.obs.globals[col]!r} is {globs[env, col]}; "
                    "features must be finite"
                )
        else:
            globs = np.zeros((n, 0), dtype=np.float32)
        actor_slot, actor_index, masks, ncand, cand_types = {}, {}, {}, {}, {}
        self._actor_counts = []
        C = np.stack([counts[k] for k in sp.obs.entities]) if sp.obs.entities else np.zeros((0, n), dtype=np.int64)
        names = list(sp.obs.entities)
        for name in sp.action_names:
            d = sp.actions[name]
            if not d.kind.actor_bound:  # asked when the observation names it in actors: one decision, no entity
                idx_lists = [[-1] if name in o.actors else [] for o in obs]
            else:
                idx_lists = [list(o.actors.get(name, ())) for o in obs]
            ac = [len(x) for x in idx_lists]
            self._actor_counts.append(ac)
            sl = np.repeat(np.arange(n, dtype=np.int64), ac)
            flat_idx: list[int] = []
            for x in idx_lists:
                flat_idx += x
            actor_slot[name] = sl + self.slot_lo
            actor_index[name] = np.array(flat_idx, dtype=np.int64)
            if not d.kind.selects_entities:
                m = None
                if any(name in o.masks for o in obs):
                    m = _listed_masks(obs, ac, name, d.n)
                    if m is None:  # (masks in other forms, boolean arrays say: each copy's checked and converted alone, then one join)
                        m = np.concatenate([np.ones((k, d.n), dtype=bool) if (mm := o.masks.get(name)) is None
                                            else self._mask(i, name, mm, (k, d.n)) for i, (o, k) in enumerate(zip(obs, ac))])
                masks[name] = d.kind.all_legal(len(flat_idx), d.n) if m is None else m
            else:
                ts = [names.index(a) for a in d.among]
                cand_types[name] = tuple(d.among)
                per_env = C[ts].sum(axis=0)
                nc = per_env[sl]
                ncand[name] = nc
                m = d.kind.all_legal(len(flat_idx), d.n, int(nc.sum()))
                if any(name in o.masks for o in obs):
                    parts = []
                    for i, (o, k, pe) in enumerate(zip(obs, ac, per_env)):
                        mm = o.masks.get(name)
                        parts.append(np.ones(k * pe, dtype=bool) if mm is None else self._mask(i, name, mm, (k, int(pe))).reshape(-1))
                    m = np.concatenate(parts) if parts else m
                masks[name] = m
            j = d.kind.no_legal(masks[name], ncand.get(name))
            if j is not None:
                env = self.env_lo + int(sl[j])
                raise InvalidObservationError(
                    f"environment copy {env}: action type {name!r}, actor {j - int(np.searchsorted(sl, sl[j]))} has no legal "
                    f"{d.kind.choice_word} (its mask allows none{', or it has no candidate' if d.kind.selects_entities else ''}); "
                    "every actor must have at least one"
                )
        metrics: dict[str, np.ndarray] = {}
        for i, m in enumerate(mets):
            if m:
                for k, v in m.items():
                    if k not in metrics:
                        metrics[k] = np.full(n, np.nan)
                    metrics[k][i] = v
        return Batch(
            num_slots=n, entities=entities, counts=counts, globals=globs, actor_slot=actor_slot,
            actor_index=actor_index, masks=masks, num_candidates=ncand,
            reward=np.array(rew, dtype=np.float32), terminated=np.array(term, dtype=bool),
            truncated=np.array(trunc, dtype=bool), active=np.ones(n, dtype=bool), metrics=metrics,
            candidate_types=cand_types,
        )

    def _mask(self, i: int, name: str, mm: Any, shape: tuple[int, int]) -> np.ndarray:
        """Environment copy ``i``'s mask of action type ``name`` as booleans of ``shape`` (actors, choices).

        Given as that shape or flat (one actor's choices after another); booleans, or numbers that
        are all 0 or 1. A mask of another shape (a transposed one, say) or of other values is refused:
        reshaped, it would allow choices the game forbids."""
        if type(mm) is np.ndarray and mm.dtype == np.bool_:
            if mm.shape == shape:
                return mm
            if mm.ndim == 1 and mm.shape[0] == shape[0] * shape[1]:  # (flat: one actor's choices after another)
                return mm.reshape(shape)
        try:
            a = np.asarray(mm)
        except (TypeError, ValueError):  # (ragged nested lists)
            a = np.asarray(None, dtype=object)
        if a.dtype != np.bool_:
            if a.dtype.kind not in "iuf" or not np.isin(a, (0, 1)).all():
                got = f"values {_short_values(a)}" if a.dtype.kind in "iuf" else f"{a.dtype} entries" if a.dtype != object else "not an array of booleans"
                raise InvalidObservationError(f"{self._mask_name(i, name)} has {got}; a mask holds booleans (True: allowed) or 0/1")
            a = a.astype(bool)
        if a.shape != shape and not (a.ndim == 1 and a.size == math.prod(shape)):
            raise InvalidObservationError(
                f"{self._mask_name(i, name)} has shape {a.shape}, expected {shape} or {math.prod(shape)} entries flat "
                "(one row per actor, one column per choice; for select-entity one column per candidate)"
            )
        return a.reshape(shape)

    def _mask_name(self, i: int, name: str) -> str:
        return f"environment copy {self.env_lo + i}: the mask of action type {name!r}"

    def _bad_rows(self, name: str, feats: Sequence[str], obs: list[Any]) -> InvalidObservationError:
        """The error for rows of entity type ``name`` that are not numbers, naming the first copy that gave them."""
        for i, o in enumerate(obs):
            rows = o.entities.get(name)
            if rows is None:
                continue
            try:
                np.asarray(rows, dtype=np.float32).reshape(len(rows), len(feats))
            except (ValueError, TypeError) as e:
                kind = f"an array of {rows.dtype}" if isinstance(rows, np.ndarray) else type(rows).__name__
                return InvalidObservationError(
                    f"environment copy {self.env_lo + i}: entity type {name!r} has rows that are not {len(feats)} numbers each "
                    f"({kind}: {e}); features {list(feats)} must be numbers"
                )
        return InvalidObservationError(f"entity type {name!r}: rows must have {len(feats)} numbers each ({list(feats)})")

    def _bad_globals(self, obs: list[Any], names: Sequence[str]) -> InvalidObservationError:
        """The error for global features that are not ``len(names)`` numbers, naming the first copy that gave them."""
        for i, o in enumerate(obs):
            g = o.globals
            try:
                ok = g is not None and np.asarray(g, dtype=np.float32).size == len(names)
                problem = f"{_short_values(g)}, not {len(names)} numbers"
            except (ValueError, TypeError):
                ok, problem = False, f"{_short_values(g)}, which are not numbers"
            if not ok:
                return InvalidObservationError(
                    f"environment copy {self.env_lo + i}: its global features are {problem}; every observation must give "
                    f"the {len(names)} global features {tuple(names)} as numbers"
                )
        return InvalidObservationError(f"every observation must give {len(names)} global features {tuple(names)}")

    def close_games(self) -> None:
        """Close every environment (``close()``; within :data:`~gymloop.runtime.faults.CLOSE_TIMEOUT_S`
        seconds together when a step timeout is set). Idempotent."""
        self._close_each([(i, functools.partial(self._close_env, e)) for i, e in enumerate(self.envs) if e is not None])

    def _close_env(self, e: Any) -> None:
        e.close()


def _check_declared(sp: Spaces, declared: DeclaredTypes) -> None:
    """Raise :class:`SchemaError` where a declared type disagrees with an environment's spaces."""
    ents, glob, acts = declared
    want = Spaces.build(ents, glob, acts)
    have_obs = sp.obs
    for name, feats in want.obs_space.entities.items():
        got = have_obs.entities.get(name)
        if got is None:
            raise SchemaError(
                f"declared entity type {name!r} is not in the environment's obs_space() {sorted(have_obs.entities)}"
            )
        if tuple(got) != tuple(feats):
            raise SchemaError(
                f"declared entity type {name!r} has features {list(feats)}, the environment's obs_space() {list(got)}"
            )
    if glob is not None and tuple(want.obs_space.globals) != tuple(have_obs.globals):
        raise SchemaError(
            f"declared globals type has features {list(want.obs_space.globals)}, the environment's obs_space() "
            f"globals are {list(have_obs.globals)}"
        )
    for name, d in want.action_space.items():
        have = sp.actions.get(name)
        if have is None:
            raise SchemaError(f"declared action type {name!r} is not in the environment's action_space() {sp.action_names}")
        if have != d:
            raise SchemaError(f"declared action type {name!r} is {d}, but the environment's action_space() has {have}")


def _is_number(x: Any) -> bool:
    """A real number: a Python or numpy number (bools included), or a 0-d numeric array."""
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_)) or (
        isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "biuf")


def _reward(x: Any) -> float:
    """A reward as a float: a finite real number (see :func:`_is_number`)."""
    if not _is_number(x):
        raise InvalidObservationError(f"the reward is {_short_values(x)} ({type(x).__name__}); a reward must be a real number")
    r = float(x)
    if not math.isfinite(r):
        raise InvalidObservationError(f"the reward is {r}; rewards must be finite")
    return r


def end_flag(x: Any, what: str) -> bool:
    """An episode's end (``terminated``, ``truncated``, entity-gym's ``done``: ``what`` names it) as a bool.

    A bool, a numpy bool or 0 and 1 (not a string or another number, which may mean anything).

    Raises:
        InvalidObservationError: anything else, naming ``what`` and the value.
    """
    if type(x) is bool:
        return x
    if isinstance(x, np.bool_) or (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype == np.bool_):
        return bool(x)
    if isinstance(x, (int, np.integer)) and x in (0, 1):  # (0 and 1 mean only one thing)
        return bool(x)
    raise InvalidObservationError(f"{what} is {_short_values(x)} ({type(x).__name__}); it must be True or False")


def _metrics(m: Any) -> dict[str, float]:
    """A copy of a game's metrics, each a real number."""
    if type(m) is dict and all(type(v) is float or type(v) is int for v in m.values()):  # the usual case
        return dict(m)
    if not isinstance(m, Mapping):
        raise InvalidObservationError(f"metrics are {_short_values(m)} ({type(m).__name__}); give a dict of name -> number")
    out = {}
    for k, v in m.items():
        if _is_number(v):
            out[k] = float(v)
        else:
            raise InvalidObservationError(f"metric {k!r} is {_short_values(v)} ({type(v).__name__}); metrics must be numbers")
    return out


def _short_values(x: Any) -> str:
    """``x`` for a message (an array as its list), cut at 60 characters."""
    return _short(x.tolist() if isinstance(x, np.ndarray) else x)
