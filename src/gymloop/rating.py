"""How strong is each agent? Matches between agents, ratings with their uncertainty (``gymloop rate``).

:func:`rate` plays every group of agents a game seats (every pair, for a two-player game) on the
same seeds, each seat taken by each agent in turn, and rates them from the results with
`openskill <https://openskill.me>`_'s Plackett-Luce model: each agent's rating is a skill ``mu``
with an uncertainty ``sigma``; ``mu - 3 * sigma`` (``ordinal``) is a skill the agent has with high
confidence. openskill is chosen over trueskill: it is maintained, MIT-licensed and free of
patents, and rates teams of any size and draws (pip install 'gymloop[rate]').

For a one-player game there is nothing to rate against: each agent gets its mean score with a 95%
interval over the same seeds.

Ratings go into an agent library (:func:`write_ratings`), where a game picks an opponent by
level or by a player's rating (:meth:`gymloop.AgentLibrary.pick`) and follows the player's own
rating from results (:class:`PlayerRating`).

Example:
    >>> from gymloop.games.suite.cycles import cycles
    >>> from gymloop.rating import rate
    >>> t = rate(cycles, {"random": "random", "scripted": "scripted"}, episodes=6, seed=0)
    >>> t.order()[0], t.wins[("scripted", "random")][0] > t.wins[("scripted", "random")][2]
    ('scripted', True)
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .agent import run
from .agent_specs import AgentSpec, load_agent
from .errors import ConfigError
from .evaluation import Estimate
from .games.registry import game_name
from .runtime.seeding import derive_seed
from .spaces import declared_agents

__all__ = ["Rating", "RatingTable", "PlayerRating", "rate", "rate_pair", "ratings_model", "RATINGS_FORMAT", "DEFAULT_MU", "DEFAULT_SIGMA"]

#: ``format`` of a ratings document (in a library: :func:`write_ratings`)
RATINGS_FORMAT = "gymloop-ratings/1"
DEFAULT_MU = 25.0
DEFAULT_SIGMA = DEFAULT_MU / 3
_MAX_STEPS_PER_MATCH = 200_000  # a match whose episode never ends is an error, not a hang


def ratings_model() -> Any:
    """openskill's Plackett-Luce model (``mu`` 25, ``sigma`` 25/3).

    Raises:
        ConfigError: openskill is not installed (the message names the extra).
    """
    try:
        from openskill.models import PlackettLuce
    except ImportError:
        raise ConfigError("rating agents needs openskill: pip install 'gymloop[rate]'") from None
    return PlackettLuce(mu=DEFAULT_MU, sigma=DEFAULT_SIGMA)


@dataclass(frozen=True)
class Rating:
    """A skill estimate: ``mu`` and its uncertainty ``sigma`` (openskill's scale: a new agent is 25 ± 8.3)."""

    mu: float = DEFAULT_MU
    sigma: float = DEFAULT_SIGMA

    @property
    def ordinal(self) -> float:
        """``mu - 3 * sigma``: a skill the agent has with high confidence (the sort key of a table)."""
        return self.mu - 3 * self.sigma

    def to_json(self) -> dict[str, float]:
        return {"mu": round(self.mu, 6), "sigma": round(self.sigma, 6)}

    @classmethod
    def from_json(cls, d: Any, where: str = "rating") -> Rating:
        """A rating read back; a malformed one is a :class:`ConfigError` naming ``where``."""
        try:
            mu, sigma = float(d["mu"]), float(d["sigma"])
        except (TypeError, KeyError, ValueError):
            raise ConfigError(f"{where}: expected {{'mu': number, 'sigma': number}}, got {d!r}") from None
        if not (math.isfinite(mu) and math.isfinite(sigma) and sigma > 0):
            raise ConfigError(f"{where}: mu must be finite and sigma positive, got mu={mu}, sigma={sigma}")
        return cls(mu, sigma)


def rate_pair(a: Rating, b: Rating, outcome: str, model: Any = None) -> tuple[Rating, Rating]:
    """Both ratings after one game of ``a`` against ``b``: ``outcome`` is ``a``'s (``"win"``,
    ``"draw"`` or ``"loss"``); ``model``: :func:`ratings_model` (made when not given).

    Raises:
        ConfigError: another outcome, or openskill missing.
    """
    ranks = {"win": [0, 1], "draw": [0, 0], "loss": [1, 0]}.get(outcome)
    if ranks is None:
        raise ConfigError(f"outcome must be 'win', 'draw' or 'loss', got {outcome!r}")
    m = model or ratings_model()
    [[a2], [b2]] = m.rate([[m.rating(mu=a.mu, sigma=a.sigma)], [m.rating(mu=b.mu, sigma=b.sigma)]], ranks=ranks)
    return Rating(float(a2.mu), float(a2.sigma)), Rating(float(b2.mu), float(b2.sigma))


class PlayerRating:
    """A player's running rating, updated from each result against a rated opponent.

    A game keeps one per player, picks an opponent near it (``library.pick(rating=player.rating.mu)``)
    and updates it after every match.

    Example:
        >>> from gymloop.rating import PlayerRating, Rating
        >>> p = PlayerRating()
        >>> p.update(Rating(30.0, 2.0), "win")
        >>> p.rating.mu > 25.0
        True
    """

    def __init__(self, rating: Rating | None = None) -> None:
        self.rating = rating or Rating()

    def update(self, opponent: Rating, outcome: str) -> None:
        """Fold in one match against ``opponent``: ``outcome`` is ``"win"``, ``"draw"`` or ``"loss"``
        (the player's).

        Raises:
            ConfigError: another outcome, or openskill missing.
        """
        try:
            self.rating, _ = rate_pair(self.rating, opponent, outcome)
        except ConfigError as e:
            raise ConfigError(f"PlayerRating.update: {e}") from None


@dataclass
class RatingTable:
    """What :func:`rate` found.

    Attributes:
        game: the game's name.
        seats: agents per game.
        episodes: games per group of agents (per pair, in a two-player game).
        seed: the root seed.
        ratings: per agent, its :class:`Rating` (empty for a one-player game).
        wins: per ordered pair ``(a, b)``, ``(wins, draws, losses)`` of ``a`` against ``b``.
        scores: per agent, the :class:`~gymloop.evaluation.Estimate` of its score.
        matches: every game: ``{"seats": [agent per seat], "scores": [...], "seed": game seed}``.
    """

    game: str
    seats: int
    episodes: int
    seed: int
    ratings: dict[str, Rating] = field(default_factory=dict)
    wins: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    scores: dict[str, Estimate] = field(default_factory=dict)
    matches: list[dict[str, Any]] = field(default_factory=list)

    def order(self) -> list[str]:
        """The agents, strongest first (by ordinal; a one-player game: by mean score)."""
        if self.ratings:
            return sorted(self.ratings, key=lambda a: -self.ratings[a].ordinal)
        return sorted(self.scores, key=lambda a: -(self.scores[a].mean or 0.0))

    def table(self) -> str:
        """A text table: ratings and win/draw/loss totals (or scores), then the win/draw/loss matrix."""
        names = self.order()
        w = max([len(n) for n in names] + [5])
        if not self.ratings:
            lines = [f"{self.game}: one player per game, so scores, not ratings ({self.episodes} episodes each, same seeds)",
                     f"{'agent':<{w}}  {'score':>10}  {'95% interval':>14}"]
            for n in names:
                e = self.scores[n]
                ci = "-" if e.ci95 is None else f"± {e.ci95:.3g}"
                lines.append(f"{n:<{w}}  {e.mean if e.mean is not None else float('nan'):>10.4g}  {ci:>14}")
            return "\n".join(lines)
        lines = [f"{self.game}: {len(self.matches)} games, {self.episodes} per {'pair' if self.seats == 2 else 'group'} "
                 f"(seats and seeds balanced), openskill Plackett-Luce",
                 f"{'agent':<{w}}  {'mu':>7}  {'sigma':>6}  {'mu-3sigma':>9}  {'W':>5}  {'D':>5}  {'L':>5}"]
        for n in names:
            r = self.ratings[n]
            tot = [sum(v[i] for (a, _), v in self.wins.items() if a == n) for i in range(3)]
            lines.append(f"{n:<{w}}  {r.mu:7.2f}  {r.sigma:6.2f}  {r.ordinal:9.2f}  {tot[0]:5d}  {tot[1]:5d}  {tot[2]:5d}")
        lines.append("")
        lines.append("wins/draws/losses of the row against the column:")
        cw = max(w, 11)
        lines.append(" " * (w + 2) + "".join(f"{n[:cw]:>{cw + 2}}" for n in names))
        for a in names:
            cells = []
            for b in names:
                v = self.wins.get((a, b))
                cells.append(f"{'-' if v is None else f'{v[0]}/{v[1]}/{v[2]}':>{cw + 2}}")
            lines.append(f"{a:<{w}}  " + "".join(cells))
        return "\n".join(lines)

    def document(self) -> dict[str, Any]:
        """The ratings as JSON-ready data (what a library stores: :func:`write_ratings`)."""
        return {
            "format": RATINGS_FORMAT, "game": self.game, "model": "openskill PlackettLuce", "seats": self.seats,
            "episodes": self.episodes, "seed": self.seed, "games": len(self.matches),
            "agents": {n: self.ratings[n].to_json() for n in self.order()} if self.ratings else {},
            "scores": {n: {"mean": e.mean, "ci95": e.ci95, "n": e.n} for n, e in self.scores.items()},
        }

    def json_text(self) -> str:
        doc = self.document()
        doc["wins"] = [{"agent": a, "against": b, "wins": v[0], "draws": v[1], "losses": v[2]} for (a, b), v in self.wins.items()]
        return json.dumps(doc, indent=2)

    def plot(self, path: str) -> None:
        """Draw the ratings (``mu`` with ``± 3 sigma`` bars, strongest on top) or the scores to ``path`` (PNG)."""
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ConfigError("drawing the ratings needs matplotlib: pip install 'gymloop[train]'") from None
        from .files import atomic_output

        names = self.order()[::-1]
        if self.ratings:
            vals = [self.ratings[n].mu for n in names]
            errs = [3 * self.ratings[n].sigma for n in names]
            label = "rating (mu ± 3 sigma)"
        else:
            vals = [self.scores[n].mean or 0.0 for n in names]
            errs = [self.scores[n].ci95 or 0.0 for n in names]
            label = "score (mean ± 95% interval)"
        fig = Figure(figsize=(6, 0.5 + 0.35 * len(names)))
        ax = fig.add_subplot(1, 1, 1)
        ax.errorbar(vals, range(len(names)), xerr=errs, fmt="o", capsize=3)
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel(label)
        ax.set_title(self.game)
        ax.grid(True, axis="x", alpha=0.3)
        fig.tight_layout()
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)


def rate(game: Callable[..., Any], agents: Mapping[str, AgentSpec], episodes: int = 10, seed: int = 0,
         progress: Callable[[int, int], None] | None = None, agents_per_game: int | None = None) -> RatingTable:
    """Play the agents against one another and rate them (see the module docstring).

    Each group of ``seats`` agents (every pair in a two-player game) plays ``episodes`` games; game
    ``e`` of a group uses the seed derived from ``seed`` and ``e // seats``, the agents rotating
    through the seats, so sides and seeds are balanced when ``episodes`` is a multiple of the seats.
    The games are played and rated round by round (game ``e`` of every group, then game ``e + 1``),
    so that every rating moves along with the others: rated group after group, an agent early in
    the list would play all its games against opponents not rated yet.
    The same ``seed`` gives the same table for the same specs: each call makes their agents afresh,
    seeded from ``seed``. An agent *object* is used as it is given: its random state carries on from
    game to game and from one call to the next, so give specs (or fresh objects) to repeat a table.

    Args:
        game: the game loop.
        agents: name → agent spec (``"random"``, ``"scripted"``, ``module:Class``, a checkpoint path,
            or an agent object; see :func:`gymloop.agent_specs.load_agent`).
        episodes: games per group (per agent, in a one-player game).
        seed: the root seed.
        progress: called with ``(games done, games in all)`` after each game.
        agents_per_game: the seats of a game (``None``: as the game declares with
            ``gl.game(agents=N)``, else 1).

    Raises:
        ConfigError: fewer agents than seats, ``episodes`` or ``agents_per_game`` below 1, an agent
            spec that is not one, a game whose episode does not end, or openskill missing.
        CheckpointError: a checkpoint that does not fit the game (before any game is played).
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"rate: episodes must be an int >= 1, got {episodes!r}")
    if agents_per_game is not None and (isinstance(agents_per_game, bool) or not isinstance(agents_per_game, int)
                                        or agents_per_game < 1):
        raise ConfigError(f"rate: agents_per_game must be an int >= 1 or None, got {agents_per_game!r}")
    names = list(agents)
    seats = agents_per_game or declared_agents(game) or 1
    if seats > 1 and len(names) < seats:
        raise ConfigError(f"rate: {game_name(game)} seats {seats} agents a game; give at least {seats}, got {len(names)}")
    if not names:
        raise ConfigError("rate: give at least one agent")
    # every agent is made (and a checkpoint checked against the game) before any game is played
    made = {n: load_agent(spec, game, seed=derive_seed(seed, i, 0, generation=7), agents_per_game=seats)
            for i, (n, spec) in enumerate(agents.items())}
    table = RatingTable(game_name(game), seats, episodes, seed)
    if seats == 1:
        total = len(names) * episodes
        done = 0
        for n in names:
            vals = []
            for e in range(episodes):
                r = run(game, made[n], seed=derive_seed(seed, e, 0), max_episodes=1, max_steps=_MAX_STEPS_PER_MATCH)
                if not r.episodes:
                    raise ConfigError(f"rate: an episode of {table.game} did not end in {_MAX_STEPS_PER_MATCH:,} decisions")
                vals.append(r.episodes[0].score)
                table.matches.append({"seats": [n], "scores": [r.episodes[0].score], "seed": derive_seed(seed, e, 0)})
                done += 1
                if progress is not None:
                    progress(done, total)
            table.scores[n] = Estimate.of(vals)
        return table
    model = ratings_model()
    live = {n: model.rating(mu=DEFAULT_MU, sigma=DEFAULT_SIGMA, name=n) for n in names}
    groups = list(itertools.combinations(names, seats))
    total = len(groups) * episodes
    done = 0
    per_agent: dict[str, list[float]] = {n: [] for n in names}
    # round by round (game e of every group, then game e + 1): each agent's rating moves with the others'
    # instead of one group's games all at once, which rates an agent early in the list against defaults
    for e in range(episodes):
        for group in groups:
            k = e % seats
            order = list(group[k:] + group[:k])
            game_seed = derive_seed(seed, e // seats, 0)
            r = run(game, [made[n] for n in order], seed=game_seed, max_episodes=seats, max_steps=_MAX_STEPS_PER_MATCH)
            first: dict[int, float] = {}
            for ep in r.episodes:
                first.setdefault(ep.agent, ep.score)
            if len(first) < seats:
                raise ConfigError(f"rate: a game of {table.game} did not end for every seat in {_MAX_STEPS_PER_MATCH:,} "
                                  "decisions (each seat's agent.game_over ends its game)")
            scores = [first[i] for i in range(seats)]
            table.matches.append({"seats": order, "scores": scores, "seed": game_seed})
            for n, s in zip(order, scores):
                per_agent[n].append(s)
            # rank 0 is the best; equal scores share a rank (a draw)
            ranks = [sum(1 for t in scores if t > s) for s in scores]
            new = model.rate([[live[n]] for n in order], ranks=ranks)
            for n, [rt] in zip(order, new):
                live[n] = rt
            for i, a in enumerate(order):
                for j, b in enumerate(order):
                    if i != j:
                        w, d, lo = table.wins.get((a, b), (0, 0, 0))
                        res = (scores[i] > scores[j], scores[i] == scores[j], scores[i] < scores[j])
                        table.wins[(a, b)] = (w + res[0], d + res[1], lo + res[2])
            done += 1
            if progress is not None:
                progress(done, total)
    table.ratings = {n: Rating(float(live[n].mu), float(live[n].sigma)) for n in names}
    table.scores = {n: Estimate.of(v) for n, v in per_agent.items()}
    return table
