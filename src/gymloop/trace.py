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

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import batch as _batch
from .actions import action_spec
from .agent import EpisodeResult, RunResult, check_action, pack_result, run
from .batch import SLOT, Batch, stack
from .errors import ConfigError, TraceError
from .featurize import OneSlotFeaturizer
from .obs import Obs
from .spaces import ActionDesc, ObsSpace, Spaces, declared_types
from .tracefile import TRACE_FORMAT_VERSION, TRACE_SUFFIX, Trace, load_trace, load_traces

__all__ = ["TRACE_FORMAT_VERSION", "TRACE_SUFFIX", "Recorder", "Trace", "load_trace", "load_traces", "record_trace", "replay"]

log = logging.getLogger("gymloop.trace")


# ---------------------------------------------------------------------- spaces
def relayout(b: Batch, src: Spaces, dst: Spaces) -> Batch:
    """The batch ``b`` (laid out for the spaces ``src``) laid out for the spaces ``dst``.

    ``dst`` may have more entity and action types (they get zero rows / no actors); types of
    ``src`` that ``dst`` lacks must be absent from ``b``. Entity indices are renumbered for
    ``dst``'s type order (:func:`gymloop.batch.relayout`, after the checks).

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
    return _batch.relayout(b, src, dst)


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
    from .games import game_name

    return game_name(game, qualified=True)


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
        batch = stack([relayout(b, s, space) for b, s in chunks])
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
    """The first difference between two one-slot batches of one layout, in words (``None``: equal).

    Every saved field is compared bit for bit, except the actors' slots (all 0 in one slot).
    """
    for f, name, r in rec.arrays():
        a = getattr(live, f.name)[name] if name else getattr(live, f.name)
        if not f.saved or f.values == SLOT or (a.shape == r.shape and a.tobytes() == r.tobytes()):
            continue
        if f.name == "counts":  # (before the rows: equal counts, rows of equal shapes)
            return f"{int(a[0])} entities of type {name!r} were observed, the trace has {int(r[0])}"
        if f.name in ("entities", "globals"):
            row, col = (int(i) for i in np.argwhere(a.view(np.uint32) != r.view(np.uint32))[0])
            if f.name == "globals":
                return f"global feature {obs_space.globals[col]!r} is {a[row, col]!r}, the trace has {r[row, col]!r}"
            feat = obs_space.entities[name][col]
            return f"entity type {name!r}, row {row}, feature {feat!r} is {a[row, col]!r}, the trace has {r[row, col]!r}"
        what = {"actor_index": "the actors of action type {n!r} are entities {a}, in the trace {r}",
                "num_candidates": "action type {n!r} has {a} candidates per actor, the trace {r}",
                "masks": "the mask of action type {n!r} is {a}, in the trace {r}"}.get(f.name, "{f}[{n!r}] is {a}, the trace has {r}")
        return what.format(n=name, f=f.name, a=a.tolist(), r=r.tolist())
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
    from .games import GAMES, same_game

    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    if game is None and tr.game not in GAMES:
        raise TraceError(
            f"{tr.path or 'the trace'} was recorded with the game {tr.game!r}, which is not a bundled game "
            f"({sorted(GAMES)}); gymloop never imports or calls what a file names: pass the game loop, "
            "gl.replay(trace, game)"
        )
    fn = _game_fn(tr.game if game is None else game)
    given = _game_name(fn)
    if not same_game(given, tr.game):
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

