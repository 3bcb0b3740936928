"""``gl.check(game)``: a checker for games, in the spirit of Gymnasium's ``check_env``.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> report = gl.check(snake, steps=200)
    >>> report.decisions >= 200
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .actions import action_spec
from .agent import RandomAgent, check_action, run
from .batch import Batch
from .copies import compare_copies
from .display import watch_windows
from .errors import GymloopError, InvalidObservationError
from .obs import Obs
from .runtime.seeding import derive_seed
from .schema import schema_of

__all__ = ["check", "CheckReport", "CheckError"]


class CheckError(GymloopError):
    """A game failed :func:`check`; the message says which property and where."""


@dataclass
class CheckReport:
    """What :func:`check` verified."""

    decisions: int = 0
    episodes: int = 0
    entity_types: list[str] = field(default_factory=list)
    action_types: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    #: what the game may mean to do otherwise (it passes the check; ``gymloop check`` prints these)
    warnings: list[str] = field(default_factory=list)


class _Inspector:
    """Wraps a random agent and verifies every observation it is shown."""

    def __init__(self, inner: Any, report: CheckReport) -> None:
        self.inner = inner
        self.report = report
        self.entities: set[str] = set()
        self.actions: set[str] = set()
        self.empty_truncation = False  # a truncated episode ended with an observation without entities (warned once)

    def _check_obs(self, obs: Obs, final: bool, action_types: tuple[Any, ...] = ()) -> None:
        if type(obs) is not Obs:
            raise CheckError(f"the game passed {obs!r} to the agent; expected a gl.Obs")
        s = obs.score
        if not isinstance(s, (int, float, np.integer, np.floating)) or not math.isfinite(float(s)):
            raise CheckError(f"score must be a finite number, got {s!r}")
        for o in obs.entity_list():
            sc = schema_of(type(o))
            self.entities.add(sc.name)
            arr = sc.featurize([o])
            if not np.isfinite(arr).all():
                col = int(np.flatnonzero(~np.isfinite(arr[0]))[0])
                raise CheckError(f"entity type {sc.name!r}, feature {sc.features[col]!r} is {arr[0, col]}; features must be finite")
        if obs.global_features is not None:
            g = schema_of(type(obs.global_features)).featurize([obs.global_features])
            if not np.isfinite(g).all():
                raise CheckError("a global feature is not finite")
        if not final and not obs.actor_list and any(action_spec(t).kind.actor_bound for t in action_types):
            bound = [action_spec(t).name for t in action_types if action_spec(t).kind.actor_bound]
            raise CheckError(f"act() was asked for {bound} with an observation that has no actor "
                             "(only global decisions are asked without one)")

    def act(self, obs: Obs, *action_types: Any) -> Any:
        self._check_obs(obs, final=False, action_types=action_types)
        for t in action_types:
            spec = action_spec(t)
            self.actions.add(spec.name)
            if not spec.kind.actor_bound:
                if not obs.legal(None, t):
                    why = "no candidate is observed or its mask allows none" if spec.kind.selects_entities else "its mask allows no choice"
                    raise CheckError(f"global decision {spec.name!r}: {why}")
                continue
            for i in range(len(obs.actor_list)):
                if not obs.legal(i, t):
                    raise CheckError(f"action type {spec.name!r}: actor {i} has no legal choice (mask or no candidate)")
        res = self.inner.act(obs, *action_types)
        check_action(obs, action_types, res)
        return res

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        self._check_obs(obs, final=True)
        if not isinstance(truncated, bool):
            raise CheckError(f"game_over(truncated=...) must be a bool, got {truncated!r}")
        if truncated and self.entities and not obs.entity_list() and not self.empty_truncation:
            self.empty_truncation = True
            self.report.warnings.append(
                "game_over(obs, truncated=True) was given an observation without entities: at a time limit the trainer "
                "values the episode's last state from that observation, so give it the last state's entities (as the "
                "observations before it), e.g. agent.game_over(gl.Obs(score=s).entities(units), truncated=True)"
            )
        self.inner.game_over(obs, truncated)


def _batch_consistent(b: Batch, env: Any) -> None:
    problem = b.layout_problem(env.spaces)
    if problem:
        raise CheckError(f"batch {problem}")
    for name, arr in b.entities.items():
        if not np.isfinite(arr).all():
            raise CheckError(f"batch entities[{name!r}] has non-finite values")
    total = sum(b.counts.values(), np.zeros(b.num_slots, dtype=np.int64))
    for name in b.actor_slot:
        sl, ai = b.actor_slot[name], b.actor_index[name]
        if not env.spaces.actions[name].kind.actor_bound:  # one decision per observation, no actor entity
            if (ai != -1).any() or np.unique(sl).size != sl.size:
                raise CheckError(f"global decision {name!r} must have one row per deciding slot and actor index -1")
        elif sl.size and ((ai < 0).any() or (ai >= total[sl]).any()):
            raise CheckError(f"actor indices of {name!r} point outside their slot's entities")


def _same(a: Batch, b: Batch) -> bool:
    return a.equal(b)


def check(game: Callable[..., Any], seed: int = 0, steps: int = 500, agents_per_game: int = 1, num_envs: int = 4) -> CheckReport:
    """Check a game loop: schemas, finite features, legal choices, independent copies, determinism, clean close.

    Runs the game with a random agent (every observation inspected); then ``num_envs`` copies
    alone and among one another (:func:`~gymloop.copies.compare_copies`: a copy must observe the
    same whatever runs beside it); then a small :class:`~gymloop.VecEnv` twice with the same seed,
    comparing the batches bit for bit.

    Args:
        game: the game loop function.
        seed: seed for the game and the random agents.
        steps: decisions to run in each phase.
        agents_per_game: agents the game takes (2 for a two-player game).
        num_envs: game copies in the vectorized phase.

    Returns:
        A :class:`CheckReport` listing what was verified.

    Raises:
        CheckError: a property does not hold; the message names it.
        GymloopError: a more specific error raised by the game's observations.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> report = gl.check(snake, steps=50)
        >>> report.entity_types, report.action_types
        (['Body', 'Food', 'Head'], ['Move'])
    """
    from .vector import VecEnv

    report = CheckReport()
    # 1. single game, every observation inspected
    agents = [_Inspector(RandomAgent(seed + i), report) for i in range(agents_per_game)]
    windows: list[str] = []
    try:
        with watch_windows(windows):
            r = run(game, agents[0] if agents_per_game == 1 else agents, seed=seed, max_steps=steps)
    except InvalidObservationError as e:
        raise CheckError(f"the game built an invalid observation: {e}") from e
    if windows:
        report.warnings.append(
            f"the game opened a window while headless (pygame.display.set_mode at {windows[0]}): training runs "
            "hundreds of copies headless, so draw only when given a display: def game(agent, seed, display=gl.HEADLESS), "
            "screen = display.screen(size), which is None headless (see 'A game that draws itself' in docs/games.md)"
        )
    report.decisions = r.steps
    report.episodes = len(r.episodes)
    if r.steps == 0:
        raise CheckError("the game never asked its agent for a decision")
    report.checks.append("observations: schemas, finite features and scores, legal choices, legal random actions")

    # 2. copies alone and among others: the same observations (no state shared between copies)
    diff = compare_copies(game, seed, num_envs, max(1, steps // max(1, num_envs)), agents_per_game)
    if diff is not None:
        raise CheckError(diff.message(derive_seed(seed, diff.copy, 0)))
    report.checks.append("copies independent: the same observations alone and among others, in any order")

    # 3. vectorized, twice with the same seed: bit-identical batches
    def trajectory() -> list[Batch]:
        env = VecEnv(game, num_envs=num_envs, seed=seed, agents_per_game=agents_per_game)
        try:
            out = [env.reset()]
            report.entity_types = sorted(env.obs_space.entities)
            report.action_types = sorted(env.action_space)
            per = max(1, steps // num_envs)
            for _ in range(per):
                b = env.step(env.sample_actions())
                _batch_consistent(b, env)
                out.append(b)
        finally:
            env.close()
            env.close()  # closing twice must be harmless
        if not env.closed:
            raise CheckError("VecEnv.close() did not close the environment")
        return out

    first, second = trajectory(), trajectory()
    for i, (a, b) in enumerate(zip(first, second)):
        if not _same(a, b):
            raise CheckError(
                f"batch {i} differs between two runs with seed {seed}: the game is not deterministic given its seed "
                "(use the seed passed to the game for every random draw, and keep no state in module globals or "
                "class attributes from one run to the next)"
            )
    report.checks.append("vectorized batches consistent (dtypes, counts, actor indices)")
    report.checks.append("seeded determinism: identical batches from identical seeds")
    report.checks.append("clean close, twice")
    return report
