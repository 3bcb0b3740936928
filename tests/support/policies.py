"""Helpers for the inference tests: random torch policies written as checkpoints, synthetic
batches, and :func:`count_calls`.

Torch's default initialization (std 0.02 weights) gives near-uniform outputs that would make any
parity test easy; these policies get weights of a realistic scale and normalization statistics from
random features, so that logits, probabilities and values differ visibly between inputs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from gymloop.batch import Batch
from gymloop.checkpoint import write_agent
from gymloop.nn.config import NetConfig
from gymloop.spaces import ActionDesc, ObsSpace

# torch is imported inside the functions that need it: pytest imports every module of tests/ for its
# doctests, also where torch is not installed.


def random_policy(obs: ObsSpace, acts: dict[str, ActionDesc], cfg: NetConfig, seed: int = 0, scale: float = 0.25) -> Any:
    """A torch policy with weights of a realistic scale and norm statistics from random features."""
    import torch

    from gymloop.nn.torch_policy import Policy

    torch.manual_seed(seed)
    pol = Policy(obs, acts, cfg)
    with torch.no_grad():
        for name, p in pol.named_parameters():
            if p.ndim == 2 and not name.startswith("featureless"):  # linear layers, relpos tables
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
            elif name.endswith(".weight") and p.ndim == 1:  # LayerNorm gains
                p.copy_(1.0 + scale * torch.randn_like(p))
            else:  # biases, the value query, featureless embeddings
                p.normal_(0.0, scale)
        for lin in pol.heads.values():  # logits of a few units, as after training
            lin.weight.mul_(3.0)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        pol.update_norms(pol.pack(synthetic_batch(rng, obs, acts, 8)))
    return pol


def write_policy(path: str | os.PathLike, pol: Any) -> None:
    """Write a torch policy as an agent checkpoint."""
    from gymloop.nn.torch_policy import policy_info, policy_tensors

    write_agent(path, policy_tensors(pol), policy_info(pol, step=0))


def synthetic_batch(
    rng: np.random.Generator,
    obs: ObsSpace,
    acts: dict[str, ActionDesc],
    S: int,
    counts: dict[str, list[int]] | None = None,
    actors: dict[str, list[list[int]]] | None = None,
) -> Batch:
    """A :class:`Batch` of ``S`` slots with random features and masks.

    ``counts[type][slot]`` and ``actors[action][slot]`` (entity indices of the slot's actors) are
    drawn from ``rng`` when not given. Features named ``x``/``y`` are integers in ``[-13, 13]``
    (beyond the default relpos extent, to exercise the clamp), others N(0, 3).
    """
    names = list(obs.entities)
    if counts is None:
        counts = {n: list(rng.integers(0, 4, S)) for n in names}
    cnt = {n: np.asarray(counts[n], dtype=np.int64) for n in names}
    ents = {}
    for n in names:
        feats = obs.entities[n]
        tot = int(cnt[n].sum())
        a = (rng.normal(size=(tot, len(feats))) * 3).astype(np.float32)
        for j, f in enumerate(feats):
            if f in ("x", "y"):
                a[:, j] = rng.integers(-13, 14, tot)
        ents[n] = a
    total = sum(cnt[n] for n in names) if names else np.zeros(S, np.int64)
    actor_slot, actor_index, masks, ncand, ctypes = {}, {}, {}, {}, {}
    for an, a in acts.items():
        sl: list[int] = []
        ix: list[int] = []
        for s in range(S):
            if not a.kind.actor_bound:  # a global decision: asked by some slots, no actor entity (index -1)
                chosen = [-1] if (actors[an][s] if actors is not None else rng.random() < 0.7) else []
            elif actors is not None:
                chosen = [i for i in actors[an][s] if i < total[s]]
            else:
                k = int(rng.integers(0, 4))
                chosen = sorted(rng.choice(int(total[s]), size=min(k, int(total[s])), replace=False).tolist()) if total[s] else []
            if a.kind.selects_entities and sum(int(cnt[t][s]) for t in a.among) == 0:
                chosen = []
            sl += [s] * len(chosen)
            ix += chosen
        actor_slot[an] = np.array(sl, dtype=np.int64)
        actor_index[an] = np.array(ix, dtype=np.int64)
        if not a.kind.selects_entities:
            m = rng.random((len(sl), a.n)) < 0.6
            m[np.arange(len(sl)), rng.integers(0, a.n, len(sl))] = True
            masks[an] = m
        else:
            ctypes[an] = tuple(a.among)
            nc = np.array([sum(int(cnt[t][s]) for t in a.among) for s in sl], dtype=np.int64)
            ncand[an] = nc
            m = rng.random(int(nc.sum())) < 0.6
            starts = np.cumsum(nc) - nc
            m[starts + (rng.random(len(sl)) * nc).astype(np.int64)] = True
            masks[an] = m
    z = np.zeros(S, np.float32)
    zb = np.zeros(S, bool)
    return Batch(
        num_slots=S, entities=ents, counts=cnt, globals=(rng.normal(size=(S, len(obs.globals))) * 2).astype(np.float32),
        actor_slot=actor_slot, actor_index=actor_index, masks=masks, num_candidates=ncand, reward=z,
        terminated=zb, truncated=zb.copy(), active=~zb, candidate_types=ctypes,
    )


def game_policy(game: Any, cfg: NetConfig | None = None, seed: int = 0, num_envs: int = 4, scale: float = 0.25) -> Any:
    """A random policy for a game's spaces, normalization statistics gathered from random play."""
    import gymloop as gl

    with gl.VecEnv(game, num_envs=num_envs, seed=seed) as env:
        b = env.reset()
        pol = random_policy(env.obs_space, env.action_space, cfg or NetConfig(), seed=seed, scale=scale)
        for n in pol.norms.values():  # forget the synthetic statistics; use the game's
            n.count.zero_()
        for _ in range(6):
            pol.update_norms(pol.pack(b))
            b = env.step(env.sample_actions())
    return pol


@contextmanager
def count_calls(obj: Any, name: str) -> Iterator[list]:
    """Within the block, ``obj.name`` (a method) appends to the list given here at each call, then
    calls through; afterwards the instance attribute is deleted again (the class's method shows)."""
    calls: list = []
    orig = getattr(obj, name)

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return orig(*args, **kw)

    setattr(obj, name, spy)
    try:
        yield calls
    finally:
        delattr(obj, name)
