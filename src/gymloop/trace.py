"""Traces: recorded runs of a game that replay bit-exactly and train agents by behaviour cloning.

A :class:`Recorder` wraps any agent (random, scripted, neural, a human at the keyboard) and
records what happens while :func:`gymloop.run` plays a game with it: the game and its seed, for
every decision the action types asked and the choices taken, in a game-independent encoding
(choice indices; for a select-entity action the index among its candidates), the observation, and
every episode end with its score and metrics. :func:`record_trace` does the run and the recording in one
call.

**Observations** are stored as one :class:`~gymloop.batch.Batch` with one slot per decision
(``trace.batch``; ``trace.actions[name]`` holds the choice of every actor of ``batch.actor_slot[name]``).
It is built by the executor's own batch builder, so it holds exactly what a :class:`~gymloop.VecEnv` batch
holds for the same observation: the network trained on a trace (behaviour cloning,
:mod:`gymloop.train.bc`) sees what PPO and :func:`gymloop.load`'s numpy agent see. The batch's
``reward``, ``terminated`` and ``truncated`` are zero: a trace keeps ``score`` per decision and its
``episodes`` instead.

**Replay.** :func:`replay` runs the game again with the recorded seed and choices and checks that
every observation is bit-for-bit the recorded one (features, counts, masks, candidates, the action
types asked, the score, each episode end); the first difference raises
:class:`~gymloop.errors.TraceError` naming the step. A trace names its game, but only a bundled
game is found by that name: the loop of any other game is passed to :func:`replay` (a file never
makes gymloop import or call anything).

**Multi-agent games.** ``Recorder([agent_a, agent_b], game)`` records every seat in one trace; hand
``recorder.agents`` to the game. The decisions are stored in the order the game asked for them (a
``gl.act_all`` request is answered seat after seat).

**File format** (version 1): a ``.safetensors`` file (the container of agent checkpoints, read with
numpy alone, never unpickled), named ``*.trace.safetensors`` by convention. Its metadata entry
``gymloop-trace`` is a JSON document: ``format_version``, ``library_version``, ``game`` (a bundled
name or ``module:function``), ``seed``, ``agents`` (seats), ``obs_space`` and ``action_space`` (as in
checkpoints), ``decisions``, ``asked`` (the distinct ``{"actions": [names in the order asked],
"single": bool}`` requests) and ``episodes`` (per end: ``agent``, ``score``, ``length``,
``truncated``, ``metrics``, ``after``: decisions taken before it). Tensors: ``entities/<type>``,
``counts/<type>``, ``globals``, ``actor_slot/<action>``, ``actor_index/<action>``,
``masks/<action>``, ``num_candidates/<action>`` (select-entity), ``actions/<action>`` (the choices),
``score`` (float64), ``agent`` and ``asked`` (int64, per decision).

Example:
    >>> import os, tempfile
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.trace.safetensors")
    >>> trace = gl.record_trace(snake, gl.RandomAgent(seed=1), seed=7, max_episodes=2, path=path)
    >>> len(trace.episodes), trace.num_decisions == trace.batch.num_slots
    (2, True)
    >>> result = gl.replay(path)          # the same game, seed and choices: every observation checked
    >>> result.scores == trace.scores
    True
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._version import __version__
from .actions import action_spec
from .agent import EpisodeResult, RunResult, check_action, pack_result, run
from .batch import Batch, stack
from .checkpoint import read_safetensors, write_safetensors
from .errors import CheckpointError, ConfigError, TraceError
from .featurize import OneSlotFeaturizer
from .obs import Obs
from .spaces import ActionDesc, ObsSpace, Spaces, declared_types

__all__ = ["TRACE_FORMAT_VERSION", "TRACE_SUFFIX", "Recorder", "Trace", "load_trace", "load_traces", "record_trace", "replay"]

log = logging.getLogger("gymloop.trace")

TRACE_FORMAT_VERSION = 1
TRACE_SUFFIX = ".trace.safetensors"
_META_KEY = "gymloop-trace"

# ---------------------------------------------------------------------- the trace
@dataclass(eq=False)
class Trace:
    """One recorded run of a game (see the module docstring).

    Attributes:
        game: the game, as a bundled name (``"snake"``) or ``"module:function"``.
        seed: the seed the game was started with.
        num_agents: seats of the game (1, or the number of agents of a multi-agent game).
        obs_space, action_space: the spaces of ``batch`` (names, as in checkpoints).
        batch: the observations, one slot per decision, in the order they were taken.
        actions: per action type, the choice index of every actor of ``batch.actor_slot[name]``
            (label index, or index among the actor's candidates for select-entity).
        score: ``(decisions,)`` float64, the observation's score at each decision.
        agent: ``(decisions,)`` int64, the seat that took each decision.
        asked: ``(decisions,)`` int64, each decision's request as an index into ``asked_table``.
        asked_table: the distinct requests: (action type names in the order asked, whether the
            observation had a single actor, ``obs.actor(x)``).
        episodes: every episode end, in order.
        episode_after: for each episode end, the number of decisions taken before it.
        path: the file it was loaded from or last saved to, else ``None``.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.tactics import tactics
        >>> trace = gl.record_trace(tactics, gl.RandomAgent(seed=0), seed=1, max_steps=3)
        >>> trace.num_decisions, trace.asked_table
        (3, [(('Order', 'Target'), False)])
        >>> first = trace.decision(0)              # a one-slot batch: what the network sees
        >>> int(first.counts["Unit"][0]), len(trace.choices(0)["Order"])   # 3 units, one order each
        (3, 3)
    """

    game: str
    seed: int
    num_agents: int
    obs_space: ObsSpace
    action_space: dict[str, ActionDesc]
    batch: Batch
    actions: dict[str, np.ndarray]
    score: np.ndarray
    agent: np.ndarray
    asked: np.ndarray
    asked_table: list[tuple[tuple[str, ...], bool]]
    episodes: list[EpisodeResult] = field(default_factory=list)
    episode_after: list[int] = field(default_factory=list)
    path: str | None = None
    _where: Any = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        where = f", path={self.path!r}" if self.path else ""
        return (f"Trace(game={self.game!r}, seed={self.seed}, agents={self.num_agents}, decisions={self.num_decisions}, "
                f"episodes={len(self.episodes)}{where})")

    @property
    def num_decisions(self) -> int:
        """Decisions recorded (all seats together)."""
        return int(self.batch.num_slots)

    @property
    def scores(self) -> list[float]:
        """Final score of each recorded episode."""
        return [e.score for e in self.episodes]

    def save(self, path: str | os.PathLike) -> str:
        """Write the trace to ``path`` (conventionally ``*.trace.safetensors``); returns the path."""
        b = self.batch
        tensors: dict[str, np.ndarray] = {"globals": b.globals, "score": self.score, "agent": self.agent, "asked": self.asked}
        for name in self.obs_space.entities:
            tensors[f"entities/{name}"] = b.entities[name]
            tensors[f"counts/{name}"] = b.counts[name]
        for name, a in self.action_space.items():
            tensors[f"actor_slot/{name}"] = b.actor_slot[name]
            tensors[f"actor_index/{name}"] = b.actor_index[name]
            tensors[f"masks/{name}"] = b.masks[name]
            tensors[f"actions/{name}"] = self.actions[name]
            if a.kind.selects_entities:
                tensors[f"num_candidates/{name}"] = b.num_candidates[name]
        obs, acts = self.spaces.to_json()
        doc = {
            "format_version": TRACE_FORMAT_VERSION,
            "library_version": __version__,
            "game": self.game,
            "seed": self.seed,
            "agents": self.num_agents,
            "obs_space": obs,
            "action_space": acts,
            "decisions": self.num_decisions,
            "asked": [{"actions": list(names), "single": single} for names, single in self.asked_table],
            "episodes": [
                {"agent": e.agent, "score": e.score, "length": e.length, "truncated": e.truncated,
                 "metrics": {k: float(v) for k, v in e.metrics.items()}, "after": after}
                for e, after in zip(self.episodes, self.episode_after)
            ],
        }
        p = os.fspath(path)
        d = os.path.dirname(p)
        if d:
            os.makedirs(d, exist_ok=True)
        write_safetensors(p, tensors, {_META_KEY: json.dumps(doc), "format": "gymloop-trace"})
        self.path = p
        return p

    @property
    def spaces(self) -> Spaces:
        """The trace's observation and action spaces as one :class:`~gymloop.spaces.Spaces` value."""
        return Spaces(self.obs_space, self.action_space)

    def decision(self, k: int) -> Batch:
        """Decision ``k`` as a one-slot batch (views into ``batch``)."""
        if not 0 <= k < self.num_decisions:
            raise IndexError(f"decision {k} out of range: the trace has {self.num_decisions}")
        w = self._where
        if w is None:
            w = self._where = _Where(self.batch)
        return w.slot(self.batch, k)

    def choices(self, k: int) -> dict[str, np.ndarray]:
        """The choice indices of decision ``k``, per action type asked (actors in order)."""
        self.decision(k)  # builds the index, checks the range
        w = self._where
        out = {}
        for name in self.actions:
            lo, hi = w.act[name][k], w.act[name][k + 1]
            if hi > lo:
                out[name] = self.actions[name][lo:hi]
        return out


class _Where:
    """Where each slot's rows lie in a batch whose actors are in slot order (O(1) slicing)."""

    def __init__(self, b: Batch) -> None:
        S = b.num_slots
        self.ent = {n: np.concatenate([[0], np.cumsum(c)]) for n, c in b.counts.items()}
        self.act = {n: np.searchsorted(sl, np.arange(S + 1)) for n, sl in b.actor_slot.items()}
        self.cand = {n: np.concatenate([[0], np.cumsum(nc)]) for n, nc in b.num_candidates.items()}

    def slot(self, b: Batch, k: int) -> Batch:
        ents = {n: b.entities[n][e[k] : e[k + 1]] for n, e in self.ent.items()}
        masks, ncand = {}, {}
        for n, a in self.act.items():
            lo, hi = a[k], a[k + 1]
            if n in self.cand:
                c = self.cand[n]
                masks[n] = b.masks[n][c[lo] : c[hi]]
                ncand[n] = b.num_candidates[n][lo:hi]
            else:
                masks[n] = b.masks[n][lo:hi]
        return Batch(
            num_slots=1, entities=ents, counts={n: c[k : k + 1] for n, c in b.counts.items()},
            globals=b.globals[k : k + 1],
            actor_slot={n: np.zeros(a[k + 1] - a[k], dtype=np.int64) for n, a in self.act.items()},
            actor_index={n: b.actor_index[n][a[k] : a[k + 1]] for n, a in self.act.items()},
            masks=masks, num_candidates=ncand, reward=b.reward[k : k + 1], terminated=b.terminated[k : k + 1],
            truncated=b.truncated[k : k + 1], active=b.active[k : k + 1], candidate_types=b.candidate_types,
        )


# ---------------------------------------------------------------------- spaces
def _names(x: Any, what: str, bad: Callable[[str], TraceError], nonempty: bool = False) -> tuple[str, ...]:
    """A JSON list of distinct strings (a file's feature names, labels, ...), else ``bad``."""
    if not isinstance(x, list) or not all(isinstance(v, str) for v in x):
        raise bad(f"{what} must be a list of strings, got {x!r}")
    if len(set(x)) != len(x):
        raise bad(f"{what} must be distinct, got {x!r}")
    if nonempty and not x:
        raise bad(f"{what} must not be empty")
    return tuple(x)


def relayout(b: Batch, src: Spaces, dst: Spaces) -> Batch:
    """The batch ``b`` (laid out for the spaces ``src``) laid out for the spaces ``dst``.

    ``dst`` may have more entity and action types (they get zero rows / no actors); types of
    ``src`` that ``dst`` lacks must be absent from ``b``. Entity indices are renumbered for
    ``dst``'s type order.

    Raises:
        TraceError: ``b`` holds something ``dst`` cannot (the message lists every difference).
    """
    so, sa = src.obs, src.actions
    do, da = dst.obs, dst.actions
    if so == do and sa == da:
        return b
    S = b.num_slots
    problems = []
    for name, feats in so.entities.items():
        if name not in do.entities:
            if b.counts[name].any():
                problems.append(f"entity type {name!r} is not in the trace's observation space {sorted(do.entities)}")
        elif do.entities[name] != feats:
            problems.append(f"entity type {name!r} has the features {list(feats)}, the trace {list(do.entities[name])}")
    if so.globals != do.globals and S:
        problems.append(f"the global features are {list(so.globals)}, the trace's {list(do.globals)}")
    for name, a in sa.items():
        if name not in da:
            if b.actor_slot[name].size:
                problems.append(f"action type {name!r} is not in the trace's action space {sorted(da)}")
        elif da[name] != a:
            problems.append(f"action type {name!r} is {a.describe()}, in the trace {da[name].describe()}")
    if problems:
        raise TraceError("; ".join(problems))
    src_names = list(so.entities)
    dst_names = list(do.entities)
    zi = np.zeros(S, dtype=np.int64)
    C_src = np.stack([b.counts[n] for n in src_names]) if src_names else np.zeros((0, S), dtype=np.int64)
    C_dst = np.stack([b.counts.get(n, zi) for n in dst_names]) if dst_names else np.zeros((0, S), dtype=np.int64)
    end_src = np.cumsum(C_src, axis=0)
    off_src = end_src - C_src
    off_dst = np.cumsum(C_dst, axis=0) - C_dst
    pos = np.array([dst_names.index(n) if n in do.entities else 0 for n in src_names], dtype=np.int64)

    def remap(sl: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if not idx.size:
            return idx
        t = (end_src[:, sl] <= idx).sum(axis=0)
        return off_dst[pos[t], sl] + idx - off_src[t, sl]

    out = Batch.empty(dst, 0)
    out.num_slots = S
    for n in dst_names:
        if n in b.entities:
            out.entities[n] = b.entities[n]
        out.counts[n] = b.counts.get(n, zi)
    out.globals = b.globals if so.globals == do.globals else np.zeros((S, len(do.globals)), dtype=np.float32)
    for n in da:
        if n in b.actor_slot:
            out.actor_slot[n] = b.actor_slot[n]
            # a global decision's rows have no actor entity (index -1): nothing to renumber
            out.actor_index[n] = remap(b.actor_slot[n], b.actor_index[n]) if da[n].kind.actor_bound else b.actor_index[n]
            out.masks[n] = b.masks[n]
            if n in b.num_candidates:
                out.num_candidates[n] = b.num_candidates[n]
    out.reward, out.terminated, out.truncated, out.active = b.reward, b.terminated, b.truncated, b.active
    return out


def join(batches: Sequence[Batch], copy: bool = False) -> Batch:
    """Concatenate batches of one layout, their slots renumbered one after the other (metrics dropped).

    With ``copy=True`` the result never shares memory with the parts.
    """
    shifted, o = [], 0
    for b in batches:
        shifted.append(replace(b, actor_slot={k: v + o for k, v in b.actor_slot.items()}, metrics={}, final=None) if o else b)
        o += b.num_slots
    return Batch.concat(shifted, copy=copy)


def merge_spaces(spaces: Sequence[Spaces], names: Sequence[str] | None = None) -> Spaces:
    """The union of several spaces (entity and action types sorted by name, as a VecEnv orders them).

    Raises:
        TraceError: two spaces disagree on a type's features, kind, labels or candidates, or on
            the global features (``names`` label the spaces in the message, e.g. file paths).
    """
    names = list(names) if names is not None else [f"space {i}" for i in range(len(spaces))]
    ents: dict[str, tuple[tuple[str, ...], str]] = {}
    acts: dict[str, tuple[ActionDesc, str]] = {}
    glob: tuple[tuple[str, ...], str] | None = None
    for sp, who in zip(spaces, names):
        o, a = sp.obs, sp.actions
        for n, f in o.entities.items():
            if n in ents and ents[n][0] != f:
                raise TraceError(f"entity type {n!r} has the features {list(ents[n][0])} in {ents[n][1]} but {list(f)} in {who}")
            ents.setdefault(n, (f, who))
        for n, d in a.items():
            if n in acts and acts[n][0] != d:
                raise TraceError(f"action type {n!r} is {acts[n][0].describe()} in {acts[n][1]} but {d.describe()} in {who}")
            acts.setdefault(n, (d, who))
        if glob is not None and glob[0] != o.globals:
            raise TraceError(f"the global features are {list(glob[0])} in {glob[1]} but {list(o.globals)} in {who}")
        glob = (o.globals, who)
    obs = ObsSpace(entities={n: ents[n][0] for n in sorted(ents)}, globals=glob[0] if glob else ())
    return Spaces(obs, {n: acts[n][0] for n in sorted(acts)})


def _choice_indices(obs: Obs, types: tuple, res: Any) -> dict[str, list[int]]:
    """The game-independent encoding of an (already checked) answer: choice indices per action type."""
    per_type = [res] if len(types) == 1 else list(res)
    out = {}
    for t, vals in zip(types, per_type):
        spec = action_spec(t)
        if obs.is_single_actor or not spec.kind.actor_bound:
            vals = [vals]
        if spec.kind.selects_entities:
            cands = obs.entities_of(spec.among)
            out[spec.name] = [next(j for j, c in enumerate(cands) if c is v) for v in vals]
        else:
            out[spec.name] = [spec.index_of(v) for v in vals]
    return out


def _game_fn(game: Callable[..., Any] | str) -> Callable[..., Any]:
    """A game loop, or a bundled game's (or ``module:function``) name resolved to one."""
    if isinstance(game, str):
        from .games import get_game

        return get_game(game)
    return game


def _game_name(game: Any) -> str:
    from .games import GAMES

    if isinstance(game, str):
        return game
    qual = f"{getattr(game, '__module__', '?')}:{getattr(game, '__qualname__', getattr(game, '__name__', '?'))}"
    for short, target in GAMES.items():
        if target == qual:
            return short
    return qual


# ---------------------------------------------------------------------- recording
class _Seat:
    """The agent one seat of the game talks to while it is recorded."""

    def __init__(self, rec: Recorder, index: int, inner: Any) -> None:
        self.rec = rec
        self.index = index
        self.inner = inner
        self.ep_len = 0

    def act(self, obs: Obs, *action_types: Any) -> Any:
        rec = self.rec
        if not action_types:
            raise ConfigError("act needs at least one action type, e.g. agent.act(obs, Move)")
        b, space = rec._feat.batch(obs, action_types)
        res = self.inner.act(obs, *action_types)
        check_action(obs, action_types, res)
        rec._add(self.index, obs, action_types, res, b, space)
        self.ep_len += 1
        return res

    @property
    def _act_group(self) -> Any:
        """Seats whose inner agents can be asked together stay batched under ``gl.act_all``."""
        inner = getattr(self.inner, "_act_group", None)
        if inner is None:
            return None
        return self.rec._groups.setdefault(inner, object())  # one token per inner group (act_all compares by identity)

    def _act_all(self, requests: Sequence[tuple]) -> list[Any]:
        """``gl.act_all`` over seats: one batched call to the inner agents, each answer recorded."""
        rec = self.rec
        if not all(isinstance(r[0], _Seat) and r[0].rec is rec for r in requests):
            return [r[0].act(r[1], *r[2:]) for r in requests]  # mixed with other agents: one by one
        feats = []
        for r in requests:
            if len(r) < 3:
                raise ConfigError("act_all needs (agent, gl.Obs, action_type, ...) requests")
            feats.append(rec._feat.batch(r[1], tuple(r[2:])))
        inner = [(r[0].inner, r[1], *r[2:]) for r in requests]
        answers = inner[0][0]._act_all(inner)
        for r, (b, space), res in zip(requests, feats, answers):
            seat, obs, types = r[0], r[1], tuple(r[2:])
            check_action(obs, types, res)
            rec._add(seat.index, obs, types, res, b, space)
            seat.ep_len += 1
        return answers

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        self.inner.game_over(obs, truncated)
        r = self.rec
        r._ends.append(EpisodeResult(self.index, float(obs.score), self.ep_len, bool(truncated), {k: float(v) for k, v in obs.metrics.items()}))
        r._ends_after.append(len(r._score))
        self.ep_len = 0

    def __repr__(self) -> str:
        return f"Recorder seat {self.index} of {self.inner!r}"


class Recorder:
    """Records a run of a game played by any agent(s) as a :class:`Trace`.

    Hand :attr:`agents` to the game (``gl.run(game, recorder.agents, seed=seed)``); a single-agent
    recorder is itself an :class:`~gymloop.Agent`. Every decision is featurized when it is taken
    (the game may change its objects afterwards), the answer is checked against the masks, then
    encoded as choice indices. :meth:`trace` returns what was recorded so far.

    Args:
        agent: the agent that plays, or a sequence of agents (one per seat of a multi-agent game).
        game: the game loop (its declared types fix the trace's spaces as they fix a VecEnv's), or
            a bundled game's name.
        seed: the seed the game is run with (recorded for replay): the seed given to
            :func:`gymloop.run`, else the trace does not replay (:func:`record_trace` does both).

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.duel import duel
        >>> rec = gl.Recorder([gl.RandomAgent(0), gl.RandomAgent(1)], duel, seed=3)
        >>> result = gl.run(duel, rec.agents, seed=3, max_episodes=2)
        >>> trace = rec.trace()
        >>> trace.num_agents, sorted(set(trace.agent.tolist()))
        (2, [0, 1])
    """

    def __init__(self, agent: Any, game: Callable[..., Any] | str, seed: int = 0) -> None:
        fn = _game_fn(game)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"seed must be an int (the seed the game is run with), got {seed!r}")
        self.game = _game_name(game)
        self.seed = seed
        self.multi = isinstance(agent, (list, tuple))
        inners = list(agent) if self.multi else [agent]
        if not inners:
            raise ConfigError("Recorder needs at least one agent")
        self._seats = [_Seat(self, i, a) for i, a in enumerate(inners)]
        self._fn = fn
        self._feat = OneSlotFeaturizer(declared_types(fn))
        self._groups: dict[Any, object] = {}  # inner act_all group -> this recorder's token for it
        self._chunks: list[tuple[Batch, Spaces]] = []  # decisions so far, stacked in chunks of one space
        self._recent: list[Batch] = []  # the latest decisions, one batch each, all of _recent_space
        self._recent_space: Spaces | None = None
        self._choices: dict[str, list[int]] = {}
        self._score: list[float] = []
        self._agent: list[int] = []
        self._asked: list[int] = []
        self._asked_table: dict[tuple[tuple[str, ...], bool], int] = {}
        self._ends: list[EpisodeResult] = []
        self._ends_after: list[int] = []

    @property
    def agents(self) -> Any:
        """What to hand to the game: this recorder (one agent) or a tuple of seats (several)."""
        return tuple(self._seats) if self.multi else self

    def act(self, obs: Obs, *action_types: Any) -> Any:
        """The single-agent recorder's ``act`` (see :class:`gymloop.Agent`)."""
        if self.multi:
            raise ConfigError("this Recorder records several agents; hand recorder.agents to the game, not the recorder")
        return self._seats[0].act(obs, *action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """The single-agent recorder's ``game_over`` (see :class:`gymloop.Agent`)."""
        if self.multi:
            raise ConfigError("this Recorder records several agents; hand recorder.agents to the game, not the recorder")
        self._seats[0].game_over(obs, truncated)

    def _add(self, seat: int, obs: Obs, types: tuple, res: Any, b: Batch, space: Spaces) -> None:
        names = tuple(action_spec(t).name for t in types)
        for name, idx in _choice_indices(obs, types, res).items():
            self._choices.setdefault(name, []).extend(idx)
        key = (names, obs.is_single_actor)
        self._asked.append(self._asked_table.setdefault(key, len(self._asked_table)))
        if self._recent and space is not self._recent_space:
            self._compact()
        self._recent.append(b)
        self._recent_space = space
        if len(self._recent) >= 1024:
            self._compact()
        self._score.append(float(obs.score))
        self._agent.append(seat)

    def _compact(self) -> None:
        """Stack the latest one-decision batches into one chunk (fewer, larger arrays)."""
        if self._recent:
            assert self._recent_space is not None  # set with the first recent decision
            self._chunks.append((stack(self._recent), self._recent_space))
            self._recent = []

    def trace(self) -> Trace:
        """The trace recorded so far (its arrays are copies: recording may go on)."""
        space = self._feat.space
        if space is None:
            raise TraceError("nothing was recorded: the game asked the recorder for no decision yet")
        self._compact()
        chunks = self._chunks
        batch = join([relayout(b, s, space) for b, s in chunks], copy=True)
        batch.reward = np.zeros(batch.num_slots, dtype=np.float32)  # see the module docstring
        batch.terminated = np.zeros(batch.num_slots, dtype=bool)
        batch.truncated = np.zeros(batch.num_slots, dtype=bool)
        actions = {n: np.array(self._choices.get(n, []), dtype=np.int64) for n in space.actions}
        return Trace(
            game=self.game, seed=self.seed, num_agents=len(self._seats), obs_space=space.obs, action_space=space.action_space,
            batch=batch, actions=actions, score=np.array(self._score, dtype=np.float64),
            agent=np.array(self._agent, dtype=np.int64), asked=np.array(self._asked, dtype=np.int64),
            asked_table=list(self._asked_table), episodes=list(self._ends), episode_after=list(self._ends_after),
        )

    def __repr__(self) -> str:
        return f"Recorder({self.game!r}, seed={self.seed}, decisions={len(self._score)}, episodes={len(self._ends)})"


def record_trace(
    game: Callable[..., Any] | str,
    agent: Any,
    seed: int = 0,
    max_episodes: int | None = None,
    max_steps: int | None = None,
    path: str | os.PathLike | None = None,
) -> Trace:
    """Run ``game`` with ``agent`` (see :func:`gymloop.run`) and record the run as a :class:`Trace`.

    Args:
        game: the game loop, or a bundled game's name.
        agent: an agent, or a sequence of agents for a multi-agent game.
        seed: the game's seed.
        max_episodes: stop after this many episode ends (all seats together); without it and
            ``max_steps``, one.
        max_steps: stop after this many decisions.
        path: also save the trace there.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import GreedyAgent
        >>> trace = gl.record_trace("snake", GreedyAgent(seed=0), seed=0)
        >>> trace.scores[0] > 5
        True
    """
    if max_episodes is None and max_steps is None:
        max_episodes = 1
    rec = Recorder(agent, game, seed=seed)
    run(rec._fn, rec.agents, seed=seed, max_episodes=max_episodes, max_steps=max_steps)
    trace = rec.trace()
    if path is not None:
        trace.save(path)
    return trace


# ---------------------------------------------------------------------- loading
def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file (never unpickles; every array is checked against the metadata).

    Example:
        >>> import os, tempfile
        >>> import gymloop as gl
        >>> path = os.path.join(tempfile.mkdtemp(), "s.trace.safetensors")
        >>> _ = gl.record_trace("snake", gl.RandomAgent(seed=0), seed=2, max_steps=10).save(path)
        >>> trace = gl.load_trace(path)
        >>> trace.game, trace.seed, trace.num_decisions
        ('snake', 2, 10)

    Raises:
        TraceError: the file is missing, truncated, corrupt, not a gymloop trace, of an unknown
            format version, or its arrays disagree with its metadata (the message names the file
            and what is wrong).
    """
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise TraceError(f"{p}: no such trace file" + (" (a folder: load it with gymloop.trace.load_traces)" if os.path.isdir(p) else ""))
    try:
        tensors, meta = read_safetensors(p, mmap=False)
    except CheckpointError as e:
        raise TraceError(f"not a readable trace file: {e}") from None
    except (OverflowError, ValueError) as e:  # a header whose shapes overflow (the reader lets these through)
        raise TraceError(f"{p}: not a readable trace file: malformed safetensors header ({e})") from None
    if _META_KEY not in meta:
        what = "a gymloop agent checkpoint (load it with gl.load)" if "gymloop" in meta else "a safetensors file"
        raise TraceError(f"{p}: {what}, not a gymloop trace (no {_META_KEY!r} metadata); record traces with gl.record_trace")
    try:
        doc = json.loads(meta[_META_KEY])
    except (json.JSONDecodeError, RecursionError) as e:
        raise TraceError(f"{p}: the trace metadata is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{p}: the trace metadata must be a JSON object, got {type(doc).__name__}")
    v = doc.get("format_version")
    if v != TRACE_FORMAT_VERSION or isinstance(v, bool):
        raise TraceError(
            f"{p}: unknown trace format version {v!r}; this gymloop reads version {TRACE_FORMAT_VERSION} "
            "(record the trace again, or use the gymloop version that wrote it)"
        )
    try:
        return _from_file(p, doc, tensors)
    except TraceError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as e:  # a check _from_file lacks
        raise TraceError(f"{p}: malformed trace: {type(e).__name__}: {e}") from None


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _from_file(p: str, doc: dict, tensors: dict[str, np.ndarray]) -> Trace:
    """Build a trace from a file's metadata and arrays, checking every field (only TraceError comes out)."""

    def bad(msg: str) -> TraceError:
        return TraceError(f"{p}: {msg}; the file is corrupt or was not written by gl.record_trace")

    for key in ("game", "seed", "agents", "obs_space", "action_space", "decisions", "asked", "episodes"):
        if key not in doc:
            raise bad(f"the trace metadata lacks {key!r}")
    try:
        spaces = Spaces.from_json(doc["obs_space"], doc["action_space"], TraceError, f"{p}: ")
    except TraceError as e:
        raise bad(str(e)[len(p) + 2 :]) from None
    obs, acts = spaces.obs, spaces.actions
    N, A, seed, game = doc["decisions"], doc["agents"], doc["seed"], doc["game"]
    if not (_is_int(N) and N >= 0 and _is_int(A) and A >= 1 and _is_int(seed)):
        raise bad(f"decisions {N!r}, agents {A!r} and seed {seed!r} must be ints (decisions >= 0, agents >= 1)")
    if not isinstance(game, str) or not game:
        raise bad(f"the game must be a name such as 'snake' or 'module:function', got {game!r}")
    used: set[str] = set()

    def get(name: str, dtype: str, shape: tuple[int | None, ...]) -> np.ndarray:
        if name not in tensors:
            raise bad(f"tensor {name!r} is missing")
        a = tensors[name]
        used.add(name)
        if a.dtype != np.dtype(dtype) or a.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, a.shape)):
            want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
            raise bad(f"tensor {name!r} is {a.dtype} of shape {a.shape}, expected {np.dtype(dtype)} of shape {want}")
        a = np.array(a)
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise bad(f"tensor {name!r} holds values that are not finite (a game's features and scores always are)")
        return a

    ents, counts = {}, {}
    for n, feats in obs.entities.items():
        c = get(f"counts/{n}", "int64", (N,))
        if (c < 0).any() or c.sum(dtype=np.float64) > 2**62:
            raise bad(f"counts/{n} must be non-negative entity counts, got entries from {c.min()} to {c.max()}")
        counts[n] = c
        ents[n] = get(f"entities/{n}", "float32", (int(c.sum()), len(feats)))
    total = np.zeros(N, dtype=np.int64)
    for c in counts.values():
        total += c
    glob = get("globals", "float32", (N, len(obs.globals)))
    score = get("score", "float64", (N,))
    agent = get("agent", "int64", (N,))
    if N and (agent.min() < 0 or agent.max() >= A):
        raise bad(f"seat indices must be in [0, {A})")
    asked = get("asked", "int64", (N,))
    if not isinstance(doc["asked"], list):
        raise bad(f"'asked' must be a list of requests, got {doc['asked']!r}")
    table = []
    for req in doc["asked"]:
        if not isinstance(req, dict) or not isinstance(req.get("single"), bool):
            raise bad(f"each request of 'asked' must be {{'actions': [names], 'single': bool}}, got {req!r}")
        names = _names(req.get("actions"), "the action types of a request", bad, nonempty=True)
        unknown = [n for n in names if n not in acts]
        if unknown:
            raise bad(f"a decision asked for the action types {unknown}, which are not in the action space {sorted(acts)}")
        table.append((names, req["single"]))
    if N and (asked.min() < 0 or asked.max() >= len(table)):
        raise bad(f"asked indices must be in [0, {len(table)})")
    b = Batch.empty(spaces, 0)
    b.num_slots = N
    b.entities, b.counts, b.globals = ents, counts, glob
    b.reward, b.terminated, b.truncated = np.zeros(N, dtype=np.float32), np.zeros(N, dtype=bool), np.zeros(N, dtype=bool)
    b.active = np.ones(N, dtype=bool)
    actions = {}
    actors = {}  # per action type, actors per decision
    for n, a in acts.items():
        sl = get(f"actor_slot/{n}", "int64", (None,))
        m = sl.shape[0]
        if m and (sl.min() < 0 or sl.max() >= N or (np.diff(sl) < 0).any()):
            raise bad(f"actor_slot/{n} must be slot indices in [0, {N}) in ascending order")
        actors[n] = np.bincount(sl, minlength=N)
        idx = get(f"actor_index/{n}", "int64", (m,))
        if not a.kind.actor_bound:
            if m and ((idx != -1).any() or (np.diff(sl) == 0).any()):
                raise bad(f"actor_index/{n} must be -1 (a global decision has no actor entity), one per deciding slot")
        elif m and ((idx < 0).any() or (idx >= total[sl]).any()):
            raise bad(f"actor_index/{n} points outside its slot's entities")
        choice = get(f"actions/{n}", "int64", (m,))
        if not a.kind.selects_entities:
            mask = get(f"masks/{n}", "bool", (m, a.n))
            if m and ((choice < 0).any() or (choice >= a.n).any() or not mask[np.arange(m), np.clip(choice, 0, a.n - 1)].all()):
                raise bad(f"actions/{n} holds a choice outside [0, {a.n}) or one its mask forbids")
        else:
            nc = get(f"num_candidates/{n}", "int64", (m,))
            want = sum(counts[t][sl] for t in a.among)
            if not np.array_equal(nc, want):
                raise bad(f"num_candidates/{n} must be each actor's number of {list(a.among)} entities")
            mask = get(f"masks/{n}", "bool", (int(nc.sum()) if m else 0,))
            if m and ((choice < 0).any() or (choice >= nc).any()):
                raise bad(f"actions/{n} holds a candidate index outside its actor's candidates")
            if m and not mask[np.cumsum(nc) - nc + choice].all():
                raise bad(f"actions/{n} holds a candidate its mask forbids")
            b.num_candidates[n] = nc
        b.actor_slot[n], b.actor_index[n], b.masks[n] = sl, idx, mask
        actions[n] = choice
    extra = sorted(set(tensors) - used)
    if extra:
        raise bad(f"unexpected tensors {extra[:5]}")
    # every decision has actors for exactly the action types it asked, the same actors for each
    for i, (names, single) in enumerate(table):
        ks = np.flatnonzero(asked == i)
        if not ks.size:
            continue
        bound = [n for n in names if acts[n].kind.actor_bound]
        if any((actors[n][ks] != 1).any() for n in names if n not in bound):
            raise bad(f"decisions that asked for {list(names)} must have one row for each global decision among them")
        n_act = actors[bound[0]][ks] if bound else None
        if n_act is not None and (
            (n_act < 1).any() or (single and (n_act != 1).any()) or any((actors[n][ks] != n_act).any() for n in bound[1:])
        ):
            raise bad(f"decisions that asked for {list(names)} must have {'one actor' if single else 'actors'} for each of them")
        others = [n for n in acts if n not in names and actors[n][ks].any()]
        if others:
            raise bad(f"decisions that asked for {list(names)} have actors for {others} too")
    if not isinstance(doc["episodes"], list):
        raise bad(f"'episodes' must be a list of episode ends, got {doc['episodes']!r}")
    episodes: list[EpisodeResult] = []
    after: list[int] = []
    for end in doc["episodes"]:
        keys = ("after", "agent", "score", "length", "truncated", "metrics")
        if not isinstance(end, dict) or any(x not in end for x in keys):
            raise bad(f"an episode end must be an object with the keys {list(keys)}, got {end!r}")
        k, seat, sc, length, trunc, mets = (end[x] for x in keys)
        if not _is_int(k) or not 0 <= k <= N or (after and k < after[-1]):
            raise bad(f"episode end 'after' values must be ascending decision counts in [0, {N}], got {k!r}")
        if not _is_int(seat) or not 0 <= seat < A:
            raise bad(f"episode end of seat {seat!r}, outside [0, {A})")
        if not _is_number(sc) or not _is_int(length) or length < 0 or not isinstance(trunc, bool):
            raise bad(f"an episode end needs a finite score, a length >= 0 and truncated true/false, got {end!r}")
        if not isinstance(mets, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in mets.values()):
            raise bad(f"an episode end's metrics must map names to numbers, got {mets!r}")
        episodes.append(EpisodeResult(seat, float(sc), length, trunc, {str(m): float(v) for m, v in mets.items()}))
        after.append(k)
    return Trace(
        game=game, seed=seed, num_agents=A, obs_space=obs, action_space=acts, batch=b,
        actions=actions, score=score, agent=agent, asked=asked, asked_table=table, episodes=episodes,
        episode_after=after, path=p,
    )


def load_traces(source: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Trace]:
    """Load every trace of a folder (files ending in ``.trace.safetensors``, sorted by name), one
    trace file, or a list of files.

    Raises:
        ConfigError: the folder holds no trace file.
        TraceError: a file is not a valid trace.
    """
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        if not os.path.exists(p):
            raise ConfigError(f"no trace folder or file {p}; record traces with `gymloop run GAME --trace-dir {p}` or gl.record_trace")
        if os.path.isdir(p):
            files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(TRACE_SUFFIX))
            if not files:
                raise ConfigError(
                    f"no trace files (*{TRACE_SUFFIX}) in {p}; record some with "
                    f"`gymloop run GAME --agent scripted --episodes 50 --trace-dir {p}` or gl.record_trace"
                )
        else:
            files = [p]
    else:
        files = [os.fspath(f) for f in source]
        if not files:
            raise ConfigError("load_traces needs at least one trace file")
    return [load_trace(f) for f in files]


# ---------------------------------------------------------------------- replay
class _Replayer:
    """Feeds a trace's choices back to a game and checks every observation against it."""

    def __init__(self, trace: Trace, declared: Any) -> None:
        self.trace = trace
        self.feat = OneSlotFeaturizer(declared)
        self.k = 0
        self.e = 0
        self.where = trace.path or f"trace of {trace.game!r} (seed {trace.seed})"
        self.space = trace.spaces
        self.ep_len = [0] * trace.num_agents

    def fail(self, what: str) -> TraceError:
        return TraceError(
            f"replay of {self.where} diverged at step {self.k} (episode {self.e}): {what}; the game is not "
            "deterministic for its seed, or it has changed since the trace was recorded"
        )

    def act(self, seat: int, obs: Obs, types: tuple) -> Any:
        tr = self.trace
        k = self.k
        if k >= tr.num_decisions:
            raise self.fail(f"the game asked for a decision, but the trace ends after {tr.num_decisions}")
        if seat != int(tr.agent[k]):
            raise self.fail(f"seat {seat} was asked to act, the trace recorded seat {int(tr.agent[k])}")
        names = tuple(action_spec(t).name for t in types)
        want = tr.asked_table[int(tr.asked[k])]
        if (names, obs.is_single_actor) != want:
            raise self.fail(
                f"the game asked for {list(names)} ({'one actor' if obs.is_single_actor else 'a list of actors'}), "
                f"the trace for {list(want[0])} ({'one actor' if want[1] else 'a list of actors'})"
            )
        b, space = self.feat.batch(obs, types)
        if float(obs.score) != float(tr.score[k]):
            raise self.fail(f"the score is {float(obs.score)!r}, the trace has {float(tr.score[k])!r}")
        try:
            live = relayout(b, space, self.space)
        except TraceError as e:
            raise self.fail(str(e)) from None
        diff = _diff(live, tr.decision(k), tr.obs_space)
        if diff:
            raise self.fail(diff)
        ch = tr.choices(k)
        per_type = []
        for t in types:
            spec = action_spec(t)
            idx = ch[spec.name].tolist()
            if spec.kind.selects_entities:
                cands = obs.entities_of(spec.among)
                per_type.append([cands[i] for i in idx])
            else:
                per_type.append([spec.values[i] for i in idx])
        self.k += 1
        self.ep_len[seat] += 1
        return pack_result(obs, per_type, types)

    def game_over(self, seat: int, obs: Obs, truncated: bool) -> None:
        tr = self.trace
        if self.e >= len(tr.episodes):
            raise self.fail(f"seat {seat}'s episode ended, but the trace records only {len(tr.episodes)} episode ends")
        want, after = tr.episodes[self.e], tr.episode_after[self.e]
        got = EpisodeResult(seat, float(obs.score), self.ep_len[seat], bool(truncated), {k: float(v) for k, v in obs.metrics.items()})
        if after != self.k or got != want:
            raise self.fail(
                f"an episode ended after {self.k} decisions as {got}, the trace records one after {after} decisions as {want}"
            )
        self.ep_len[seat] = 0
        self.e += 1


def _diff(live: Batch, rec: Batch, obs_space: ObsSpace) -> str | None:
    """The first difference between two one-slot batches of one layout, in words (``None``: equal)."""
    for name, feats in obs_space.entities.items():
        a, r = live.entities[name], rec.entities[name]
        if a.shape != r.shape:
            return f"{a.shape[0]} entities of type {name!r} were observed, the trace has {r.shape[0]}"
        if a.tobytes() != r.tobytes():
            row, col = (int(i) for i in np.argwhere(a.view(np.uint32) != r.view(np.uint32))[0])
            return f"entity type {name!r}, row {row}, feature {feats[col]!r} is {a[row, col]!r}, the trace has {r[row, col]!r}"
    if live.globals.tobytes() != rec.globals.tobytes():
        col = int(np.flatnonzero(live.globals[0].view(np.uint32) != rec.globals[0].view(np.uint32))[0])
        return f"global feature {obs_space.globals[col]!r} is {live.globals[0, col]!r}, the trace has {rec.globals[0, col]!r}"
    for name in rec.actor_slot:
        if not np.array_equal(live.actor_index[name], rec.actor_index[name]):
            return f"the actors of action type {name!r} are entities {live.actor_index[name].tolist()}, in the trace {rec.actor_index[name].tolist()}"
        if name in rec.num_candidates and not np.array_equal(live.num_candidates[name], rec.num_candidates[name]):
            return f"action type {name!r} has {live.num_candidates[name].tolist()} candidates per actor, the trace {rec.num_candidates[name].tolist()}"
        if not np.array_equal(live.masks[name], rec.masks[name]):
            return f"the mask of action type {name!r} is {live.masks[name].tolist()}, in the trace {rec.masks[name].tolist()}"
    return None


class _ReplaySeat:
    def __init__(self, rp: _Replayer, index: int) -> None:
        self.rp = rp
        self.index = index

    def act(self, obs: Obs, *action_types: Any) -> Any:
        return self.rp.act(self.index, obs, action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        self.rp.game_over(self.index, obs, truncated)


def replay(trace: Trace | str | os.PathLike, game: Callable[..., Any] | str | None = None, check: bool = True) -> RunResult:
    """Run the game of a trace again with its seed and choices, checking every observation bit-exactly.

    Args:
        trace: a :class:`Trace` or the path of a trace file.
        game: the game loop (or a bundled game's name); ``None``: the trace's own ``game`` if it is a
            bundled game. A trace of any other game needs its game loop here: nothing a file names is
            imported or called (a trace file is data, never code).
        check: also check every replayed choice against the live masks (as :func:`gymloop.run` does).

    Returns:
        The :class:`~gymloop.RunResult` of the replayed run (its episodes equal ``trace.episodes``).

    Raises:
        TraceError: the file is not a valid trace, ``game`` is ``None`` for a trace of a game that
            is not bundled, or the replay observed something other than the trace at some step (the
            message names the step, the episode and what differs).

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.tactics import tactics
        >>> trace = gl.record_trace(tactics, gl.RandomAgent(seed=0), seed=5)
        >>> gl.replay(trace, tactics).steps == trace.num_decisions
        True
    """
    from .games import GAMES

    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    if game is None and tr.game not in GAMES:
        raise TraceError(
            f"{tr.path or 'the trace'} was recorded with the game {tr.game!r}, which is not a bundled game "
            f"({sorted(GAMES)}); gymloop never imports or calls what a file names: pass the game loop, "
            "gl.replay(trace, game)"
        )
    fn = _game_fn(tr.game if game is None else game)
    given = _game_name(fn)
    if tr.game in GAMES and given in GAMES and given != tr.game:
        raise TraceError(
            f"{tr.path or 'the trace'} was recorded with the game {tr.game!r}, not {given!r}; replay it with its "
            f"own game: gl.replay(trace) or gl.replay(trace, {tr.game!r})"
        )
    rp = _Replayer(tr, declared_types(fn))
    seats = [_ReplaySeat(rp, i) for i in range(tr.num_agents)]
    agent: Any = seats if tr.num_agents > 1 else seats[0]
    # stop where the recording stopped: at its last episode end when nothing was decided after it
    # (a run limited by max_episodes stops inside a multi-agent game's round of game_over calls)
    N, E = tr.num_decisions, len(tr.episodes)
    last_is_end = E > 0 and tr.episode_after[-1] == N
    result = run(fn, agent, seed=tr.seed, max_steps=N, max_episodes=E if last_is_end else None, check=check)
    if rp.k != N or rp.e != E:
        raise rp.fail(f"the game stopped ({result.stopped}) after {rp.k} of the trace's {N} decisions and {rp.e} of its {E} episode ends")
    log.debug("replayed %s: %d decisions, %d episodes", rp.where, rp.k, rp.e)
    return result

