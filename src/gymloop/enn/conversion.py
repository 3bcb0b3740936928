"""Turning what :mod:`gymloop.enn.reader` read into gymloop: the tensors and metadata of a
:class:`~gymloop.nn.numpy_policy.NumpyPolicy`, a :class:`~gymloop.neural.NeuralAgent`, or a gymloop
``.safetensors`` checkpoint.

Importing this module registers the enn-trainer format with ``gl.load`` (:mod:`gymloop.formats`).
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..actions import CATEGORICAL, SELECT_ENTITY, action_spec
from ..checkpoint import agent_document, write_agent
from ..errors import CheckpointError, ConfigError
from ..formats import ForeignFormat, register_format
from ..neural import NeuralAgent
from ..nn.config import NetConfig
from ..nn.numpy_policy import NumpyPolicy
from ..ron import parse_ron
from ..schema import entity, schema_of
from ..spaces import ActionDesc, ObsSpace, Spaces, declared_types
from .reader import _F32, _FILES, GLOBAL_ENTITY, _Net, _read_config, _read_sources, _read_state, _read_weights, is_enn_checkpoint

__all__ = ["GlobalToken", "convert", "load", "load_policy", "read_checkpoint"]


@entity(name=GLOBAL_ENTITY)
@dataclass(frozen=True)
class GlobalToken:
    """rogue-net's ``__global__`` token: the actor of an imported global categorical action.

    It has no features of its own; the network embeds it from the observation's global features.

    Example:
        >>> import gymloop as gl
        >>> gl.schema_of(GlobalToken).name, gl.schema_of(GlobalToken).features
        ('__global__', ())
    """



# ---------------------------------------------------------------------- weights
def _convert(
    weights: dict[str, np.ndarray], net: _Net, ents: dict[str, list[str]], glob: list[str],
    acts: dict[str, tuple[str, list[str]]], where: str,
) -> dict[str, np.ndarray]:
    """rogue-net's ``state_dict`` renamed to gymloop's (every name and shape checked)."""
    d, dh, ng = net.d_model, net.d_model // net.n_head, len(glob)
    types = dict(ents)
    if any(k == "global" for k, _ in acts.values()):
        types[GLOBAL_ENTITY] = []
    ctx = f"(config: d_model={d}, n_layer={net.n_layer}, n_head={net.n_head}, d_qk={net.d_qk}; spaces from state.ron)"
    out: dict[str, np.ndarray] = {}
    used: set[str] = set()

    def take(enn: str, shape: tuple[int, ...], ours: str | None) -> np.ndarray:
        t = weights.get(enn)
        if t is None:
            raise CheckpointError(f"{where}: the weights lack {enn!r}, which the config and spaces imply {ctx}")
        if tuple(t.shape) != shape:
            raise CheckpointError(f"{where}: tensor {enn!r} has shape {tuple(t.shape)} but the config and spaces imply {shape} {ctx}")
        if t.dtype.kind == "b":
            raise CheckpointError(f"{where}: tensor {enn!r} holds booleans; expected numbers")
        used.add(enn)
        a = np.asarray(t, dtype=_F32)
        if ours is not None:
            out[ours] = a
        return a

    for name, feats in types.items():
        nf = (len(feats) + ng) if name != GLOBAL_ENTITY else ng
        pre = f"embedding.embeddings.{name}"
        if nf:
            take(f"{pre}.0.count", (), f"norms.{name}.count")
            take(f"{pre}.0.mean", (nf,), f"norms.{name}.mean")
            take(f"{pre}.0.squares_sum", (nf,), f"norms.{name}.squares_sum")
            take(f"{pre}.1.weight", (d, nf), f"embeds.{name}.0.weight")
            take(f"{pre}.1.bias", (d,), f"embeds.{name}.0.bias")
            take(f"{pre}.3.weight", (d,), f"embeds.{name}.2.weight")
            take(f"{pre}.3.bias", (d,), f"embeds.{name}.2.bias")
        else:
            take(f"{pre}.embedding", (1, d), f"featureless.{name}")
    rel: dict[str, np.ndarray] = {}
    rp = net.relpos
    if rp is not None:
        P = len(rp.extent)
        npos = math.prod(2 * e + 1 for e in rp.extent)
        strides = np.cumprod([1] + [2 * e + 1 for e in rp.extent[:-1]]).astype(_F32)
        spec = {
            "strides": ((1, P), "strides"), "extent_tensor": ((1, 1, 1, P), "extent_t"), "keys.weight": ((npos, dh), "keys.weight"),
            "values.weight": ((npos, dh), "values.weight"), "distance_values.weight": ((len(types), dh), None),
        }
        if rp.value_gate is not None:
            spec["value_gate_proj.weight"] = ((dh, d), "value_gate.weight")
            spec["value_gate_proj.bias"] = ((dh,), "value_gate.bias")
        for k, (shape, ours) in spec.items():
            a = take(f"backbone.relpos_encoding.{k}", shape, None)
            for i in range(net.n_layer):  # the module is shared: every block's copy must be the same
                b = take(f"backbone.blocks.{i}.attn.relpos_encoding.{k}", shape, None)
                if not np.array_equal(a, b):
                    raise CheckpointError(
                        f"{where}: tensor 'backbone.blocks.{i}.attn.relpos_encoding.{k}' differs from "
                        f"'backbone.relpos_encoding.{k}' (one shared module in rogue-net); corrupt weights"
                    )
            if ours is not None:
                rel[ours] = a.reshape(-1) if k in ("strides", "extent_tensor") else a
        if not np.array_equal(rel["strides"], strides) or not np.array_equal(rel["extent_t"], np.array(rp.extent, dtype=_F32)):
            raise CheckpointError(
                f"{where}: the relpos strides/extent tensors ({rel['strides'].tolist()}, {rel['extent_t'].tolist()}) "
                f"disagree with config extent {rp.extent}"
            )
        out.update({f"relpos.{k}": v for k, v in rel.items()})
    for i in range(net.n_layer):
        pre = f"backbone.blocks.{i}"
        for ln in ("ln1", "ln2"):
            take(f"{pre}.{ln}.weight", (d,), f"blocks.{i}.{ln}.weight")
            take(f"{pre}.{ln}.bias", (d,), f"blocks.{i}.{ln}.bias")
        for lin in ("key", "query", "value", "proj"):
            take(f"{pre}.attn.{lin}.weight", (d, d), f"blocks.{i}.{lin}.weight")
            take(f"{pre}.attn.{lin}.bias", (d,), f"blocks.{i}.{lin}.bias")
        take(f"{pre}.mlp.0.weight", (4 * d, d), f"blocks.{i}.mlp.0.weight")
        take(f"{pre}.mlp.0.bias", (4 * d,), f"blocks.{i}.mlp.0.bias")
        take(f"{pre}.mlp.2.weight", (d, 4 * d), f"blocks.{i}.mlp.2.weight")
        take(f"{pre}.mlp.2.bias", (d,), f"blocks.{i}.mlp.2.bias")
        out.update({f"blocks.{i}.relpos.{k}": v for k, v in rel.items()})
    for name, (kind, labels) in acts.items():
        pre = f"action_heads.{name}"
        if kind == "select":
            take(f"{pre}.query_proj.weight", (net.d_qk, d), f"qproj.{name}.weight")
            take(f"{pre}.query_proj.bias", (net.d_qk,), f"qproj.{name}.bias")
            take(f"{pre}.key_proj.weight", (net.d_qk, d), f"kproj.{name}.weight")
            take(f"{pre}.key_proj.bias", (net.d_qk,), f"kproj.{name}.bias")
        else:
            take(f"{pre}.proj.weight", (len(labels), d), f"heads.{name}.weight")
            take(f"{pre}.proj.bias", (len(labels),), f"heads.{name}.bias")
    take("auxiliary_heads.value.weight", (1, d), "value_head.weight")
    take("auxiliary_heads.value.bias", (1,), "value_head.bias")
    unexpected = sorted(set(weights) - used)
    if unexpected:
        raise CheckpointError(
            f"{where}: unexpected tensors {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''} that the config and "
            f"spaces do not imply {ctx}"
        )
    return out


def _apply_among(
    info: dict[str, Any], among: Mapping[str, Sequence[str]] | None, strict: bool, where: str
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Set the candidate types of select-entity actions in ``info``; returns them (a cache key)."""
    acts = info["action_space"]
    real = [n for n in info["obs_space"]["entities"] if n != GLOBAL_ENTITY]
    if among:
        for name, types in among.items():
            a = acts.get(name)
            if a is None or a["kind"] != SELECT_ENTITY:
                if strict:
                    raise ConfigError(f"among: {where} has no select-entity action {name!r} (its select-entity actions: "
                                      f"{[k for k, v in acts.items() if v['kind'] == SELECT_ENTITY]})")
                continue
            if isinstance(types, str):
                types = [types]
            unknown = [t for t in types if t not in real]
            if unknown and strict:
                raise ConfigError(f"among: entity types {unknown} of action {name!r} are not in {where} (it has {real})")
            keep = [t for t in real if t in types]
            if keep:
                a["among"] = keep
                a.pop("among_any", None)
    return tuple((k, tuple(v["among"])) for k, v in acts.items() if v["kind"] == SELECT_ENTITY)


def read_checkpoint(path: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read an enn-trainer checkpoint as the tensors and metadata of a gymloop policy.

    Args:
        path: a checkpoint folder (``config.ron``, ``state.ron``, ``state.agent.msgpack``) or a
            ``.roguenet`` tar archive of those files.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Returns:
        ``(tensors, info)`` as :class:`~gymloop.nn.numpy_policy.NumpyPolicy` and
        :func:`gymloop.checkpoint.write_agent` take them. ``info["enn"]`` records the source: the
        config version, the environment id, the global categorical actions, and
        ``separate_value_network`` (trained with ``vf_net``: the value head is untrained, and a
        warning is logged).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> tensors, info = read_checkpoint("xor.roguenet")  # doctest: +SKIP
        >>> info["obs_space"], info["enn"]["global_actions"]  # doctest: +SKIP
        ({'entities': {'Input': ['is_set'], '__global__': []}, 'globals': ['negate']}, ['output'])
    """
    p = os.fspath(path)
    src = _read_sources(p)
    (cw, ctext), (sw, stext), (ww, wdata) = (src[f] for f in _FILES)
    net, version, env, separate_vf = _read_config(parse_ron(ctext, cw), cw)
    ents, glob, acts, step = _read_state(parse_ron(stext, sw), sw)
    if net.relpos is not None:
        types = dict(ents)
        if any(k == "global" for k, _ in acts.values()):
            types[GLOBAL_ENTITY] = []
        lacking = {t: [f for f in net.relpos.position_features if f not in fs] for t, fs in types.items()}
        lacking = {t: m for t, m in lacking.items() if m}
        if lacking:
            raise CheckpointError(
                f"{cw}: relative positions need the position features {net.relpos.position_features} in every entity type's "
                f"own features; lacking: {lacking} (positions from global features are not supported)"
            )
    weights = _read_weights(wdata, ww)
    tensors = _convert(weights, net, ents, glob, acts, ww)
    entities = {k: list(v) for k, v in ents.items()}
    global_actions = [k for k, (kind, _) in acts.items() if kind == "global"]
    if global_actions:
        entities[GLOBAL_ENTITY] = []
    real = [n for n in ents]
    if any(kind == "select" for kind, _ in acts.values()) and not real:
        raise CheckpointError(f"{sw}: a select-entity action needs entity types to select among")
    # enn-trainer does not record the candidate types: any type the game offers (among_any). Its global
    # actions stay categorical actions of the __global__ token's entity: rogue-net reads them from that
    # token's embedding, not from an observation summary.
    action_space = {
        k: ActionDesc(k, SELECT_ENTITY, (), tuple(real), among_any=True) if kind == "select" else ActionDesc(k, CATEGORICAL, tuple(labels))
        for k, (kind, labels) in acts.items()
    }
    spaces = Spaces(ObsSpace({k: tuple(v) for k, v in entities.items()}, tuple(glob)), action_space, error=CheckpointError, where=f"{sw}: ")
    cfg = NetConfig(d_model=net.d_model, n_layer=net.n_layer, n_head=net.n_head, d_qk=net.d_qk, relpos=net.relpos,
                    norm_clip=5.0, mlp_ratio=4, readout=False, frame=None)
    info = agent_document(spaces, cfg.to_dict(), arch="rogue-net", step=step, enn={
        "source": p, "config_version": version, "env": env, "global_actions": global_actions,
        "separate_value_network": separate_vf,
    })
    _apply_among(info, among, True, p)
    return tensors, info


_policies: weakref.WeakValueDictionary[tuple, NumpyPolicy] = weakref.WeakValueDictionary()


def _file_key(p: str) -> tuple:
    try:
        if os.path.isdir(p):
            sts = [os.stat(os.path.join(p, f)) for f in _FILES if os.path.exists(os.path.join(p, f))]
        else:
            sts = [os.stat(p)]
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
    return (os.path.realpath(p), tuple((s.st_mtime_ns, s.st_size) for s in sts))


def _load_policy(p: str, among: Mapping[str, Sequence[str]] | None, strict: bool) -> NumpyPolicy:
    want = None if among is None else tuple(sorted((str(k), (v,) if isinstance(v, str) else tuple(v)) for k, v in among.items()))
    key = (_file_key(p), want, strict)
    pol = _policies.get(key)
    if pol is None:
        tensors, info = read_checkpoint(p)
        _apply_among(info, among, strict, p)
        pol = NumpyPolicy(tensors, info, p)
        _policies[key] = pol
    return pol


def load_policy(path: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> NumpyPolicy:
    """The numpy policy of an enn-trainer checkpoint (shared between calls for an unchanged file).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> policy = load_policy("cherrypick.roguenet", among={"Pick Cherry": ["Cherry"]})  # doctest: +SKIP
        >>> policy.entity_names, policy.action_space["Pick Cherry"].among  # doctest: +SKIP
        (['Cherry', 'Player'], ('Cherry',))
    """
    return _load_policy(os.fspath(path), among, True)


def _among_of_game(game: Any) -> dict[str, list[str]] | None:
    decl = declared_types(game)
    if decl is None:
        return None
    out = {}
    for a in decl[2]:
        spec = action_spec(a)
        if spec.kind.selects_entities:
            out[spec.name] = [schema_of(c).name for c in spec.among]
    return out or None


def _policy_for_game(p: str, game: Any) -> NumpyPolicy:
    """The policy ``gl.load(p, game=game)`` plays: a game's select-entity actions give the candidate
    types (names it has and the checkpoint lacks are left to :meth:`NeuralAgent.check`)."""
    if game is not None:
        return _load_policy(p, _among_of_game(game), False)
    return _load_policy(p, None, True)


ENN_FORMAT = register_format(ForeignFormat("enn-trainer", is_enn_checkpoint, _policy_for_game))
"""enn-trainer / rogue-net checkpoints (folders and ``.roguenet`` archives), as ``gl.load`` opens them."""


def load(
    path: str | os.PathLike,
    seed: int | None = None,
    greedy: bool = False,
    game: Any = None,
    among: Mapping[str, Sequence[str]] | None = None,
) -> NeuralAgent:
    """Load an enn-trainer checkpoint as a :class:`~gymloop.neural.NeuralAgent` (``gl.load`` does the same).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        seed: seed of the agent's sampling generator.
        greedy: always take the most probable choice.
        game: a game declared with ``@gl.game(...)``: its select-entity actions give the candidate
            entity types (unless ``among`` is given), and the game is checked against the agent.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Raises:
        CheckpointError: see the module docstring; or the game lacks what the agent needs.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> import gymloop as gl  # doctest: +SKIP
        >>> agent = gl.load("ckpt/latest-step000000016384", seed=0)  # doctest: +SKIP
    """
    p = os.fspath(path)
    policy = _policy_for_game(p, game) if among is None else _load_policy(p, among, True)
    agent = NeuralAgent(policy, seed=seed, greedy=greedy)
    if game is not None:
        agent.check(game)
    return agent


def convert(path: str | os.PathLike, out: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> None:
    """Write an enn-trainer checkpoint as a gymloop agent checkpoint (``.safetensors``).

    The result loads with ``gl.load(out)`` and, for training on, with torch
    (:func:`gymloop.nn.torch_policy.policy_from_file`); its metadata keeps ``info["enn"]`` (see
    :func:`read_checkpoint`).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        out: the gymloop checkpoint to write.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> convert("multisnake.roguenet", "multisnake.safetensors")  # doctest: +SKIP
        >>> gl.load("multisnake.safetensors").policy.info["enn"]["env"]["id"]  # doctest: +SKIP
        'MultiSnake'
    """
    tensors, info = read_checkpoint(path, among)
    NumpyPolicy(tensors, info, os.fspath(path))  # validate before writing
    write_agent(out, tensors, info)

