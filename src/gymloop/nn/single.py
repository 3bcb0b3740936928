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
_ZERO_0D = np.zeros((), dtype=_F32)  # (a 0-d array: numpy takes it faster than a scalar)
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
    """LayerNorm (no affine part) of columns ``[x; 1]`` (``d + 1`` rows, one column per entity) in
    same-shaped operations: ``c @ [x; 1]`` is ``[x centered; 1]`` and ``j @ (that squared)`` is
    ``var(x) + eps`` in every one of the first ``d`` rows and 1 in the last (the 1 carries
    LayerNorm's eps, 1e-5), so that dividing the first by the square root of the second gives
    ``[LayerNorm(x); 1]`` (:func:`_layer_norm`). (numpy's broadcasting costs more than the
    operation itself on arrays this small; these products spread the statistics instead.)"""
    c = np.zeros((d + 1, d + 1))
    c[:d, :d] = np.eye(d) - 1.0 / d
    c[d, d] = 1.0
    j = np.zeros((d + 1, d + 1))
    j[:d, :d] = 1.0 / d
    j[:d, d] = float(_LN_EPS)
    j[d, d] = 1.0
    return c.astype(_F32), j.astype(_F32)


def _layer_norm(c: np.ndarray, j: np.ndarray, xt: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``[LayerNorm(x); 1]`` of columns ``xt`` = ``[x; 1]``, with :func:`_centering_eps`'s ``c, j``
    (written to ``out`` when given)."""
    xc = c.dot(xt)
    v = j.dot(xc * xc)
    np.sqrt(v, out=v)
    return np.divide(xc, v, out=xc if out is None else out)


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

    The embeddings come out transposed, ``(d + 1, L)`` (one column per row of the observation):
    products take a transposed operand for free, and the per-row statistics then apply as
    same-shaped operations. :meth:`layout` gives, per count of rows of each type, an observation's
    starting layout, its clip bounds and means row by row, and its rows' LayerNorm weights and
    biases, extended by 1 and 0 so that the embeddings keep a last row of 1s (cached: a game's
    observations come in few shapes).
    """

    __slots__ = ("T", "F", "K", "d", "offs", "nfs", "cols", "gcols", "lo", "hi", "mean", "fold_mean", "wt", "start", "lw", "lb", "pselt",
                 "c", "j", "layouts", "cached")

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
        sds = np.ones(K)
        # the LayerNorm's weight and bias, and for the last column 1 and 0: the embeddings come with a 1
        self.lw = np.ones((T, d + 1), dtype=_F32)
        self.lb = np.zeros((T, d + 1), dtype=_F32)
        for t, e in enumerate(embeds):
            _, m, sd, clip, wt, b, lw, lb = e
            m64, sd64 = m.astype(_F64), sd.astype(_F64)
            o = self.offs[t]
            blk = slice(o, o + widths[t])
            lo[blk] = m64 - float(clip) * sd64
            hi[blk] = m64 + float(clip) * sd64
            mean[blk] = m
            sds[blk] = sd64
            w[blk, :d] = wt.astype(_F64) / sd64[:, None]
            w[F + t, :d] = b
            start[:, blk] = m  # float32 rounding is monotone: lo <= mean <= hi, so these columns clip to mean, then 0
            start[t, F + t] = 1.0
            self.lw[t, :d] = lw
            self.lb[t, :d] = lb
        self.pselt = None
        if position_idx is not None:
            P = len(position_idx[0])
            psel = np.zeros((K, P + 1), dtype=_F32)  # (and a column of 0s: see OneActorTables.actor)
            pcols = [self.offs[t] + col for t, cols in enumerate(position_idx) for col in cols]
            for t, cols in enumerate(position_idx):
                for i, col in enumerate(cols):
                    psel[self.offs[t] + col, i] = 1.0
            self.pselt = np.ascontiguousarray(psel.T)
            z = np.minimum(np.maximum(np.zeros(K, dtype=_F32), lo), hi) - mean
            for t in range(T):
                other = [c for c in pcols if not self.offs[t] <= c < self.offs[t] + widths[t]]
                start[t, other] = 0.0
                w[F + t, :d] = w[F + t, :d].astype(_F64) - z[other].astype(_F64) @ w[other, :d].astype(_F64)
        # the normalization's mean folded into every type's bias: (clip(Z) - mean) @ w is clip(Z) @ w
        # - mean @ w, the same vector for every row; exact but for float32 rounding of the products in
        # raw units, which stays within a few units of the last place while the means lie within
        # _MEAN_FOLD standard deviations of 0 (else the subtraction stays)
        self.fold_mean = bool(np.all(np.abs(mean.astype(_F64)) <= _MEAN_FOLD * sds))
        if self.fold_mean:
            w[F:, :d] = w[F:, :d].astype(_F64) - mean[:F].astype(_F64) @ w[:F, :d].astype(_F64)
        self.lo, self.hi, self.mean, self.start = lo, hi, mean, start
        self.wt = np.ascontiguousarray(w.T)
        self.c, self.j = _centering_eps(d)
        self.layouts: dict[tuple[int, ...], Layout] = {}
        self.cached = 0  # numbers held by the cached layouts

    def layout(self, counts: tuple[int, ...]) -> Layout:
        """The :class:`Layout` of an observation with ``counts[t]`` rows of type ``t``."""
        lay = self.layouts.get(counts)
        if lay is not None:
            return lay
        typ = np.repeat(np.arange(self.T), counts)
        rows, s = [], 0
        for n in counts:
            rows.append(slice(s, s + n))
            s += n
        L = s
        full = [np.broadcast_to(a, (L, self.K)) for a in (self.lo, self.hi, self.mean)]
        arrays = [self.start.take(typ, axis=0), *(np.ascontiguousarray(a) for a in full),
                  np.ascontiguousarray(self.lw.take(typ, axis=0).T), np.ascontiguousarray(self.lb.take(typ, axis=0).T)]
        for a in arrays:
            a.flags.writeable = False
        lay = Layout(arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], arrays[5], rows)
        size = s * (4 * self.K + 2 * self.d)
        if self.cached + size > _LAYOUT_CACHE:
            self.layouts.clear()
            self.cached = 0
        if size <= _LAYOUT_CACHE // 8:
            self.layouts[counts] = lay
            self.cached += size
        return lay


class Layout(NamedTuple):
    """An observation's row layout in :class:`OneObsTables` (read-only arrays: copy ``start``
    before writing)."""

    #: ``(L, K)`` the starting layout
    start: np.ndarray
    #: ``(L, K)`` the clip's lower bounds, row by row
    lo: np.ndarray
    #: ``(L, K)`` the clip's upper bounds
    hi: np.ndarray
    #: ``(L, K)`` the normalization means
    mean: np.ndarray
    #: ``(d + 1, L)`` the rows' LayerNorm weights, and 1
    lw: np.ndarray
    #: ``(d + 1, L)`` the rows' LayerNorm biases, and 0
    lb: np.ndarray
    #: each type's rows
    rows: list[slice]


_LAYOUT_CACHE = 1 << 22  # numbers the cached layouts of one policy may hold (16 MB)
_MEAN_FOLD = 8.0  # the largest |mean| / sd of a feature whose mean OneObsTables folds into the biases


class OneActorTables:
    """Precomputed tables of the readout block at ONE actor and the linear heads that read its output.

    Every row of the observation gets one column of a work matrix ``B = [n1; 1; rk; v]`` ``(nb,
    L)``: its normalized readout input ``n1``, a 1, and (with relative positions) the
    relative-position key and value of the row seen from the actor (the value then gated). With
    ``q_h`` the actor's query of head ``h`` (pre-scaled) and ``p_h`` that head's attention weights:

    * ``mq``: the actor's ``[n1; 1]`` to the ``(H, nb)`` matrix ``U`` whose row ``h`` is ``[Wk_h
      q_h; bk_h . q_h; q_h; 0]``: the query and the key projection folded, so that ``U @ B`` is
      every head's score of every row (key plus relative-position key) in one product;
    * ``wg``: ``[n1; 1]`` to the value gate (with gated relative positions);
    * ``wv``: per head ``[Wv_h Wp_h; bv_h Wp_h (+ the output bias, head 0); 0; Wp_h]``, stacked:
      the value projection, the relative values and the output projection folded into one matrix,
      applied to ``p_h B^T`` of every head at once (with ``p_h`` normalized: B's row of 1s gives the
      sums); its last output column is 0, the residual adds the actor's 1;
    * ``wm``: the actor's row after attention and its 1, ``[x | 1]``, to ``[x centered | x centered
      @ W1 / sqrt 2 | x @ heads + the heads' bias]``: the MLP's LayerNorm is then one scalar, its
      GELU an erf of the folded input; ``w2c`` carries the MLP's output through the heads (every
      actor-bound categorical head's weights and every select-entity head's query projection,
      side by side: ``heads`` gives each action type's ``(first column, width)``).

    The input of :meth:`actor` is the embeddings transposed, ``(C + 1, L)`` with a last row of 1s
    (:func:`_embed` gives it), on which the readout LayerNorm's eps rides. :attr:`per_rows` caches
    per row count the arrays that spread per-row or per-head numbers over same-shaped operations.
    """

    __slots__ = ("C", "H", "dh", "nb", "mq", "wgt", "kv", "wv", "wm", "hid", "b1", "w2c", "heads", "relpos", "strides",
                 "c", "j", "per_rows")

    def __init__(self, p: NumpyPolicy) -> None:
        blk = p.readout
        assert blk is not None  # made only with a readout block
        C, H, dh = p.d, p.H, p.dh
        self.C, self.H, self.dh = C, H, dh
        rp = p.relpos
        self.relpos = rp
        self.c, self.j = _centering_eps(C)
        n_rel = dh if rp is not None else 0
        self.nb = nb = C + 1 + 2 * n_rel
        # relative positions: the strides, and the index's offset on the positions' last row (its
        # 0 is clamped to [1, 1]); the keys and values
        self.strides = self.kv = None
        if rp is not None:
            self.strides = np.append(rp.strides, rp.offset).astype(_F32)
            self.kv = rp.kv
        self.per_rows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]] = {}
        w_in, b_in = blk.w_in.astype(_F64), blk.b_in.astype(_F64)
        # [n1; 1] -> q (pre-scaled), and q -> U (flattened row-major over (H, nb))
        wq = np.concatenate([w_in[:, :C], b_in[None, :C]]) * float(p.scale)
        wk, bk = w_in[:, C : 2 * C], b_in[C : 2 * C]
        head = np.arange(C) // dh
        a = np.zeros((H, nb, C))
        for h in range(H):
            on = head == h
            a[h, :C, on] = wk[:, on].T
            a[h, C, on] = bk[on]
            if n_rel:
                a[h, C + 1 + np.arange(dh), h * dh + np.arange(dh)] = 1.0
        self.mq = np.ascontiguousarray(a.reshape(-1, C) @ wq.T, dtype=_F32)  # (H nb, C + 1)
        self.wgt = None
        if blk.gated:
            self.wgt = np.ascontiguousarray(np.concatenate([w_in[:, 3 * C :], b_in[None, 3 * C :]]).T, dtype=_F32)
        # values and output projection, per head: p_h B^T @ wv_h
        wv, bv = w_in[:, 2 * C : 3 * C], b_in[2 * C : 3 * C]
        wp, bp = blk.wp.astype(_F64), blk.bp.astype(_F64)
        big = np.zeros((H * nb, C + 1))  # (the last column: 0; the residual brings the 1)
        for h in range(H):
            hs = slice(h * dh, (h + 1) * dh)
            o = h * nb
            big[o : o + C, :C] = wv[:, hs] @ wp[hs]
            big[o + C, :C] = bv[hs] @ wp[hs] + (bp if h == 0 else 0.0)
            if n_rel:
                big[o + C + 1 + dh : o + nb, :C] = wp[hs]
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
        if not all(np.isfinite(a).all() for a in (t.mq, t.wv, t.wm, t.b1, t.w2c) + ((t.wgt,) if t.wgt is not None else ())):
            return None
        return t

    def actor(self, xt: np.ndarray, r: int, post: np.ndarray | None) -> np.ndarray:
        """The heads' inputs at actor row ``r`` of embeddings ``xt`` ``(C + 1, L)`` (after the full
        blocks; the last row 1) with positions ``(P + 1, L)`` (the last row 0), as :func:`_embed`
        gives them: ``(n_heads_columns,)``, sliced by :attr:`heads`."""
        C = self.C
        L = xt.shape[1]
        pr = self.per_rows.get(L)
        if pr is None:
            pr = self._per_rows(L)
        ones, lo, hi, diffs = pr
        rp = self.relpos
        if rp is not None and post is not None:
            B = np.empty((self.nb, L), dtype=_F32)
            n1 = _layer_norm(self.c, self.j, xt, B[: C + 1])
            # the actor's position minus every row's, as one product (exact: one subtraction per
            # entry), clamped to the extent; the last row, 0 clamped to 1, brings the index's offset
            if L <= 64:
                dr = diffs.get(r)
                if dr is None:
                    dr = diffs[r] = self._diffs(L, r)
                rel = post.dot(dr)
            else:
                rel = post[:, r : r + 1] - post
            np.maximum(rel, lo, out=rel)
            np.minimum(rel, hi, out=rel)
            ix = self.strides.dot(rel)  # type: ignore[union-attr]  # (set with relpos)
            np.rint(ix, out=ix)
            B[C + 1 :] = self.kv.take(ix.astype(np.intp), axis=0).T  # type: ignore[union-attr]  # keys and values
            if self.wgt is not None:
                g = self.wgt.dot(n1)
                vals = B[C + 1 + self.dh :]
                vals *= np.maximum(g, _ZERO_0D, out=g) if rp.gate_kind == "relu" else rp.activate(g)
        elif self.nb == C + 1:
            B = n1 = _layer_norm(self.c, self.j, xt)
        else:  # (relative positions but none given: their keys and values count 0)
            B = np.zeros((self.nb, L), dtype=_F32)
            n1 = _layer_norm(self.c, self.j, xt, B[: C + 1])
        U = self.mq.dot(n1[:, r]).reshape(self.H, self.nb)
        att = U.dot(B)  # (H, L): every head's scores
        # the softmax without its shift by the maximum when the sums show it unneeded: every score
        # then lies within about 46 of 0, where exp keeps float32's relative precision
        np.exp(att, out=att)
        R = att.dot(B.T)  # (H, nb): per head the weighted rows, row C of B the weights' sum
        sums = R[:, C].tolist()
        if not (min(sums) > 1e-20 and sum(sums) < 1e20):  # (a NaN fails the second)
            att = U.dot(B)
            att -= _max_reduce(att, 1)[:, None]
            np.exp(att, out=att)
            R = att.dot(B.T)
        R /= att.dot(ones)  # (the sums, spread over every column of R)
        xr = R.ravel().dot(self.wv)  # (C + 1): the attention's output, and 0
        xr += xt[:, r]
        P = xr.dot(self.wm)
        xc1 = P[:C]
        inv = 1.0 / math.sqrt(float(xc1.dot(xc1)) / C + 1e-5)
        hid = self.hid
        h = P[C : C + hid]
        h *= inv
        h += self.b1
        e = np.fromiter(map(_erf, h.tolist()), _F32, hid)
        e *= h
        e += h  # h (1 + erf)
        out = e.dot(self.w2c)
        out += P[C + hid :]
        return out

    def _per_rows(self, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """For ``L`` rows: ``(L, nb)`` ones, the clamp's bounds ``(P + 1, L)`` and a cache of
        :meth:`_diffs` (cached, read-only)."""
        ones = np.ones((L, self.nb), dtype=_F32)
        lo = hi = ones
        if self.relpos is not None:
            ext = np.append(self.relpos.extent, _ONE)
            hi = np.ascontiguousarray(np.broadcast_to(ext[:, None], (ext.size, L)))
            lo = np.ascontiguousarray(np.broadcast_to(np.append(-self.relpos.extent, _ONE)[:, None], (ext.size, L)))
        for a in (ones, lo, hi):
            a.flags.writeable = False
        diffs: dict[int, np.ndarray] = {}
        pr = (ones, lo, hi, diffs)
        if len(self.per_rows) >= 64:
            self.per_rows.clear()
        if L <= 1024:
            self.per_rows[L] = pr
        return pr

    @staticmethod
    def _diffs(L: int, r: int) -> np.ndarray:
        """``(L, L)``, read-only: column ``i`` is ``e_r - e_i`` (positions times it: the actor's minus row ``i``'s)."""
        d = np.zeros((L, L), dtype=_F32)
        d[r] = 1.0
        d[np.arange(L), np.arange(L)] -= 1.0
        d.flags.writeable = False
        return d


def _embed(p: NumpyPolicy, parts: list[tuple[int, Any]], g: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Embeddings transposed, ``(d + 1, L)`` (the last row 1), and positions ``(P + 1, L)`` (the
    last row 0) of one observation's rows (positions ``None`` without relative positions)."""
    one = p.one_tables
    raw_positions = None
    if p.frame is not None:  # relpos reads the raw positions, the embeddings the frame's
        if one is not None and one.pselt is not None and p.position_idx is not None:
            raw = np.concatenate([x[:, p.position_idx[p.entity_names[t]]] for t, x in parts])
            raw_positions = np.concatenate([raw.T, np.zeros((1, raw.shape[0]), dtype=_F32)])
        parts = _in_frame(p, parts)
    if one is None:  # a featureless type: embed type by type (no relpos then)
        if p.frame is not None:
            for t, x in parts:
                if not isinstance(x, int) and not np.isfinite(x).all():
                    _bad_features(p, [(t, x)])
        embs = [p.embed(t, x) for t, x in parts]
        x = embs[0] if len(embs) == 1 else np.concatenate(embs)
        return np.concatenate([x.T, np.ones((1, x.shape[0]), dtype=_F32)]), None
    if len(parts) == one.T:
        counts = tuple([x.shape[0] for _, x in parts])
    else:
        cl = [0] * one.T
        for t, x in parts:
            cl[t] = x.shape[0]
        counts = tuple(cl)
    lay = one.layouts.get(counts)
    if lay is None:
        lay = one.layout(counts)
    Z = lay.start.copy()
    rows, cols = lay.rows, one.cols
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
    positions = raw_positions if raw_positions is not None or one.pselt is None else one.pselt.dot(Z.T)
    np.maximum(Z, lay.lo, out=Z)
    np.minimum(Z, lay.hi, out=Z)
    if not one.fold_mean:
        Z -= lay.mean
    h = one.wt.dot(Z.T)  # (d + 1, L): the embeddings before their LayerNorm, and a row of 1s
    np.maximum(h, _ZERO_0D, out=h)
    x = _layer_norm(one.c, one.j, h, h)
    x *= lay.lw
    x += lay.lb
    return x, positions


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
    xt, post = _embed(p, parts, g)
    positions = None if post is None else post.T  # (L, P + 1)
    x = xt[: p.d].T  # (L, d)
    if p.blocks:
        L = x.shape[0]
        x = np.ascontiguousarray(x).reshape(1, L, p.d)
        idx = None
        if p.relpos is not None and positions is not None:
            pos = positions[:, :-1]
            idx = p.relpos.index(pos[:, None, :] - pos[None, :, :])[None]
        for blk in p.blocks:
            x = p._block(blk, x, None, idx)
        x = x.reshape(L, p.d)
        xt = np.concatenate([x.T, np.ones((1, L), dtype=_F32)])
    one = p.one_actor
    heads = emb = None
    if one is not None and actor_rows.shape[0] == 1:
        heads = one.actor(xt, int(actor_rows[0]), post)
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
