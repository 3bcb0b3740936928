"""A self-play league (``gymloop train GAME --league``): snapshots of the learner as opponents, chosen
by how often the learner loses to them, rated as it trains.

In a two-player game, a share ``league.live_fraction`` of the game copies is plain self-play (the
learner in both seats, both learning); in the others the learner plays seat 0 and the other seat
is taken, one update at a time, by an opponent the league chooses:

* every ``league.snapshot_every`` updates a frozen copy of the learner joins the pool (and is written
  to ``league/uNNNNN.safetensors`` in the run folder);
* each update's opponent is a snapshot drawn with weight ``(1 - w) ** league.priority_power``, ``w``
  the learner's score against it so far (wins count 1, draws 1/2, with one win and one loss as a
  prior): the snapshots the learner still loses to are played most (prioritized fictitious
  self-play, as in AlphaStar's league); only the newest ``league.max_snapshots`` are drawn; while
  the pool is empty, the learner itself (those seats do not learn);
* every finished game against a snapshot updates both ratings (openskill's Plackett-Luce model,
  the learner's uncertainty kept at least ``SIGMA_FLOOR`` so that its rating follows its progress);
  the learner's rating goes into ``metrics.csv`` (``league_rating_mean``), TensorBoard and the curve.

When the run ends the league folder is an agent library of the snapshots and the final agent
(``final``), its ``ratings.json`` written from the league's ratings: ready to rate again with
``gymloop rate`` or to ship (``gymloop library pack``).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
from dataclasses import dataclass

import numpy as np

from ..batch import Batch
from ..checkpoint import write_agent
from ..errors import CheckpointError
from ..files import make_folder, open_input, write_atomic
from ..nn.torch_policy import Policy, policy_from_file, policy_info, policy_tensors
from ..rating import DEFAULT_MU, DEFAULT_SIGMA, RATINGS_FORMAT, Rating, rate_pair, ratings_model
from .config import LeagueConfig

__all__ = ["League", "LEAGUE_DIR", "SIGMA_FLOOR"]

log = logging.getLogger(__name__)

#: the run folder's sub-folder of snapshots (an agent library)
LEAGUE_DIR = "league"
_STATE_FILE = "league.json"
_SNAPSHOT_NAME = re.compile(r"u\d{5,}\.safetensors")  # (as after_update names them)
#: the learner's rating uncertainty never drops below this: it keeps following the learner's progress
SIGMA_FLOOR = 1.0


@dataclass
class _Member:
    """A snapshot in the pool: its frozen policy, its results against the learner, its rating."""

    name: str
    policy: Policy | None
    wins: int = 0  # the learner's, against this snapshot
    draws: int = 0
    losses: int = 0
    mu: float = DEFAULT_MU
    sigma: float = DEFAULT_SIGMA

    @property
    def learner_score(self) -> float:
        """The learner's mean score against it (win 1, draw 1/2), one win and one loss as a prior."""
        return (self.wins + 0.5 * self.draws + 1.0) / (self.wins + self.draws + self.losses + 2.0)


class League:
    """The pool of snapshots, the opponent of each update and the ratings (see the module docstring).

    Args:
        cfg: the league's settings.
        learner: the learning policy.
        seed: seeds the draws of opponents.
        folder: the run folder (``None``: snapshots stay in memory only).
        game: the game's name (written with the snapshots and the ratings).
    """

    def __init__(self, cfg: LeagueConfig, learner: Policy, seed: int, folder: str | None, game: str,
                 pairs: np.ndarray | None = None) -> None:
        self.cfg = cfg
        #: ``(learner slot, opponent slot)`` of each game copy played against the league, in a group's VecEnv
        self.pairs = np.zeros((0, 2), dtype=np.int64) if pairs is None else pairs
        self.learner = learner
        self.game = game
        self.folder = os.path.join(folder, LEAGUE_DIR) if folder else None
        self.model = ratings_model()
        self.rng = np.random.default_rng([seed, 0x1EA6E])
        self.members: list[_Member] = []
        self.mu, self.sigma = DEFAULT_MU, DEFAULT_SIGMA
        self.games = 0
        self._chosen: tuple[int, int | None] | None = None  # (update, member index or None: the live learner)

    # ------------------------------------------------------------------ each update
    def opponent(self, update: int) -> Policy:
        """The opponent of ``update`` (drawn once per update)."""
        if self._chosen is None or self._chosen[0] != update:
            self._chosen = (update, self._draw())
        i = self._chosen[1]
        if i is None:
            return self.learner
        pol = self.members[i].policy
        assert pol is not None  # (drawn only among the members with a policy)
        return pol

    def _draw(self) -> int | None:
        pool = [i for i, m in enumerate(self.members) if m.policy is not None]
        if not pool:
            return None
        w = np.array([(1.0 - self.members[i].learner_score) ** self.cfg.priority_power for i in pool])
        w = w / w.sum() if w.sum() > 0 else np.full(len(pool), 1.0 / len(pool))
        return pool[int(self.rng.choice(len(pool), p=w))]

    def observe(self, b: Batch) -> None:
        """Fold in the games against the league that ended in ``b`` (:attr:`pairs`)."""
        if self._chosen is None or self._chosen[1] is None or not self.pairs.size:
            return  # against itself: nothing to learn about the pool
        ret = b.metrics.get("episode_return")
        if ret is None:
            return
        mine, theirs = ret[self.pairs[:, 0]], ret[self.pairs[:, 1]]
        ended = ~np.isnan(mine) & ~np.isnan(theirs)
        if not ended.any():
            return
        m = self.members[self._chosen[1]]
        for a, o in zip(mine[ended].tolist(), theirs[ended].tolist()):
            if a > o:
                m.wins += 1
                outcome = "win"
            elif a < o:
                m.losses += 1
                outcome = "loss"
            else:
                m.draws += 1
                outcome = "draw"
            me, them = rate_pair(Rating(self.mu, self.sigma), Rating(m.mu, m.sigma), outcome, self.model)
            self.mu, self.sigma = me.mu, max(me.sigma, SIGMA_FLOOR)
            m.mu, m.sigma = them.mu, them.sigma
            self.games += 1

    def after_update(self, update: int, step: int) -> None:
        """Take a snapshot every ``snapshot_every`` updates (the pool keeps the newest ``max_snapshots``)."""
        if update % self.cfg.snapshot_every:
            return
        name = f"u{update:05d}"
        snap = copy.deepcopy(self.learner).eval()
        for p in snap.parameters():
            p.requires_grad_(False)
        self.members.append(_Member(name, snap, mu=self.mu, sigma=max(self.sigma, 2 * SIGMA_FLOOR)))
        if self.folder is not None:
            self._write(name, snap, step, update)
        drawn = [m for m in self.members if m.policy is not None]
        for m in drawn[: max(0, len(drawn) - self.cfg.max_snapshots)]:
            m.policy = None  # out of the pool (its file stays in the library)

    def metrics(self) -> dict[str, float]:
        """The row's league columns: the learner's rating (a curve panel), the pool, the opponent."""
        pool = [m for m in self.members if m.policy is not None]
        out = {"league_rating_mean": self.mu, "league_rating_count": float(self.games), "league/rating_sigma": self.sigma,
               "league/pool": float(len(pool))}
        if pool:
            out["league/learner_score"] = float(np.mean([m.learner_score for m in pool]))
        return out

    # ------------------------------------------------------------------ files
    def _write(self, name: str, policy: Policy, step: int, update: int) -> None:
        assert self.folder is not None
        make_folder(self.folder)
        write_agent(os.path.join(self.folder, f"{name}.safetensors"), policy_tensors(policy),
                    policy_info(policy, step=step, update=update, game=self.game, league=True))

    def save(self) -> None:
        """Write the league's state beside the snapshots (read back by :meth:`load` on ``--resume``)."""
        if self.folder is None:
            return
        make_folder(self.folder)
        doc = {
            "mu": self.mu, "sigma": self.sigma, "games": self.games, "rng": self.rng.bit_generator.state,
            "members": [{"name": m.name, "in_pool": m.policy is not None, "wins": m.wins, "draws": m.draws,
                         "losses": m.losses, "mu": m.mu, "sigma": m.sigma} for m in self.members],
        }
        write_atomic(os.path.join(self.folder, _STATE_FILE), [json.dumps(doc).encode()])

    def start_new(self) -> None:
        """A new run (not ``--resume``) in a folder that holds an earlier run's league: its snapshots,
        final agent, state and ratings go, so that the library holds this run's agents alone (files
        the league does not write stay)."""
        if self.folder is None or not os.path.isdir(self.folder):
            return
        from ..agent_library import RATINGS_FILE

        gone = [n for n in os.listdir(self.folder)
                if _SNAPSHOT_NAME.fullmatch(n) or n in ("final.safetensors", _STATE_FILE, RATINGS_FILE)]
        for n in gone:
            os.remove(os.path.join(self.folder, n))
        if gone:
            log.info("league: a new run; removed the earlier run's %d league files from %s", len(gone), self.folder)

    def load(self) -> None:
        """Read the state :meth:`save` wrote (``--resume``); nothing when there is none."""
        if self.folder is None or not os.path.isfile(os.path.join(self.folder, _STATE_FILE)):
            return
        path = os.path.join(self.folder, _STATE_FILE)
        from ..checkpoint import read_agent

        try:
            with open_input(path, "league state") as fh:
                doc = json.loads(fh.read())
            self.mu, self.sigma, self.games = float(doc["mu"]), float(doc["sigma"]), int(doc["games"])
            self.rng.bit_generator.state = doc["rng"]
            self.members = []
            for d in doc["members"]:
                pol = None
                if d["in_pool"]:
                    pol = policy_from_file(read_agent(os.path.join(self.folder, f"{d['name']}.safetensors"))).to(self.learner.device).eval()
                self.members.append(_Member(d["name"], pol, int(d["wins"]), int(d["draws"]), int(d["losses"]),
                                            float(d["mu"]), float(d["sigma"])))
        except (KeyError, ValueError, TypeError) as e:
            raise CheckpointError(f"--resume: {path} is not a league state ({type(e).__name__}: {e}); delete the league "
                                  "folder to resume with a new league") from None

    def finish(self, step: int, update: int) -> None:
        """At the end of the run: the final agent joins the library as ``final`` and ``ratings.json`` is written."""
        if self.folder is None:
            return
        from ..agent_library import write_ratings

        self._write("final", self.learner, step, update)
        self.save()
        agents = {m.name: {"mu": round(m.mu, 6), "sigma": round(m.sigma, 6)} for m in self.members}
        agents["final"] = {"mu": round(self.mu, 6), "sigma": round(self.sigma, 6)}
        doc = {"format": RATINGS_FORMAT, "game": self.game, "model": "openskill PlackettLuce (league, during training)",
               "seats": 2, "games": self.games, "agents": agents}
        write_ratings(self.folder, doc)
        log.info("league: %d snapshots and the final agent in %s (rated; gymloop rate can rate them again)",
                 len(self.members), self.folder)
