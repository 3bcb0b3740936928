"""Episode bookkeeping of game-loop slots between two batches (see :class:`EpisodeState`).

The greenlet :class:`~gymloop.runtime.executor.Executor` updates it when a game ends an episode or
returns; :meth:`BatchBuilder.build <gymloop.runtime.builder.BatchBuilder.build>` folds the new
scores in and empties it into the batch.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidObservationError
from ..obs import EMPTY_EPISODES, Obs, check_score, empty_episodes_error

__all__ = ["EpisodeState"]


class EpisodeState:
    """Per-slot rewards, episode ends, returns, lengths and metrics between two batches.

    Attributes (per slot; the float64 arrays are updated with one numpy call per batch):
        prev_score: the score of the last observation (NaN: none yet in this episode).
        reward_acc: reward accumulated since the last batch.
        ep_ret, ep_len: the running episode return and length.
        term, trunc: whether an episode ended (terminated / truncated) since the last batch.
        metrics: ``{name: {slot: value}}`` to report in the next batch.
        final_obs: ``{slot: obs}`` given to ``game_over`` on truncation (for the ``final`` batch).
    """

    def __init__(self, num_slots: int, slot_lo: int = 0) -> None:
        n = self.n = num_slots
        self.slot_lo = slot_lo
        self.prev_score = np.full(n, np.nan)
        self.reward_acc = np.zeros(n)
        self.term = [False] * n
        self.trunc = [False] * n
        self.any_done = False
        self.ep_ret = np.zeros(n)
        self.ep_len = np.zeros(n, dtype=np.int64)
        self.metrics: dict[str, dict[int, float]] = {}
        self.final_obs: dict[int, Obs] = {}
        self.empty = [0] * n  # episodes ended in a row without a decision

    def game_over(self, s: int, obs: Obs, truncated: bool) -> None:
        """Slot ``s``'s game ended its episode with ``obs`` (``agent.game_over``)."""
        if type(obs) is not Obs:
            raise InvalidObservationError(f"game_over expects a gl.Obs, got {obs!r}")
        prev = float(self.prev_score[s])
        score = check_score(obs.score, f"slot {self.slot_lo + s}, game_over: ")
        if not math.isnan(prev):
            r = score - prev
            self.reward_acc[s] += r
            self.ep_ret[s] += r
            self.empty[s] = 0
        else:
            self.empty[s] += 1
            if self.empty[s] >= EMPTY_EPISODES:
                raise empty_episodes_error(f"slot {self.slot_lo + s}")
        self.prev_score[s] = math.nan
        if truncated:
            self.trunc[s] = True
            if obs.has_entities:
                self.final_obs[s] = obs
        else:
            self.term[s] = True
        self.any_done = True
        self.episode_end(s, obs.view_metrics)

    def game_returned(self, s: int) -> None:
        """Slot ``s``'s game function returned: close its open episode (if any) as truncated."""
        if not math.isnan(self.prev_score[s]):
            self.prev_score[s] = math.nan
            self.trunc[s] = True
            self.any_done = True
            self.episode_end(s, None)

    def episode_end(self, s: int, metrics: dict[str, float] | None) -> None:
        buf = self.metrics
        if metrics:
            for name, v in metrics.items():
                buf.setdefault(name, {})[s] = v
        buf.setdefault("episode_return", {})[s] = float(self.ep_ret[s])
        buf.setdefault("episode_length", {})[s] = int(self.ep_len[s])
        self.ep_ret[s] = 0.0
        self.ep_len[s] = 0

    def fold(self, idx: list[int], sc: np.ndarray) -> None:
        """Fold the scores ``sc`` (float64, checked) of slots ``idx`` into rewards, returns and lengths."""
        if len(idx) == self.n:
            prev = self.prev_score
            r = sc - prev
            np.nan_to_num(r, copy=False, nan=0.0)  # no previous score: no reward yet
            self.reward_acc += r
            self.ep_ret += r
            self.prev_score = sc
            self.ep_len += 1
        else:
            ii = np.array(idx, dtype=np.intp)
            r = sc - self.prev_score[ii]
            np.nan_to_num(r, copy=False, nan=0.0)
            self.reward_acc[ii] += r
            self.ep_ret[ii] += r
            self.prev_score[ii] = sc
            self.ep_len[ii] += 1

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(reward, terminated, truncated, metrics)`` since the last batch, as arrays; then clear them."""
        n = self.n
        with np.errstate(over="ignore"):  # an overflow is the error below, not a RuntimeWarning first
            reward = self.reward_acc.astype(np.float32)
        if not math.isfinite(reward.sum(dtype=np.float64)):  # (a float64 sum of float32 values cannot overflow)
            s = int(np.flatnonzero(~np.isfinite(reward))[0])
            raise InvalidObservationError(
                f"slot {self.slot_lo + s}: the reward (the change of the score) is not a finite float32 "
                f"({self.reward_acc[s]!r}); keep scores finite and their changes within +-3.4e38"
            )
        self.reward_acc = np.zeros(n)
        if self.any_done:
            terminated = np.array(self.term, dtype=bool)
            truncated = np.array(self.trunc, dtype=bool)
            self.term = [False] * n
            self.trunc = [False] * n
            self.any_done = False
        else:
            terminated = np.zeros(n, dtype=bool)
            truncated = np.zeros(n, dtype=bool)
        metrics: dict[str, np.ndarray] = {}
        if self.metrics:
            for name, d in self.metrics.items():
                v = np.full(n, np.nan)
                v[list(d.keys())] = list(d.values())
                metrics[name] = v
            self.metrics = {}
        return reward, terminated, truncated, metrics
