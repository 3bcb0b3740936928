"""The PPO update: epochs of minibatches over a rollout, each a clipped policy loss, a value loss and
an entropy bonus, as CleanRL writes them (:func:`ppo_loss`), over ragged entity batches.

A rollout's ``T`` steps of ``S`` slots are one batch of ``T * S`` slots (:class:`Samples`). A
:class:`Minibatch` holds its slots as a few chunks of similar entity counts (little padding) and
every tensor the loss needs aligned with what the policy gives for them (:func:`evaluate`): per
actor (each actor of each action type, chunk after chunk) its old log-probability and its slot's
advantage; per slot its old value and return.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ..batch import Batch, stack, take
from ..errors import TrainingError
from ..nn.torch_policy import Policy, host_to
from .config import PPOConfig
from .guards import Diverged, all_finite
from .normalize import AdvantageNormalizer
from .optim import Adam
from .rollout import Rollout

__all__ = ["Evaluation", "Losses", "Minibatch", "Samples", "evaluate", "ppo_loss", "ppo_update"]


def _cat_host(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)`` as float32; one part as it is (no copy); no part: an empty array."""
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(parts[0] if len(parts) == 1 else np.concatenate(parts), dtype=np.float32)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(parts)``; one part as it is (the usual minibatch: one chunk, one action type), without the copy and
    the op in the graph a cat of one adds; no part: an empty tensor."""
    if not parts:
        return torch.zeros(0)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


@dataclass(frozen=True)
class Minibatch:
    """A minibatch of slots, forwarded in ``chunks``, with its per-actor and per-slot tensors.

    The actors are in the order of the policy's outputs for the chunks (:func:`evaluate`): chunk
    after chunk, within one action type after action type (those with actors in the chunk), within
    one in batch order. The slots are chunk after chunk.
    """

    chunks: list[tuple[Batch, dict[str, np.ndarray]]]
    """Sub-batches of slots of similar entity counts, each with its actors' actions (per action type)."""
    old_logprob: torch.Tensor
    """Per actor, the log-probability of its action under the policy that chose it: float32 ``(A,)``."""
    advantages: torch.Tensor
    """Per actor, its slot's advantage (normalized as ``ppo.adv_norm`` says): float32 ``(A,)``."""
    old_values: torch.Tensor
    """Per slot, the value estimate when the action was chosen: float32 ``(N,)``."""
    returns: torch.Tensor
    """Per slot, the value head's target: float32 ``(N,)``."""


class Evaluation(NamedTuple):
    """The policy's outputs for a :class:`Minibatch`'s actions, aligned with it."""

    logprob: torch.Tensor  # per actor
    entropy: torch.Tensor  # per actor
    value: torch.Tensor  # per slot


class Losses(NamedTuple):
    """One minibatch's losses: ``total`` is what the gradient step minimizes."""

    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor
    approx_kl: float | None  # (None: the minibatch has no actor)
    clipfrac: float | None


class Samples:
    """A rollout's ``T`` steps of ``S`` slots as one batch of ``T * S`` slots, step-major (slot ``t * S + s``),
    with its actions, log-probabilities, advantages, returns and old values flattened alike (on the host; a
    minibatch's tensors on ``device``, the policy's)."""

    def __init__(self, r: Rollout, device: torch.device | None = None) -> None:
        if r.advantages is None or r.returns is None:
            raise TrainingError("Samples: the rollout has no advantages; compute them with gymloop.train.rollout.gae first")
        self.obs = stack(r.observations)
        self.names = list(self.obs.actor_slot)
        self.actions = {k: np.concatenate([step[k] for step in r.actions]) for k in self.names}
        self.logprobs = {k: np.concatenate([step[k] for step in r.logprobs]) for k in self.names}
        self.advantages, self.returns, self.old_values = r.advantages.reshape(-1), r.returns.reshape(-1), r.values.reshape(-1)
        self.put = host_to(device or torch.device("cpu"))

    @property
    def num_slots(self) -> int:
        """``T * S``."""
        return self.obs.num_slots

    def minibatch(self, slots: np.ndarray, adv_norm: AdvantageNormalizer, chunk_size: int) -> Minibatch:
        """The minibatch of ``slots`` (sorted), in chunks of at most ``chunk_size`` slots."""
        mb, mb_sel = take(self.obs, slots)
        adv = adv_norm(self.advantages[slots])
        chunks, old_lp, actor_adv, old_values, returns = [], [], [], [], []
        for part, chunk, sel in _chunks(mb, chunk_size):
            per_type = {k: self.actions[k][mb_sel[k]] if sel is None else self.actions[k][mb_sel[k]][sel[k]] for k in self.names}
            chunks.append((chunk, per_type))
            for k in self.names:
                if chunk.actor_slot[k].shape[0] == 0:
                    continue
                lp = self.logprobs[k][mb_sel[k]]
                old_lp.append(lp if sel is None else lp[sel[k]])
                actor_adv.append(adv[part[chunk.actor_slot[k]]])
            old_values.append(self.old_values[slots[part]])
            returns.append(self.returns[slots[part]])
        put = self.put
        return Minibatch(chunks, put(_cat_host(old_lp)), put(_cat_host(actor_adv)), put(_cat_host(old_values)), put(_cat_host(returns)))

    def minibatches(self, rng: np.random.Generator, size: int, adv_norm: AdvantageNormalizer, chunk_size: int) -> Iterator[Minibatch]:
        """One epoch: the slots in a random order (``rng``), ``size`` at a time."""
        perm = rng.permutation(self.num_slots)
        for i in range(0, self.num_slots, size):
            yield self.minibatch(np.sort(perm[i : i + size]), adv_norm, chunk_size)


def _chunks(b: Batch, size: int) -> list[tuple[np.ndarray, Batch, dict[str, np.ndarray] | None]]:
    """``b``'s slots in chunks of at most ``size`` slots of similar entity counts (little padding):
    per chunk its slot positions in ``b``, its sub-batch and its actors' selection (``None``: all of ``b``)."""
    S = b.num_slots
    if S <= size:
        return [(np.arange(S), b, None)]
    entities = sum(b.counts.values())  # per slot
    order = np.argsort(entities, kind="stable")
    out: list[tuple[np.ndarray, Batch, dict[str, np.ndarray] | None]] = []
    for part in np.array_split(order, -(-S // size)):
        part = np.sort(part)
        out.append((part, *take(b, part)))
    return out


def evaluate(policy: Policy, mb: Minibatch) -> Evaluation:
    """The policy's log-probabilities and entropies of the minibatch's actions and its values, aligned with ``mb``."""
    logprob, entropy, value = [], [], []
    for chunk, actions in mb.chunks:
        out = policy(policy.pack(chunk), actions=actions)
        for k in actions:
            if chunk.actor_slot[k].shape[0]:
                logprob.append(out.logprob[k])
                entropy.append(out.entropy[k])
        value.append(out.value)
    return Evaluation(_cat(logprob), _cat(entropy), _cat(value))


def ppo_loss(new: Evaluation, mb: Minibatch, p: PPOConfig, ent_coef: float) -> Losses:
    """PPO's loss: the clipped surrogate (each actor's ratio weighted by its slot's advantage), the
    (clipped) value loss and the entropy bonus."""
    approx_kl = clipfrac = None
    if mb.advantages.numel():
        logratio = new.logprob - mb.old_logprob
        ratio = logratio.exp()
        pg_loss = torch.max(-mb.advantages * ratio, -mb.advantages * ratio.clamp(1 - p.clip_coef, 1 + p.clip_coef)).mean()
        entropy = new.entropy.mean()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean().item()
            clipfrac = ((ratio - 1).abs() > p.clip_coef).float().mean().item()
    else:
        pg_loss = entropy = new.value.new_zeros(())
    if p.clip_vloss:
        value_clipped = mb.old_values + (new.value - mb.old_values).clamp(-p.clip_coef, p.clip_coef)
        v_loss = 0.5 * torch.max((new.value - mb.returns) ** 2, (value_clipped - mb.returns) ** 2).mean()
    else:
        v_loss = 0.5 * ((new.value - mb.returns) ** 2).mean()
    return Losses(pg_loss - ent_coef * entropy + p.vf_coef * v_loss, pg_loss, v_loss, entropy, approx_kl, clipfrac)


def ppo_update(policy: Policy, optim: Adam, r: Rollout, p: PPOConfig, *, ent_coef: float, epochs: int, minibatch_size: int,
               rng: np.random.Generator, adv_norm: AdvantageNormalizer) -> dict[str, float]:
    """PPO epochs over a rollout (its advantages computed); the mean losses and the explained variance.

    Then the rollout's observations are folded into the policy's input normalization.

    Raises:
        Diverged: the loss, the gradients or the weights stopped being finite.
    """
    data = Samples(r, policy.device)
    adv_norm.observe(data.advantages)
    stats: dict[str, list[float]] = {"loss/policy": [], "loss/value": [], "loss/entropy": [], "loss/approx_kl": [], "loss/clipfrac": []}
    policy.train()
    for _ in range(epochs):
        for mb in data.minibatches(rng, minibatch_size, adv_norm, p.chunk_size):
            losses = ppo_loss(evaluate(policy, mb), mb, p, ent_coef)
            if not torch.isfinite(losses.total):
                raise Diverged(f"the loss became {losses.total.item()}")
            optim.zero_grad(set_to_none=True)
            losses.total.backward()
            grad_norm = optim.step(max_grad_norm=p.max_grad_norm)  # (clipped; no update when not finite)
            if grad_norm is not None and not torch.isfinite(grad_norm):
                raise Diverged(f"the gradients became non-finite (norm {grad_norm.item()})")
            stats["loss/policy"].append(losses.policy.item())
            stats["loss/value"].append(losses.value.item())
            stats["loss/entropy"].append(losses.entropy.item())
            if losses.approx_kl is not None and losses.clipfrac is not None:
                stats["loss/approx_kl"].append(losses.approx_kl)
                stats["loss/clipfrac"].append(losses.clipfrac)
    policy.eval()
    policy.update_norms(policy.pack(data.obs))  # this rollout's observations, for the next rollout
    if not all_finite(list(policy.state_dict().values())):
        raise Diverged("the weights or normalization statistics became non-finite")
    result = {k: float(np.mean(v)) for k, v in stats.items() if v}
    ret, old = data.returns, data.old_values
    var = np.var(ret)
    result["explained_variance"] = float("nan") if var == 0 else float(1 - np.var(ret - old) / var)
    return result
