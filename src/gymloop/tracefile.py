"""The :class:`Trace` value and its file: :meth:`Trace.save`, :func:`load_trace`, :func:`load_traces`.

The file format is described in :mod:`gymloop.trace` (which records and replays traces, and
re-exports everything here).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._version import __version__
from .agent import EpisodeResult
from .batch import ACTOR, Batch, SlotRanges
from .checkpoint import read_safetensors, write_safetensors
from .errors import CheckpointError, ConfigError, TraceError
from .files import make_folder
from .spaces import ActionDesc, ObsSpace, Spaces

__all__ = ["MAX_SEATS", "TRACE_FORMAT_VERSION", "TRACE_SUFFIX", "Trace", "load_trace", "load_traces"]

TRACE_FORMAT_VERSION = 1
#: the most seats (agents of one game) a trace file may declare; a replay holds per-seat state
MAX_SEATS = 65_536
TRACE_SUFFIX = ".trace.safetensors"
_META_KEY = "gymloop-trace"


# ---------------------------------------------------------------------- the trace
@dataclass(eq=False)
class Trace:
    """One recorded run of a game (see :mod:`gymloop.trace`).

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
        tensors = {**self.batch.to_tensors(), "score": self.score, "agent": self.agent, "asked": self.asked}
        tensors.update({f"actions/{name}": self.actions[name] for name in self.action_space})
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
            make_folder(d, "the trace's folder")
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
            w = self._where = SlotRanges(self.batch)
        return w.slot(k)

    def choices(self, k: int) -> dict[str, np.ndarray]:
        """The choice indices of decision ``k``, per action type asked (actors in order)."""
        self.decision(k)  # builds the index, checks the range
        w = self._where
        out = {}
        for name in self.actions:
            lo, hi = w.span(ACTOR, name, k)
            if hi > lo:
                out[name] = self.actions[name][lo:hi]
        return out


def _names(x: Any, what: str, bad: Callable[[str], TraceError], nonempty: bool = False) -> tuple[str, ...]:
    """A JSON list of distinct strings (a file's feature names, labels, ...), else ``bad``."""
    if not isinstance(x, list) or not all(isinstance(v, str) for v in x):
        raise bad(f"{what} must be a list of strings, got {x!r}")
    if len(set(x)) != len(x):
        raise bad(f"{what} must be distinct, got {x!r}")
    if nonempty and not x:
        raise bad(f"{what} must not be empty")
    return tuple(x)


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
    if A > MAX_SEATS:
        raise bad(f"agents {A} is more seats than a trace may have (at most {MAX_SEATS}); the file is corrupt or forged")
    if not isinstance(game, str) or not game:
        raise bad(f"the game must be a name such as 'snake' or 'module:function', got {game!r}")
    used: set[str] = set()

    def get(name: str, dtype: str | np.dtype, shape: tuple[int | None, ...]) -> np.ndarray:
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

    def check(b: Batch, field: str, n: str) -> None:  # each array's values, before the arrays it numbers
        if field == "counts":
            c = b.counts[n]
            if (c < 0).any() or c.sum(dtype=np.float64) > 2**62:
                raise bad(f"counts/{n} must be non-negative entity counts, got entries from {c.min()} to {c.max()}")
            return
        sl = b.actor_slot.get(n)
        if sl is None or not sl.shape[0]:
            return
        if field == "actor_slot" and (sl.min() < 0 or sl.max() >= N or (np.diff(sl) < 0).any()):
            raise bad(f"actor_slot/{n} must be slot indices in [0, {N}) in ascending order")
        idx = b.actor_index[n]
        if field == "actor_index" and not acts[n].kind.actor_bound:
            if (idx != -1).any() or (np.diff(sl) == 0).any():
                raise bad(f"actor_index/{n} must be -1 (a global decision has no actor entity), one per deciding slot")
        elif field == "actor_index" and ((idx < 0).any() or (idx >= sum(c[sl] for c in b.counts.values())).any()):
            raise bad(f"actor_index/{n} points outside its slot's entities")
        if field == "num_candidates" and not np.array_equal(b.num_candidates[n], sum(b.counts[t][sl] for t in acts[n].among)):
            raise bad(f"num_candidates/{n} must be each actor's number of {list(acts[n].among)} entities")

    b = Batch.from_tensors(spaces, N, get, check)  # every field's tensor, its dtype, shape and values checked
    b.active = np.ones(N, dtype=bool)
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
    actions = {}
    actors = {}  # per action type, actors per decision
    for n, a in acts.items():
        sl, mask = b.actor_slot[n], b.masks[n]
        m = sl.shape[0]
        actors[n] = np.bincount(sl, minlength=N)
        choice = actions[n] = get(f"actions/{n}", "int64", (m,))
        if not a.kind.selects_entities:
            if m and ((choice < 0).any() or (choice >= a.n).any() or not mask[np.arange(m), np.clip(choice, 0, a.n - 1)].all()):
                raise bad(f"actions/{n} holds a choice outside [0, {a.n}) or one its mask forbids")
            continue
        nc = b.num_candidates[n]
        if m and ((choice < 0).any() or (choice >= nc).any()):
            raise bad(f"actions/{n} holds a candidate index outside its actor's candidates")
        if m and not mask[np.cumsum(nc) - nc + choice].all():
            raise bad(f"actions/{n} holds a candidate its mask forbids")
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
