"""Network sizes and tensor shapes of an agent checkpoint, from its metadata alone (no torch).

:func:`check_net_sizes` bounds the sizes in a checkpoint's ``net`` metadata (sane limits, and
agreement with the tensors present) before anything is built from them; :func:`resolve` reads a
whole agent document once (its current form, spaces, configuration and the tensor shapes it
implies) and checks that a checkpoint holds exactly those tensors. Both read shapes only, never
tensor data: :func:`gymloop.checkpoint.read_agent` resolves a file's document once and hands the
:class:`NetSpec` to :class:`~gymloop.nn.numpy_policy.NumpyPolicy`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError, ConfigError
from ..spaces import ActionDesc, Spaces
from .config import MAX_HEADS, MAX_LAYERS, MAX_MLP_RATIO, MAX_WIDTH, FrameConfig, NetConfig, RelposConfig
from .heads import POINTER, head_of
from .migrate import current_document

__all__ = ["NetSpec", "check_net_sizes", "check_weights", "expected_shapes", "resolve"]

_DEFAULT = NetConfig()


def _short(x: Any, n: int = 120) -> str:
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


#: ``net`` fields that are integers, with their sane range (the limits ``NetConfig.check`` enforces)
_NET_INTS: dict[str, tuple[int, int]] = {
    "d_model": (1, MAX_WIDTH), "n_layer": (0, MAX_LAYERS), "n_head": (1, MAX_HEADS), "d_qk": (1, MAX_WIDTH),
    "mlp_ratio": (1, MAX_MLP_RATIO),
}
_MAX_RELPOS_DIMS = 8
_MAX_RELPOS_EXTENT = 1 << 12
_MAX_RELPOS_POSITIONS = 1 << 22


def check_net_sizes(net: Any, shapes: Mapping[str, tuple[int, ...]] | None, where: str) -> None:
    """Bound an agent's network sizes (its metadata's ``net``) before any network is built.

    Every size must be an integer within a sane range and, given the shapes of the tensors present,
    agree with them: ``n_layer`` with the transformer blocks present, ``d_model`` with the value
    head, ``mlp_ratio`` with the first MLP, ``d_qk`` with the select-entity heads, the relative-position
    extent with its tables. A forged ``net.n_layer=1e9`` fails here at once; it reads no tensor data.

    Raises:
        CheckpointError: naming ``where`` and the field.

    Example:
        >>> check_net_sizes({"d_model": 32, "n_layer": 10**9}, None, "agent.safetensors")
        Traceback (most recent call last):
        ...
        gymloop.errors.CheckpointError: agent.safetensors: net.n_layer=1000000000 in the metadata; expected an integer in [0, 1024]...
    """
    if not isinstance(net, Mapping):
        raise CheckpointError(f"{where}: the metadata's 'net' must be a JSON object, got {_short(net)}")

    def bad(field: str, v: Any, want: str) -> CheckpointError:
        return CheckpointError(f"{where}: net.{field}={_short(v)} in the metadata; expected {want}. The checkpoint is corrupt or forged")

    for k, (lo, hi) in _NET_INTS.items():
        v = net.get(k)
        if k in net and (type(v) is not int or not lo <= v <= hi):
            raise bad(k, v, f"an integer in [{lo}, {hi}]")
    clip = net.get("norm_clip", _DEFAULT.norm_clip)
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not (math.isfinite(clip) and clip > 0):
        raise bad("norm_clip", clip, "a finite number > 0")
    readout = net.get("readout", _DEFAULT.readout)
    if not isinstance(readout, bool):
        raise bad("readout", readout, "true or false")
    for k in ("summary_mean", "summary_count", "relpos_1d"):
        if not isinstance(net.get(k, getattr(_DEFAULT, k)), bool):
            raise bad(k, net.get(k), "true or false")
    rp = net.get("relpos", _DEFAULT.relpos)
    npos = None
    if isinstance(rp, Mapping):
        ext = rp.get("extent", RelposConfig().extent)
        if (not isinstance(ext, list) or not 1 <= len(ext) <= _MAX_RELPOS_DIMS
                or not all(type(e) is int and 1 <= e <= _MAX_RELPOS_EXTENT for e in ext)):
            raise bad("relpos.extent", ext, f"1 to {_MAX_RELPOS_DIMS} integers in [1, {_MAX_RELPOS_EXTENT}]")
        npos = math.prod(2 * e + 1 for e in ext)
        if npos > _MAX_RELPOS_POSITIONS:
            raise bad("relpos.extent", ext, f"at most {_MAX_RELPOS_POSITIONS} relative positions in all, not {npos}")
    elif rp not in ("auto", None):
        raise bad("relpos", rp, '"auto", null or an object with position_features, extent and value_gate')
    if shapes is None:
        return
    d = net.get("d_model", _DEFAULT.d_model)
    n_layer = net.get("n_layer", _DEFAULT.n_layer)
    n_full = n_layer - 1 if readout else n_layer
    blocks = {k.split(".", 2)[1] for k in shapes if k.startswith("blocks.")}
    if n_full >= 0 and n_full != len(blocks):
        raise CheckpointError(
            f"{where}: net.n_layer={n_layer} in the metadata{' (the last one the readout block)' if readout else ''} needs "
            f"{n_full} full transformer blocks, the file holds the weights of {len(blocks)} ({abs(n_full - len(blocks))} "
            f"{'missing' if n_full > len(blocks) else 'unexpected'}); the checkpoint is corrupt or forged"
        )

    def agree(field: str, v: Any, tensor: str, want: tuple[int, ...], got: tuple[int, ...]) -> None:
        if tuple(got) != want:
            raise CheckpointError(
                f"{where}: tensor {tensor!r} has shape {tuple(got)} but the metadata implies {want} (net.{field}={v}); the "
                "checkpoint is corrupt or forged"
            )

    if "value_head.weight" in shapes:
        agree("d_model", d, "value_head.weight", (1, d), shapes["value_head.weight"])
    ratio = net.get("mlp_ratio", _DEFAULT.mlp_ratio)
    for k in ("blocks.0.mlp.0.weight", "readout.mlp.0.weight"):
        if k in shapes:
            agree("mlp_ratio", ratio, k, (ratio * d, d), shapes[k])
            break
    d_qk = net.get("d_qk", _DEFAULT.d_qk)
    for k, s in shapes.items():
        if k.startswith("qproj.") and k.endswith(".weight"):
            agree("d_qk", d_qk, k, (d_qk, d), s)
            break
    if npos is not None and "relpos.keys.weight" in shapes:
        got = shapes["relpos.keys.weight"]
        if not got or got[0] != npos:
            raise CheckpointError(
                f"{where}: net.relpos.extent={rp.get('extent', RelposConfig().extent)} in the metadata implies {npos} relative positions, "
                f"tensor 'relpos.keys.weight' has shape {tuple(got)}; the checkpoint is corrupt or forged"
            )


@dataclass(frozen=True)
class NetSpec:
    """An agent document resolved once: the current document, its spaces, network configuration
    (``"auto"`` resolved) and the tensor shapes it implies (see :func:`resolve`).

    Attributes:
        info: the document as the current format version has it (:func:`~gymloop.nn.migrate.current_document`).
        spaces: the validated observation and action spaces.
        cfg: the network configuration, checked.
        relpos: the relative-position settings (``None``: none).
        frame: the egocentric frame (``None``: none).
        shapes: every tensor name with the shape the document implies (``Policy.state_dict()``'s).
    """

    info: dict[str, Any]
    spaces: Spaces
    cfg: NetConfig
    relpos: RelposConfig | None
    frame: FrameConfig | None
    shapes: dict[str, tuple[int, ...]]

    @property
    def entities(self) -> dict[str, tuple[str, ...]]:
        """Entity types in network order, with their feature names."""
        return dict(self.spaces.obs.entities)

    @property
    def globals(self) -> tuple[str, ...]:
        """The global feature names."""
        return tuple(self.spaces.obs.globals)

    @property
    def actions(self) -> dict[str, ActionDesc]:
        """The action types, in network order."""
        return dict(self.spaces.actions)


def resolve(info: Mapping[str, Any], where: str, shapes: Mapping[str, tuple[int, ...]] | None = None) -> NetSpec:
    """Resolve an agent document in one pass: bring it to the current format version, bound its
    network sizes, validate its spaces and configuration, resolve ``"auto"`` and work out the tensor
    shapes it implies. With ``shapes`` (the tensors present: names and shapes, no data), the sizes
    are matched to them first and the tensors must be exactly those implied.

    Raises:
        CheckpointError: naming ``where`` and the first field or tensor that is wrong.
    """
    if not isinstance(info, Mapping):
        raise CheckpointError(f"{where}: the metadata must be a JSON object, got {type(info).__name__}")
    doc = current_document(info)
    if "net" not in doc:
        raise CheckpointError(f"{where}: the gymloop metadata lacks 'net'")
    check_net_sizes(doc["net"], shapes, where)  # sizes bounded (and matched to the tensors) before anything is built
    for key in ("obs_space", "action_space"):
        if key not in doc:
            raise CheckpointError(f"{where}: the gymloop metadata lacks {key!r}")
    sp = Spaces.from_json(doc["obs_space"], doc["action_space"], CheckpointError, f"{where}: ")
    for a in sp.actions.values():
        head_of(a, where)  # a kind this network has no head for is refused here
    try:
        cfg = NetConfig.from_dict(doc["net"])
        cfg.check()
    except (TypeError, KeyError, ConfigError) as e:
        raise CheckpointError(f"{where}: network config is malformed: {e}") from None
    ents, glob, acts = dict(sp.obs.entities), tuple(sp.obs.globals), dict(sp.actions)
    try:
        rp = cfg.resolve_relpos(ents)
    except ConfigError as e:
        raise CheckpointError(f"{where}: {e}") from None
    implied = _shapes(ents, glob, acts, cfg, rp)
    if shapes is not None:
        _check_shapes(shapes, implied, where, _mismatch_hint(shapes, implied, ents, cfg, rp))
    try:
        frame = cfg.resolve_frame(ents)
    except ConfigError as e:
        raise CheckpointError(f"{where}: {e}") from None
    return NetSpec(doc, sp, cfg, rp, frame, implied)


def expected_shapes(info: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor name of a checkpoint with the shape its metadata implies.

    The names and shapes of ``Policy.state_dict()`` for the same spaces and configuration.
    """
    return resolve(info, "checkpoint").shapes


def check_weights(shapes: Mapping[str, tuple[int, ...]], info: Mapping[str, Any], where: str) -> None:
    """Check that a checkpoint holds exactly the tensors its metadata implies, with those shapes.

    ``shapes`` maps tensor names to shapes (no data is read). The network sizes are bounded first
    (:func:`check_net_sizes`), so a forged metadata fails at once.

    Raises:
        CheckpointError: naming ``where`` and the first tensors or fields that disagree.
    """
    resolve(info, where, shapes)


def _mismatch_hint(have: Mapping[str, Any], shapes: Mapping[str, Any], ents: Mapping[str, Sequence[str]], cfg: NetConfig,
                   rp: RelposConfig | None) -> str:
    """What a mismatch between the weights' names and the metadata's most likely means (``""``: no guess)."""
    unexpected = [k for k in have if k not in shapes]
    missing = [k for k in shapes if k not in have]
    if rp is None and any(k.startswith("readout.relpos.") for k in unexpected):
        why = ""
        if cfg.relpos == "auto":
            lacking = {t: [p for p in ("x", "y") if p not in f] for t, f in ents.items()}
            lacking = {t: m for t, m in lacking.items() if m}
            why = (f" (relpos='auto' finds no position features x, y in every entity type: {lacking} lack them; was a "
                   "position feature renamed?)")
        return (f"; the weights hold a relative-position encoding (readout.relpos.*) that the metadata's network "
                f"does not have{why}")
    gone = sorted({k.split(".")[1] for k in unexpected if k.startswith("embeds.")})
    new = sorted({k.split(".")[1] for k in missing if k.startswith("embeds.")})
    if gone or new:
        return (f"; the weights embed the entity types {gone} and the metadata names {new} instead (an entity type "
                "renamed in the metadata?)")
    return ""


def _check_shapes(have: Mapping[str, tuple[int, ...]], shapes: Mapping[str, tuple[int, ...]], where: str, hint: str = "") -> None:
    missing = [k for k in shapes if k not in have]
    unexpected = sorted(k for k in have if k not in shapes)
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: the weights do not match the metadata: missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}{hint}"
        )
    for k, shp in shapes.items():
        if tuple(have[k]) != shp:
            raise CheckpointError(f"{where}: tensor {k!r} has shape {tuple(have[k])} but the metadata implies {shp}")


def _shapes(ents: dict, glob: tuple, acts: dict, cfg: NetConfig, rp: RelposConfig | None) -> dict[str, tuple[int, ...]]:
    d = cfg.d_model
    dh = d // cfg.n_head
    hid = cfg.mlp_ratio * d
    out: dict[str, tuple[int, ...]] = {}
    for name, feats in ents.items():
        nf = len(feats) + len(glob)
        if nf:
            out[f"norms.{name}.count"] = ()
            out[f"norms.{name}.mean"] = (nf,)
            out[f"norms.{name}.squares_sum"] = (nf,)
    for name, feats in ents.items():
        nf = len(feats) + len(glob)
        if nf:
            out[f"embeds.{name}.0.weight"] = (d, nf)
            out[f"embeds.{name}.0.bias"] = (d,)
            out[f"embeds.{name}.2.weight"] = (d,)
            out[f"embeds.{name}.2.bias"] = (d,)
        else:
            out[f"featureless.{name}"] = (1, d)
    rel: dict[str, tuple[int, ...]] = {}
    if rp is not None:
        npos = math.prod(2 * e + 1 for e in rp.extent)
        P = len(rp.extent)
        rel = {"strides": (P,), "extent_t": (P,), "keys.weight": (npos, dh), "values.weight": (npos, dh)}
        if rp.value_gate:
            rel["value_gate.weight"] = (dh, d)
            rel["value_gate.bias"] = (dh,)
        out.update({f"relpos.{k}": v for k, v in rel.items()})

    def block(prefix: str) -> None:
        for ln in ("ln1", "ln2"):
            out[f"{prefix}.{ln}.weight"] = (d,)
            out[f"{prefix}.{ln}.bias"] = (d,)
        for lin in ("key", "query", "value", "proj"):
            out[f"{prefix}.{lin}.weight"] = (d, d)
            out[f"{prefix}.{lin}.bias"] = (d,)
        out[f"{prefix}.mlp.0.weight"] = (hid, d)
        out[f"{prefix}.mlp.0.bias"] = (hid,)
        out[f"{prefix}.mlp.2.weight"] = (d, hid)
        out[f"{prefix}.mlp.2.bias"] = (d,)
        out.update({f"{prefix}.relpos.{k}": v for k, v in rel.items()})

    n_full = cfg.n_layer - 1 if cfg.readout else cfg.n_layer
    for i in range(n_full):
        block(f"blocks.{i}")
    if cfg.readout:
        out["readout.value_query"] = (d,)
        block("readout")
        if cfg.summary_count:
            out["readout.count_embed"] = (d,)
            out.update({"readout.count_norm.count": (), "readout.count_norm.mean": (1,), "readout.count_norm.squares_sum": (1,)})
    for name, a in acts.items():
        if head_of(a) != POINTER:
            out[f"heads.{name}.weight"] = (a.n, d)
            out[f"heads.{name}.bias"] = (a.n,)
    for name, a in acts.items():
        if head_of(a) == POINTER:
            out[f"qproj.{name}.weight"] = (cfg.d_qk, d)
            out[f"qproj.{name}.bias"] = (cfg.d_qk,)
            out[f"kproj.{name}.weight"] = (cfg.d_qk, d)
            out[f"kproj.{name}.bias"] = (cfg.d_qk,)
    out["value_head.weight"] = (1, d)
    out["value_head.bias"] = (1,)
    return out
