"""rogue-net's inference side, entity-gym style: observations in entity-gym's batched layout
(:class:`EnnObservation`) packed into the network's inputs and run as one batch (:func:`forward`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..actions import CATEGORICAL, SELECT_ENTITY
from ..errors import InvalidObservationError
from ..nn.inputs import ObsInputs, Packed, pack_observations
from ..nn.numpy_policy import NumpyPolicy
from .reader import _F32, GLOBAL_ENTITY, _show

__all__ = ["EnnObservation", "EnnOutput", "forward", "pack"]


@dataclass
class EnnObservation:
    """One observation laid out as entity-gym's ``batch_obs`` gives it to rogue-net.

    Entities are indexed through all types in the checkpoint's observation-space order (rows in
    order); the ``__global__`` token, when the network has one, comes last. entity-gym's
    ``visible`` masks are not supported: leave entities the policy must not see out.

    Attributes:
        entities: per entity type, ``(n, n_features)`` raw features (columns in the checkpoint's
            feature order); a missing type has no entities.
        global_features: the global features, in the checkpoint's order.
        actors: per action, the entity indices of its actors (missing: no actors).
        actees: per select-entity action, the entity indices of the selectable entities.
        masks: per categorical action, ``(n_actors, n_choices)`` bool or ``None`` (all allowed).

    Example:
        >>> o = EnnObservation({"Input": [[1.0], [0.0]]}, global_features=[1.0], actors={"output": [2]})
        >>> len(o.entities["Input"]), o.actors["output"]  # the __global__ token is entity 2
        (2, [2])
    """

    entities: Mapping[str, Any]
    global_features: Sequence[float] = ()
    actors: Mapping[str, Sequence[int]] = field(default_factory=dict)
    actees: Mapping[str, Sequence[int]] = field(default_factory=dict)
    masks: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class EnnOutput:
    """rogue-net's outputs for one observation.

    Attributes:
        logprobs: per action, ``(n_actors, n_choices)`` log-probabilities (select-entity:
            ``(n_actors, n_actees)`` in ``actees`` order); masked choices ``-inf``.
        value: the value head's output.
    """

    logprobs: dict[str, np.ndarray]
    value: float


def _obs_floats(x: Any, what: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=_F32)
    except (TypeError, ValueError) as e:
        raise InvalidObservationError(f"{what} must be numbers in a rectangular array, got {_show(x, 60)} ({e})") from None
    if not np.isfinite(a).all():
        raise InvalidObservationError(f"{what} must be finite, got {_show(a[~np.isfinite(a)][:3].tolist(), 60)}")
    return a


def _obs_indices(x: Any, n: int, what: str) -> np.ndarray:
    """Entity indices ``x`` of an observation with ``n`` entities, as an int64 array."""
    try:
        a = np.asarray(x if x is not None else ())
    except (TypeError, ValueError):
        a = np.asarray([None])  # refused below, with the value shown
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise InvalidObservationError(f"{what} must be a list of entity indices (integers), got {_show(x, 60)}")
    bad = a[(a < 0) | (a >= n)]
    if bad.size:
        raise InvalidObservationError(
            f"{what} out of range: {int(bad[0])}; the observation has {n} entities (indices 0 to {n - 1}, all types in "
            "the checkpoint's order, the global token last)"
        )
    return a.astype(np.int64)


def pack(policy: NumpyPolicy, observations: Sequence[EnnObservation]) -> Packed:
    """The network inputs of entity-gym style observations (slot ``s`` = observation ``s``).

    Usable with :meth:`NumpyPolicy.forward` and, for a converted checkpoint, the torch policy.

    Args:
        policy: the policy of an imported (or converted) checkpoint.
        observations: one :class:`EnnObservation` per batch slot.

    Raises:
        InvalidObservationError: features of the wrong shape or not finite, unknown entity types or
            actions, indices out of range, masks of the wrong shape or allowing no choice.
    """
    names = policy.entity_names
    ng = len(policy.global_features)
    acts = policy.action_space
    inputs: list[ObsInputs] = []
    for s, o in enumerate(observations):
        unknown = [k for k in o.entities if k not in policy.entity_features or k == GLOBAL_ENTITY]
        if unknown:
            raise InvalidObservationError(f"observation {s}: unknown entity types {unknown}; the network has {names}")
        for what, given, kinds, desc in (
            ("actors", o.actors, (CATEGORICAL, SELECT_ENTITY), "actions"),
            ("actees", o.actees, (SELECT_ENTITY,), "select-entity actions"),
            ("masks", {k: v for k, v in o.masks.items() if v is not None}, (CATEGORICAL,), "categorical actions"),
        ):
            unknown = [k for k in given if k not in acts or acts[k].kind not in kinds]
            if unknown:
                have = [k for k, v in acts.items() if v.kind in kinds]
                raise InvalidObservationError(f"observation {s}: {what} given for {unknown}, which are not among the network's {desc} {have}")
        g = _obs_floats(o.global_features, f"observation {s}: global features").reshape(-1)
        if g.shape != (ng,):
            raise InvalidObservationError(f"observation {s}: {g.size} global features, the network has {ng} {list(policy.global_features)}")
        parts: list[tuple[int, Any]] = []
        for t, n in enumerate(names):
            nf = len(policy.entity_features[n])
            if n == GLOBAL_ENTITY:
                parts.append((t, np.zeros((1, 0), dtype=_F32)))
                continue
            x = o.entities.get(n)
            a = np.zeros((0, nf), dtype=_F32) if x is None else _obs_floats(x, f"observation {s}: features of entity type {n!r}")
            if a.shape == (0,):  # [] : no entity of this type
                a = np.zeros((0, nf), dtype=_F32)
            if a.ndim != 2 or a.shape[1] != nf:
                raise InvalidObservationError(f"observation {s}: entity type {n!r} needs (n, {nf}) features, got shape {a.shape}")
            parts.append((t, a))
        inputs.append((parts, g, {}))
    asked: list[dict[str, Any]] = [{} for _ in inputs]
    for name, ad in acts.items():  # (action after action, as the errors name them)
        for s, o in enumerate(observations):
            asked[s][name] = _request(o, s, name, ad, sum(x.shape[0] for _, x in inputs[s][0]))
    inputs = [(parts, g, a) for (parts, g, _), a in zip(inputs, asked)]
    widths = [len(policy.entity_features[n]) for n in names]
    return pack_observations(inputs, names, widths, ng, acts, policy.position_idx)


def _request(o: EnnObservation, s: int, name: str, ad: Any, total: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Observation ``s``'s actors, mask and actees of action ``name`` (``total`` entities), checked."""
    act = _obs_indices(o.actors.get(name), total, f"observation {s}: actor index for action {name!r}")
    if ad.kind.selects_entities:
        ae = _obs_indices(o.actees.get(name), total, f"observation {s}: actee index for action {name!r}")
        if act.size and ae.size == 0:
            raise InvalidObservationError(f"observation {s}: select-entity action {name!r} has actors but no actees")
        return act, None, ae
    m = o.masks.get(name)
    if m is None:
        return act, None, None
    k = len(ad.labels)
    m = np.asarray(m, dtype=bool)
    if m.size != act.size * k:
        raise InvalidObservationError(
            f"observation {s}: the mask of action {name!r} has shape {m.shape}; expected ({act.size}, {k}): "
            "one row per actor, one column per choice"
        )
    m = m.reshape(act.size, k)
    if not m.any(axis=1).all():
        raise InvalidObservationError(
            f"observation {s}: the mask of action {name!r} allows no choice to actor "
            f"{int(act[~m.any(axis=1)][0])}; give it at least one, or leave it out of the actors"
        )
    return act, m, None


def forward(policy: NumpyPolicy, observations: Sequence[EnnObservation]) -> list[EnnOutput]:
    """rogue-net's outputs for entity-gym style observations (one ragged batch, one forward pass).

    What ``RogueNet.get_action_and_auxiliary`` computes in ``eval()`` mode: per action the
    normalised log-probabilities, and the value head.

    Args:
        policy: the policy of an imported (or converted) checkpoint (:func:`load_policy`).
        observations: the observations, run as one batch.

    Returns:
        One :class:`EnnOutput` per observation, in order.

    Raises:
        InvalidObservationError: as :func:`pack` says.

    Example:
        >>> policy = load_policy("xor/checkpoint")  # doctest: +SKIP
        >>> obs = EnnObservation({"Input": [[1.0], [0.0]]}, global_features=[0.0], actors={"output": [2]})
        >>> forward(policy, [obs])[0].logprobs["output"].shape  # doctest: +SKIP
        (1, 2)
    """
    obs = list(observations)
    if not obs:
        return []
    p = pack(policy, obs)
    res = policy.forward(p, value=True)
    assert res.value is not None  # value=True
    outs = [EnnOutput({}, float(v)) for v in res.value]
    for name, a in policy.action_space.items():
        lp = res.logp[name]
        slot = p.actors[name] // p.L
        n = np.bincount(slot, minlength=len(obs))  # actors per observation
        width = n if not a.kind.selects_entities else np.bincount(slot, weights=p.n_cand[name], minlength=len(obs)).astype(np.int64)
        end = np.cumsum(width)
        for s in range(len(obs)):
            part = lp[end[s] - width[s] : end[s]]
            outs[s].logprobs[name] = part if not a.kind.selects_entities else part.reshape(n[s], -1 if n[s] else 0)
    return outs
