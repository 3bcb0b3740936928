"""The greenlet executor: many game loops, one batch of decisions.

Each game copy runs in its own greenlet. A :class:`TrainingAgent`'s ``act`` records the
observation and switches back to the executor; once every game is waiting, the executor hands the
pending decisions to its :class:`~gymloop.runtime.builder.BatchBuilder`, which builds one
:class:`~gymloop.batch.Batch` (one numpy call per entity type, never one per game). ``step`` has the
builder decode the batch of actions and resumes each game with its own. This module is scheduling
only (starting, resuming and restarting games, ``act_all``, errors); episode bookkeeping lives in
:class:`~gymloop.runtime.builder.EpisodeState`.

Faults. Whatever a game raises (``SystemExit`` and every other ``BaseException`` included; only
``KeyboardInterrupt`` passes through as itself, and ``GreenletExit`` is the executor's own close
signal) becomes a :class:`~gymloop.errors.GameError` with the copy's env index and seed. A game that
does not ask for its next decision within ``step_timeout`` is interrupted where it runs by the step
alarm (:mod:`gymloop.runtime.alarm`) and fails with :class:`~gymloop.errors.GameTimeoutError`. With
``on_game_error="raise"`` the call raises the first error (in env order) once every other game has
had its turn; with ``"restart"`` the faulting copy's open episode ends as truncated, it restarts
with a fresh seed, the error is appended to :attr:`Executor.faults` (the backend counts and logs
it), and the call goes on.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import greenlet
import numpy as np

from ..agent import pack_result
from ..batch import Batch
from ..errors import ConfigError, GameError, GameTimeoutError, InvalidObservationError
from ..obs import Obs
from ..spaces import Spaces
from .builder import BatchBuilder
from .declared import DeclaredTypes, merge_types
from .episodes import EpisodeState
from .faults import MAX_START_FAILURES, gave_up
from .shard import RUNTIME_FILES, ShardExecutor

log = logging.getLogger("gymloop.executor")

# frames of these files are the executor's or the agent's own: the step alarm never raises in them
_OUR_FILES = RUNTIME_FILES | {os.path.normcase(os.path.abspath(__file__))}


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


class Executor(ShardExecutor):
    """Runs games ``[env_lo, env_lo + num_games)`` of a vectorized environment in greenlets.

    A :class:`~gymloop.runtime.shard.ShardExecutor` (seeds, faults, the step alarm and the
    attributes backends use are documented there).

    Args:
        step_timeout: seconds a call (``start``, ``step``) may resume games before the game running
            then fails with :class:`~gymloop.errors.GameTimeoutError` (see :mod:`gymloop.runtime.alarm`;
            only in the process's main thread); ``None``: no limit.
        on_game_error: ``"raise"`` or ``"restart"`` (see the module docstring).
    """

    def __init__(
        self,
        game: Callable[..., Any],
        env_lo: int,
        num_games: int,
        agents_per_game: int,
        seed: int,
        spaces: Spaces | None = None,
        declared: DeclaredTypes | None = None,
        step_timeout: float | None = None,
        on_game_error: str = "raise",
    ) -> None:
        super().__init__(env_lo, num_games, seed, declared, step_timeout, on_game_error)
        self.game = game
        self.apg = agents_per_game
        self.n = num_games * agents_per_game
        self.slot_lo = env_lo * agents_per_game
        self.builder: BatchBuilder | None = None
        self.spaces = spaces  # (also makes the builder)
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
        """Start (or restart) game ``k``; it runs until it asks for its first decision.

        With ``on_game_error="restart"`` a game that fails before its first decision is restarted
        with a fresh seed (each failure is a fault), up to :data:`~gymloop.runtime.faults.MAX_START_FAILURES`
        times in a row.
        """
        returned = failed = 0
        while returned < 2:
            seed = self._next_seed(k)
            g = greenlet.greenlet(self.game, parent=self.caller)
            self.greenlets[k] = g
            agents = self.agents[k]
            arg = agents[0] if self.apg == 1 else tuple(agents)
            try:
                g.switch(arg, seed)
            except BaseException as e:
                err = self._fault(k, e)  # (KeyboardInterrupt passes through)
                self._clear(k)
                if self.restart_on_error and failed < MAX_START_FAILURES:
                    failed += 1
                    self.faults.append(err)
                    continue
                self.errors.append(gave_up(err, failed + 1, before_first_decision=True) if failed else err)
                return
            if not g.dead:
                return
            self._game_returned(k)
            returned += 1
        self.errors.append(
            GameError(
                f"game {getattr(self.game, '__name__', self.game)!r} (env {self.env_lo + k}) returned without asking "
                "its agent for a decision; a game loop must call agent.act(...) at least once per run",
                env_index=self.env_lo + k,
                seed=self.seeds[k],
            ),
        )
        self._clear(k)

    def _game_returned(self, k: int) -> None:
        """The game function of copy ``k`` returned: close any open episode as truncated."""
        ep = self.episodes
        for s in range(k * self.apg, (k + 1) * self.apg):
            self.pobs[s] = None
            ep.game_returned(s)

    def _clear(self, k: int) -> None:
        for s in range(k * self.apg, (k + 1) * self.apg):
            self.pobs[s] = None

    def _record_error(self, k: int, e: BaseException) -> None:
        """Game ``k`` raised ``e`` (its greenlet is dead): fail the call, or restart it (``"restart"``)."""
        err = self._fault(k, e)  # (KeyboardInterrupt passes through)
        if self.restart_on_error:
            self.faults.append(err)
            self._game_returned(k)  # its open episode ends as truncated
            self._start(k)  # with a fresh seed (the restart counter moved on)
        else:
            self.errors.append(err)
            self._clear(k)

    def game_over(self, s: int, obs: Obs, truncated: bool) -> None:
        self.episodes.game_over(s, obs, truncated)

    def start(self) -> None:
        """(Re)start every game; each runs until its first decision."""
        self.close_games()
        self.closing = False
        self.errors = []
        self._new_generation()
        self._set_caller()
        self.episodes = EpisodeState(self.n, self.slot_lo)
        self.pobs[:] = [None] * self.n
        self.ptypes[:] = [None] * self.n
        token = self.alarm.arm(check=True)
        try:
            for k in range(self.n_games):
                self._start(k)
        finally:
            self.alarm.disarm(token)
        self._raise_errors()

    def set_spaces(self, classes: DeclaredTypes) -> None:
        """Fix the spaces (workers receive the union of what every worker discovered)."""
        self.spaces = Spaces.build(*classes)

    def discover(self) -> DeclaredTypes:
        """Entity classes, globals class and action types declared or seen in the pending decisions."""
        ents: set[type] = set()
        glob: set[type] = set()
        acts: list[Any] = []
        for s in range(self.n):
            obs, pt = self.pobs[s], self.ptypes[s]
            if obs is None or pt is None:
                continue
            ents.update(obs.entity_types())
            if obs.global_features is not None:
                glob.add(type(obs.global_features))
            acts.extend(pt)
        parts: list[tuple[Iterable[type], Iterable[type], list[Any]]] = [(ents, glob, acts)]
        if self.declared:
            e, g, a = self.declared
            parts.insert(0, (e, [g] if g is not None else [], a))
        return merge_types(parts)

    def close_games(self) -> None:
        """Throw ``GreenletExit`` into every suspended game so its ``finally`` blocks run.

        With a ``step_timeout`` the games' ``finally`` blocks get
        :data:`~gymloop.runtime.faults.CLOSE_TIMEOUT_S` seconds together (at most ``step_timeout``);
        a game still running then is abandoned. The step alarm's signal handler is given back (the
        next call takes it again).
        """
        self.closing = True
        live = [(k, functools.partial(self._close_game, k)) for k, g in enumerate(self.greenlets) if g is not None and not g.dead]
        if live:
            self._set_caller()
        self._close_each(live)
        self.pobs[:] = [None] * self.n

    def _close_game(self, k: int) -> None:
        g = self.greenlets[k]
        try:
            g.throw(greenlet.GreenletExit)
        finally:
            if not g.dead:
                log.warning("game copy %d kept running after GreenletExit; it is abandoned", self.env_lo + k)
            self.greenlets[k] = None

    def alarm_may_raise(self, frame: Any) -> bool:
        """The step alarm fired in ``frame``: raise there only if it is a game's own code.

        Not in the executor's greenlet (executor code), nor in a frame of this module's (an agent's
        ``act`` or ``game_over``, whose bookkeeping must not be cut in half).
        """
        if greenlet.getcurrent() is self.caller:
            return False
        f = frame
        while f is not None:
            if os.path.normcase(f.f_code.co_filename) in _OUR_FILES:
                return False
            f = f.f_back
        return True

    # ------------------------------------------------------------------ stepping
    def step(self, actions: Sequence[np.ndarray]) -> Batch:
        """Resume each waiting game with its action (one int array per action type, in space order)."""
        self._set_caller()
        token = self.alarm.arm()
        try:
            self._resume(actions)
        finally:
            self.alarm.disarm(token)
        self._raise_errors()
        return self.build()

    def _resume(self, actions: Sequence[np.ndarray]) -> None:
        """Resume every waiting game with its action; each runs to its next decision (or fails)."""
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
                except BaseException as e:
                    self.chain = None  # (a restart below must not follow the chain)
                    pos = self.pos
                    self._record_error(chain[pos][0], e)  # (KeyboardInterrupt passes through)
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
                except BaseException as e:
                    self._record_error(k, e)  # (KeyboardInterrupt passes through)
                    continue
                if g.dead:
                    self._game_returned(k)
                    self._start(k)

    def _raise_errors(self) -> None:
        if self.errors:
            errs = self.errors
            self.errors = []
            first = errs[0]
            if len(errs) > 1:
                others = ", ".join(
                    f"{e.env_index}{' (timed out)' if isinstance(e, GameTimeoutError) else ''}" for e in errs[1:]
                )
                first.args = (first.args[0] + f"\n({len(errs) - 1} other game copies failed in the same step: {others})",)
            raise first

    # ------------------------------------------------------------------ batching (the builder's)
    def build(self) -> Batch:
        """Build the batch of all pending decisions (see :class:`~gymloop.runtime.builder.BatchBuilder`)."""
        return self._builder().build(self.pobs, self.ptypes, self.episodes)

    def _builder(self) -> BatchBuilder:
        if self.builder is None:
            raise self._not_fixed()
        return self.builder
