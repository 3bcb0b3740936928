"""The entity-transformer policy's forward pass in numpy alone (inference, no torch).

:class:`NumpyPolicy` computes what :class:`gymloop.nn.torch_policy.Policy` computes, from the
tensors and metadata of a checkpoint: per action type the log-probabilities of every choice (masked
choices ``-inf``) and the value of every slot, and it samples actions with a seeded
``np.random.Generator`` or takes the greedy argmax. Arithmetic is float32 like torch's (GELU's erf
is within 6e-7 of the exact one, as torch's float32 one is; LayerNorm's eps is 1e-5), so the two
agree to about 1e-6.

Everything that does not depend on the input is prepared once, when the policy is built: weights
transposed and fused, normalization statistics turned into float32 mean and standard deviation, the
readout's value query projected. Nothing here imports torch, directly or indirectly.

One observation's decision has its own, faster path beside this one: :mod:`gymloop.nn.single`.

Example:
    >>> import numpy as np
    >>> from gymloop.nn.numpy_policy import segment_argmax
    >>> segment_argmax(np.array([0.1, 0.9, 0.5, 0.2, 0.3]), np.array([2, 3])).tolist()
    [1, 0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CheckpointError, ConfigError
from ..spaces import ActionDesc
from .blas import single_blas_thread
from .config import RelposConfig
from .heads import POINTER, head_of, summary_actions
from .inputs import FrameIndex, Packed, actor_rows, pack
from .numpy_ops import erf, fold, gelu, gelu2, lin, ln, norm, softmax_last
from .shapes import NetSpec, check_weights, expected_shapes, resolve
from .single import OBS_SUMMARY, OneActorTables, OneObsTables, logits_one

__all__ = ["OBS_SUMMARY", "NumpyPolicy", "NumpyOutput", "erf", "gelu", "check_weights", "expected_shapes", "segment_argmax"]

_F32 = np.float32
_MASKED = np.float32(-1e9)  # the attention logit of padding, as in the torch policy
_NEG_INF = np.float32(-np.inf)
_F32_MAX = float(np.finfo(np.float32).max)
_MAX_TABLE = 1 << 25  # numbers in the one-observation tables (entity types x (feature columns + 3 d_model))


@dataclass
class NumpyOutput:
    """What :meth:`NumpyPolicy.forward` gives for a packed batch.

    Attributes:
        logp: per action type, log-probabilities: categorical ``(n_actors, n_choices)``, masked
            choices ``-inf``; select-entity ``(n_candidates,)`` flat, actor after actor.
        value: ``(S,)`` float32, the value of every slot (``None`` when not asked for).
        logits: per action type, the masked logits (same layout as ``logp``).
    """

    logp: dict[str, np.ndarray]
    value: np.ndarray | None
    logits: dict[str, np.ndarray]


# ---------------------------------------------------------------------- the network
class _Relpos:
    """Relative-position keys and values (shared by every block)."""

    __slots__ = ("extent", "strides", "offset", "keys", "values", "kv", "wg", "bg", "gate_kind", "P")

    def __init__(self, cfg: RelposConfig, g: Any, where: str) -> None:
        strides, n = [], 1
        for e in cfg.extent:
            strides.append(n)
            n *= 2 * e + 1
        self.P = len(cfg.extent)
        self.extent = np.array(cfg.extent, dtype=_F32)
        self.strides = np.array(strides, dtype=_F32)
        self.offset = _F32(self.extent @ self.strides)
        if not (np.array_equal(g("relpos.strides"), self.strides) and np.array_equal(g("relpos.extent_t"), self.extent)):
            raise CheckpointError(f"{where}: the relpos strides/extent tensors disagree with the metadata's relpos extent {cfg.extent}")
        self.keys = g("relpos.keys.weight")
        self.values = g("relpos.values.weight")
        self.kv = np.ascontiguousarray(np.concatenate([self.keys, self.values], axis=1))
        self.gate_kind = cfg.value_gate
        self.wg = self.bg = None
        if cfg.value_gate:
            self.wg = np.ascontiguousarray(g("relpos.value_gate.weight").T)
            self.bg = g("relpos.value_gate.bias")

    def index(self, rel: np.ndarray) -> np.ndarray:
        """Embedding index of relative positions ``(..., P)`` (clamped to the extent)."""
        e = self.extent
        r = np.maximum(rel, -e)
        np.minimum(r, e, out=r)
        d = r @ self.strides if r.ndim == 2 else lin(r, self.strides)
        d += self.offset
        return np.rint(d).astype(np.intp)

    def activate(self, g: np.ndarray) -> np.ndarray:
        """The value gate's nonlinearity, applied to the gate's linear projection."""
        k = self.gate_kind
        if k == "relu":
            return np.maximum(g, _F32(0.0))
        if k == "gelu":
            return gelu(g)
        if k == "sigmoid":
            return _F32(1.0) / (_F32(1.0) + np.exp(-g))
        return g


def _norm_stats(tensors: Mapping[str, np.ndarray], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """The float32 (mean, standard deviation) of the running statistics ``prefix.count/mean/squares_sum``
    as ``InputNorm.stats`` computes them: sd 0 becomes 1, and identity before two samples."""
    count = float(np.asarray(tensors[f"{prefix}.count"], dtype=np.float64))
    nf = np.shape(tensors[f"{prefix}.mean"])[0]
    if count <= 1:
        return np.zeros(nf, dtype=_F32), np.ones(nf, dtype=_F32)
    sd64 = np.sqrt(np.asarray(tensors[f"{prefix}.squares_sum"], dtype=np.float64) / (count - 1))
    sd64[sd64 == 0] = 1.0
    return np.asarray(tensors[f"{prefix}.mean"], dtype=np.float64).astype(_F32), sd64.astype(_F32)


class _Block:
    """One transformer block's parameters, transposed (``x @ W``), fused and with the LayerNorms'
    affine parts folded into the products that follow them.

    ``w_in`` maps the normalized input to ``[query | key | value | value gate]`` (the gate only
    with gated relative positions); ``w1`` is the MLP's first layer after ``ln2``.
    """

    __slots__ = ("w_in", "b_in", "wp", "bp", "w1", "b1", "w2", "b2", "vq", "vq_q", "gated", "count")

    def __init__(self, g: Any, prefix: str, readout: bool, n_head: int, relpos: _Relpos | None) -> None:
        f = lambda k: g(f"{prefix}.{k}")  # noqa: E731
        ln1w, ln1b = f("ln1.weight"), f("ln1.bias")
        wq, bq = f("query.weight").T, f("query.bias")
        ws = [wq, f("key.weight").T, f("value.weight").T]
        bs = [bq, f("key.bias"), f("value.bias")]
        self.gated = False
        if relpos is not None and relpos.wg is not None and relpos.bg is not None:  # (wg and bg are set together)
            self.gated = True
            ws.append(relpos.wg)
            bs.append(relpos.bg)
        self.w_in, self.b_in = fold(np.concatenate(ws, axis=1), np.concatenate(bs), ln1w, ln1b)
        self.wp, self.bp = np.ascontiguousarray(f("proj.weight").T), f("proj.bias")
        self.w1, self.b1 = fold(f("mlp.0.weight").T, f("mlp.0.bias"), f("ln2.weight"), f("ln2.bias"))
        # gelu(h) @ w2 == (h * (1 + erf(h / sqrt 2))) @ (w2 / 2): the exact halving is folded
        self.w2, self.b2 = np.ascontiguousarray(f("mlp.2.weight").T * _F32(0.5)), f("mlp.2.bias")
        self.vq = self.vq_q = None
        self.count: tuple[np.float32, np.float32, np.ndarray] | None = None  # net.summary_count: (mean, sd, vector)
        if readout:
            vq = f("value_query").reshape(1, -1)
            d = vq.shape[1]
            self.vq = vq
            # the value query's projected query never depends on the input: (H, dh), pre-scaled
            q0 = ln(vq, ln1w, ln1b) @ wq + bq
            self.vq_q = (q0.reshape(n_head, d // n_head) * _F32(1.0 / math.sqrt(d // n_head))).astype(_F32)

    def finish(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The block after attention: ``x + proj(y)``, then ``+ mlp(ln2(.))``."""
        x = x + lin(y, self.wp, self.bp)
        out = lin(gelu2(lin(norm(x), self.w1, self.b1)), self.w2, self.b2)
        out += x
        return out


class NumpyPolicy:
    """The policy network of a checkpoint, evaluated with numpy.

    Args:
        tensors: the checkpoint's tensors (``Policy.state_dict()`` names; memory-mapped is fine:
            they are copied to contiguous float32 once).
        info: the checkpoint's metadata (``obs_space``, ``action_space``, ``net``).
        path: where they came from, for error messages.
        net: the metadata already resolved against these tensors' shapes (``read_agent`` does it:
            :attr:`~gymloop.checkpoint.AgentFile.net`); ``None`` resolves ``info`` here.

    Raises:
        CheckpointError: the metadata is malformed, or a tensor is missing, unexpected, has a
            shape the metadata does not imply, or holds non-finite values.

    Attributes:
        entity_names: entity types in network order; ``entity_features``: their feature names;
        global_features: the global feature names; ``action_space``: per action type ``kind``,
        ``labels`` and ``among``; ``cfg``: the :class:`NetConfig`; ``position_idx``: per entity type
        the columns of the relative-position features (``None`` without relpos); ``one_tables``: the
        :class:`~gymloop.nn.single.OneObsTables` of the one-decision path (``None`` when an entity
        type has no features); ``one_actor``: its :class:`~gymloop.nn.single.OneActorTables` (``None``
        without a readout block).

    Example:
        >>> import os, tempfile
        >>> from gymloop import VecEnv, neural
        >>> from gymloop.games.snake import snake
        >>> path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
        >>> neural.random_checkpoint(path, snake)  # (writing one needs torch; reading it does not)
        >>> policy = NumpyPolicy.from_file(path)
        >>> policy.entity_names, list(policy.action_space)
        (['Body', 'Food', 'Head'], ['Move'])
        >>> with VecEnv(snake, num_envs=3) as env:
        ...     p = policy.pack(env.reset())
        >>> out = policy.forward(p)
        >>> out.logp["Move"].shape, out.value.shape
        ((3, 4), (3,))
    """

    def __init__(self, tensors: Mapping[str, np.ndarray], info: Mapping[str, Any], path: str = "<tensors>",
                 net: NetSpec | None = None) -> None:
        if net is None:
            net = resolve(info, path, {k: tuple(np.shape(t)) for k, t in tensors.items()})
        ents, glob, cfg, shapes = net.entities, net.globals, net.cfg, net.shapes
        width = sum(len(f) + len(glob) for f in ents.values())
        if len(ents) * (width + 3 * cfg.d_model) > _MAX_TABLE:
            raise CheckpointError(
                f"{path}: {len(ents)} entity types with {width} feature columns in all would need tables of "
                f"{len(ents) * (width + 3 * cfg.d_model)} numbers (at most {_MAX_TABLE}); the metadata is corrupt or forged"
            )
        for k in shapes:
            t = tensors[k]
            if t.dtype.kind not in "fiu":
                raise CheckpointError(f"{path}: tensor {k!r} has dtype {t.dtype}; expected numbers")
            if t.dtype.kind == "f" and not np.isfinite(t).all():
                raise CheckpointError(f"{path}: tensor {k!r} contains NaN or infinite values; the checkpoint is corrupt")
            if t.size and (t.dtype.kind in "iu" or t.dtype.itemsize > 4) and np.abs(t).max() > _F32_MAX and not k.endswith(".count"):
                raise CheckpointError(f"{path}: tensor {k!r} holds values beyond float32's range; the checkpoint is corrupt")
        for name in ents:
            if f"norms.{name}.count" in tensors:
                c = np.asarray(tensors[f"norms.{name}.count"], dtype=np.float64)
                if c.size != 1 or not np.isfinite(c).all() or float(c.reshape(-1)[0]) < 0 or (np.asarray(tensors[f"norms.{name}.squares_sum"]) < 0).any():
                    raise CheckpointError(
                        f"{path}: the normalization statistics of entity type {name!r} are impossible (a negative count or "
                        "sum of squares); the checkpoint is corrupt"
                    )
        try:
            with np.errstate(over="raise", invalid="raise"):
                self._build(tensors, net, path)
        except FloatingPointError as e:
            raise CheckpointError(f"{path}: the weights overflow float32 when prepared ({e}); the checkpoint is corrupt") from None

    def _build(self, tensors: Mapping[str, np.ndarray], net: NetSpec, path: str) -> None:
        ents, glob, acts, cfg, rp = net.entities, net.globals, net.actions, net.cfg, net.relpos
        self.path = path
        self.info = dict(net.info)
        self.cfg = cfg
        self.entity_names: list[str] = list(ents)
        self.entity_features = ents
        self.global_features = glob
        self.action_space: dict[str, ActionDesc] = acts
        # action types answered from the observation summary (no actor entity), and the rest
        self.summary_actions = summary_actions(acts)
        self.relpos_cfg = rp
        self.position_idx = {n: [list(f).index(p) for p in rp.position_features] for n, f in ents.items()} if rp else None
        self.frame = FrameIndex.of(net.frame, ents)

        def g(k: str) -> np.ndarray:
            return np.ascontiguousarray(tensors[k], dtype=_F32)

        d = cfg.d_model
        self.d = d
        self.H = cfg.n_head
        self.dh = d // cfg.n_head
        self.scale = _F32(1.0 / math.sqrt(self.dh))
        ng = len(glob)
        # per entity type: ("featureless", vector) or ("embed", mean, sd, clip, W^T, b, ln_w, ln_b)
        self.embeds: list[tuple] = []
        clip = _F32(cfg.norm_clip)
        for name in self.entity_names:
            nf = len(ents[name]) + ng
            if not nf:
                self.embeds.append(("featureless", g(f"featureless.{name}")))
                continue
            mean, sd = _norm_stats(tensors, f"norms.{name}")
            self.embeds.append((
                "embed", mean, sd, clip, np.ascontiguousarray(g(f"embeds.{name}.0.weight").T), g(f"embeds.{name}.0.bias"),
                g(f"embeds.{name}.2.weight"), g(f"embeds.{name}.2.bias"),
            ))
        self.relpos = _Relpos(rp, g, path) if rp else None
        n_full = cfg.n_layer - 1 if cfg.readout else cfg.n_layer
        self.blocks = [_Block(g, f"blocks.{i}", False, self.H, self.relpos) for i in range(n_full)]
        self.readout = _Block(g, "readout", True, self.H, self.relpos) if cfg.readout else None
        if self.readout is not None and cfg.summary_count:
            mean, sd = _norm_stats(tensors, "readout.count_norm")
            self.readout.count = (_F32(mean[0]), _F32(sd[0]), g("readout.count_embed").reshape(1, -1))
        self.heads: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.qk: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        for name, a in acts.items():
            if head_of(a) != POINTER:
                self.heads[name] = (np.ascontiguousarray(g(f"heads.{name}.weight").T), g(f"heads.{name}.bias"))
            else:
                self.qk[name] = (
                    np.ascontiguousarray(g(f"qproj.{name}.weight").T), g(f"qproj.{name}.bias"),
                    np.ascontiguousarray(g(f"kproj.{name}.weight").T), g(f"kproj.{name}.bias"),
                )
        self.qk_scale = _F32(1.0 / math.sqrt(cfg.d_qk))
        self.value_w = np.ascontiguousarray(g("value_head.weight").T)
        self.value_b = g("value_head.bias")
        self.one_tables = None
        if self.embeds and all(e[0] == "embed" for e in self.embeds):
            pidx = None if self.position_idx is None else [self.position_idx[n] for n in self.entity_names]
            self.one_tables = OneObsTables(self.embeds, [len(ents[n]) for n in self.entity_names], ng, d, pidx)
        self.one_actor = OneActorTables.of(self)

    @classmethod
    def from_file(cls, path: Any) -> NumpyPolicy:
        """Read a checkpoint written by :func:`gymloop.checkpoint.write_agent`."""
        from ..checkpoint import read_agent

        af = read_agent(path)
        return cls(af.tensors, af.info, af.path, af.net)

    def __repr__(self) -> str:
        return f"NumpyPolicy({self.path!r}, entities={self.entity_names}, actions={list(self.action_space)})"

    # ------------------------------------------------------------------ inputs
    def pack(self, b: Any) -> Packed:
        """Pack a :class:`~gymloop.batch.Batch` for this network (entity types in its order)."""
        return pack(b, self.entity_names, self.position_idx, summary_actions=self.summary_actions, frame=self.frame)

    # ------------------------------------------------------------------ pieces
    def embed(self, t: int, x: np.ndarray | int) -> np.ndarray:
        """Embeddings of entity type ``t`` from its raw features ``(n, n_features + n_globals)``
        float32 (for a featureless type, the row count ``n`` is enough)."""
        e = self.embeds[t]
        if e[0] == "featureless":
            n = x if isinstance(x, (int, np.integer)) else x.shape[0]
            return np.broadcast_to(e[1], (int(n), self.d))
        _, mean, sd, clip, w, b, lw, lb = e
        z = (x - mean) / sd
        np.maximum(z, -clip, out=z)
        np.minimum(z, clip, out=z)
        z = z @ w
        z += b
        np.maximum(z, _F32(0.0), out=z)
        return ln(z, lw, lb)

    def _block(self, blk: _Block, x: np.ndarray, pad: np.ndarray | None, idx: np.ndarray | None) -> np.ndarray:
        """A full block over ``x`` ``(S, L, d)``; ``pad`` ``(S, L)`` True at padding or ``None``;
        ``idx`` ``(S, L, L)`` relative-position indices or ``None``."""
        S, L, C = x.shape
        H, dh = self.H, self.dh
        a = lin(norm(x), blk.w_in, blk.b_in)
        q = a[..., :C].reshape(S, L, H, dh)
        k = a[..., C : 2 * C].reshape(S, L, H, dh)
        v = a[..., 2 * C : 3 * C].reshape(S, L, H, dh)
        att = q.transpose(0, 2, 1, 3) @ k.transpose(0, 2, 3, 1)  # (S, H, Lq, Lk)
        rp = self.relpos
        if idx is not None and rp is not None:  # (idx comes from relpos)
            rk = rp.keys[idx]  # (S, Lq, Lk, dh); per query row: (H, dh) @ (dh, Lk)
            att += (q @ rk.transpose(0, 1, 3, 2)).transpose(0, 2, 1, 3)
        att *= self.scale
        if pad is not None:
            att = np.where(pad[:, None, None, :], _MASKED, att)
        att = softmax_last(att)
        y = att @ v.transpose(0, 2, 1, 3)  # (S, H, L, dh)
        if idx is not None and rp is not None:
            vals = rp.values[idx]  # (S, Lq, Lk, dh)
            if blk.gated:
                vals *= rp.activate(a[..., 3 * C :])[:, None, :, :]
            y += (att.transpose(0, 2, 1, 3) @ vals).transpose(0, 2, 1, 3)
        return blk.finish(x, y.transpose(0, 2, 1, 3).reshape(S, L, C))

    def _readout_rows(self, x: np.ndarray, a: np.ndarray, pad: np.ndarray | None, rows: np.ndarray,
                      positions: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The readout block's input and attention output at flat ``rows`` of ``x`` ``(S, L, d)``,
        ``(n, d)`` each (:meth:`_Block.finish` makes the block's output of them); ``a`` is the
        block's input projection of every row, ``(S, L, 3d [+ dh])``."""
        S, L, C = x.shape
        H, dh = self.H, self.dh
        n = rows.shape[0]
        af = a.reshape(S * L, -1)
        q = af[rows, :C].reshape(n, H, 1, dh)
        slot = None if S == 1 else rows // L
        if n == S and slot is not None and np.array_equal(slot, np.arange(S)):
            ak, pos_k, pad_k = a, positions, pad  # one actor a slot, in slot order: no gathers
        else:
            ak = a if slot is None else a[slot]  # (1 or n, L, 3d [+ dh])
            pos_k = positions if slot is None or positions is None else positions[slot]  # (1 or n, L, P)
            pad_k = pad if slot is None or pad is None else pad[slot]
        att = (q @ ak[..., C : 2 * C].reshape(-1, L, H, dh).transpose(0, 2, 3, 1)).reshape(n, H, L)
        rp = self.relpos
        vals = None
        if rp is not None and positions is not None and pos_k is not None:
            ridx = rp.index(positions.reshape(S * L, -1)[rows][:, None, :] - pos_k)  # (n, L): query minus key
            att += q.reshape(n, H, dh) @ rp.keys[ridx].transpose(0, 2, 1)
            vals = rp.values[ridx]  # (n, L, dh)
            if self.readout is not None and self.readout.gated:
                vals *= rp.activate(ak[..., 3 * C :])
        att *= self.scale
        if pad_k is not None:
            att = np.where(pad_k[:, None, :], _MASKED, att)
        att = softmax_last(att)
        y = (att[:, :, None, :] @ ak[..., 2 * C : 3 * C].reshape(-1, L, H, dh).transpose(0, 2, 1, 3)).reshape(n, H, dh)
        if vals is not None:
            y += att @ vals
        return x.reshape(S * L, C)[rows], y.reshape(n, C)

    def _readout_value(self, a: np.ndarray, pad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The readout block's input and attention output at each slot's value query, ``(S, d)``
        each (the summary is :meth:`_Block.finish` of them, then :meth:`_count_term`)."""
        blk = self.readout
        assert blk is not None and blk.vq is not None  # called only with a readout block (which has the value query)
        S, L, _ = a.shape
        C, H, dh = self.d, self.H, self.dh
        att = (a[..., C : 2 * C].reshape(S, L, H, dh) * blk.vq_q).sum(-1).transpose(0, 2, 1)  # (S, H, L)
        if pad is not None:
            att = np.where(pad[:, None, :], _MASKED, att)
        att = softmax_last(np.ascontiguousarray(att))
        v = a[..., 2 * C : 3 * C].reshape(S, L, H, dh).transpose(0, 2, 1, 3)  # (S, H, L, dh)
        y0 = (att[:, :, None, :] @ v).reshape(S, C)
        if self.cfg.summary_mean:  # plus the mean of the values over each slot's entities
            vals = a[..., 2 * C : 3 * C]
            if pad is None:
                y0 = y0 + (vals.mean(1) if L else 0)
            else:
                keep = (~pad).astype(_F32)[..., None]
                y0 = y0 + (vals * keep).sum(1) / np.maximum(keep.sum(1), _F32(1))
        return np.broadcast_to(blk.vq, (S, C)), y0

    def _count_term(self, summary: np.ndarray, pad: np.ndarray | None, L: int) -> np.ndarray:
        """``summary`` plus the entity count, normalized, times a learned vector (net.summary_count;
        unchanged without it)."""
        blk = self.readout
        if blk is None or blk.count is None:
            return summary
        mean, sd, vec = blk.count
        S = summary.shape[0]
        n = np.full((S, 1), _F32(L)) if pad is None else (~pad).sum(1, keepdims=True).astype(_F32)
        return summary + np.clip((n - mean) / sd, -self.cfg.norm_clip, self.cfg.norm_clip) * vec

    def _categorical_logits(self, name: str, emb: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        w, b = self.heads[name]
        logits = emb @ w
        logits += b
        if mask is not None:
            logits = np.where(mask, logits, _NEG_INF)
        return logits

    # ------------------------------------------------------------------ forward
    def encode(self, p: Packed) -> tuple[np.ndarray, np.ndarray | None]:
        """Entity embeddings after the full blocks, ``(S, L, d)``, and the padding mask (or ``None``)."""
        d = self.d
        flat = np.zeros((p.S * p.L, d), dtype=_F32)
        for t, name in enumerate(self.entity_names):
            dest = p.dest[name]
            if dest.size == 0:
                continue
            e = self.embeds[t]
            flat[dest] = e[1] if e[0] == "featureless" else self.embed(t, p.feats[name])
        x = flat.reshape(p.S, p.L, d)
        pad = None if p.valid.all() else ~p.valid
        if self.blocks:
            idx = None
            if self.relpos is not None and p.positions is not None:
                pos = p.positions
                idx = self.relpos.index(pos[:, :, None, :] - pos[:, None, :, :])
            for blk in self.blocks:
                x = self._block(blk, x, pad, idx)
        return x, pad

    @single_blas_thread
    def logits(self, p: Packed, value: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """Masked logits of every action type (layout as :attr:`NumpyOutput.logits`) and, with
        ``value``, the value of every slot (numpy's BLAS on one thread meanwhile: :mod:`gymloop.nn.blas`)."""
        x, pad = self.encode(p)
        S, L, d = x.shape
        flat = x.reshape(S * L, d)
        actor_emb: dict[str, np.ndarray] = {}
        v = None
        summary_names = self.summary_actions
        need_summary = value or bool(summary_names)
        summary = None
        if self.readout is not None:
            blk = self.readout
            if pad is None or self.blocks:
                a = lin(norm(x), blk.w_in, blk.b_in)
            else:  # the projection of the real rows only: padding's embeddings are 0 (no block ran), projected to the bias
                real = np.flatnonzero(p.valid)
                af = np.empty((S * L, blk.w_in.shape[1]), _F32)
                af[...] = blk.b_in
                af[real] = lin(norm(flat[real]), blk.w_in, blk.b_in)
                a = af.reshape(S, L, -1)
            uniq, where = actor_rows(p, [n for n in self.action_space if n not in summary_names])
            # the actors' rows and the value queries go through the block's MLP together
            ins, ys = [], []
            if uniq.size:
                xr, yr = self._readout_rows(x, a, pad, uniq, p.positions)
                ins.append(xr)
                ys.append(yr)
            if need_summary:
                xv, yv = self._readout_value(a, pad)
                ins.append(xv)
                ys.append(yv)
            if len(ins) > 1:
                out_rows = blk.finish(np.concatenate(ins), np.concatenate(ys))
            elif ins:
                out_rows = blk.finish(ins[0], ys[0])
            else:
                out_rows = np.zeros((0, d), _F32)
            emb = out_rows[: uniq.size]
            for n, w in where.items():
                actor_emb[n] = emb[w]
            if need_summary:
                summary = self._count_term(out_rows[uniq.size :], pad, L)
        else:
            for n in self.action_space:
                if n not in summary_names:
                    actor_emb[n] = flat[p.actors[n]]
            if need_summary:
                valid = p.valid.astype(_F32)
                summary = (x * valid[:, :, None]).sum(1) / np.maximum(valid.sum(1, keepdims=True), _F32(1.0))
        if value:
            v = (summary @ self.value_w + self.value_b)[:, 0]
        for n in summary_names:  # the value head's per-observation summary, at each deciding slot
            assert summary is not None  # computed: summary_names sets need_summary
            actor_emb[n] = summary[p.actors[n]]
        out: dict[str, np.ndarray] = {}
        for name, ad in self.action_space.items():
            if head_of(ad) == POINTER:
                out[name] = self._select_logits(name, flat, actor_emb[name], p)
            else:
                out[name] = self._categorical_logits(name, actor_emb[name], p.masks[name])
        return out, v

    def forward(self, p: Packed, value: bool = True) -> NumpyOutput:
        """Log-probabilities of every action type and the value of every slot of a packed batch."""
        logits, v = self.logits(p, value)
        logp: dict[str, np.ndarray] = {}
        for name, a in self.action_space.items():
            lg = logits[name]
            if not a.kind.selects_entities:
                m = lg.max(-1, keepdims=True)
                logp[name] = lg - (m + np.log(np.exp(lg - m).sum(-1, keepdims=True)))
            elif lg.size:
                seg = p.cand_seg[name]
                n_act = p.n_cand[name].size
                mx = np.full(n_act, _NEG_INF, dtype=_F32)
                np.maximum.at(mx, seg, lg)
                z = np.zeros(n_act, dtype=_F32)
                np.add.at(z, seg, np.exp(lg - mx[seg]))
                logp[name] = lg - (mx + np.log(z))[seg]
            else:
                logp[name] = lg
        return NumpyOutput(logp, v, logits)

    def _select_logits(self, name: str, flat: np.ndarray, actor_emb: np.ndarray, p: Packed) -> np.ndarray:
        if actor_emb.shape[0] == 0:
            return np.zeros(0, _F32)
        wq, bq, wk, bk = self.qk[name]
        q = actor_emb @ wq + bq
        k = flat[p.cand[name]] @ wk + bk
        logits = (q[p.cand_seg[name]] * k).sum(-1) * self.qk_scale
        return np.where(p.masks[name], logits, _NEG_INF)

    # ------------------------------------------------------------------ actions
    def sample(self, p: Packed, rng: np.random.Generator | None = None, greedy: bool = False, value: bool = False) -> tuple[dict[str, np.ndarray], NumpyOutput]:
        """Choose actions for every actor of a packed batch.

        Returns ``(actions, output)``: per action type an int64 array with one entry per actor
        (the choice index; for select-entity the index among that actor's candidates), and the
        forward pass's :class:`NumpyOutput`. ``rng`` is required unless ``greedy``.
        """
        if rng is None and not greedy:
            raise ConfigError("sample needs a numpy Generator (rng=np.random.default_rng(seed)) unless greedy=True")
        out = self.forward(p, value=value)
        acts: dict[str, np.ndarray] = {}
        for name, a in self.action_space.items():
            lg = out.logits[name]  # the argmax of logits (plus noise) is that of log-probabilities
            if not a.kind.selects_entities:
                score = lg if greedy or rng is None else lg + rng.gumbel(size=lg.shape).astype(_F32)  # (rng is None: greedy)
                acts[name] = score.argmax(-1).astype(np.int64)
            else:
                nc = p.n_cand.get(name)
                if nc is None or nc.size == 0:
                    acts[name] = np.zeros(0, np.int64)
                    continue
                score = lg if greedy or rng is None else lg + rng.gumbel(size=lg.shape).astype(_F32)
                acts[name] = segment_argmax(score, nc)
        return acts, out

    # ------------------------------------------------------------------ one observation
    def logits_one(
        self,
        parts: list[tuple[int, Any]],
        g: np.ndarray | None,
        actor_rows: np.ndarray,
        requests: list[tuple[str, Any, Any]],
    ) -> list[np.ndarray]:
        """Masked logits for the actors of ONE observation: :func:`gymloop.nn.single.logits_one`."""
        return logits_one(self, parts, g, actor_rows, requests)


def segment_argmax(score: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """Per segment (consecutive lengths ``nc``, all >= 1), the index of the first maximum within it."""
    starts = np.cumsum(nc) - nc
    seg = np.repeat(np.arange(nc.size), nc)
    best = np.maximum.reduceat(score, starts)
    hit = np.flatnonzero(score == best[seg])
    first = np.full(nc.size, score.shape[0], dtype=np.int64)
    np.minimum.at(first, seg[hit], hit)
    return first - starts
