"""One decision with numpy: one observation's logits without padding (what ``gl.load``'s agents run).

:func:`logits_one` computes for ONE observation what :meth:`NumpyPolicy.logits
<gymloop.nn.numpy_policy.NumpyPolicy.logits>` computes for a padded batch, faster for a single
decision: the embeddings of every entity type in one product (:class:`OneObsTables`), the readout
block only at the actors' rows, the summary only when a global decision asks for it. Its inputs come
from :meth:`gymloop.neural.ObsEncoder.prepare_one`, the single-observation builder
(:class:`gymloop.featurize.OneObsBuilder`) bound to the checkpoint, which checks every value; the ONNX exporter
(:func:`gymloop.export.onnx.policy_to_onnx`) writes the same inputs and outputs as a graph (its
operations those of the network as trained, not the folded tables below: the outputs agree to
float32 rounding).

A decision costs a few dozen numpy calls on tiny arrays, each worth about half a microsecond
whatever its size, so the path is written as few and large operations: everything that does not
depend on the observation is folded into tables when the policy is built. The common decision (one
actor, a readout block) goes through :class:`OneActorTables`: the readout's query of that one actor
against every row's key and relative-position key in one product, the values and the output
projection folded into one matrix per head, the LayerNorm of the MLP reduced to a scalar, and the
linear heads folded into the MLP's last layer.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import random_checkpoint
    >>> from gymloop.nn.numpy_policy import NumpyPolicy
    >>> path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
    >>> random_checkpoint(path, snake)
    >>> policy = NumpyPolicy.from_file(path)   # types in network order: Body, Food, Head
    >>> parts = [(1, np.array([[3, 4]], np.float32)), (2, np.array([[1, 1]], np.float32))]
    >>> (lg,) = logits_one(policy, parts, None, np.array([1]), [("Move", None, None)])
    >>> lg.shape
    (1, 4)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import InvalidObservationError
from .numpy_ops import lin, norm, softmax_last

if TYPE_CHECKING:
    from .numpy_policy import NumpyPolicy

__all__ = ["OBS_SUMMARY", "SummaryCandidates", "OneActorTables", "OneObsTables", "logits_one"]

_F32 = np.float32
_F64 = np.float64
_NEG_INF = np.float32(-np.inf)
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_LN_EPS = np.float32(1e-5)
_SQRT2 = math.sqrt(2.0)
_erf = math.erf
_max_reduce = np.maximum.reduce
#: marks a request of :func:`logits_one` answered from the observation summary
OBS_SUMMARY = "summary"


class SummaryCandidates(NamedTuple):
    """The candidates of a request of :func:`logits_one` whose query is the observation summary (a
    global select-entity: one row, no actor entity)."""

    #: the candidates' rows in the observation's sequence
    rows: np.ndarray


def _centering_eps(d: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows ``[x | 1]`` (``d + 1`` columns): ``c`` centers ``x`` and maps the 1 to ``sqrt(eps d)``,
    ``j`` averages over ``d``, so that ``((xc * xc) @ j)`` is the variance of ``x`` plus
    LayerNorm's eps (1e-5)."""
    c = np.zeros((d + 1, d + 1))
    c[:d, :d] = np.eye(d) - 1.0 / d
    c[d, d] = math.sqrt(float(_LN_EPS) * d)
    return c.astype(_F32), np.full((d + 1, 1), 1.0 / d, dtype=_F32)


class OneObsTables:
    """Precomputed tables of the one-observation embedding path (every entity type has features).

    The rows of all types go through one product. A row of type ``t`` is laid out over ``K``
    columns: every type's feature columns (its own raw features in its block; every other type's
    block holding that other type's normalization mean, its position columns 0), then one
    indicator column per type (1 at ``t``). The normalization clip is applied in raw units
    (``clip(x, mean - c*sd, mean + c*sd) - mean``: the other blocks become exactly 0 but for the
    position columns, whose constant is taken off the type's bias; the indicators stay), the
    division by ``sd`` is folded into the stacked weights ``w`` and each type's bias sits in its
    indicator's row of ``w``, whose last column gives every row a 1 (the LayerNorm's eps rides on
    it: :func:`_centering_eps`). The positions are one product ``psel`` of the raw layout (exact:
    the other columns are 0), with a last column of 0s.

    :meth:`layout` gives, per count of rows of each type, the starting rows of an observation and
    its rows' LayerNorm weights and biases, extended by 0 and 1 so that the embeddings keep a
    last column of 1s (cached: a game's observations come in few shapes).
    """

    __slots__ = ("T", "F", "K", "d", "offs", "nfs", "cols", "gcols", "lo", "hi", "mean", "w", "start", "lw", "lb", "psel", "c",
                 "j", "layouts", "cached")

    def __init__(self, embeds: list[tuple], nfs: list[int], ng: int, d: int, position_idx: list[list[int]] | None) -> None:
        widths = [nf + ng for nf in nfs]
        self.T = T = len(embeds)
        self.F = F = sum(widths)
        self.K = K = F + T
        self.d = d
        self.offs = [int(o) for o in np.cumsum(widths) - widths]
        self.nfs = nfs
        self.cols = [slice(o, o + nf) for o, nf in zip(self.offs, nfs)]
        self.gcols = [slice(o + nf, o + nf + ng) for o, nf in zip(self.offs, nfs)]
        lo = np.zeros(K, dtype=_F32)
        hi = np.ones(K, dtype=_F32)  # (the indicator columns pass the clip unchanged)
        mean = np.zeros(K, dtype=_F32)
        w = np.zeros((K, d + 1), dtype=_F32)
        w[F:, d] = 1.0  # every row's last column is 1: its LayerNorm's eps rides on it
        start = np.zeros((T, K), dtype=_F32)
        # the LayerNorm's weight and bias, and for the last column 0 and 1: the embeddings come with a 1
        self.lw = np.zeros((T, d + 1), dtype=_F32)
        self.lb = np.ones((T, d + 1), dtype=_F32)
        for t, e in enumerate(embeds):
            _, m, sd, clip, wt, b, lw, lb = e
            m64, sd64 = m.astype(_F64), sd.astype(_F64)
            o = self.offs[t]
            blk = slice(o, o + widths[t])
            lo[blk] = m64 - float(clip) * sd64
            hi[blk] = m64 + float(clip) * sd64
            mean[blk] = m
            w[blk, :d] = wt.astype(_F64) / sd64[:, None]
            w[F + t, :d] = b
            start[:, blk] = m  # float32 rounding is monotone: lo <= mean <= hi, so these columns clip to mean, then 0
            start[t, F + t] = 1.0
            self.lw[t, :d] = lw
            self.lb[t, :d] = lb
        self.psel = None
        if position_idx is not None:
            P = len(position_idx[0])
            self.psel = np.zeros((K, P + 1), dtype=_F32)  # (and a column of 0s: see OneActorTables.actor)
            pcols = [self.offs[t] + col for t, cols in enumerate(position_idx) for col in cols]
            for t, cols in enumerate(position_idx):
                for i, col in enumerate(cols):
                    self.psel[self.offs[t] + col, i] = 1.0
            z = np.minimum(np.maximum(np.zeros(K, dtype=_F32), lo), hi) - mean
            for t in range(T):
                other = [c for c in pcols if not self.offs[t] <= c < self.offs[t] + widths[t]]
                start[t, other] = 0.0
                w[F + t, :d] = w[F + t, :d].astype(_F64) - z[other].astype(_F64) @ w[other, :d].astype(_F64)
        self.lo, self.hi, self.mean, self.w, self.start = lo, hi, mean, w, start
        self.c, self.j = _centering_eps(d)
        self.layouts: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray, list[slice]]] = {}
        self.cached = 0  # numbers held by the cached layouts

    def layout(self, counts: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[slice]]:
        """``(start, lw, lb, rows)`` of an observation with ``counts[t]`` rows of type ``t``: its
        starting layout ``(L, K)`` (copy it before writing), its rows' LayerNorm weights and biases
        ``(L, d + 1)`` (read-only) and each type's rows."""
        lay = self.layouts.get(counts)
        if lay is not None:
            return lay
        typ = np.repeat(np.arange(self.T), counts)
        rows, s = [], 0
        for n in counts:
            rows.append(slice(s, s + n))
            s += n
        arrays = [self.start.take(typ, axis=0), self.lw.take(typ, axis=0), self.lb.take(typ, axis=0)]
        for a in arrays:
            a.flags.writeable = False
        lay = (arrays[0], arrays[1], arrays[2], rows)
        size = s * (self.K + 2 * self.d)
        if self.cached + size > _LAYOUT_CACHE:
            self.layouts.clear()
            self.cached = 0
        if size <= _LAYOUT_CACHE // 8:
            self.layouts[counts] = lay
            self.cached += size
        return lay


_LAYOUT_CACHE = 1 << 22  # numbers the cached layouts of one policy may hold (16 MB)


class OneActorTables:
    """Precomputed tables of the readout block at ONE actor and the linear heads that read its output.

    Every row of the observation gets one row of a work matrix ``B = [n1 | 1 | rk | v]``: its
    normalized readout input ``n1``, a 1, and (with relative positions) the relative-position key
    and value of the row seen from the actor (the value then gated). With ``q_h`` the actor's
    query of head ``h`` (pre-scaled) and ``p_h`` that head's attention weights:

    * ``mq``: the actor's ``[n1 | 1]`` to the ``(d + 1 [+ d_head], H)`` matrix ``U`` whose column
      ``h`` is ``[Wk_h q_h; bk_h . q_h; q_h]``: the query and the key projection folded, so that
      ``B @ U`` is every head's score of every row (key plus relative-position key) in one product;
    * ``wg``: ``[n1 | 1]`` to the value gate (with gated relative positions);
    * ``wv``: per head ``[Wv_h Wp_h; bv_h Wp_h (+ the output bias, head 0); 0; Wp_h]``, stacked:
      the value projection, the relative values and the output projection folded into one matrix,
      applied to ``p_h^T B`` of every head at once (the column of 1s carries the softmax's sum, so
      the normalization is one division); a last output column passes head 0's 1 on;
    * ``wm``: the actor's row after attention and its 1, ``[x | 1]``, to ``[x centered | x centered
      @ W1 / sqrt 2 | x @ heads + the heads' bias]``: the MLP's LayerNorm is then one scalar, its
      GELU an erf of the folded input; ``w2c`` carries the MLP's output through the heads (every
      actor-bound categorical head's weights and every select-entity head's query projection,
      side by side: ``heads`` gives each action type's ``(first column, width)``).

    Every ``(L, d + 1)`` input of :meth:`actor` has the last column 1 (:func:`_embed` gives it), on
    which the readout LayerNorm's eps rides; the work matrix starts from a cached template per row
    count (:attr:`work`).
    """

    __slots__ = ("C", "H", "dh", "nb", "mq", "wg", "wv", "wm", "hid", "b1", "w2c", "heads", "relpos", "clamp", "c",
                 "j", "work")

    def __init__(self, p: NumpyPolicy) -> None:
        blk = p.readout
        assert blk is not None  # made only with a readout block
        C, H, dh = p.d, p.H, p.dh
        self.C, self.H, self.dh = C, H, dh
        rp = p.relpos
        self.relpos = rp
        self.c, self.j = _centering_eps(C)
        # relative positions: (lower bounds, upper bounds, strides); the positions' last column is
        # 0, clamped to [1, 1] it adds the index's offset
        self.clamp = None
        if rp is not None:
            self.clamp = (np.append(-rp.extent, _ONE), np.append(rp.extent, _ONE), np.append(rp.strides, rp.offset))
        self.work: dict[int, np.ndarray] = {}  # per row count, B's starting value (read-only)
        n_rel = dh if rp is not None else 0
        self.nb = nb = C + 1 + 2 * n_rel
        w_in, b_in = blk.w_in.astype(_F64), blk.b_in.astype(_F64)
        # [n1 | 1] -> q (pre-scaled), and q -> U (flattened row-major over (C + 1 + n_rel, H))
        wq = np.concatenate([w_in[:, :C], b_in[None, :C]]) * float(p.scale)
        wk, bk = w_in[:, C : 2 * C], b_in[C : 2 * C]
        head = np.arange(C) // dh
        a = np.zeros((C + 1 + n_rel, H, C))
        for h in range(H):
            on = head == h
            a[:C, h, on] = wk[:, on]
            a[C, h, on] = bk[on]
            if n_rel:
                a[C + 1 + np.arange(dh), h, h * dh + np.arange(dh)] = 1.0
        self.mq = np.ascontiguousarray(wq @ a.reshape(-1, C).T, dtype=_F32)
        self.wg = None
        if blk.gated:
            self.wg = np.concatenate([w_in[:, 3 * C :], b_in[None, 3 * C :]]).astype(_F32)
        # values and output projection, per head: p_h^T B @ wv_h
        wv, bv = w_in[:, 2 * C : 3 * C], b_in[2 * C : 3 * C]
        wp, bp = blk.wp.astype(_F64), blk.bp.astype(_F64)
        big = np.zeros((H * nb, C + 1))  # (the last column: 1, from head 0's column of 1s)
        for h in range(H):
            hs = slice(h * dh, (h + 1) * dh)
            o = h * nb
            big[o : o + C, :C] = wv[:, hs] @ wp[hs]
            big[o + C, :C] = bv[hs] @ wp[hs] + (bp if h == 0 else 0.0)
            if n_rel:
                big[o + C + 1 + dh : o + nb, :C] = wp[hs]
        big[C, C] = 1.0
        self.wv = big.astype(_F32)
        # the MLP and the heads after it
        names = [n for n in p.action_space if n not in p.summary_actions]
        hw, hb, self.heads = [], [], {}
        o = 0
        for n in names:
            w, b = p.heads[n] if n in p.heads else p.qk[n][:2]
            self.heads[n] = (o, w.shape[1])
            o += w.shape[1]
            hw.append(w.astype(_F64))
            hb.append(b.astype(_F64))
        wc = np.concatenate(hw, axis=1) if hw else np.zeros((C, 0))
        bcons = np.concatenate(hb) if hb else np.zeros(0)
        w1, b1 = blk.w1.astype(_F64), blk.b1.astype(_F64)
        w2, b2 = blk.w2.astype(_F64) * _SQRT2, blk.b2.astype(_F64)  # (w2 already holds gelu's halving)
        self.hid = w1.shape[1]
        cen = np.eye(C) - 1.0 / C
        wm = np.zeros((C + 1, C + self.hid + wc.shape[1]))
        wm[:C] = np.concatenate([cen, cen @ w1 / _SQRT2, wc], axis=1)
        wm[C, C + self.hid :] = b2 @ wc + bcons  # (the heads' bias, on the row's last entry, 1)
        self.wm = wm.astype(_F32)
        self.b1 = (b1 / _SQRT2).astype(_F32)
        self.w2c = np.ascontiguousarray(w2 @ wc, dtype=_F32)

    @classmethod
    def of(cls, p: NumpyPolicy) -> OneActorTables | None:
        """The tables of ``p`` (``None`` without a readout block, or when folding overflows float32)."""
        if p.readout is None:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            t = cls(p)
        if not all(np.isfinite(a).all() for a in (t.mq, t.wv, t.wm, t.b1, t.w2c) + ((t.wg,) if t.wg is not None else ())):
            return None
        return t

    def actor(self, x: np.ndarray, r: int, positions: np.ndarray | None) -> np.ndarray:
        """The heads' inputs at actor row ``r`` of embeddings ``x`` ``(L, d + 1)`` (after the full
        blocks; the last column 1) with positions ``(L, P + 1)`` (the last column 0), as
        :func:`_embed` gives them: ``(n_heads_columns,)``, sliced by :attr:`heads`."""
        C = self.C
        L = x.shape[0]
        xc = x.dot(self.c)
        v = (xc * xc).dot(self.j)  # variance plus eps
        np.sqrt(v, out=v)
        B = self.work.get(L)
        if B is None:
            B = self._work(L)
        B = B.copy()
        np.divide(xc[:, :C], v, out=B[:, :C])
        n1 = B[:, : C + 1]
        u = B[r, : C + 1].dot(self.mq)
        rp = self.relpos
        cl = self.clamp
        if rp is not None and cl is not None and positions is not None:  # (clamp is set with relpos)
            dh = self.dh
            rel = positions[r] - positions  # query minus key, clamped to the extent
            np.maximum(rel, cl[0], out=rel)
            np.minimum(rel, cl[1], out=rel)
            ix = rel.dot(cl[2])
            np.rint(ix, out=ix)
            rp.kv.take(ix.astype(np.intp), axis=0, out=B[:, C + 1 :])  # keys and values
            att = u.reshape(C + 1 + dh, self.H).T.dot(B[:, : C + 1 + dh].T)
            if self.wg is not None:
                g = n1.dot(self.wg)
                vals = B[:, C + 1 + dh :]
                vals *= np.maximum(g, _ZERO, out=g) if rp.gate_kind == "relu" else rp.activate(g)
        else:
            att = u.reshape(C + 1, self.H).T.dot(n1.T)
        att -= _max_reduce(att, 1)[:, None]  # (H, L): every head's scores
        np.exp(att, out=att)
        R = att.dot(B)  # (H, nb): per head the weighted rows, column C the weights' sum
        R /= R[:, C : C + 1]
        xr = R.ravel().dot(self.wv)  # (C + 1): the attention's output, and a 1
        xr[:C] += x[r, :C]
        P = xr.dot(self.wm)
        xc1 = P[:C]
        inv = _F32(1.0 / math.sqrt(float(xc1.dot(xc1)) / C + 1e-5))
        hid = self.hid
        h = P[C : C + hid]
        h *= inv
        h += self.b1
        e = np.array(list(map(_erf, h.tolist())), dtype=_F32)
        e += _ONE
        e *= h
        out = e.dot(self.w2c)
        out += P[C + hid :]
        return out

    def _work(self, L: int) -> np.ndarray:
        """B's starting value for ``L`` rows: 0, and the column of 1s (cached, read-only)."""
        b = np.zeros((L, self.nb), dtype=_F32)
        b[:, self.C] = 1.0
        b.flags.writeable = False
        if len(self.work) >= 64:
            self.work.clear()
        if L <= 1024:
            self.work[L] = b
        return b


def _embed(p: NumpyPolicy, parts: list[tuple[int, Any]], g: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Embeddings ``(L, d + 1)`` (the last column 1) and positions ``(L, P + 1)`` (the last column 0)
    of one observation's rows (positions ``None`` without relative positions)."""
    one = p.one_tables
    raw_positions = None
    if p.frame is not None:  # relpos reads the raw positions, the embeddings the frame's
        if one is not None and one.psel is not None and p.position_idx is not None:
            raw = np.concatenate([x[:, p.position_idx[p.entity_names[t]]] for t, x in parts])
            raw_positions = np.concatenate([raw, np.zeros((raw.shape[0], 1), dtype=_F32)], axis=1)
        parts = _in_frame(p, parts)
    if one is None:  # a featureless type: embed type by type (no relpos then)
        if p.frame is not None:
            for t, x in parts:
                if not isinstance(x, int) and not np.isfinite(x).all():
                    _bad_features(p, [(t, x)])
        embs = [p.embed(t, x) for t, x in parts]
        x = embs[0] if len(embs) == 1 else np.concatenate(embs)
        return np.concatenate([x, np.ones((x.shape[0], 1), dtype=_F32)], axis=1), None
    if len(parts) == one.T:
        counts = tuple([x.shape[0] for _, x in parts])
    else:
        cl = [0] * one.T
        for t, x in parts:
            cl[t] = x.shape[0]
        counts = tuple(cl)
    lay = one.layouts.get(counts)
    start, lw, lb, rows = lay if lay is not None else one.layout(counts)
    Z = start.copy()
    cols = one.cols
    if g is None:
        for t, x in parts:
            Z[rows[t], cols[t]] = x
    else:
        gcols = one.gcols
        for t, x in parts:
            Z[rows[t], cols[t]] = x
            Z[rows[t], gcols[t]] = g
    if p.frame is not None and not np.isfinite(Z).all():  # (the inputs are checked; offsets in a frame may overflow)
        _bad_features(p, parts)
    positions = raw_positions if raw_positions is not None or one.psel is None else Z.dot(one.psel)
    np.maximum(Z, one.lo, out=Z)
    np.minimum(Z, one.hi, out=Z)
    Z -= one.mean
    h = Z.dot(one.w)  # (L, d + 1): the embedding before its LayerNorm, and a 1
    np.maximum(h, _ZERO, out=h)
    hc = h.dot(one.c)
    v = (hc * hc).dot(one.j)  # variance plus eps
    np.sqrt(v, out=v)
    hc /= v
    hc *= lw
    hc += lb
    return hc, positions


def _in_frame(p: NumpyPolicy, parts: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """One observation's rows with the other entities' positions in the reference's frame
    (what :func:`~gymloop.nn.inputs.pack_entities` does to a batch, in the same float32 steps)."""
    fr = p.frame
    assert fr is not None  # called only with a frame
    t_ref = p.entity_names.index(fr.reference)
    ref = next((x for t, x in parts if t == t_ref and not isinstance(x, int) and x.shape[0]), None)
    if ref is None:
        return parts
    ox, oy = ref[0, fr.ref_cols[0]], ref[0, fr.ref_cols[1]]
    cs, sn = _F32(1.0), _F32(0.0)
    if fr.heading_col is not None:
        a = float(ref[0, fr.heading_col])
        cs, sn = _F32(math.cos(a)), _F32(math.sin(a))
    return [(t, x if isinstance(x, int) else fr.place(p.entity_names[t], x, ox, oy, cs, sn)) for t, x in parts]

def _bad_features(p: NumpyPolicy, parts: list[tuple[int, Any]]) -> None:
    for t, x in parts:
        if isinstance(x, np.ndarray) and not np.isfinite(x).all():
            r, c = (int(i) for i in np.argwhere(~np.isfinite(x))[0])
            name = p.entity_names[t]
            raise InvalidObservationError(
                f"entity type {name!r}, feature {p.entity_features[name][c]!r} is {x[r, c]}; features must be finite numbers"
            )
    raise InvalidObservationError("global features must be finite numbers")

def _readout(p: NumpyPolicy, x: np.ndarray, rows: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
    """The readout block at ``rows`` of one observation's embeddings ``x`` ``(L, d)`` (no padding)."""
    blk = p.readout
    assert blk is not None  # called only with a readout block
    L, C = x.shape
    H, dh = p.H, p.dh
    n = rows.shape[0]
    a = norm(x) @ blk.w_in
    a += blk.b_in  # (L, 3d [+ dh])
    q = a.take(rows, axis=0)[:, :C].reshape(n, H, 1, dh)
    att = (q @ a[:, C : 2 * C].reshape(L, H, dh).transpose(1, 2, 0)).reshape(n, H, L)
    rp = p.relpos
    vals = None
    if rp is not None and positions is not None:
        pos = positions[:, :-1]
        ridx = rp.index(pos.take(rows, axis=0)[:, None, :] - pos)  # (n, L): query minus key
        kv = rp.kv.take(ridx, axis=0)  # (n, L, 2 dh): keys and values
        att += q.reshape(n, H, dh) @ kv[..., :dh].transpose(0, 2, 1)
        vals = kv[..., dh:]
        if blk.gated:
            vals *= rp.activate(a[:, 3 * C :])
    att *= p.scale
    att = softmax_last(att)
    y = (att[:, :, None, :] @ a[:, 2 * C : 3 * C].reshape(L, H, dh).transpose(1, 0, 2)).reshape(n, H, dh)
    if vals is not None:
        y += att @ vals
    return blk.finish(x.take(rows, axis=0), y.reshape(n, C))

def _summary(p: NumpyPolicy, x: np.ndarray) -> np.ndarray:
    """The observation summary ``(1, d)`` of one observation's embeddings ``x`` ``(L, d)`` (the value head's input)."""
    if p.readout is None:
        return x.mean(0, keepdims=True) if x.shape[0] else np.zeros((1, p.d), dtype=_F32)
    blk = p.readout
    a = lin(norm(x[None]), blk.w_in, blk.b_in)
    return p._count_term(blk.finish(*p._readout_value(a, None)), None, x.shape[0])

def logits_one(
    p: NumpyPolicy,
    parts: list[tuple[int, Any]],
    g: np.ndarray | None,
    actor_rows: np.ndarray,
    requests: list[tuple[str, Any, Any]],
) -> list[np.ndarray]:
    """Masked logits for the actors of ONE observation (no padding, no value).

    Args:
        parts: the observation's rows, entity type by entity type in network order:
            ``(type index, raw features (n, n_features) float32)`` (for a featureless type the
            row count ``n`` instead), only for types present; finite, as the single-observation
            builder (:class:`~gymloop.featurize.OneObsBuilder`) checks them.
        g: ``(n_globals,)`` float32 global features (finite), or ``None`` when the network has none.
        actor_rows: ``(n_actors,)`` row of each actor in the sequence.
        requests: per asked action type ``(name, mask, candidate_rows)``: ``mask`` ``(n_actors,
            n)`` bool or ``None``; ``candidate_rows`` the rows of the candidates (select-entity),
            ``None`` (categorical), :data:`OBS_SUMMARY` (a global decision: one row, from the
            observation summary) or :class:`SummaryCandidates` (a global select-entity: one row,
            the summary's query against the candidates' keys).

    Returns:
        Per request, ``(n_actors, n_choices)`` logits (``(n_actors, n_candidates)`` for
        select-entity), masked choices ``-inf``.

    Raises:
        InvalidObservationError: a position relative to the egocentric frame's origin is not finite
            (features far beyond the positions' scale).
    """
    xe, positions = _embed(p, parts, g)
    x = xe[:, : p.d]
    if p.blocks:
        L = x.shape[0]
        x = x.reshape(1, L, p.d)
        idx = None
        if p.relpos is not None and positions is not None:
            pos = positions[:, :-1]
            idx = p.relpos.index(pos[:, None, :] - pos[None, :, :])[None]
        for blk in p.blocks:
            x = p._block(blk, x, None, idx)
        x = x.reshape(L, p.d)
        xe = np.concatenate([x, np.ones((L, 1), dtype=_F32)], axis=1)
    one = p.one_actor
    heads = emb = None
    if one is not None and actor_rows.shape[0] == 1:
        heads = one.actor(xe, int(actor_rows[0]), positions)
    elif p.readout is None:
        emb = x.take(actor_rows, axis=0)
    elif actor_rows.size:
        emb = _readout(p, x, actor_rows, positions)
    else:
        emb = np.zeros((0, p.d), dtype=_F32)
    out = []
    summary = None
    for name, mask, cand in requests:
        if cand is OBS_SUMMARY:
            if summary is None:
                summary = _summary(p, x)
            out.append(p._categorical_logits(name, summary, mask))
            continue
        if cand is None:
            if heads is not None:
                o, n = one.heads[name]  # type: ignore[union-attr]  # (heads comes from one)
                lg = heads[o : o + n].reshape(1, n)
                out.append(lg if mask is None else np.where(mask, lg, _NEG_INF))
            else:
                assert emb is not None  # (set whenever heads is not)
                out.append(p._categorical_logits(name, emb, mask))
            continue
        wq, bq, wk, bk = p.qk[name]
        if type(cand) is SummaryCandidates:
            if summary is None:
                summary = _summary(p, x)
            q = summary @ wq + bq
            cand = cand.rows
        elif heads is not None:
            o, n = one.heads[name]  # type: ignore[union-attr]
            q = heads[o : o + n].reshape(1, n)
        else:
            q = emb @ wq + bq
        k = x.take(cand, axis=0) @ wk + bk
        lg = (q @ k.T) * p.qk_scale
        if mask is not None:
            lg = np.where(mask, lg, _NEG_INF)
        out.append(lg)
    return out
