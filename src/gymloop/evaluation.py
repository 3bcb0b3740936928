"""Evaluating agents: whole episodes of a policy (or of a random agent), per episode, and the random
agent and a trained one side by side (``gymloop eval``).

Numpy only: an agent checkpoint is loaded with :func:`gymloop.load` (gymloop's own ``.safetensors``,
a training run's folder, or an enn-trainer checkpoint) and its
:class:`~gymloop.nn.numpy_policy.NumpyPolicy` chooses for a whole :class:`~gymloop.VecEnv` batch at
once. The trainer's :func:`gymloop.train.ppo.evaluate` uses the same episode loop with its torch
policy.

What is measured, per episode (the names of :attr:`Batch.metrics <gymloop.batch.Batch.metrics>`):

- ``episode_return``: the sum of the episode's rewards, i.e. its last score minus its first;
- ``episode_score`` (with ``scores=True``): the score the game gave to ``game_over``, as
  :func:`gymloop.run` reports it; for a game whose scores start at 0 it equals the return;
- ``episode_length``: the episode's decisions;
- every metric the game reports itself (``Obs.metric``, e.g. snake's ``length``).

Example:
    >>> from gymloop.games.snake import snake
    >>> per_episode = evaluate_episodes(snake, None, episodes=8, seed=0, scores=True)
    >>> len(per_episode["episode_return"]), sorted(per_episode)
    (8, ['episode_length', 'episode_return', 'episode_score', 'length'])
    >>> Estimate.of([1.0, 2.0, 3.0]).mean
    2.0
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .batch import Batch
from .errors import CheckpointError, ConfigError
from .nn.numpy_policy import NumpyPolicy
from .obs import Obs
from .spaces import ObsSpace, Spaces, spaces_to_json
from .vector import VecEnv, _is_environment

__all__ = ["Comparison", "Estimate", "compare", "evaluate_episodes", "RETURN", "SCORE", "LENGTH"]

log = logging.getLogger(__name__)

#: after this many decisions of every slot with no episode ended, evaluation warns (the game may never call game_over)
SILENT_DECISIONS = 2_000

RETURN = "episode_return"
SCORE = "episode_score"
LENGTH = "episode_length"

Chooser = Callable[[Batch], Mapping[str, np.ndarray]]
"""Chooses the actions of a batch: per action type an int64 array (as ``VecEnv.step`` takes it)."""


def evaluate_episodes(
    game: Callable[..., Any],
    policy: NumpyPolicy | Chooser | None = None,
    episodes: int = 100,
    num_envs: int = 64,
    seed: int = 10_000,
    greedy: bool = False,
    agents_per_game: int = 1,
    max_steps: int = 1_000_000,
    scores: bool = False,
) -> dict[str, list[float]]:
    """Per metric, its value at each counted episode's end.

    Every slot (agent seat of a game copy) gets a fixed quota of episodes before playing, the first
    ``episodes % slots`` slots one more than the others, so that exactly ``episodes`` count (fewer
    only when ``max_steps`` runs out first). Taking the first ``episodes`` to *end* instead would
    favour short episodes: with 64 copies, the first 50 endings are the 50 quickest deaths. Game
    copy ``i`` gets the seeds derived from ``seed`` and ``i`` (as in any :class:`~gymloop.VecEnv`),
    so two policies evaluated with one ``seed`` play the same games.

    Args:
        game: a game loop (or ``gl.Environment`` class).
        policy: ``None`` (uniformly random legal actions), a numpy policy (``gl.load(path).policy``;
            its spaces must be the game's), or a function from a batch to its actions.
        episodes: episodes to count (over all slots).
        num_envs: game copies at most (fewer when fewer episodes are asked for).
        seed: root seed of the game copies and of the policy's sampling.
        greedy: a numpy policy takes its most probable choice instead of sampling.
        agents_per_game: agents per game copy; all of them are played by ``policy``.
        max_steps: stop after this many decisions (all slots together), counted or not.
        scores: also report ``episode_score``, the score each episode ended with (game loops only;
            a low-level ``gl.Environment`` has rewards, not scores).

    Returns:
        ``{metric: [value per counted episode that reported it]}``, in order of ending; metrics
        with no value are left out.

    Raises:
        ConfigError: ``episodes`` or ``num_envs`` is below 1.
        CheckpointError: ``policy`` is a numpy policy of other spaces than the game's.
    """
    return _episodes(game, policy, episodes, num_envs, seed, greedy, agents_per_game, max_steps, scores)[0]


def _episodes(
    game: Callable[..., Any], policy: NumpyPolicy | Chooser | None, episodes: int, num_envs: int, seed: int, greedy: bool = False,
    agents_per_game: int = 1, max_steps: int = 1_000_000, scores: bool = False,
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """:func:`evaluate_episodes`, and per metric the game each value comes from: the seats of one
    game copy's ``k``-th episode share a number (their values are not independent)."""
    if episodes < 1 or num_envs < 1:
        raise ConfigError(f"evaluate needs episodes >= 1 and num_envs >= 1, got {episodes} and {num_envs}")
    if not isinstance(agents_per_game, int) or isinstance(agents_per_game, bool) or agents_per_game < 1:
        raise ConfigError(f"evaluate needs agents_per_game (--agents) >= 1, got {agents_per_game!r}")
    num_envs = min(num_envs, math.ceil(episodes / agents_per_game))
    played = _with_scores(game) if scores and not _is_environment(game) else game
    env = VecEnv(played, num_envs=num_envs, seed=seed, agents_per_game=agents_per_game)
    slots = env.num_slots
    quota = np.full(slots, episodes // slots, dtype=np.int64)
    quota[: episodes % slots] += 1
    counted = np.zeros(slots, dtype=np.int64)
    values: dict[str, list[float]] = {}
    games: dict[str, list[int]] = {}
    copy_of_slot = np.arange(slots) // agents_per_game
    try:
        b = env.reset()
        choose = _chooser(policy, env.spaces, seed, greedy)
        steps = 0
        warned = False
        while (counted < quota).any() and steps < max_steps:
            b = env.step(env.sample_actions() if choose is None else dict(choose(b)))
            steps += slots
            ends = b.metrics.get(RETURN)
            if ends is None:
                if not warned and not counted.any() and steps >= SILENT_DECISIONS * slots:
                    warned = True
                    log.warning("evaluation: no episode has ended in %d decisions of each of %d game copies; it goes on until "
                                "max_steps=%d decisions in all. Does the game call agent.game_over(...) at each episode's end?",
                                SILENT_DECISIONS, slots, max_steps)
                continue
            ended = ~np.isnan(ends)
            take = ended & (counted < quota)
            game_ids = (counted * num_envs + copy_of_slot)[take]  # the k-th episode of copy c: seats of one game share it
            for name, arr in b.metrics.items():
                vals = arr[take]
                have = ~np.isnan(vals)
                values.setdefault(name, []).extend(vals[have].tolist())
                games.setdefault(name, []).extend(game_ids[have].tolist())
            counted += ended
    finally:
        env.close()
    if (counted < quota).any():
        log.warning("evaluation: %d of %d episodes ended within max_steps=%d decisions; %s", int(np.minimum(counted, quota).sum()),
                    episodes, max_steps, "does the game call agent.game_over(...) at each episode's end?" if not counted.any()
                    else "the figures are of those that did")
    return {k: v for k, v in values.items() if v}, {k: games[k] for k, v in values.items() if v}


def _chooser(policy: NumpyPolicy | Chooser | None, spaces: Spaces, seed: int, greedy: bool) -> Chooser | None:
    if policy is None or not isinstance(policy, NumpyPolicy):
        return policy
    check_fits(policy, spaces)
    rng = np.random.default_rng(seed)
    numpy_policy = policy

    def choose(b: Batch) -> dict[str, np.ndarray]:
        return numpy_policy.sample(numpy_policy.pack(b), rng=rng, greedy=greedy)[0]

    return choose


def check_fits(policy: NumpyPolicy, spaces: Spaces) -> None:
    """Raise :class:`CheckpointError` unless a batch of ``spaces`` is what ``policy`` was trained on.

    The batched forward pass needs the same entity types with the same features, the same global
    features and the same action types (kind, labels, candidates; a select-entity head that may
    point at any entity, as enn-trainer's, fits candidates among its entity types). (:func:`gymloop.load`'s
    agents match by name one observation at a time and accept more; a batch does not.)
    """
    mine_obs, mine_act = spaces_to_json(spaces.obs, spaces.actions)
    theirs_obs, theirs_act = spaces_to_json(ObsSpace(dict(policy.entity_features), tuple(policy.global_features)), policy.action_space)
    diffs = []
    for what, a, b in (("entity type", mine_obs["entities"], theirs_obs["entities"]), ("action type", mine_act, theirs_act)):
        for who, only in (("the game", sorted(set(a) - set(b))), ("the checkpoint", sorted(set(b) - set(a)))):
            if only:
                diffs.append(f"{what}s only {who} has: {', '.join(only)}")
        for k in sorted(set(a) & set(b)):
            if a[k] != b[k] and not (what == "action type" and _candidates_fit(a[k], b[k], theirs_obs["entities"])):
                diffs.append(f"{what} {k!r}: the game has {a[k]!r}, the checkpoint {b[k]!r}")
    if mine_obs["globals"] != theirs_obs["globals"]:
        diffs.append(f"global features: the game has {mine_obs['globals']}, the checkpoint {theirs_obs['globals']}")
    if diffs:
        trained_on = policy.info.get("game")
        fix = f"evaluate it on the game it was trained on ({trained_on!r})" if trained_on else "evaluate it on the game it was trained on"
        raise CheckpointError(f"{policy.path} does not fit this game ({'; '.join(diffs)}); {fix}")


def _candidates_fit(game: Any, ckpt: Any, ckpt_entities: Any) -> bool:
    """A select-entity action whose checkpoint head may point at any entity (``among_any``: an
    enn-trainer checkpoint) fits a game whose candidate types are entity types of the checkpoint
    (as :func:`gymloop.load`'s agents accept it); everything else about the action must be equal."""
    if not (isinstance(game, dict) and isinstance(ckpt, dict) and ckpt.get("among_any")):
        return False
    rest = {k: v for k, v in ckpt.items() if k not in ("among", "among_any")}
    mine = {k: v for k, v in game.items() if k not in ("among", "among_any")}
    return rest == mine and set(game.get("among", ())) <= set(ckpt_entities)


# ---------------------------------------------------------------------- final scores
class _ScoreTap:
    """Passes everything to the game's agent; at ``game_over`` adds the final score as a metric."""

    __slots__ = ("agent",)

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def act(self, obs: Any, *action_types: Any) -> Any:
        return self.agent.act(obs, *action_types)

    def game_over(self, obs: Any, truncated: bool = False) -> None:
        if type(obs) is Obs and SCORE not in obs.metrics:
            try:
                obs.metric(SCORE, float(obs.score))
            except (TypeError, ValueError):
                pass  # the agent below names the bad score
        self.agent.game_over(obs, truncated)

    @property
    def _act_group(self) -> Any:  # gl.act_all still asks the agents of one VecEnv together
        return getattr(self.agent, "_act_group", None)

    def _act_all(self, requests: Sequence[tuple]) -> list[Any]:
        return self.agent._act_all([(r[0].agent, *r[1:]) for r in requests])


def _with_scores(game: Callable[..., Any]) -> Callable[..., Any]:
    """``game`` with its agents tapped for final scores (declared types and agents carried over)."""

    @functools.wraps(game)
    def scored(agents: Any, seed: int) -> Any:
        tapped = tuple(_ScoreTap(a) for a in agents) if isinstance(agents, tuple) else _ScoreTap(agents)
        return game(tapped, seed)

    return scored


# ---------------------------------------------------------------------- summaries
@dataclass(frozen=True)
class Estimate:
    """The mean of a metric over ``n`` episodes and its 95% confidence interval's half-width.

    ``ci95`` is ``1.96 * s / sqrt(n)`` with ``s`` the sample standard deviation (the normal
    approximation); ``None`` below two episodes, as is ``mean`` without any. When several seats
    play one game their episodes are not independent (in a zero-sum game their returns cancel):
    :meth:`of` then takes each value's game and the interval is the cluster-robust one, games
    as the independent units (the same as above when every game has one value).
    """

    mean: float | None
    ci95: float | None
    n: int

    @classmethod
    def of(cls, values: Sequence[float], games: Sequence[int] | None = None) -> Estimate:
        """The estimate of ``values``; ``games``: the game each value comes from (values of one game
        are correlated, values of different games independent), ``None``: each its own.

        Example:
            >>> round(Estimate.of([1.0, 2.0, 3.0]).ci95, 6)  # two seats that always score alike are one game's worth
            1.131607
            >>> round(Estimate.of([1.0, 1.0, 2.0, 2.0, 3.0, 3.0], games=[0, 0, 1, 1, 2, 2]).ci95, 6)
            1.131607
        """
        a = np.asarray(values, dtype=np.float64)
        n = int(a.size)
        if n == 0:
            return cls(None, None, 0)
        mean = float(a.mean())
        if games is None:
            return cls(mean, 1.96 * float(a.std(ddof=1)) / math.sqrt(n) if n > 1 else None, n)
        g = np.asarray(games)
        if g.shape != a.shape:
            raise ConfigError(f"Estimate.of: {g.size} game numbers for {n} values; give one per value")
        _, cluster = np.unique(g, return_inverse=True)
        k = int(cluster.max()) + 1
        if k < 2:
            return cls(mean, None, n)
        sums = np.bincount(cluster.reshape(-1), weights=a - mean, minlength=k)  # per game, its values' deviations
        return cls(mean, 1.96 * math.sqrt(k / (k - 1) * float((sums**2).sum())) / n, n)

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci95": self.ci95, "n": self.n}

    def __str__(self) -> str:
        """``mean ± ci95`` to two significant digits of the interval (``-`` without episodes)."""
        if self.mean is None:
            return "-"
        if self.ci95 is None:
            return f"{self.mean:.2f}"
        digits = 2 if self.ci95 <= 0 else min(4, max(0, 1 - math.floor(math.log10(self.ci95))))
        return f"{self.mean:.{digits}f} ± {self.ci95:.{digits}f}"


_LABELS = {RETURN: "return", SCORE: "score", LENGTH: "episode length"}


#: the columns a comparison may have, in display order, with their table headings
_COLUMNS = {"random": "random agent", "scripted": "scripted agent", "agent": "agent"}


@dataclass(frozen=True)
class Comparison:
    """Agents evaluated on the same games (:func:`compare`): the random agent, and a trained agent
    and/or the game's scripted agent.

    Attributes:
        game: the game's name; ``agent_path``: the trained agent's checkpoint (``None``: none).
        episodes: episodes asked for per agent; ``seed``: the root seed of the games;
        agents_per_game: seats per game copy (all played by the agent evaluated).
        metrics: metric names in display order: return, score (when it differs from the return),
            episode length, then the game's own.
        levels: per agent (``"random"``, ``"scripted"``, ``"agent"``, in that order), per metric,
            its :class:`Estimate`.
    """

    game: str
    agent_path: str | None
    episodes: int
    seed: int
    agents_per_game: int
    metrics: list[str]
    levels: dict[str, dict[str, Estimate]]

    @property
    def random(self) -> dict[str, Estimate]:
        """The random agent's estimates."""
        return self.levels["random"]

    @property
    def agent(self) -> dict[str, Estimate]:
        """The trained agent's estimates (empty without one)."""
        return self.levels.get("agent", {})

    def to_json(self) -> dict[str, Any]:
        """One JSON object: the run's parameters and, per agent, per metric ``mean``, ``ci95``, ``n``."""
        empty = Estimate(None, None, 0)
        return {
            "game": self.game,
            "agent_path": self.agent_path,
            "episodes": self.episodes,
            "seed": self.seed,
            "agents_per_game": self.agents_per_game,
            "interval": _interval_text(self.agents_per_game),
            "metrics": list(self.metrics),
            "agents": {who: {m: est.get(m, empty).to_json() for m in self.metrics} for who, est in self.levels.items()},
        }

    def table(self) -> str:
        """The comparison as a text table, with a line saying what each quantity is."""
        empty = Estimate(None, None, 0)
        who = list(self.levels)
        rows = [[""] + [_COLUMNS[w] for w in who]]  # (the JSON names them "random", "scripted" and "agent")
        for m in self.metrics:
            cells = [_LABELS.get(m, m)]
            for x in who:
                e = self.levels[x].get(m, empty)
                cells.append(str(e) + (f" (n={e.n})" if e.n != self.episodes else ""))
            rows.append(cells)
        w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        seats = f", {self.agents_per_game} seats per game" if self.agents_per_game > 1 else ""
        names = [f"the checkpoint {self.agent_path}" if x == "agent" else f"the {_COLUMNS[x]}" for x in who]
        named = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        lines = [
            f"{self.game}: {named}, {self.episodes} episodes each on the same games (seed {self.seed}{seats})",
            f"mean ± 95% interval ({_interval_text(self.agents_per_game, unicode=True)})",
        ]
        lines += ["  " + "   ".join([f"{r[0]:<{w[0]}}"] + [f"{c:>{w[i + 1]}}" for i, c in enumerate(r[1:])]) for r in rows]
        own = [m for m in self.metrics if m not in _LABELS]
        notes = "return: the sum of an episode's rewards"
        if SCORE in self.metrics:
            notes += "; score: the game's score at the episode's end"
        if own:
            notes += f"; {', '.join(own)}: reported by the game"
        lines.append(f"  ({notes})")
        return "\n".join(lines)

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def _interval_text(agents_per_game: int, unicode: bool = False) -> str:
    """How ``ci95`` is computed, for the table and the JSON."""
    if agents_per_game == 1:
        return "1.96 × sample std / √n" if unicode else "ci95 = 1.96 * sample std / sqrt(n) (normal approximation)"
    return ("1.96 × cluster-robust std error, each game's seats one cluster" if unicode
            else "ci95 = 1.96 * cluster-robust standard error, the seats of one game one cluster (normal approximation)")


def compare(
    game: Callable[..., Any],
    agent_path: str | None = None,
    game_name: str = "",
    episodes: int = 200,
    seed: int = 10_000,
    agents_per_game: int = 1,
    num_envs: int = 64,
) -> Comparison:
    """Evaluate the random agent beside an agent checkpoint, or beside the game's scripted agent.

    Args:
        game: the game loop (or ``gl.Environment`` class).
        agent_path: an agent checkpoint (see :func:`gymloop.load`: ``agent.safetensors``, the
            output folder of ``gymloop train``, or an enn-trainer checkpoint); ``"scripted"``: the
            game's scripted agent; ``"random"``: the random agent alone; ``None``: the random agent
            and, when the game has one, its scripted agent.
        game_name: the name shown (default: the function's name).
        episodes: episodes per agent (see :func:`evaluate_episodes`).
        seed: root seed of the games, the same for every agent.
        agents_per_game: seats per game copy; the agent evaluated plays all of them.
        num_envs: game copies at most.

    The random agent and a checkpoint play ``num_envs`` copies at once (:func:`evaluate_episodes`);
    a scripted agent plays through :func:`gymloop.run`, one copy at a time, from the same root seed.

    Raises:
        ConfigError: ``episodes`` below 1, or ``"scripted"`` for a game without a scripted agent.
        CheckpointError: ``agent_path`` does not exist, is not an agent checkpoint, or was trained
            on a game of other entity, global or action types.
    """
    from .agent_specs import load_agent
    from .games import game_name as name_of_game
    from .neural import load

    if episodes < 1:
        raise ConfigError(f"episodes must be at least 1, got {episodes}; evaluate on e.g. 200 episodes")
    kw: dict[str, Any] = dict(episodes=episodes, num_envs=num_envs, seed=seed, agents_per_game=agents_per_game, scores=True)
    runs: dict[str, tuple[dict[str, list[float]], dict[str, list[int]]]] = {}
    if agent_path is not None and agent_path not in ("random", "scripted"):
        if not os.path.exists(agent_path):
            raise CheckpointError(
                f"agent checkpoint {agent_path!r} does not exist; give the agent.safetensors that gymloop train wrote (or its "
                "--out folder), or 'scripted' / 'random'"
            )
        policy = load(agent_path).policy
        runs["agent"] = _episodes(game, policy, **kw)  # first: a checkpoint of another game fails before any random play
    runs["random"] = _episodes(game, None, **kw)
    if agent_path in (None, "scripted"):
        try:
            load_agent("scripted", game, seed)
        except ConfigError:
            if agent_path == "scripted":
                raise
        else:
            runs["scripted"] = _run_episodes(game, lambda s: load_agent("scripted", game, s), episodes, seed, agents_per_game)
    names: list[str] = []
    for per, _ in runs.values():
        names += [k for k in per if k not in names]
    same_as_return = all(
        len(per.get(SCORE, [])) == len(per.get(RETURN, [])) and np.allclose(per.get(SCORE, []), per.get(RETURN, []))
        for per, _ in runs.values()
    )
    order = [RETURN] + ([SCORE] if SCORE in names and not same_as_return else []) + [LENGTH]
    metrics = [m for m in order if m in names] + [m for m in names if m not in (RETURN, SCORE, LENGTH)]
    levels = {
        who: {k: Estimate.of(v, runs[who][1][k] if agents_per_game > 1 else None) for k, v in runs[who][0].items()}
        for who in _COLUMNS if who in runs
    }
    return Comparison(
        game=game_name or name_of_game(game),
        agent_path=agent_path if "agent" in runs else None,
        episodes=episodes,
        seed=seed,
        agents_per_game=agents_per_game,
        metrics=metrics,
        levels=levels,
    )


class _ReturnTap:
    """Passes everything to a seat's agent and keeps each episode's return: its final score minus
    the score of its first observation (the rewards a ``VecEnv`` would give, summed)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.first: float | None = None
        self.returns: list[float] = []

    def act(self, obs: Any, *types: Any) -> Any:
        if self.first is None:
            self.first = float(obs.score)
        return self.agent.act(obs, *types)

    def game_over(self, obs: Any, truncated: bool = False) -> None:
        final = float(obs.score)
        self.returns.append(final - (self.first if self.first is not None else final))
        self.first = None
        self.agent.game_over(obs, truncated)


def _run_episodes(
    game: Callable[..., Any], make_agent: Callable[[int], Any], episodes: int, seed: int, agents_per_game: int,
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """``episodes`` episodes of the agents ``make_agent(seed)`` (one per seat) through :func:`gymloop.run`:
    per metric the values and, per value, its game (the k-th episode of every seat is game k)."""
    from .agent import run

    values: dict[str, list[float]] = {}
    games: dict[str, list[int]] = {}
    per_seat = [0] * agents_per_game
    k = 0
    while sum(per_seat) < episodes:
        taps = [_ReturnTap(make_agent(seed + k * agents_per_game + i)) for i in range(agents_per_game)]
        result = run(game, taps[0] if agents_per_game == 1 else taps, seed=seed + k, max_episodes=episodes - sum(per_seat))
        k += 1
        if not result.episodes:
            log.warning("evaluation: the game returned without ending an episode (no game_over); %d of %d episodes",
                        sum(per_seat), episodes)
            break
        seen = [0] * agents_per_game
        for e in result.episodes:
            i = e.agent
            ret = taps[i].returns[seen[i]]
            game_id = per_seat[i] + seen[i]
            seen[i] += 1
            row = {RETURN: ret, SCORE: float(e.score), LENGTH: float(e.length), **e.metrics}
            for name, v in row.items():
                values.setdefault(name, []).append(float(v))
                games.setdefault(name, []).append(game_id)
        for i in range(agents_per_game):
            per_seat[i] += seen[i]
    return values, games
