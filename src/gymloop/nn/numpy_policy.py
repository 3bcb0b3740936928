"""The entity-transformer policy's forward pass in numpy alone (inference, no torch).

:class:`NumpyPolicy` computes what :class:`gymloop.nn.torch_policy.Policy` computes, from the
tensors and metadata of a checkpoint: per action type the log-probabilities of every choice (masked
choices ``-inf``) and the value of every slot, and it samples actions with a seeded
``np.random.Generator`` or takes the greedy argmax. Arithmetic is float32 like torch's (GELU uses an
erf accurate to 1e-10; LayerNorm's eps is 1e-5), so the two agree to about 1e-6.

Everything that does not depend on the input is prepared once, when the policy is built: weights
transposed and fused, normalization statistics turned into float32 mean and standard deviation, the
readout's value query projected. Nothing here imports torch, directly or indirectly.

Example:
    >>> import numpy as np
    >>> from gymloop.nn.numpy_policy import NumpyPolicy, erf
    >>> float(erf(np.array([0.5]))[0])  # doctest: +ELLIPSIS
    0.5204998778...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CheckpointError, ConfigError, InvalidObservationError
from ..spaces import ActionDesc
from .config import RelposConfig
from .heads import POINTER, SUMMARY, head_of
from .inputs import FrameIndex, Packed, pack
from .shapes import NetSpec, check_weights, expected_shapes, resolve

__all__ = ["NumpyPolicy", "NumpyOutput", "erf", "gelu", "check_weights", "expected_shapes", "segment_argmax"]

_F32 = np.float32
#: marks a request of :meth:`NumpyPolicy.logits_one` answered from the observation summary
OBS_SUMMARY = "summary"
_LN_EPS = 1e-5
_MASKED = np.float32(-1e9)  # the attention logit of padding, as in the torch policy
_NEG_INF = np.float32(-np.inf)
_F32_MAX = float(np.finfo(np.float32).max)
_MAX_TABLE = 1 << 25  # numbers in the one-observation tables (entity types x (feature columns + 3 d_model))

# erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2), fitted for z in [0, 6] (Chebyshev
# interpolation of log(erfc(z) / t) + z^2, converted to a power series in t). The maximum absolute
# error of erf over the real line is 1e-10; for |x| >= 6, erf(x) = sign(x) to double precision.
_ERFC_P = (
    -1.2655340125278434, 1.0004454578505158, 0.3714602017177271, 0.0944107171459283,
    -0.06363377996750358, -0.49345147429160774, 1.461372534267395, -3.9586413393291604,
    6.623879799461026, -6.456716573612718, 3.6955965048470425, -1.167909169491564,
    0.15872113402604288,
)
_ERF_SMALL = 512  # below this many elements, math.erf element by element is faster than the fit


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in float64 (absolute error below 1e-10).

    Small arrays use :func:`math.erf`; large ones a rational-exponential fit evaluated with a
    handful of vectorized operations.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size <= _ERF_SMALL:
        f = math.erf
        return np.array([f(v) for v in x.ravel().tolist()], dtype=np.float64).reshape(x.shape)
    z = np.minimum(np.abs(x), 6.0)
    t = 1.0 / (1.0 + 0.5 * z)
    p = np.full_like(t, _ERFC_P[-1])
    for c in _ERFC_P[-2::-1]:
        p *= t
        p += c
    p -= z * z
    np.exp(p, out=p)
    p *= t
    return np.copysign(1.0 - p, x)


def _gelu2(x: np.ndarray) -> np.ndarray:
    """``2 * gelu(x)`` = ``x * (1 + erf(x / sqrt(2)))`` of a float32 array (a new array)."""
    if x.size <= _ERF_SMALL:
        e = np.array(list(map(math.erf, (x * _F32(0.7071067811865476)).ravel().tolist())), dtype=_F32).reshape(x.shape)
    else:
        e = erf(x.astype(np.float64) * 0.7071067811865476).astype(_F32)
    e += _F32(1.0)
    e *= x
    return e


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf-based) GELU of a float32 array, as ``torch.nn.GELU()``."""
    e = _gelu2(x)
    e *= _F32(0.5)
    return e


_MEAN: dict[int, np.ndarray] = {}


def _norm(x: np.ndarray) -> np.ndarray:
    """LayerNorm without its affine part, over the last axis (biased variance, eps 1e-5), float32."""
    d = x.shape[-1]
    j = _MEAN.get(d)
    if j is None:
        j = _MEAN[d] = np.full((d, 1), 1.0 / d, dtype=_F32)
    x2 = x.reshape(-1, d)
    xc = x2 - x2 @ j
    var = (xc * xc) @ j
    var += _F32(_LN_EPS)
    xc /= np.sqrt(var)
    return xc.reshape(x.shape)


def _lin(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x @ w (+ b)`` over the last axis as ONE 2-D product (numpy's stacked matmul is far slower)."""
    y = x.reshape(-1, x.shape[-1]) @ w
    if b is not None:
        y += b
    return y.reshape(x.shape[:-1] + w.shape[1:])


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LayerNorm over the last axis with weight ``w`` and bias ``b``."""
    y = _norm(x)
    y *= w
    y += b
    return y


def _fold(w: np.ndarray, b: np.ndarray, ln_w: np.ndarray, ln_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``LN(x) @ w + b`` as ``norm(x) @ w' + b'``: the LayerNorm's affine part folded into ``w``, ``b``."""
    w64 = w.astype(np.float64)
    wf = ln_w.astype(np.float64)[:, None] * w64
    bf = ln_b.astype(np.float64) @ w64 + b.astype(np.float64)
    return np.ascontiguousarray(wf, dtype=_F32), bf.astype(_F32)


_max_reduce = np.maximum.reduce
_sum_reduce = np.add.reduce


def _softmax_last(a: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place (``a`` must be a temporary)."""
    a -= _max_reduce(a, axis=-1, keepdims=True)
    np.exp(a, out=a)
    a /= _sum_reduce(a, axis=-1, keepdims=True)
    return a


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
        d = r @ self.strides if r.ndim == 2 else _lin(r, self.strides)
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


class _Block:
    """One transformer block's parameters, transposed (``x @ W``), fused and with the LayerNorms'
    affine parts folded into the products that follow them.

    ``w_in`` maps the normalized input to ``[query | key | value | value gate]`` (the gate only
    with gated relative positions); ``w1`` is the MLP's first layer after ``ln2``.
    """

    __slots__ = ("w_in", "b_in", "wp", "bp", "w1", "b1", "w2", "b2", "vq", "vq_q", "gated")

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
        self.w_in, self.b_in = _fold(np.concatenate(ws, axis=1), np.concatenate(bs), ln1w, ln1b)
        self.wp, self.bp = np.ascontiguousarray(f("proj.weight").T), f("proj.bias")
        self.w1, self.b1 = _fold(f("mlp.0.weight").T, f("mlp.0.bias"), f("ln2.weight"), f("ln2.bias"))
        # gelu(h) @ w2 == (h * (1 + erf(h / sqrt 2))) @ (w2 / 2): the exact halving is folded
        self.w2, self.b2 = np.ascontiguousarray(f("mlp.2.weight").T * _F32(0.5)), f("mlp.2.bias")
        self.vq = self.vq_q = None
        if readout:
            vq = f("value_query").reshape(1, -1)
            d = vq.shape[1]
            self.vq = vq
            # the value query's projected query never depends on the input: (H, dh), pre-scaled
            q0 = _ln(vq, ln1w, ln1b) @ wq + bq
            self.vq_q = (q0.reshape(n_head, d // n_head) * _F32(1.0 / math.sqrt(d // n_head))).astype(_F32)

    def finish(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The block after attention: ``x + proj(y)``, then ``+ mlp(ln2(.))``."""
        x = x + _lin(y, self.wp, self.bp)
        out = _lin(_gelu2(_lin(_norm(x), self.w1, self.b1)), self.w2, self.b2)
        out += x
        return out


class _OneObs:
    """Precomputed tables of the one-observation embedding path (every entity type has features).

    The rows of all types go through one product: type ``t``'s raw features sit in its own column
    block of a ``(L, F)`` matrix (zeros elsewhere); the normalization clip is applied in raw units
    (``clip(x, mean - c*sd, mean + c*sd) - mean``) and the division by ``sd`` is folded into the
    stacked weights. ``table`` holds per type ``[block mask | bias | ln weight | ln bias]``.
    """

    __slots__ = ("F", "offs", "nfs", "lo", "hi", "mean", "w", "table", "psel", "d")

    def __init__(self, embeds: list[tuple], nfs: list[int], ng: int, d: int, position_idx: list[list[int]] | None) -> None:
        widths = [nf + ng for nf in nfs]
        self.F = F = sum(widths)
        self.offs = list(np.cumsum(widths) - widths)
        self.nfs = nfs
        self.d = d
        T = len(embeds)
        lo, hi, mean, ws = [], [], [], []
        table = np.zeros((T, F + 3 * d), dtype=_F32)
        for t, e in enumerate(embeds):
            _, m, sd, clip, w, b, lw, lb = e
            m64, sd64 = m.astype(np.float64), sd.astype(np.float64)
            lo.append(m64 - float(clip) * sd64)
            hi.append(m64 + float(clip) * sd64)
            mean.append(m)
            ws.append(w.astype(np.float64) / sd64[:, None])
            o = self.offs[t]
            table[t, o : o + widths[t]] = 1.0
            table[t, F : F + d] = b
            table[t, F + d : F + 2 * d] = lw
            table[t, F + 2 * d :] = lb
        self.lo = np.concatenate(lo).astype(_F32)
        self.hi = np.concatenate(hi).astype(_F32)
        self.mean = np.concatenate(mean).astype(_F32)
        self.w = np.ascontiguousarray(np.concatenate(ws), dtype=_F32)
        self.table = table
        self.psel = None
        if position_idx is not None:
            P = len(position_idx[0])
            self.psel = np.zeros((F, P), dtype=_F32)
            for t, cols in enumerate(position_idx):
                for j, c in enumerate(cols):
                    self.psel[self.offs[t] + c, j] = 1.0


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
        the columns of the relative-position features (``None`` without relpos).

    Example:
        >>> import os, tempfile
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> from gymloop.neural import random_checkpoint
        >>> path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
        >>> random_checkpoint(path, snake)  # (writing one needs torch; reading it does not)
        >>> policy = NumpyPolicy.from_file(path)
        >>> policy.entity_names, list(policy.action_space)
        (['Body', 'Food', 'Head'], ['Move'])
        >>> with gl.VecEnv(snake, num_envs=3) as env:
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
        self.summary_actions = frozenset(n for n, a in acts.items() if head_of(a) == SUMMARY)
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
            count = float(np.asarray(tensors[f"norms.{name}.count"], dtype=np.float64))
            if count <= 1:  # InputNorm.stats: identity before two samples
                mean = np.zeros(nf, dtype=_F32)
                sd = np.ones(nf, dtype=_F32)
            else:
                sd64 = np.sqrt(np.asarray(tensors[f"norms.{name}.squares_sum"], dtype=np.float64) / (count - 1))
                sd64[sd64 == 0] = 1.0
                mean = np.asarray(tensors[f"norms.{name}.mean"], dtype=np.float64).astype(_F32)
                sd = sd64.astype(_F32)
            self.embeds.append((
                "embed", mean, sd, clip, np.ascontiguousarray(g(f"embeds.{name}.0.weight").T), g(f"embeds.{name}.0.bias"),
                g(f"embeds.{name}.2.weight"), g(f"embeds.{name}.2.bias"),
            ))
        self.relpos = _Relpos(rp, g, path) if rp else None
        n_full = cfg.n_layer - 1 if cfg.readout else cfg.n_layer
        self.blocks = [_Block(g, f"blocks.{i}", False, self.H, self.relpos) for i in range(n_full)]
        self.readout = _Block(g, "readout", True, self.H, self.relpos) if cfg.readout else None
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
        self._one = None
        if self.embeds and all(e[0] == "embed" for e in self.embeds):
            pidx = None if self.position_idx is None else [self.position_idx[n] for n in self.entity_names]
            self._one = _OneObs(self.embeds, [len(ents[n]) for n in self.entity_names], ng, d, pidx)

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
        return _ln(z, lw, lb)

    def _block(self, blk: _Block, x: np.ndarray, pad: np.ndarray | None, idx: np.ndarray | None) -> np.ndarray:
        """A full block over ``x`` ``(S, L, d)``; ``pad`` ``(S, L)`` True at padding or ``None``;
        ``idx`` ``(S, L, L)`` relative-position indices or ``None``."""
        S, L, C = x.shape
        H, dh = self.H, self.dh
        a = _lin(_norm(x), blk.w_in, blk.b_in)
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
        att = _softmax_last(att)
        y = att @ v.transpose(0, 2, 1, 3)  # (S, H, L, dh)
        if idx is not None and rp is not None:
            vals = rp.values[idx]  # (S, Lq, Lk, dh)
            if blk.gated:
                vals *= rp.activate(a[..., 3 * C :])[:, None, :, :]
            y += (att.transpose(0, 2, 1, 3) @ vals).transpose(0, 2, 1, 3)
        return blk.finish(x, y.transpose(0, 2, 1, 3).reshape(S, L, C))

    def _readout_rows(self, x: np.ndarray, a: np.ndarray, pad: np.ndarray | None, rows: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
        """The readout block's output at flat ``rows`` of ``x`` ``(S, L, d)``; ``a`` is the block's
        input projection of every row, ``(S, L, 3d [+ dh])``."""
        blk = self.readout
        assert blk is not None  # called only with a readout block
        S, L, C = x.shape
        H, dh = self.H, self.dh
        n = rows.shape[0]
        slot = None if S == 1 else rows // L
        af = a.reshape(S * L, -1)
        q = af[rows, :C].reshape(n, H, 1, dh)
        ak = a if slot is None else a[slot]  # (1 or n, L, 3d [+ dh])
        att = (q @ ak[..., C : 2 * C].reshape(-1, L, H, dh).transpose(0, 2, 3, 1)).reshape(n, H, L)
        rp = self.relpos
        vals = None
        if rp is not None and positions is not None:
            pos_k = positions if slot is None else positions[slot]  # (1 or n, L, P)
            ridx = rp.index(positions.reshape(S * L, -1)[rows][:, None, :] - pos_k)  # (n, L): query minus key
            att += q.reshape(n, H, dh) @ rp.keys[ridx].transpose(0, 2, 1)
            vals = rp.values[ridx]  # (n, L, dh)
            if blk.gated:
                vals *= rp.activate(ak[..., 3 * C :])
        att *= self.scale
        if pad is not None:
            att = np.where(pad[0][None, None, :] if slot is None else pad[slot][:, None, :], _MASKED, att)
        att = _softmax_last(att)
        y = (att[:, :, None, :] @ ak[..., 2 * C : 3 * C].reshape(-1, L, H, dh).transpose(0, 2, 1, 3)).reshape(n, H, dh)
        if vals is not None:
            y += att @ vals
        return blk.finish(x.reshape(S * L, C)[rows], y.reshape(n, C))

    def _readout_value(self, a: np.ndarray, pad: np.ndarray | None) -> np.ndarray:
        """The readout block's output at each slot's value query, ``(S, d)``."""
        blk = self.readout
        assert blk is not None and blk.vq is not None  # called only with a readout block (which has the value query)
        S, L, _ = a.shape
        C, H, dh = self.d, self.H, self.dh
        att = (a[..., C : 2 * C].reshape(S, L, H, dh) * blk.vq_q).sum(-1).transpose(0, 2, 1)  # (S, H, L)
        if pad is not None:
            att = np.where(pad[:, None, :], _MASKED, att)
        att = _softmax_last(np.ascontiguousarray(att))
        v = a[..., 2 * C : 3 * C].reshape(S, L, H, dh).transpose(0, 2, 1, 3)  # (S, H, L, dh)
        y0 = (att[:, :, None, :] @ v).reshape(S, C)
        if self.cfg.summary_mean:  # plus the mean of the values over each slot's entities
            vals = a[..., 2 * C : 3 * C]
            if pad is None:
                y0 = y0 + (vals.mean(1) if L else 0)
            else:
                keep = (~pad).astype(_F32)[..., None]
                y0 = y0 + (vals * keep).sum(1) / np.maximum(keep.sum(1), _F32(1))
        return blk.finish(np.broadcast_to(blk.vq, (S, C)), y0)

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

    def logits(self, p: Packed, value: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """Masked logits of every action type (layout as :attr:`NumpyOutput.logits`) and, with
        ``value``, the value of every slot."""
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
            a = _lin(_norm(x), blk.w_in, blk.b_in)
            names = [n for n in self.action_space if n not in summary_names]
            rows = [p.actors[n] for n in names]
            allrows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
            uniq, inv = np.unique(allrows, return_inverse=True)
            emb = self._readout_rows(x, a, pad, uniq, p.positions) if uniq.size else np.zeros((0, d), _F32)
            o = 0
            for n, r in zip(names, rows):
                actor_emb[n] = emb[inv[o : o + r.size]]
                o += r.size
            if need_summary:
                summary = self._readout_value(a, pad)
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
    def _embed_one(self, parts: list[tuple[int, Any]], g: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """Embeddings ``(L, d)`` and positions ``(L, P)`` (or ``None``) of one observation's rows."""
        one = self._one
        ng = len(self.global_features)
        raw_positions = None
        if self.frame is not None:  # relpos reads the raw positions, the embeddings the frame's
            if one is not None and one.psel is not None and self.position_idx is not None:
                raw_positions = np.concatenate([x[:, self.position_idx[self.entity_names[t]]] for t, x in parts])
            parts = self._in_frame(parts)
        if one is None:  # a featureless type: embed type by type (no relpos then)
            for t, x in parts:
                if not isinstance(x, int) and not np.isfinite(x).all():
                    self._bad_features([(t, x)])
            embs = [self.embed(t, x) for t, x in parts]
            return (embs[0] if len(embs) == 1 else np.concatenate(embs)), None
        counts = [x.shape[0] for _, x in parts]
        L = sum(counts)
        Z = np.zeros((L, one.F), dtype=_F32)
        s = 0
        offs, nfs = one.offs, one.nfs
        for (t, x), n in zip(parts, counts):
            o = offs[t]
            e = s + n
            Z[s:e, o : o + nfs[t]] = x
            if ng:
                Z[s:e, o + nfs[t] : o + nfs[t] + ng] = g
            s = e
        if not np.isfinite(Z).all():
            self._bad_features(parts)
        positions = raw_positions if raw_positions is not None or one.psel is None else Z @ one.psel
        F, d = one.F, one.d
        tab = one.table if len(parts) == len(self.embeds) else one.table.take([t for t, _ in parts], axis=0)
        tab = tab.repeat(counts, axis=0)
        np.maximum(Z, one.lo, out=Z)
        np.minimum(Z, one.hi, out=Z)
        Z -= one.mean
        Z *= tab[:, :F]
        z = Z @ one.w
        z += tab[:, F : F + d]
        np.maximum(z, _F32(0.0), out=z)
        z = _norm(z)
        z *= tab[:, F + d : F + 2 * d]
        z += tab[:, F + 2 * d :]
        return z, positions

    def _in_frame(self, parts: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """One observation's rows with the other entities' positions in the reference's frame
        (what :func:`~gymloop.nn.inputs.pack_entities` does to a batch, in the same float32 steps)."""
        fr = self.frame
        assert fr is not None  # called only with a frame
        t_ref = self.entity_names.index(fr.reference)
        ref = next((x for t, x in parts if t == t_ref and not isinstance(x, int) and x.shape[0]), None)
        if ref is None:
            return parts
        ox, oy = ref[0, fr.ref_cols[0]], ref[0, fr.ref_cols[1]]
        cs, sn = _F32(1.0), _F32(0.0)
        if fr.heading_col is not None:
            a = float(ref[0, fr.heading_col])
            cs, sn = _F32(math.cos(a)), _F32(math.sin(a))
        return [(t, x if isinstance(x, int) else fr.place(self.entity_names[t], x, ox, oy, cs, sn)) for t, x in parts]

    def _bad_features(self, parts: list[tuple[int, Any]]) -> None:
        for t, x in parts:
            if isinstance(x, np.ndarray) and not np.isfinite(x).all():
                r, c = (int(i) for i in np.argwhere(~np.isfinite(x))[0])
                name = self.entity_names[t]
                raise InvalidObservationError(
                    f"entity type {name!r}, feature {self.entity_features[name][c]!r} is {x[r, c]}; features must be finite numbers"
                )
        raise InvalidObservationError("global features must be finite numbers")

    def _readout_one(self, x: np.ndarray, rows: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
        """The readout block at ``rows`` of one observation's embeddings ``x`` ``(L, d)`` (no padding)."""
        blk = self.readout
        assert blk is not None  # called only with a readout block
        L, C = x.shape
        H, dh = self.H, self.dh
        n = rows.shape[0]
        a = _norm(x) @ blk.w_in
        a += blk.b_in  # (L, 3d [+ dh])
        if n == 1:
            return self._readout_one_actor(x, a, int(rows[0]), positions)
        q = a.take(rows, axis=0)[:, :C].reshape(n, H, 1, dh)
        att = (q @ a[:, C : 2 * C].reshape(L, H, dh).transpose(1, 2, 0)).reshape(n, H, L)
        rp = self.relpos
        vals = None
        if rp is not None and positions is not None:
            ridx = rp.index(positions.take(rows, axis=0)[:, None, :] - positions)  # (n, L): query minus key
            kv = rp.kv.take(ridx, axis=0)  # (n, L, 2 dh): keys and values
            att += q.reshape(n, H, dh) @ kv[..., :dh].transpose(0, 2, 1)
            vals = kv[..., dh:]
            if blk.gated:
                vals *= rp.activate(a[:, 3 * C :])
        att *= self.scale
        att = _softmax_last(att)
        y = (att[:, :, None, :] @ a[:, 2 * C : 3 * C].reshape(L, H, dh).transpose(1, 0, 2)).reshape(n, H, dh)
        if vals is not None:
            y += att @ vals
        return blk.finish(x.take(rows, axis=0), y.reshape(n, C))

    def _readout_one_actor(self, x: np.ndarray, a: np.ndarray, r: int, positions: np.ndarray | None) -> np.ndarray:
        """:meth:`_readout_one` for a single actor at row ``r`` (two-dimensional arrays throughout)."""
        blk = self.readout
        assert blk is not None  # called only with a readout block
        L, C = x.shape
        H, dh = self.H, self.dh
        q = a[r, :C]
        att = (q.reshape(H, 1, dh) @ a[:, C : 2 * C].reshape(L, H, dh).transpose(1, 2, 0)).reshape(H, L)
        rp = self.relpos
        vals = None
        if rp is not None and positions is not None:
            kv = rp.kv.take(rp.index(positions[r] - positions), axis=0)  # (L, 2 dh): query minus key
            att += q.reshape(H, dh) @ kv[:, :dh].T
            vals = kv[:, dh:]
            if blk.gated:
                vals = vals * rp.activate(a[:, 3 * C :])
        att *= self.scale
        att = _softmax_last(att)
        y = (att.reshape(H, 1, L) @ a[:, 2 * C : 3 * C].reshape(L, H, dh).transpose(1, 0, 2)).reshape(H, dh)
        if vals is not None:
            y += att @ vals
        return blk.finish(x[r : r + 1], y.reshape(1, C))

    def _summary_one(self, x: np.ndarray) -> np.ndarray:
        """The observation summary ``(1, d)`` of one observation's embeddings ``x`` ``(L, d)`` (the value head's input)."""
        if self.readout is None:
            return x.mean(0, keepdims=True) if x.shape[0] else np.zeros((1, self.d), dtype=_F32)
        blk = self.readout
        a = _lin(_norm(x[None]), blk.w_in, blk.b_in)
        return self._readout_value(a, None)

    def logits_one(
        self,
        parts: list[tuple[int, Any]],
        g: np.ndarray | None,
        actor_rows: np.ndarray,
        requests: list[tuple[str, Any, Any]],
    ) -> list[np.ndarray]:
        """Masked logits for the actors of ONE observation (no padding, no value).

        Args:
            parts: the observation's rows, entity type by entity type in network order:
                ``(type index, raw features (n, n_features) float32)`` (for a featureless type the
                row count ``n`` instead), only for types present.
            g: ``(n_globals,)`` float32 global features, or ``None`` when the network has none.
            actor_rows: ``(n_actors,)`` row of each actor in the sequence.
            requests: per asked action type ``(name, mask, candidate_rows)``: ``mask`` ``(n_actors,
                n)`` bool or ``None``; ``candidate_rows`` the rows of the candidates (select-entity),
                ``None`` (categorical) or :data:`OBS_SUMMARY` (a global decision: one row, from the
                observation summary).

        Returns:
            Per request, ``(n_actors, n_choices)`` logits (``(n_actors, n_candidates)`` for
            select-entity), masked choices ``-inf``.

        Raises:
            InvalidObservationError: a feature is not a finite number.
        """
        x, positions = self._embed_one(parts, g)
        if self.blocks:
            L = x.shape[0]
            x = x.reshape(1, L, self.d)
            idx = None
            if self.relpos is not None and positions is not None:
                idx = self.relpos.index(positions[:, None, :] - positions[None, :, :])[None]
            for blk in self.blocks:
                x = self._block(blk, x, None, idx)
            x = x.reshape(L, self.d)
        if self.readout is None:
            emb = x.take(actor_rows, axis=0)
        elif actor_rows.size:
            emb = self._readout_one(x, actor_rows, positions)
        else:
            emb = np.zeros((0, self.d), dtype=_F32)
        out = []
        summary = None
        for name, mask, cand in requests:
            if cand is OBS_SUMMARY:
                if summary is None:
                    summary = self._summary_one(x)
                out.append(self._categorical_logits(name, summary, mask))
            elif cand is None:
                out.append(self._categorical_logits(name, emb, mask))
            else:
                wq, bq, wk, bk = self.qk[name]
                q = emb @ wq + bq
                k = x.take(cand, axis=0) @ wk + bk
                lg = (q @ k.T) * self.qk_scale
                if mask is not None:
                    lg = np.where(mask, lg, _NEG_INF)
                out.append(lg)
        return out


def segment_argmax(score: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """Per segment (consecutive lengths ``nc``, all >= 1), the index of the first maximum within it."""
    starts = np.cumsum(nc) - nc
    seg = np.repeat(np.arange(nc.size), nc)
    best = np.maximum.reduceat(score, starts)
    hit = np.flatnonzero(score == best[seg])
    first = np.full(nc.size, score.shape[0], dtype=np.int64)
    np.minimum.at(first, seg[hit], hit)
    return first - starts
