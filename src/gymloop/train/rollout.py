"""Rollout collection: the environment groups, the policy's actions in them, the steps recorded
(:class:`Rollout`) and their advantages (:func:`gae`).

A run steps its game copies as a list of environment groups (:func:`make_groups`), each a
:class:`~gymloop.VecEnv` with its own batch and reward scaler: one group, or with
``TrainConfig.overlap`` two halves, each stepping while the policy acts on the other's batch.
:func:`collect` keeps every group's step under way while it records another's, the same loop for one
group or two; GAE runs per group (each has its own time axis), then :func:`join` puts the groups'
rollouts one after the other for the update.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..batch import Batch, take
from ..nn.torch_policy import Policy, PolicyOutput
from ..runtime.backend import default_backend
from ..vector import VecEnv
from .config import PPOConfig, TrainConfig
from .guards import torch_errors
from .normalize import RewardScaler

if TYPE_CHECKING:
    from .league import League

__all__ = ["Group", "Players", "Rollout", "collect", "gae", "join", "make_groups", "overlap_seed"]


@dataclass(frozen=True)
class Rollout:
    """What :func:`collect` gathers from one environment group: ``T`` (``cfg.rollout_steps``) steps of
    the learner's slots (:func:`join` puts the groups' one after the other: ``T`` is then their sum).

    ``S`` is the number of learner slots: every slot of the group's :class:`~gymloop.VecEnv`, or with
    frozen opponents only the learning agent's (:attr:`Players.learner_slots`). Per-step arrays are
    indexed ``[t, s]``; ``t`` is the step, ``s`` the learner slot.
    """

    observations: list[Batch]
    """Per step, the learner's ``S`` slots' observations the actions were chosen at (``T`` batches)."""
    actions: list[dict[str, np.ndarray]]
    """Per step, per action type, the learner's actions: int64 ``(actors of that type at that step,)``,
    in the order of that step's ``observations[t].actor_slot[type]`` (a choice index for a
    categorical action, a candidate index for a select-entity one)."""
    logprobs: list[dict[str, np.ndarray]]
    """Per step, per action type, the log-probability of each action in ``actions`` under the
    policy that chose it: float32, the same shapes as ``actions``."""
    values: np.ndarray
    """The value estimate of each step's observation: float32 ``(T, S)``."""
    rewards: np.ndarray
    """The reward each slot received after its step's action: float32 ``(T, S)``."""
    terminated: np.ndarray
    """Whether the slot's episode terminated after the step (no bootstrap): bool ``(T, S)``."""
    truncated: np.ndarray
    """Whether the slot's episode was truncated after the step (bootstrapped): bool ``(T, S)``."""
    last_values: np.ndarray
    """The value estimate of the observation after the rollout's last step (the bootstrap of the
    last step's unfinished episodes): float32 ``(S,)``."""
    episode_metrics: dict[str, list[float]]
    """Per metric name (``episode_return``, ``episode_length``, the game's own), its value at every
    learner episode that ended during the rollout, in order of ending."""
    final_values: np.ndarray | None = None
    """The value of each truncated episode's final observation (the one the game gave to
    ``game_over``): float32 ``(T, S)``, NaN where the step truncated no episode or the game gave
    none. ``None`` means NaN everywhere: truncations bootstrap from their last decision's value."""
    advantages: np.ndarray | None = None
    """The GAE advantage of each step (:func:`gae`): float32 ``(T, S)``; ``None`` until computed."""
    returns: np.ndarray | None = None
    """``advantages + values``, the value head's target: float32 ``(T, S)``; ``None`` until computed."""


@dataclass
class Group:
    """One environment group: its :class:`~gymloop.VecEnv`, the batch its next step acts on, and its
    reward scaler (``None`` without ``ppo.scale_rewards``)."""

    env: VecEnv
    batch: Batch
    reward_scaler: RewardScaler | None = None


def overlap_seed(seed: int) -> int:
    """The root seed of the second half of the game copies with ``TrainConfig.overlap`` (the first half's
    is ``seed``): derived from ``seed`` alone, so the same seed gives the same run."""
    return int(np.random.SeedSequence(entropy=seed, spawn_key=(0x6F766C,)).generate_state(1, np.uint64)[0]) >> 1


def make_groups(game: Callable[..., Any], cfg: TrainConfig, num_envs: int) -> list[Group]:
    """The environment groups of a run of ``num_envs`` game copies, reset: one, or with ``cfg.overlap``
    two halves (the second seeded by :func:`overlap_seed`), each with half the workers and the backend
    the whole run would get. A failure to start closes the groups' games made before it."""
    halves = [(cfg.seed, cfg.workers)]
    n, backend = num_envs, cfg.backend
    if cfg.overlap:
        halves = [(cfg.seed, cfg.workers // 2), (overlap_seed(cfg.seed), cfg.workers // 2)]
        n, backend = num_envs // 2, cfg.backend or default_backend(cfg.workers)
    options = {**cfg.backend_options, **({"address": cfg.address} if cfg.address is not None else {})} or None
    envs: list[VecEnv] = []
    try:
        for seed, workers in halves:
            envs.append(VecEnv(game, num_envs=n, workers=workers, seed=seed, agents_per_game=cfg.agents_per_game,
                               step_timeout=cfg.step_timeout, on_game_error=cfg.on_game_error,
                               restart_workers=cfg.on_game_error == "restart", backend=backend, backend_options=options))
        return [Group(env, env.reset()) for env in envs]
    except BaseException:
        for env in envs:
            env.close()
        raise


class Players:
    """Who acts in the games: the learning policy in the learner's slots, and with frozen opponents
    (``TrainConfig.opponents``: agent 0 of each game learns) one of them in the others.

    Every forward pass samples with the run's generator ``gen`` (on the policy's device), in the order of the calls;
    the actions, log-probabilities and values come back to the host as numpy arrays.
    """

    def __init__(self, policy: Policy, opponents: list[Policy], learner: np.ndarray, gen: torch.Generator,
                 league: League | None = None) -> None:
        self.policy, self.opponents, self.gen = policy, opponents, gen
        self.league = league  # with a league, it names each update's opponent and hears how the games end
        self.learner = learner  # whether each slot of a group's VecEnv is the learner's: bool (slots,)
        self.learner_slots = np.flatnonzero(learner)
        #: the learner's slots as an index of a VecEnv's per-slot arrays (every slot: a plain slice)
        self.index: np.ndarray | slice = self.learner_slots if opponents or league else slice(None)

    @torch_errors("choosing actions")
    def act(self, b: Batch, update: int) -> tuple[dict[str, np.ndarray], Batch, PolicyOutput]:
        """Actions for every actor of ``b`` (opponent ``update % len(opponents)`` plays the others);
        the learner's sub-batch and the policy's outputs for it."""
        if not self.opponents and self.league is None:
            packed = self.policy.pack(b)
            with torch.inference_mode():
                out = self.policy(packed, generator=self.gen)
            return {k: v.cpu().numpy() for k, v in out.actions.items()}, b, out
        learner_obs, learner_sel = take(b, self.learner_slots)
        opp_obs, opp_sel = take(b, np.flatnonzero(~self.learner))
        opp = self.league.opponent(update) if self.league is not None else self.opponents[update % len(self.opponents)]
        with torch.inference_mode():
            out = self.policy(self.policy.pack(learner_obs), generator=self.gen)
            opp_out = opp(opp.pack(opp_obs), generator=self.gen)
        actions = {}
        for k in b.actor_slot:
            a = np.zeros(b.actor_slot[k].shape[0], dtype=np.int64)
            a[learner_sel[k]] = out.actions[k].cpu().numpy()
            a[opp_sel[k]] = opp_out.actions[k].cpu().numpy()
            actions[k] = a
        return actions, learner_obs, out

    @torch_errors("computing values")
    def values(self, b: Batch) -> np.ndarray:
        """The value of each learner slot's observation in ``b``."""
        sub = b if not self.opponents and self.league is None else take(b, self.learner_slots)[0]
        with torch.inference_mode():
            return self.policy(self.policy.pack(sub), generator=self.gen).value.cpu().numpy()

    @torch_errors("computing values")
    def final_values(self, b: Batch) -> np.ndarray:
        """Value of each truncated episode's final observation (NaN where the game gave none)."""
        values = np.full(self.learner_slots.size, np.nan, dtype=np.float32)
        final = b.final
        if final is None:
            return values
        if self.opponents or self.league is not None:
            final, _ = take(final, self.learner_slots)
            truncated = b.truncated[self.learner_slots]
        else:
            truncated = b.truncated
        slots = np.flatnonzero(final.active & truncated)
        if slots.size:
            sub, _ = take(final, slots)
            with torch.inference_mode():
                values[slots] = self.policy(self.policy.pack(sub), generator=self.gen).value.cpu().numpy()
        return values


class _Recorder:
    """The per-step lists of one group's :class:`Rollout` while it is being collected.

    :meth:`acted` records the learner's side of a step's actions (what :meth:`Players.act` gave) and
    returns every actor's actions for the VecEnv; :meth:`stepped` records the batch that came back.
    """

    def __init__(self, learner: np.ndarray | slice, reward_scaler: RewardScaler | None) -> None:
        self.learner = learner
        self.reward_scaler = reward_scaler
        self.observations: list[Batch] = []
        self.actions: list[dict[str, np.ndarray]] = []
        self.logprobs: list[dict[str, np.ndarray]] = []
        self.values: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.terminated: list[np.ndarray] = []
        self.truncated: list[np.ndarray] = []
        self.final_values: list[np.ndarray] = []
        self.episode_metrics: dict[str, list[float]] = {}

    def acted(self, acted: tuple[dict[str, np.ndarray], Batch, PolicyOutput]) -> dict[str, np.ndarray]:
        all_actions, learner_obs, out = acted
        self.observations.append(learner_obs)
        self.actions.append({k: out.actions[k].cpu().numpy() for k in out.actions})
        self.logprobs.append({k: out.logprob[k].cpu().numpy() for k in out.logprob})
        self.values.append(out.value.cpu().numpy())
        return all_actions

    def stepped(self, b: Batch, final_values: Callable[[Batch], np.ndarray]) -> None:
        learner = self.learner
        self.rewards.append(b.reward[learner])
        self.terminated.append(b.terminated[learner])
        self.truncated.append(b.truncated[learner])
        if self.reward_scaler is not None:
            self.reward_scaler.update(self.rewards[-1], self.terminated[-1] | self.truncated[-1])
        self.final_values.append(final_values(b))
        for name, arr in b.metrics.items():
            ended = arr[learner]
            ended = ended[~np.isnan(ended)]
            if ended.size:
                self.episode_metrics.setdefault(name, []).extend(ended.tolist())

    def rollout(self, last_values: np.ndarray) -> Rollout:
        return Rollout(
            observations=self.observations,
            actions=self.actions,
            logprobs=self.logprobs,
            values=np.stack(self.values),
            rewards=np.stack(self.rewards).astype(np.float32),
            terminated=np.stack(self.terminated),
            truncated=np.stack(self.truncated),
            last_values=last_values,
            episode_metrics=self.episode_metrics,
            final_values=np.stack(self.final_values),
        )


def collect(groups: Sequence[Group], steps: int, players: Players, update: int) -> list[Rollout]:
    """Step every group ``steps`` times from its batch; each group's rollout (without advantages).

    Every group's step is under way while the policy acts on another's batch: first each group's
    first step is sent, then, group after group, its step is awaited, recorded and its next one sent
    (after the last, its last values are computed). With one group this is act, step, record; with
    two, A's games step while the policy acts on B's batch, and B's while it acts on A's.
    """
    recorders = [_Recorder(players.index, g.reward_scaler) for g in groups]
    last_values: list[np.ndarray] = []
    for g, rec in zip(groups, recorders):
        g.env.step_async(rec.acted(players.act(g.batch, update)))
    for t in range(steps):
        for g, rec in zip(groups, recorders):
            g.batch = g.env.step_wait()
            rec.stepped(g.batch, players.final_values)
            if players.league is not None:
                players.league.observe(g.batch)
            if t + 1 < steps:
                g.env.step_async(rec.acted(players.act(g.batch, update)))
            else:
                last_values.append(players.values(g.batch))
    return [rec.rollout(last) for rec, last in zip(recorders, last_values)]


def gae(r: Rollout, p: PPOConfig, scaler: RewardScaler | None = None) -> Rollout:
    """``r`` with its advantages (GAE) and returns (``advantages + values``): float32 ``(T, S)`` each.

    ``scaler``: the reward scaler of ``r``'s group (it scales the rewards), if any. Truncations
    bootstrap with the value of the episode's final observation when the game gave one to
    ``game_over``, else with the value of its last decision's observation; terminations do not."""
    values = r.values
    T, S = values.shape
    rewards = r.rewards if scaler is None else scaler(r.rewards)
    advantages = np.zeros((T, S), dtype=np.float32)
    running = np.zeros(S, dtype=np.float32)  # the advantage of step t + 1, discounted along its episode
    no_final = np.full(S, np.nan, dtype=np.float32)
    for t in reversed(range(T)):
        next_value = r.last_values if t == T - 1 else values[t + 1]
        final = r.final_values[t] if r.final_values is not None else no_final
        truncated_value = np.where(np.isnan(final), values[t], final)
        bootstrap = np.where(r.terminated[t], 0.0, np.where(r.truncated[t], truncated_value, next_value))
        done = r.terminated[t] | r.truncated[t]
        delta = rewards[t] + p.gamma * bootstrap - values[t]
        running = delta + p.gamma * p.gae_lambda * (~done) * running
        advantages[t] = running
    return replace(r, advantages=advantages, returns=advantages + values)


def join(rollouts: Sequence[Rollout]) -> Rollout:
    """The groups' rollouts (``T`` steps of ``S`` slots each, advantages computed) one after the other
    along the time axis: ``len(rollouts) * T`` steps of ``S`` slots, as the update takes them (it needs
    no temporal structure after GAE). ``last_values`` is the groups' concatenated."""
    metrics: dict[str, list[float]] = {}
    for r in rollouts:
        for name, vals in r.episode_metrics.items():
            metrics.setdefault(name, []).extend(vals)

    def cat(name: str) -> Any:
        parts = [getattr(r, name) for r in rollouts]
        return None if any(x is None for x in parts) else np.concatenate(parts)

    return Rollout(
        observations=[o for r in rollouts for o in r.observations],
        actions=[a for r in rollouts for a in r.actions],
        logprobs=[lp for r in rollouts for lp in r.logprobs],
        values=cat("values"), rewards=cat("rewards"), terminated=cat("terminated"), truncated=cat("truncated"),
        last_values=cat("last_values"), episode_metrics=metrics, final_values=cat("final_values"),
        advantages=cat("advantages"), returns=cat("returns"),
    )
