"""The greenlet executor: many game loops, one batch of decisions.

Each game copy runs in its own greenlet. A :class:`TrainingAgent`'s ``act`` records the
observation and switches back to the executor; once every game is waiting, the executor builds one
:class:`~gymloop.batch.Batch` (one numpy call per entity type, never one per game). ``step``
decodes the batch of actions and resumes each game with its own.
"""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import greenlet
import numpy as np

from ..agent import no_actor_message, pack_result
from ..batch import Batch
from ..errors import ConfigError, GameError, InvalidObservationError, SchemaError
from ..obs import Obs, mask_vector
from ..spaces import Spaces

log = logging.getLogger("gymloop.executor")

_EMPTY_I64 = np.zeros(0, dtype=np.int64)


_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finalizer: a fast, well-distributed 64-bit mix."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def derive_seed(seed: int, env: int, restart: int, generation: int = 0) -> int:
    """Seed (32 bits) of game copy ``env``'s ``restart``-th run after its ``generation``-th reset.

    It depends on nothing else (not on the worker layout), so any ``workers`` gives the same games.
    """
    return _mix(_mix(_mix(_mix(seed & _M64) ^ env) ^ generation) ^ restart) & 0xFFFFFFFF


def merge_types(parts: Any) -> tuple[list[type], type | None, list[Any]]:
    """Union of ``(entity classes, globals classes, action types)`` parts, in canonical form.

    Entity classes come sorted by name, action types in first-seen order; at most one globals class.
    """
    ents: set[type] = set()
    glob: set[type] = set()
    acts: list[Any] = []
    seen: set[Any] = set()
    for e, g, a in parts:
        ents.update(e)
        glob.update(g)
        for x in a:
            if x not in seen:
                seen.add(x)
                acts.append(x)
    if len(glob) > 1:
        raise SchemaError(f"games used several globals classes {sorted(c.__name__ for c in glob)}; use one")
    return sorted(ents, key=lambda c: c.__qualname__), (glob.pop() if glob else None), acts


class TrainingAgent:
    """The agent inside each game copy of a :class:`~gymloop.VecEnv`.

    ``act`` hands the observation to the executor and suspends the game until the trainer has
    chosen; ``game_over`` records the episode end. Games never need to know which agent they hold.
    """

    __slots__ = ("_ex", "_slot", "_pobs", "_ptypes")

    def __init__(self, ex: Executor, slot: int) -> None:
        self._ex = ex
        self._slot = slot
        self._pobs = ex.pobs  # the executor only ever updates these lists in place
        self._ptypes = ex.ptypes

    def act(self, obs: Obs, *action_types: Any) -> Any:
        ex = self._ex
        if type(obs) is not Obs or not action_types or ex.closing:
            self._refuse(obs, action_types)
        s = self._slot
        self._pobs[s] = obs
        self._ptypes[s] = action_types
        chain = ex.chain
        if chain is not None:  # resume the next waiting game directly (one switch per decision)
            p = ex.pos + 1
            if p < len(chain):
                ex.pos = p
                k, v = chain[p]
                return ex.greenlets[k].switch(v)
        return ex.caller.switch(_ASKED)

    def _refuse(self, obs: Any, action_types: tuple) -> None:
        if self._ex.closing:
            raise greenlet.GreenletExit
        if type(obs) is not Obs:
            raise InvalidObservationError(f"act expects a gl.Obs, got {obs!r} of type {type(obs).__name__}")
        raise ConfigError("act needs at least one action type, e.g. agent.act(obs, Move)")

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        self._ex.game_over(self._slot, obs, truncated)

    @property
    def _act_group(self) -> Executor:
        """Agents of one executor can be asked together (see ``gl.act_all``)."""
        return self._ex

    def _act_all(self, requests: Sequence[tuple]) -> list[Any]:
        ex = self._ex
        if ex.closing:
            raise greenlet.GreenletExit
        ex.uses_act_all = True  # its games are resumed one by one (no chaining, results by slot)
        slots = []
        for r in requests:
            agent, obs, types = r[0], r[1], r[2:]
            if agent._ex is not ex or type(obs) is not Obs or not types:
                raise ConfigError("act_all needs (agent, gl.Obs, action_type, ...) requests of one environment")
            ex.pobs[agent._slot] = obs
            ex.ptypes[agent._slot] = types
            slots.append(agent._slot)
        game = slots[0] // ex.apg
        ex.wait_all[game] = True
        ex.caller.switch()
        ex.wait_all[game] = False
        res = ex.results
        return [res[s] for s in slots]

    def __repr__(self) -> str:
        return f"TrainingAgent(slot={self._slot})"


_ASKED = object()  # what a game's greenlet hands back when it asks for a decision


class Executor:
    """Runs games ``[env_lo, env_lo + num_games)`` of a vectorized environment in greenlets."""

    def __init__(
        self,
        game: Callable[..., Any],
        env_lo: int,
        num_games: int,
        agents_per_game: int,
        seed: int,
        spaces: Spaces | None = None,
        declared: tuple[list[type], type | None, list[Any]] | None = None,
    ) -> None:
        self.game = game
        self.env_lo = env_lo
        self.n_games = num_games
        self.apg = agents_per_game
        self.n = num_games * agents_per_game
        self.slot_lo = env_lo * agents_per_game
        self.seed = seed
        self.spaces = spaces
        self.declared = declared
        self.closing = False
        self.caller: Any = None
        # while step() resumes the waiting games: their (game, action) pairs in order, and the
        # position of the game running now; a game's act() switches straight to the next one
        self.chain: list[tuple[int, Any]] | None = None
        self.pos = 0
        self.uses_act_all = False
        n = self.n
        self.pobs: list[Obs | None] = [None] * n
        self.ptypes: list[tuple | None] = [None] * n
        self.results: list[Any] = [None] * n
        self.wait_all = [False] * num_games
        self.greenlets: list[Any] = [None] * num_games
        self.game_seeds = [0] * num_games
        self.restarts = [0] * num_games
        self.generation = -1  # incremented by every start(): reset k starts generation k
        self.agents = [[TrainingAgent(self, g * agents_per_game + i) for i in range(agents_per_game)] for g in range(num_games)]
        self._reset_slot_state()
        self._plan: Any = None
        self.errors: list[GameError] = []

    def _reset_slot_state(self) -> None:
        n = self.n
        # per slot, float64 arrays (updated with one numpy call per batch): the score of the last
        # observation (NaN: none yet in this episode), reward accumulated since the last batch,
        # the running episode return and length
        self.prev_score = np.full(n, np.nan)
        self.reward_acc = np.zeros(n)
        self.term = [False] * n
        self.trunc = [False] * n
        self.any_done = False
        self.ep_ret = np.zeros(n)
        self.ep_len = np.zeros(n, dtype=np.int64)
        self.metric_buf: dict[str, dict[int, float]] = {}
        self.final_obs: dict[int, Obs] = {}

    # ------------------------------------------------------------------ game lifecycle
    def _set_caller(self) -> None:
        cur = greenlet.getcurrent()
        if cur is not self.caller:
            self.caller = cur
            for g in self.greenlets:
                if g is not None and not g.dead:
                    g.parent = cur

    def _start(self, k: int) -> None:
        """Start (or restart) game ``k``; it runs until it asks for its first decision."""
        for _attempt in range(2):
            env = self.env_lo + k
            seed = derive_seed(self.seed, env, self.restarts[k], self.generation)
            self.restarts[k] += 1
            self.game_seeds[k] = seed
            g = greenlet.greenlet(self.game, parent=self.caller)
            self.greenlets[k] = g
            agents = self.agents[k]
            arg = agents[0] if self.apg == 1 else tuple(agents)
            try:
                g.switch(arg, seed)
            except Exception as e:
                self._record_error(k, e)
                return
            if not g.dead:
                return
            self._game_returned(k)
        self._record_error(
            k,
            GameError(
                f"game {getattr(self.game, '__name__', self.game)!r} (env {self.env_lo + k}) returned without asking "
                "its agent for a decision; a game loop must call agent.act(...) at least once per run",
                env_index=self.env_lo + k,
                seed=self.game_seeds[k],
            ),
        )

    def _game_returned(self, k: int) -> None:
        """The game function of copy ``k`` returned: close any open episode as truncated."""
        for s in range(k * self.apg, (k + 1) * self.apg):
            self.pobs[s] = None
            if not math.isnan(self.prev_score[s]):
                self.prev_score[s] = math.nan
                self.trunc[s] = True
                self.any_done = True
                self._episode_end(s, None)

    def _record_error(self, k: int, e: BaseException) -> None:
        env = self.env_lo + k
        if isinstance(e, GameError):
            self.errors.append(e)
            return
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        err = GameError(
            f"game copy {env} raised {type(e).__name__}: {e} (replay it with gl.run(game, agent, seed={self.game_seeds[k]}))"
            f"\n--- original traceback ---\n{tb}",
            env_index=env,
            seed=self.game_seeds[k],
            original_traceback=tb,
        )
        err.__cause__ = e
        self.errors.append(err)
        for s in range(k * self.apg, (k + 1) * self.apg):
            self.pobs[s] = None

    def game_over(self, s: int, obs: Obs, truncated: bool) -> None:
        if type(obs) is not Obs:
            raise InvalidObservationError(f"game_over expects a gl.Obs, got {obs!r}")
        prev = float(self.prev_score[s])
        if not math.isnan(prev):
            try:
                r = float(obs.score) - prev
            except (TypeError, ValueError):
                raise InvalidObservationError(
                    f"game_over: the observation's score must be a number, got {obs.score!r}"
                ) from None
            self.reward_acc[s] += r
            self.ep_ret[s] += r
        self.prev_score[s] = math.nan
        if truncated:
            self.trunc[s] = True
            if obs._chunks or obs._actors:
                self.final_obs[s] = obs
        else:
            self.term[s] = True
        self.any_done = True
        self._episode_end(s, obs._metrics)

    def _episode_end(self, s: int, metrics: dict[str, float] | None) -> None:
        buf = self.metric_buf
        if metrics:
            for name, v in metrics.items():
                buf.setdefault(name, {})[s] = v
        buf.setdefault("episode_return", {})[s] = float(self.ep_ret[s])
        buf.setdefault("episode_length", {})[s] = int(self.ep_len[s])
        self.ep_ret[s] = 0.0
        self.ep_len[s] = 0

    def reset(self) -> Batch:
        """(Re)start every game and return the first batch."""
        self.start()
        if self.spaces is None:
            self.spaces = Spaces.build(*self.discover())
        return self.build()

    def start(self) -> None:
        """(Re)start every game; each runs until its first decision."""
        self.close_games()
        self.closing = False
        self.errors = []
        self.generation += 1
        self.restarts = [0] * self.n_games
        self._set_caller()
        self._reset_slot_state()
        self.pobs[:] = [None] * self.n
        self.ptypes[:] = [None] * self.n
        for k in range(self.n_games):
            self._start(k)
        self._raise_errors()

    def set_spaces(self, classes: tuple[list[type], type | None, list[Any]]) -> None:
        """Fix the spaces (workers receive the union of what every worker discovered)."""
        self.spaces = Spaces.build(*classes)

    def discover(self) -> tuple[list[type], type | None, list[Any]]:
        """Entity classes, globals class and action types declared or seen in the pending decisions."""
        ents: set[type] = set()
        glob: set[type] = set()
        acts: list[Any] = []
        for s in range(self.n):
            obs = self.pobs[s]
            if obs is None:
                continue
            ents.update(type(a) for a in obs._actors)
            for ch in obs._chunks:
                ents.update(map(type, ch))
            if obs._globals is not None:
                glob.add(type(obs._globals))
            acts.extend(self.ptypes[s])
        parts = [(ents, glob, acts)]
        if self.declared:
            e, g, a = self.declared
            parts.insert(0, (e, [g] if g is not None else [], a))
        return merge_types(parts)

    def close_games(self) -> None:
        """Throw ``GreenletExit`` into every suspended game so its ``finally`` blocks run."""
        self.closing = True
        for k, g in enumerate(self.greenlets):
            if g is None or g.dead:
                continue
            try:
                g.throw(greenlet.GreenletExit)
            except Exception:
                log.exception("game copy %d raised while being closed", self.env_lo + k)
            if not g.dead:
                log.warning("game copy %d kept running after GreenletExit; it is abandoned", self.env_lo + k)
            self.greenlets[k] = None
        self.pobs[:] = [None] * self.n

    # ------------------------------------------------------------------ stepping
    def step(self, actions: Sequence[np.ndarray]) -> Batch:
        """Resume each waiting game with its action (one int array per action type, in space order)."""
        self._set_caller()
        plan = self._plan
        specs = self.spaces.action_specs
        apg = self.apg
        pobs = self.pobs
        # decode per action type
        decoded: list[list[Any]] = []
        for a, spec in enumerate(specs):
            idx = actions[a].tolist()
            if spec.kind.selects_entities:
                decoded.append(self._decode_select(a, idx))
            else:
                vals = spec.values
                decoded.append([vals[i] for i in idx])
        gls = self.greenlets
        if plan.simple and apg == 1 and not self.uses_act_all:
            # every waiting game asked one action type for one actor: resume them as a chain, each
            # game's act() switching straight to the next game; control comes back here at the
            # end of the chain, or when a game returns or raises
            if len(specs) == 1:
                chain = list(zip(plan.a_slot[0], decoded[0]))
            else:
                chain = []
                for a in range(len(specs)):
                    chain.extend(zip(plan.a_slot[a], decoded[a]))
            # (pobs[s] needs no clearing: a resumed game either acts again, which overwrites
            # it, or returns or raises, which clear it)
            last = len(chain) - 1
            pos = 0
            while pos <= last:
                self.pos = pos
                self.chain = chain
                try:
                    r = gls[chain[pos][0]].switch(chain[pos][1])
                except Exception as e:
                    pos = self.pos
                    self._record_error(chain[pos][0], e)
                    pos += 1
                    continue
                finally:  # (also on KeyboardInterrupt: a later restart must not follow a stale chain)
                    self.chain = None
                pos = self.pos
                if r is _ASKED and pos == last:
                    break
                k = chain[pos][0]
                if gls[k].dead:  # the game function returned: restart it (it runs to its first act)
                    self._game_returned(k)
                    self._start(k)
                pos += 1
        else:
            per_slot: dict[int, list[list[Any]]] = {}
            for a in range(len(specs)):
                for s, v in zip(plan.a_slot[a], decoded[a]):
                    d = per_slot.get(s)
                    if d is None:
                        d = per_slot[s] = [[] for _ in specs]
                    d[a].append(v)
            aindex = self.spaces.action_index
            games: dict[int, list[int]] = {}
            for s in per_slot:
                games.setdefault(s // apg, []).append(s)
            res = self.results
            for k, slots in games.items():
                for s in slots:
                    d = per_slot[s]
                    pt = self.ptypes[s]
                    res[s] = pack_result(pobs[s], [d[aindex[key]] for key in pt], pt)
                    pobs[s] = None
                g = gls[k]
                try:
                    if self.wait_all[k]:
                        g.switch()
                    else:
                        g.switch(res[slots[0]])
                except Exception as e:
                    self._record_error(k, e)
                    continue
                if g.dead:
                    self._game_returned(k)
                    self._start(k)
        self._raise_errors()
        return self.build()

    def _raise_errors(self) -> None:
        if self.errors:
            errs = self.errors
            self.errors = []
            first = errs[0]
            if len(errs) > 1:
                first.args = (first.args[0] + f"\n({len(errs) - 1} other game copies failed in the same step)",)
            raise first

    def _decode_select(self, a: int, idx: list[int]) -> list[Any]:
        plan = self._plan
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

    # ------------------------------------------------------------------ batching
    def _gather(self, rewards: bool = True) -> tuple:
        """One pass over the pending observations: objects per type, counts, actors.

        With ``rewards`` it also folds each observation's score change into the slot's reward
        (one numpy call for the whole batch).

        Returns ``(objs, cnt, a_slot, a_t, a_rank, masked, simple, active)``: ``a_rank`` holds,
        per action type, ``(position in a_slot, rank)`` only for actors whose rank within their
        type is not 0 (a single actor always has rank 0: actors come first within a type).
        """
        sp = self.spaces
        n = self.n
        T = len(sp.entity_schemas)
        tindex = sp.entity_index
        aindex = sp.action_index
        A = len(sp.action_specs)
        bound = [spec.kind.actor_bound for spec in sp.action_specs]
        objs: list[list[Any]] = [[] for _ in range(T)]
        cnt = [[0] * n for _ in range(T)]
        a_slot: list[list[int]] = [[] for _ in range(A)]
        a_t: list[list[int]] = [[] for _ in range(A)]
        a_rank: list[list[tuple[int, int]]] = [[] for _ in range(A)]
        masked: list[tuple[int, int, int, Any]] = []  # (slot, action, first position in actor list, obs)
        pobs = self.pobs
        ptypes = self.ptypes
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
                if obs._single and len(pt) == 1 and bound[aindex[pt[0]]]:
                    x = obs._actors[0]
                    t = tindex[type(x)]
                    objs[t].append(x)
                    cnt[t][s] = 1
                    a = aindex[pt[0]]
                    if obs._masks is not None:
                        masked.append((s, a, len(a_slot[a]), obs))
                    a_slot[a].append(s)
                    a_t[a].append(t)
                else:
                    simple = False
                    acts = obs._actors
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
                        if obs._masks is not None:
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
                for ch in obs._chunks:
                    t = tindex[type(ch[0])]
                    objs[t] += ch
                    cnt[t][s] += len(ch)
                if obs._metrics:
                    for mname, mv in obs._metrics.items():
                        self.metric_buf.setdefault(mname, {})[s] = mv
        except KeyError as e:
            key = e.args[0] if e.args else None
            self._unknown_type(key, is_action=any(p is not None and key in p for p in ptypes))
            raise  # pragma: no cover
        except TypeError as e:
            raise InvalidObservationError(f"slot {self.slot_lo + s}: invalid action type passed to act: {e}") from None
        if rewards and idx:
            self._fold_scores(idx, scores)
        if len(idx) == n:
            active = np.ones(n, dtype=bool)
        else:
            active = np.zeros(n, dtype=bool)
            active[idx] = True
        return objs, cnt, a_slot, a_t, a_rank, masked, simple, active

    def _fold_scores(self, idx: list[int], scores: list[Any]) -> None:
        """Rewards since each slot's previous observation, episode returns and lengths."""
        try:
            sc = np.array(scores, dtype=np.float64)
        except (TypeError, ValueError):
            sc = None
        if sc is None or sc.shape != (len(idx),) or not math.isfinite(sc.sum()):
            for s, v in zip(idx, scores):
                if not isinstance(v, (int, float, np.integer, np.floating)):
                    raise InvalidObservationError(
                        f"slot {self.slot_lo + s}: the observation's score must be a number, got {v!r}"
                    )
                if not math.isfinite(v):
                    raise InvalidObservationError(f"slot {self.slot_lo + s}: the score is not finite ({v})")
        if len(idx) == self.n:
            prev = self.prev_score
            r = sc - prev
            np.nan_to_num(r, copy=False, nan=0.0)  # no previous score: no reward yet
            self.reward_acc += r
            self.ep_ret += r
            self.prev_score = sc
            self.ep_len += 1
        else:
            ii = np.array(idx, dtype=np.intp)
            r = sc - self.prev_score[ii]
            np.nan_to_num(r, copy=False, nan=0.0)
            self.reward_acc[ii] += r
            self.ep_ret[ii] += r
            self.prev_score[ii] = sc
            self.ep_len[ii] += 1

    def build(self) -> Batch:
        """Build the batch of all pending decisions (one numpy call per entity type)."""
        sp = self.spaces
        n = self.n
        schemas = sp.entity_schemas
        T = len(schemas)
        tindex = sp.entity_index
        specs = sp.action_specs
        pobs = self.pobs
        objs, cnt, a_slot, a_t, a_rank, masked, simple, active = self._gather()
        for t, sc in enumerate(schemas):
            lst = objs[t]
            if lst and (type(lst[0]) is not sc.cls or len(set(map(type, lst))) != 1):
                self._regroup()
                objs, cnt, a_slot, a_t, a_rank, masked, simple, active = self._gather(rewards=False)
                break
        racc = self.reward_acc

        # ---- entities: one numpy call per type
        entities: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        C = np.array(cnt, dtype=np.int64).reshape(T, n)
        for t, sc in enumerate(schemas):
            entities[sc.name] = self._featurize(sc, objs[t], cnt[t])
            counts[sc.name] = C[t]

        # ---- globals
        gs = sp.globals_schema
        if gs is not None:
            gl_objs = []
            for s in range(n):
                obs = pobs[s]
                if obs is None:
                    continue
                g = obs._globals
                if g is None or type(g) is not gs.cls:
                    raise InvalidObservationError(
                        f"slot {self.slot_lo + s}: the observation space has globals of type {gs.name!r} but the "
                        f"observation gave {g!r}; call obs.globals({gs.name}(...)) on every observation"
                    )
                gl_objs.append(g)
            garr = self._featurize(gs, gl_objs, active.astype(np.int64).tolist())
            if active.all():
                globs = garr
            else:
                globs = np.zeros((n, len(gs.features)), dtype=np.float32)
                globs[active] = garr
        else:
            globs = np.zeros((n, 0), dtype=np.float32)

        # ---- actors and masks
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
            if not spec.kind.actor_bound:
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
            if spec.kind.selects_entities:
                ts = tuple(tindex[c] for c in spec.among)
                among.append(ts)
                cand_types[spec.name] = tuple(schemas[t].name for t in ts)
                nc = C[list(ts)].sum(axis=0)[sl] if sl.size else _EMPTY_I64.copy()
                ncand[spec.name] = nc
                masks[spec.name] = np.ones(int(nc.sum()), dtype=bool)
            else:
                among.append(())
                masks[spec.name] = np.ones((sl.size, spec.n), dtype=bool)
        if masked:
            self._apply_masks(masked, masks, ncand, specs)
        for a, spec in enumerate(specs):
            m = masks[spec.name]
            if not spec.kind.selects_entities:
                if m.shape[0] and not m.any(axis=1).all():
                    j = int(np.flatnonzero(~m.any(axis=1))[0])
                    self._no_legal(spec.name, a_slot[a][j])
            else:
                nc = ncand[spec.name]
                if nc.size:
                    if (nc == 0).any():
                        j = int(np.flatnonzero(nc == 0)[0])
                        raise InvalidObservationError(
                            f"select-entity action {spec.name!r}: the actor of slot {self.slot_lo + a_slot[a][j]} has no "
                            f"candidate (no entity of type {cand_types[spec.name]} was observed); observe at least one "
                            "candidate or do not ask for this action type"
                        )
                    legal = np.add.reduceat(m.astype(np.int64), np.cumsum(nc) - nc)
                    if (legal == 0).any():
                        self._no_legal(spec.name, a_slot[a][int(np.flatnonzero(legal == 0)[0])])

        # ---- rewards, ends, metrics
        reward = racc.astype(np.float32)
        if not math.isfinite(reward.sum()) and not np.isfinite(reward).all():
            s = int(np.flatnonzero(~np.isfinite(reward))[0])
            raise InvalidObservationError(f"slot {self.slot_lo + s}: the score is not finite (reward {reward[s]})")
        self.reward_acc = np.zeros(n)
        if self.any_done:
            terminated = np.array(self.term, dtype=bool)
            truncated = np.array(self.trunc, dtype=bool)
            self.term = [False] * n
            self.trunc = [False] * n
            self.any_done = False
        else:
            terminated = np.zeros(n, dtype=bool)
            truncated = np.zeros(n, dtype=bool)
        metrics: dict[str, np.ndarray] = {}
        if self.metric_buf:
            for name, d in self.metric_buf.items():
                v = np.full(n, np.nan)
                v[list(d.keys())] = list(d.values())
                metrics[name] = v
            self.metric_buf = {}
        self._plan = _Plan(simple, a_slot, among, objs, cnt)
        final = None
        if self.final_obs:
            final = self._build_final()
            self.final_obs = {}
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

    def _build_final(self) -> Batch:
        """The observations given to ``game_over`` on truncation, as a batch without actors."""
        sp = self.spaces
        n = self.n
        schemas = sp.entity_schemas
        tindex = sp.entity_index
        objs: list[list[Any]] = [[] for _ in schemas]
        cnt = [[0] * n for _ in schemas]
        has = np.zeros(n, dtype=bool)
        gs = sp.globals_schema
        globs = np.zeros((n, len(gs.features) if gs else 0), dtype=np.float32)
        for s in sorted(self.final_obs):
            obs = self.final_obs[s]
            has[s] = True
            for o in obs.entity_list():  # actors first within a type, as in every batch
                t = tindex.get(type(o))
                if t is None:
                    self._unknown_type(type(o))
                objs[t].append(o)
                cnt[t][s] += 1
            if gs is not None and type(obs._globals) is gs.cls:
                globs[s] = self._featurize(gs, [obs._globals], [1])[0]
        entities = {sc.name: self._featurize(sc, objs[t], cnt[t]) for t, sc in enumerate(schemas)}
        counts = {sc.name: np.array(cnt[t], dtype=np.int64) for t, sc in enumerate(schemas)}
        z = np.zeros(0, dtype=np.int64)
        cand_types = {spec.name: spec.desc.among for spec in sp.action_specs if spec.kind.selects_entities}
        return Batch(
            num_slots=n, entities=entities, counts=counts, globals=globs,
            actor_slot={spec.name: z for spec in sp.action_specs},
            actor_index={spec.name: z for spec in sp.action_specs},
            masks={spec.name: spec.kind.empty_masks(spec.n) for spec in sp.action_specs},
            num_candidates={spec.name: z for spec in sp.action_specs if spec.kind.selects_entities},
            reward=np.zeros(n, dtype=np.float32), terminated=np.zeros(n, dtype=bool), truncated=np.zeros(n, dtype=bool),
            active=has, candidate_types=cand_types,
        )

    def _no_legal(self, name: str, s: int) -> None:
        raise InvalidObservationError(
            f"action type {name!r}: an actor of slot {self.slot_lo + s} (env {self.env_lo + s // self.apg}) has a mask "
            "that leaves no legal choice; every mask must allow at least one choice"
        )

    def _unknown_type(self, key: Any, is_action: bool = False) -> None:
        sp = self.spaces
        known_e = [s.name for s in sp.entity_schemas]
        known_a = [s.name for s in sp.action_specs]
        if not is_action:
            raise InvalidObservationError(
                f"entity type {key.__qualname__!r} appeared after the observation space was fixed (known entity "
                f"types: {known_e}); declare every entity type up front: gl.VecEnv(..., entity_types=[...])"
            )
        raise InvalidObservationError(
            f"action type {getattr(key, '__name__', key)!r} appeared after the action space was fixed (known action "
            f"types: {known_a}); declare every action type up front: gl.VecEnv(..., action_types=[...])"
        )

    def _featurize(self, sc: Any, lst: list[Any], per_slot: list[int]) -> np.ndarray:
        nf = len(sc.features)
        if not lst:
            return np.zeros((0, nf), dtype=np.float32)
        try:
            arr = np.array(sc.flat(lst), dtype=np.float32)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            self._locate_bad(sc, lst, per_slot, e)
            raise  # pragma: no cover
        arr = arr.reshape(len(lst), nf)
        # a finite sum proves every value finite (one cheap reduction); only then-not is checked fully
        if not math.isfinite(arr.sum()) and not np.isfinite(arr).all():
            bad = np.argwhere(~np.isfinite(arr))[0]
            row, col = int(bad[0]), int(bad[1])
            s = int(np.searchsorted(np.cumsum(per_slot), row, side="right"))
            raise InvalidObservationError(
                f"entity type {sc.name!r}, feature {sc.features[col]!r} is {arr[row, col]} in env "
                f"{self.env_lo + s // self.apg} (slot {self.slot_lo + s}); features must be finite numbers"
            )
        return arr

    def _locate_bad(self, sc: Any, lst: list[Any], per_slot: list[int], e: Exception) -> None:
        """Slow path after featurizing failed: name the object, its field and its env."""
        ends = np.cumsum(per_slot)
        for i, o in enumerate(lst):
            env = self.env_lo + int(np.searchsorted(ends, i, side="right")) // self.apg
            for f in sc.fields:
                if not hasattr(o, f):
                    raise InvalidObservationError(f"entity type {sc.name!r}: object {o!r} in env {env} has no field {f!r}")
            try:
                np.array(sc.flat([o]), dtype=np.float32)
            except Exception as e2:
                raise InvalidObservationError(
                    f"entity type {sc.name!r}: cannot featurize {o!r} in env {env}: {type(e2).__name__}: {e2}; "
                    "every feature must be a number (an Enum field must hold one of its members)"
                ) from None
        raise InvalidObservationError(f"entity type {sc.name!r}: cannot featurize: {e}") from None

    def _regroup(self) -> None:
        """Slow path: some ``entities(...)`` call mixed several types; split such chunks by type."""
        tindex = self.spaces.entity_index
        for obs in self.pobs:
            if obs is None:
                continue
            new: list[Any] = []
            for ch in obs._chunks:
                first = type(ch[0])
                if all(type(o) is first for o in ch):
                    new.append(ch)
                    continue
                groups: dict[type, list[Any]] = {}
                for o in ch:
                    t = type(o)
                    if t not in tindex:
                        self._unknown_type(t)
                    groups.setdefault(t, []).append(o)
                new.extend(groups.values())
            obs._chunks = new

    def _apply_masks(self, masked: list, masks: dict[str, np.ndarray], ncand: dict[str, np.ndarray], specs: list) -> None:
        """Write the masks the games set (slow path, only for observations that have masks)."""
        ncand_cum = {k: np.cumsum(v) - v for k, v in ncand.items()}
        for s, a, pos, obs in masked:
            spec = specs[a]
            raw_list = obs._masks.get(spec.key)
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
            unknown = [k for k in obs._masks if k not in self.ptypes[s]]
            if unknown:
                raise InvalidObservationError(
                    f"slot {self.slot_lo + s}: the observation has masks for {unknown!r}, which act() was not asked for "
                    f"(asked: {list(self.ptypes[s])!r}); a mask must belong to a requested action type"
                )


class _Plan:
    """What ``step`` needs from the last batch to decode actions."""

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

