"""Agents: whatever answers ``act``. A random agent, a scripted one, a trained one, a human.

The protocol is two methods. A scripted agent is a small class:

    >>> from enum import Enum
    >>> import gymloop as gl
    >>> class Move(Enum):
    ...     LEFT = 0
    ...     RIGHT = 1
    >>> class AlwaysRight:
    ...     def act(self, obs, *action_types):
    ...         return Move.RIGHT
    ...     def game_over(self, obs, truncated=False):
    ...         pass
    >>> isinstance(AlwaysRight(), gl.Agent)
    True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import greenlet

from .actions import action_spec
from .errors import ConfigError, InvalidActionError, InvalidObservationError
from .featurize import ObsValidator
from .obs import EMPTY_EPISODES, Obs, check_score, empty_episodes_error, no_actor_message
from .spaces import check_agents, declared_types

__all__ = ["Agent", "RandomAgent", "run", "act_all", "RunResult", "EpisodeResult"]


@runtime_checkable
class Agent(Protocol):
    """What a game loop talks to.

    ``act(obs, *action_types)`` returns, for each action type, the chosen value (``obs.actor(x)``)
    or a list of values in actor order (``obs.actors(xs)``); with several action types it returns a
    tuple with one such entry per type. ``game_over(obs, truncated=False)`` ends an episode:
    ``truncated=True`` for a time limit, ``False`` for a real end (death, win).

    Example (a scripted agent is any object with these two methods):
        >>> import gymloop as gl
        >>> from gymloop.games.snake import Move, snake
        >>> class AlwaysUp:
        ...     def act(self, obs, *action_types):
        ...         return Move.UP
        ...     def game_over(self, obs, truncated=False):
        ...         pass
        >>> gl.run(snake, AlwaysUp(), seed=0, max_episodes=1).episodes[0].length > 0
        True
    """

    def act(self, obs: Obs, *action_types: Any) -> Any: ...

    def game_over(self, obs: Obs, truncated: bool = False) -> None: ...


def pack_result(obs: Obs, per_type: list[list[Any]], action_types: Sequence[Any] | None = None) -> Any:
    """Shape per-type lists of per-actor choices into what ``act`` returns.

    A single actor's choice comes alone, several actors' as a list; a global decision (one choice
    per observation; ``action_types`` tells which) always comes alone.
    """
    if obs.is_single_actor:
        vals = [lst[0] for lst in per_type]
    elif action_types is not None:
        vals = [lst if action_spec(t).kind.actor_bound else lst[0] for t, lst in zip(action_types, per_type)]
    else:
        vals = per_type
    return vals[0] if len(vals) == 1 else tuple(vals)


class RandomAgent:
    """Chooses uniformly among the legal choices of every actor (masks respected).

    Args:
        seed: seed of the agent's own random generator.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import Head, Move
        >>> gl.RandomAgent(seed=0).act(gl.Obs().actor(Head(0, 0), masks={Move: [Move.RIGHT]}), Move)
        <Move.RIGHT: 3>
    """

    def __init__(self, seed: int | None = 0) -> None:
        self._rng = random.Random(seed)

    def act(self, obs: Obs, *action_types: Any) -> Any:
        if not action_types:
            raise ConfigError("act needs at least one action type, e.g. agent.act(obs, Move)")
        n = obs.n_actors
        specs = [action_spec(t) for t in action_types]
        if n == 0 and any(s.kind.actor_bound for s in specs):
            raise InvalidObservationError(no_actor_message(specs))
        per_type: list[list[Any]] = []
        choice = self._rng.choice
        for t, spec in zip(action_types, specs):
            rows = n if spec.kind.actor_bound else 1
            if not obs.has_masks and not spec.kind.selects_entities:
                per_type.append([choice(spec.values) for _ in range(rows)])
                continue
            out = []
            for i in range(rows):
                legal = obs.legal(i, t)
                if not legal:
                    raise InvalidObservationError(
                        f"actor {i} of the observation has no legal choice for action type {spec.name!r}; "
                        "a mask must leave at least one choice (and a select-entity action needs a candidate)"
                    )
                out.append(choice(legal))
            per_type.append(out)
        return pack_result(obs, per_type, action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        pass


def act_all(requests: Sequence[tuple]) -> list[Any]:
    """Ask several agents for a decision in the same frame.

    Each request is ``(agent, obs, *action_types)``. With training agents of one vectorized
    environment, all decisions go into the same batch (lock-step multi-agent play); with other
    agents they are asked one after another. Returns one ``act`` result per request.

    Example:
        >>> from dataclasses import dataclass
        >>> from enum import Enum
        >>> import gymloop as gl
        >>> @dataclass
        ... class P:
        ...     x: int
        >>> class Move(Enum):
        ...     STAY = 0
        >>> a, b = gl.RandomAgent(0), gl.RandomAgent(1)
        >>> gl.act_all([(a, gl.Obs().actor(P(0)), Move), (b, gl.Obs().actor(P(1)), Move)])
        [<Move.STAY: 0>, <Move.STAY: 0>]
    """
    reqs = list(requests)
    if not reqs:
        return []
    group = getattr(reqs[0][0], "_act_group", None)
    if group is not None and all(getattr(r[0], "_act_group", None) is group for r in reqs):
        return reqs[0][0]._act_all(reqs)
    return [r[0].act(r[1], *r[2:]) for r in reqs]


@dataclass
class EpisodeResult:
    """How one episode of :func:`run` ended."""

    agent: int
    score: float
    length: int
    truncated: bool
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RunResult:
    """What :func:`run` observed: decisions taken and finished episodes."""

    steps: int = 0
    episodes: list[EpisodeResult] = field(default_factory=list)
    stopped: str = "returned"

    @property
    def scores(self) -> list[float]:
        """Final score of each finished episode."""
        return [e.score for e in self.episodes]


class _Stop(Exception):
    pass


class _RunAgent:
    """Wraps a user's agent in :func:`run`: counts, checks actions, stops at limits."""

    def __init__(self, inner: Any, index: int, state: _RunState) -> None:
        self.inner = inner
        self.index = index
        self.state = state
        self.ep_len = 0
        self.empty = 0  # episodes ended in a row without a decision

    def _before(self) -> None:
        st = self.state
        if st.max_steps is not None and st.result.steps >= st.max_steps:
            st.result.stopped = "max_steps"
            st.parent.switch(_STOP)
        if st.max_episodes == 0:  # (other limits are checked when an episode ends)
            st.result.stopped = "max_episodes"
            st.parent.switch(_STOP)

    def _after(self, obs: Obs, action_types: Sequence[Any], res: Any) -> Any:
        if self.state.check:
            check_action(obs, action_types, res)
        self.state.result.steps += 1
        self.ep_len += 1
        return res

    def act(self, obs: Obs, *action_types: Any) -> Any:
        self._before()
        self.state.validator.check(obs, action_types)
        return self._after(obs, action_types, self.inner.act(obs, *action_types))

    @property
    def _act_group(self) -> Any:
        """Wrapped agents keep their inner agents' grouping, so ``act_all`` still batches."""
        return getattr(self.inner, "_act_group", None)

    def _act_all(self, requests: Sequence[tuple]) -> list[Any]:
        self._before()
        for r in requests:
            self.state.validator.check(r[1], r[2:])
        inner = [(r[0].inner, *r[1:]) for r in requests]
        results = self.inner._act_all(inner)
        return [r[0]._after(r[1], r[2:], res) for r, res in zip(requests, results)]

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        st = self.state
        st.validator.check_final(obs)
        self.inner.game_over(obs, truncated)
        st.result.episodes.append(
            EpisodeResult(self.index, check_score(obs.score), self.ep_len, bool(truncated), obs.metrics)
        )
        self.empty = self.empty + 1 if self.ep_len == 0 else 0
        if self.empty >= EMPTY_EPISODES:
            raise empty_episodes_error(f"run, agent {self.index}")
        self.ep_len = 0
        if st.max_episodes is not None and len(st.result.episodes) >= st.max_episodes:
            st.result.stopped = "max_episodes"
            st.parent.switch(_STOP)


_STOP = object()


@dataclass
class _RunState:
    max_steps: int | None
    max_episodes: int | None
    check: bool
    validator: Any
    parent: Any = None
    result: RunResult = field(default_factory=RunResult)


def check_action(obs: Obs, action_types: Sequence[Any], res: Any) -> None:
    """Raise :class:`InvalidActionError` if an agent's answer is not legal for ``obs``."""
    n_types = len(action_types)
    per_type = [res] if n_types == 1 else res
    if n_types > 1 and (not isinstance(res, tuple) or len(res) != n_types):
        raise InvalidActionError(
            f"the agent was asked for {n_types} action types and must return a tuple of {n_types}, got {res!r}"
        )
    for t, vals in zip(action_types, per_type):
        spec = action_spec(t)
        if obs.is_single_actor or not spec.kind.actor_bound:
            vals = [vals]
        elif not isinstance(vals, list) or len(vals) != obs.n_actors:
            raise InvalidActionError(
                f"action type {spec.name!r}: expected a list of {obs.n_actors} choices (one per actor), got {vals!r}"
            )
        for i, v in enumerate(vals):
            legal = obs.legal(i, t)
            if spec.kind.selects_entities:
                ok = any(v is lv for lv in legal)
            else:
                ok = any(v == lv for lv in legal)
            if not ok:
                raise InvalidActionError(
                    f"action type {spec.name!r}, actor {i}: {v!r} is not a legal choice; legal choices are {legal!r}"
                )


def run(
    game: Callable[..., Any],
    agent: Any,
    seed: int = 0,
    max_steps: int | None = None,
    max_episodes: int | None = None,
    check: bool = True,
) -> RunResult:
    """Run one game with one agent (or a list of agents for a multi-agent game).

    The game runs until it returns, or until ``max_steps`` decisions or ``max_episodes`` finished
    episodes; it is then closed at its ``act`` call (its ``finally`` blocks run).

    Args:
        game: the game loop, ``game(agent, seed)`` (``game(agents, seed)`` for several agents).
        agent: an :class:`Agent`, or a sequence of agents.
        seed: passed to the game.
        max_steps: stop after this many decisions (all agents together).
        max_episodes: stop after this many ``game_over`` calls.
        check: check every answer of the agent against the observation's masks.

    Returns:
        A :class:`RunResult` with the decision count and finished episodes.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> r = gl.run(snake, gl.RandomAgent(seed=1), seed=0, max_episodes=3)
        >>> len(r.episodes)
        3
    """
    for name, v in (("max_steps", max_steps), ("max_episodes", max_episodes)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise ConfigError(f"{name} must be a non-negative int or None, got {v!r}")
    from .env import _is_environment

    if _is_environment(game):
        raise ConfigError(
            f"gl.run plays a game loop, game(agent, seed); {getattr(game, '__name__', game)!r} makes a gl.Environment. "
            "Step it with gl.VecEnv(factory, num_envs=1, seed=...), or make one and call its reset(seed) and act(actions)"
        )
    multi = isinstance(agent, (list, tuple))
    check_agents(game, len(agent) if multi else 1, "run")
    st = _RunState(max_steps, max_episodes, check, ObsValidator(declared_types(game)))
    wrapped: Any = [_RunAgent(a, i, st) for i, a in enumerate(agent)] if multi else _RunAgent(agent, 0, st)
    if multi:
        wrapped = tuple(wrapped)  # the same shape a VecEnv passes
    st.parent = greenlet.getcurrent()
    g = greenlet.greenlet(game, parent=st.parent)
    out = g.switch(wrapped, seed)
    if out is _STOP and not g.dead:
        g.throw(greenlet.GreenletExit)
    return st.result
