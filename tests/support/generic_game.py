"""A generic game loop whose behaviour each test injects: :func:`make_game`.

In the spirit of Gymnasium's ``GenericTestEnv``: instead of writing a new game class per test, a
test builds one with :func:`make_game` and passes only the parts it cares about::

    from support.entities import Move, Unit
    from support.generic_game import make_game

    log = []
    game = make_game(
        build_obs=lambda st: gl.Obs(score=st.score).actor(Unit(st.t, 0)),
        on_step=lambda st, action: setattr(st, "score", st.score + 1),
        episode_len=3,
        log=log,
    )
    env = gl.VecEnv(game, num_envs=2, seed=0)

The game keeps its per-run state in a :class:`GameState` (``st``) handed to every callback, and
records what happened in ``log`` as ``(event, seed, payload)`` tuples: ``start`` when a run
begins (in env order at ``reset``), ``act`` with the agent's answer, ``over`` at each episode end
and ``finally`` when the run ends in any way (returned, raised, or closed at its ``act`` call).
Its default actor is :class:`support.entities.Unit`, its default action type :class:`support.entities.Move`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymloop as gl
from support.entities import Move, Unit


@dataclass
class GameState:
    """State of one run of a :func:`make_game` game, handed to every injected callback.

    Attributes:
        seed: the seed the run was started with.
        rng: a ``random.Random(seed)`` for seeded randomness.
        t: decisions taken in the current episode.
        total: decisions taken since the run started.
        episode: episodes finished in this run.
        score: the score the default observations report; callbacks may change it.
        obs: the last observation handed to the agent.
        last: the agent's last answer.
        data: free space for callbacks.
    """

    seed: int
    rng: random.Random
    t: int = 0
    total: int = 0
    episode: int = 0
    score: float = 0.0
    obs: Any = None
    last: Any = None
    data: dict = field(default_factory=dict)


def default_obs(st: GameState) -> gl.Obs:
    """One ``Unit`` actor at ``(t, episode)``, score ``st.score``."""
    return gl.Obs(score=st.score).actor(Unit(st.t, st.episode))


def make_game(
    build_obs: Callable[[GameState], gl.Obs] = default_obs,
    action_types: tuple = (Move,),
    on_step: Callable[[GameState, Any], None] | None = None,
    episode_len: int | None = None,
    truncated: bool = False,
    final_obs: Callable[[GameState], gl.Obs] | None = None,
    max_decisions: int | None = None,
    log: list | None = None,
) -> Callable[[Any, int], None]:
    """A game loop ``game(agent, seed)`` built from injected parts.

    Args:
        build_obs: the observation of each decision.
        action_types: the action types asked for at each decision.
        on_step: called with ``(st, answer)`` after each decision (after ``t``/``total`` count it);
            may change ``st.score`` or raise to simulate a failing game.
        episode_len: call ``agent.game_over`` after this many decisions, then start a new episode
            in place (``t = 0``, ``score = 0``, ``episode += 1``). ``None``: episodes never end.
        truncated: what ``game_over`` reports.
        final_obs: the observation given to ``game_over`` (default ``Obs(score=st.score)``).
        max_decisions: return after this many decisions (a VecEnv then restarts the game).
        log: a list receiving ``(event, seed, payload)`` tuples (see the module docstring).
    """

    def record(event: str, seed: int, payload: Any = None) -> None:
        if log is not None:
            log.append((event, seed, payload))

    def game(agent: Any, seed: int) -> None:
        st = GameState(seed=seed, rng=random.Random(seed))
        record("start", seed)
        try:
            while max_decisions is None or st.total < max_decisions:
                st.obs = build_obs(st)
                st.last = agent.act(st.obs, *action_types)
                record("act", seed, st.last)
                st.t += 1
                st.total += 1
                if on_step is not None:
                    on_step(st, st.last)
                if episode_len is not None and st.t >= episode_len:
                    end = final_obs(st) if final_obs is not None else gl.Obs(score=st.score)
                    agent.game_over(end, truncated=truncated)
                    record("over", seed, st.episode)
                    st.t = 0
                    st.score = 0.0
                    st.episode += 1
        finally:
            record("finally", seed)

    return game


def events(log: list, event: str) -> list:
    """The ``(seed, payload)`` of every ``event`` in a :func:`make_game` log, in order."""
    return [(seed, payload) for e, seed, payload in log if e == event]


def start_seeds(log: list) -> list[int]:
    """Seeds of the runs started so far, in start order (env order at ``reset``)."""
    return [seed for seed, _ in events(log, "start")]
