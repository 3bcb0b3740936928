"""Warm-start a policy for a game that has grown since an older agent was trained.

Games change: a later version adds a feature to an entity type (``Food.age``), a global feature,
an entity type, an action label or an action type. :func:`warm_start` builds the policy for the
*current* game and copies every weight of the older checkpoint into it, matched by name:

* **New features** (entity or global): the first layer of each entity type's embedding grows by one
  input column per new feature; the column's weights start at **zero**, so the network computes
  exactly what the old one did (the old agent's behaviour is unchanged at step 0) and training
  learns how much to use the new input. The new columns' normalization statistics are seeded from
  a first batch of the current game, so they are right from the start.
* **New entity types** get fresh embeddings: they add tokens the old network never saw, so
  behaviour can change at step 0; the report says so.
* **New action labels** of a categorical action get zero weights and a bias far below the old
  labels' (so they are almost never chosen at step 0); **new action types** get fresh heads.
* Anything the old agent needs and the game lacks (a feature, a label, a position feature of the
  relative-position encoding, a select-entity candidate type) raises
  :class:`~gymloop.errors.CheckpointError` naming it.

The network's sizes come from the checkpoint (a warm start cannot change ``d_model`` or layers).

Example:
    >>> import os, tempfile
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import random_checkpoint
    >>> from gymloop.checkpoint import read_agent
    >>> path = os.path.join(tempfile.mkdtemp(), "old.safetensors")
    >>> random_checkpoint(path, snake, seed=0)
    >>> with gl.VecEnv(snake, num_envs=4) as env:
    ...     b0 = env.reset()
    ...     policy, report = warm_start(read_agent(path), env.obs_space, env.action_space, b0)
    >>> report.unchanged
    True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..checkpoint import AgentFile
from ..errors import CheckpointError
from ..nn.config import NetConfig
from ..nn.heads import POINTER, head_of
from ..nn.torch_policy import Policy, policy_from_file
from ..spaces import ActionDesc, ObsSpace

__all__ = ["WarmStartReport", "warm_start"]

log = logging.getLogger("gymloop.train")

_NEW_LABEL_BIAS_GAP = 20.0  # new labels start this far below the lowest old bias (probability ~2e-9 each)


@dataclass
class WarmStartReport:
    """What :func:`warm_start` grew.

    Attributes:
        new_features: per entity type, the input columns added (entity and global features).
        new_entity_types: entity types with fresh embeddings.
        new_labels: per categorical action type, the labels added.
        new_action_types: action types with fresh heads.
        dropped_entity_types: entity types of the checkpoint the game no longer has (their
            embeddings are not used).
    """

    new_features: dict[str, list[str]] = field(default_factory=dict)
    new_entity_types: list[str] = field(default_factory=list)
    new_labels: dict[str, list[str]] = field(default_factory=dict)
    new_action_types: list[str] = field(default_factory=list)
    dropped_entity_types: list[str] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        """True when the grown network computes exactly what the old one did (only new features,
        or nothing new at all)."""
        return not (self.new_entity_types or self.new_labels or self.new_action_types)

    def __str__(self) -> str:
        parts = []
        if self.new_features:
            parts.append("new features " + ", ".join(f"{t}: {fs}" for t, fs in self.new_features.items()) + " (zero-initialized)")
        if self.new_entity_types:
            parts.append(f"new entity types {self.new_entity_types} (fresh embeddings)")
        if self.new_labels:
            parts.append("new labels " + ", ".join(f"{a}: {ls}" for a, ls in self.new_labels.items()))
        if self.new_action_types:
            parts.append(f"new action types {self.new_action_types} (fresh heads)")
        if self.dropped_entity_types:
            parts.append(f"entity types no longer in the game: {self.dropped_entity_types}")
        return "; ".join(parts) if parts else "same spaces; every weight copied"


def warm_start(
    old: AgentFile,
    obs_space: ObsSpace,
    action_space: dict[str, ActionDesc],
    first_batch: Any = None,
    device: torch.device | str = "cpu",
) -> tuple[Policy, WarmStartReport]:
    """A policy for the current spaces holding the weights of an older checkpoint.

    Args:
        old: the older agent (``gymloop.checkpoint.read_agent(path)``).
        obs_space, action_space: the current game's spaces (``VecEnv.obs_space`` and
            ``.action_space``).
        first_batch: a :class:`~gymloop.batch.Batch` of the current game, used to seed the
            normalization statistics of new input columns (``None``: they start as identity).
        device: where the returned policy is (it is grown on the CPU, then moved there).

    Returns:
        ``(policy, report)``.

    Raises:
        CheckpointError: the checkpoint is unreadable, or the game lacks something it needs.
    """
    src = policy_from_file(old)
    where = old.path
    report = WarmStartReport()
    _check_removals(src, obs_space, action_space, where)
    cfg = NetConfig.from_dict(old.info["net"])
    cfg.relpos = src.relpos_cfg  # keep what the old network resolved ("auto" could resolve differently now)
    if cfg.relpos is not None:
        lacking = {t: [p for p in cfg.relpos.position_features if p not in f] for t, f in obs_space.entities.items()}
        lacking = {t: m for t, m in lacking.items() if m}
        if lacking:
            raise CheckpointError(
                f"{where}: the checkpoint uses relative positions {cfg.relpos.position_features}, which the game's "
                f"entity types {lacking} lack; give every entity type these features"
            )
    dst = Policy(obs_space, action_space, cfg)
    s_sd = src.state_dict()
    d_sd = dst.state_dict()
    old_g = list(src.obs_space.globals)
    new_g = list(obs_space.globals)
    first_feats = dst.pack(first_batch).feats if first_batch is not None else {}  # seeds new columns' statistics

    for name, feats in obs_space.entities.items():
        if name not in src.obs_space.entities:
            report.new_entity_types.append(name)
            continue
        old_cols = list(src.obs_space.entities[name]) + old_g
        new_cols = list(feats) + new_g
        if not new_cols:  # featureless in both (removals were refused)
            k = f"featureless.{name}"
            d_sd[k] = s_sd[k].clone()
            continue
        idx = [new_cols.index(c) for c in old_cols]
        added = [c for c in new_cols if c not in old_cols]
        if added:
            report.new_features[name] = added
        pre = f"embeds.{name}"
        w = torch.zeros_like(d_sd[f"{pre}.0.weight"])
        if old_cols:
            w[:, idx] = s_sd[f"{pre}.0.weight"]
            d_sd[f"{pre}.0.bias"] = s_sd[f"{pre}.0.bias"].clone()
            for k in (f"{pre}.2.weight", f"{pre}.2.bias"):
                d_sd[k] = s_sd[k].clone()
        else:  # was featureless: its learned vector cannot be reproduced by a layer on new inputs
            report.new_entity_types.append(name)
            continue
        d_sd[f"{pre}.0.weight"] = w
        nm = f"norms.{name}"
        count = float(s_sd[f"{nm}.count"])
        mean = torch.zeros_like(d_sd[f"{nm}.mean"])
        ss = torch.zeros_like(d_sd[f"{nm}.squares_sum"])
        mean[idx] = s_sd[f"{nm}.mean"]
        ss[idx] = s_sd[f"{nm}.squares_sum"]
        x = first_feats.get(name)
        if added and count > 1 and x is not None and x.shape[0] > 1:
            cols = [new_cols.index(c) for c in added]
            sub = torch.from_numpy(np.asarray(x)[:, cols].astype(np.float64))
            mean[cols] = sub.mean(0)
            ss[cols] = sub.var(0) * (count - 1)  # the same sd under the old sample count
        d_sd[f"{nm}.count"] = s_sd[f"{nm}.count"].clone()
        d_sd[f"{nm}.mean"] = mean
        d_sd[f"{nm}.squares_sum"] = ss
    report.dropped_entity_types = [n for n in src.obs_space.entities if n not in obs_space.entities]

    for name, a in action_space.items():
        if name not in src.action_space:
            report.new_action_types.append(name)
            continue
        if src.action_space[name].kind != a.kind:  # pragma: no cover - _check_removals refused it
            raise CheckpointError(f"{where}: action type {name!r} changed kind")
        if head_of(a) != POINTER:  # a linear head over labels (per actor, or on the observation summary)
            old_labels = list(src.action_space[name].labels)
            idx = [list(a.labels).index(lab) for lab in old_labels]
            added = [lab for lab in a.labels if lab not in old_labels]
            w = torch.zeros_like(d_sd[f"heads.{name}.weight"])
            w[idx] = s_sd[f"heads.{name}.weight"]
            ob = s_sd[f"heads.{name}.bias"]
            b = torch.full_like(d_sd[f"heads.{name}.bias"], float(ob.min()) - _NEW_LABEL_BIAS_GAP)
            b[idx] = ob
            d_sd[f"heads.{name}.weight"] = w
            d_sd[f"heads.{name}.bias"] = b
            if added:
                report.new_labels[name] = added
        else:
            for k in (f"qproj.{name}.weight", f"qproj.{name}.bias", f"kproj.{name}.weight", f"kproj.{name}.bias"):
                d_sd[k] = s_sd[k].clone()

    for k, v in d_sd.items():  # everything else (blocks, readout, relpos, value head) has the same shape
        if k.startswith(("embeds.", "norms.", "featureless.", "heads.", "qproj.", "kproj.")):  # handled above
            continue
        sv = s_sd.get(k)
        if sv is None or tuple(sv.shape) != tuple(v.shape):
            raise CheckpointError(f"{where}: tensor {k!r} cannot be carried over (checkpoint shape "
                                  f"{None if sv is None else tuple(sv.shape)}, new network {tuple(v.shape)})")
        d_sd[k] = sv.clone()
    dst.load_state_dict(d_sd)
    dst.to(device)
    if not report.unchanged:
        log.warning("warm start from %s: %s; behaviour changes at step 0", where, report)
    else:
        log.info("warm start from %s: %s", where, report)
    return dst, report


def _check_removals(src: Policy, obs_space: ObsSpace, action_space: dict[str, ActionDesc], where: str) -> None:
    """Refuse when the game lost something the old agent needs, naming all of it."""
    problems = []
    lost_g = [g for g in src.obs_space.globals if g not in obs_space.globals]
    if lost_g:
        problems.append(f"global features {lost_g}")
    for name, feats in src.obs_space.entities.items():
        now = obs_space.entities.get(name)
        if now is None:
            continue
        lost = [f for f in feats if f not in now]
        if lost:
            problems.append(f"entity type {name!r} features {lost}")
    for name, a in src.action_space.items():
        now_a = action_space.get(name)
        if now_a is None:
            problems.append(f"action type {name!r}")
            continue
        if now_a.kind != a.kind:
            problems.append(f"action type {name!r} as {a.kind} (the game now has it as {now_a.kind})")
        elif not a.kind.selects_entities:
            lost = [lab for lab in a.labels if lab not in now_a.labels]
            if lost:
                problems.append(f"action type {name!r} labels {lost}")
        else:
            lost = [t for t in a.among if t not in now_a.among]
            if lost:
                problems.append(f"select-entity action {name!r} candidates of types {lost}")
    if problems:
        raise CheckpointError(
            f"{where}: cannot warm-start: the game no longer has " + "; ".join(problems)
            + " that the checkpoint was trained with; restore them in the game or train from scratch"
        )
