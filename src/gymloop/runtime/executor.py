"""The greenlet executor: many game loops, one batch of decisions.

Each game copy runs in its own greenlet. A :class:`TrainingAgent`'s ``act`` records the
observation and switches back to the executor; once every game is waiting, the executor hands the
pending decisions to its :class:`~gymloop.runtime.builder.BatchBuilder`, which builds one
:class:`~gymloop.batch.Batch` (one numpy call per entity type, never one per game). ``step`` has the
builder decode the batch of actions and resumes each game with its own. This module is scheduling
only (starting, resuming and restarting games, ``act_all``, errors); episode bookkeeping lives in
:class:`~gymloop.runtime.builder.EpisodeState`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import greenlet
import numpy as np

from ..agent import pack_result
from ..batch import Batch
from ..errors import ConfigError, EnvStateError, GameError, InvalidObservationError, SchemaError
from ..obs import Obs
from ..spaces import Spaces
from .builder import BatchBuilder, EpisodeState

log = logging.getLogger("gymloop.executor")

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
        self.builder: BatchBuilder | None = None
        self.spaces = spaces  # (also makes the builder)
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
        # per slot: rewards, episode ends, returns, lengths and metrics until the next batch
        self.episodes = EpisodeState(self.n, self.slot_lo)
        self.errors: list[GameError] = []

    @property
    def spaces(self) -> Spaces | None:
        """The compiled spaces (``None`` until discovered); setting them makes the batch builder."""
        return self._spaces

    @spaces.setter
    def spaces(self, sp: Spaces | None) -> None:
        self._spaces = sp
        self.builder = None if sp is None else BatchBuilder(sp, self.n, self.slot_lo, self.env_lo, self.apg)

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
        ep = self.episodes
        for s in range(k * self.apg, (k + 1) * self.apg):
            self.pobs[s] = None
            ep.game_returned(s)

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
        self.episodes.game_over(s, obs, truncated)

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
        self.episodes = EpisodeState(self.n, self.slot_lo)
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
            obs, pt = self.pobs[s], self.ptypes[s]
            if obs is None or pt is None:
                continue
            ents.update(type(a) for a in obs._actors)
            for ch in obs._chunks:
                ents.update(map(type, ch))
            if obs._globals is not None:
                glob.add(type(obs._globals))
            acts.extend(pt)
        parts: list[tuple[Iterable[type], Iterable[type], list[Any]]] = [(ents, glob, acts)]
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
        builder = self._builder()
        plan = builder.last_plan()
        specs = builder.spaces.action_specs
        apg = self.apg
        pobs = self.pobs
        decoded = builder.decode(actions)  # the chosen values, per action type
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
            aindex = builder.spaces.action_index
            unbound = builder.unbound  # global decisions come back alone, not in a list
            games: dict[int, list[int]] = {}
            for s in per_slot:
                games.setdefault(s // apg, []).append(s)
            res = self.results
            for k, slots in games.items():
                for s in slots:
                    d = per_slot[s]
                    pt, ob = self.ptypes[s], pobs[s]
                    assert pt is not None and ob is not None  # a slot with actions has a pending decision
                    res[s] = pack_result(ob, [d[aindex[key]] for key in pt], pt if unbound else None)
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

    # ------------------------------------------------------------------ batching (the builder's)
    def build(self) -> Batch:
        """Build the batch of all pending decisions (see :class:`~gymloop.runtime.builder.BatchBuilder`)."""
        return self._builder().build(self.pobs, self.ptypes, self.episodes)

    def _builder(self) -> BatchBuilder:
        if self.builder is None:
            raise EnvStateError("the spaces are not fixed yet (no reset); call reset() first")
        return self.builder
