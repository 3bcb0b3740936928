"""One decision with numpy: one observation's logits without padding (what ``gl.load``'s agents run).

:func:`logits_one` computes for ONE observation what :meth:`NumpyPolicy.logits
<gymloop.nn.numpy_policy.NumpyPolicy.logits>` computes for a padded batch, faster for a single
decision: the embeddings of every entity type in one product (:class:`OneObsTables`), the readout
block only at the actors' rows, the summary only when a global decision asks for it. Its inputs come
from :meth:`gymloop.neural.ObsEncoder.prepare_one`, the single-observation builder
(:class:`gymloop.featurize.OneObsBuilder`) bound to the checkpoint, which checks every value; the ONNX exporter
(:func:`gymloop.export.onnx.policy_to_onnx`) writes this same function as a graph.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import InvalidObservationError
from .numpy_ops import lin, norm, softmax_last

if TYPE_CHECKING:
    from .numpy_policy import NumpyPolicy

__all__ = ["OBS_SUMMARY", "SummaryCandidates", "OneObsTables", "logits_one"]

_F32 = np.float32
_NEG_INF = np.float32(-np.inf)
#: marks a request of :func:`logits_one` answered from the observation summary
OBS_SUMMARY = "summary"


class SummaryCandidates(NamedTuple):
    """The candidates of a request of :func:`logits_one` whose query is the observation summary (a
    global select-entity: one row, no actor entity)."""

    #: the candidates' rows in the observation's sequence
    rows: np.ndarray


class OneObsTables:
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


def _embed(p: NumpyPolicy, parts: list[tuple[int, Any]], g: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Embeddings ``(L, d)`` and positions ``(L, P)`` (or ``None``) of one observation's rows."""
    one = p.one_tables
    ng = len(p.global_features)
    raw_positions = None
    if p.frame is not None:  # relpos reads the raw positions, the embeddings the frame's
        if one is not None and one.psel is not None and p.position_idx is not None:
            raw_positions = np.concatenate([x[:, p.position_idx[p.entity_names[t]]] for t, x in parts])
        parts = _in_frame(p, parts)
    if one is None:  # a featureless type: embed type by type (no relpos then)
        if p.frame is not None:
            for t, x in parts:
                if not isinstance(x, int) and not np.isfinite(x).all():
                    _bad_features(p, [(t, x)])
        embs = [p.embed(t, x) for t, x in parts]
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
    if p.frame is not None and not np.isfinite(Z).all():  # (the inputs are checked; offsets in a frame may overflow)
        _bad_features(p, parts)
    positions = raw_positions if raw_positions is not None or one.psel is None else Z @ one.psel
    F, d = one.F, one.d
    tab = one.table if len(parts) == len(p.embeds) else one.table.take([t for t, _ in parts], axis=0)
    tab = tab.repeat(counts, axis=0)
    np.maximum(Z, one.lo, out=Z)
    np.minimum(Z, one.hi, out=Z)
    Z -= one.mean
    Z *= tab[:, :F]
    z = Z @ one.w
    z += tab[:, F : F + d]
    np.maximum(z, _F32(0.0), out=z)
    z = norm(z)
    z *= tab[:, F + d : F + 2 * d]
    z += tab[:, F + 2 * d :]
    return z, positions

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
    if n == 1:
        return _readout_actor(p, x, a, int(rows[0]), positions)
    q = a.take(rows, axis=0)[:, :C].reshape(n, H, 1, dh)
    att = (q @ a[:, C : 2 * C].reshape(L, H, dh).transpose(1, 2, 0)).reshape(n, H, L)
    rp = p.relpos
    vals = None
    if rp is not None and positions is not None:
        ridx = rp.index(positions.take(rows, axis=0)[:, None, :] - positions)  # (n, L): query minus key
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

def _readout_actor(p: NumpyPolicy, x: np.ndarray, a: np.ndarray, r: int, positions: np.ndarray | None) -> np.ndarray:
    """:func:`_readout` for a single actor at row ``r`` (two-dimensional arrays throughout)."""
    blk = p.readout
    assert blk is not None  # called only with a readout block
    L, C = x.shape
    H, dh = p.H, p.dh
    q = a[r, :C]
    att = (q.reshape(H, 1, dh) @ a[:, C : 2 * C].reshape(L, H, dh).transpose(1, 2, 0)).reshape(H, L)
    rp = p.relpos
    vals = None
    if rp is not None and positions is not None:
        kv = rp.kv.take(rp.index(positions[r] - positions), axis=0)  # (L, 2 dh): query minus key
        att += q.reshape(H, dh) @ kv[:, :dh].T
        vals = kv[:, dh:]
        if blk.gated:
            vals = vals * rp.activate(a[:, 3 * C :])
    att *= p.scale
    att = softmax_last(att)
    y = (att.reshape(H, 1, L) @ a[:, 2 * C : 3 * C].reshape(L, H, dh).transpose(1, 0, 2)).reshape(H, dh)
    if vals is not None:
        y += att @ vals
    return blk.finish(x[r : r + 1], y.reshape(1, C))

def _summary(p: NumpyPolicy, x: np.ndarray) -> np.ndarray:
    """The observation summary ``(1, d)`` of one observation's embeddings ``x`` ``(L, d)`` (the value head's input)."""
    if p.readout is None:
        return x.mean(0, keepdims=True) if x.shape[0] else np.zeros((1, p.d), dtype=_F32)
    blk = p.readout
    a = lin(norm(x[None]), blk.w_in, blk.b_in)
    return p._readout_value(a, None)

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
    x, positions = _embed(p, parts, g)
    if p.blocks:
        L = x.shape[0]
        x = x.reshape(1, L, p.d)
        idx = None
        if p.relpos is not None and positions is not None:
            idx = p.relpos.index(positions[:, None, :] - positions[None, :, :])[None]
        for blk in p.blocks:
            x = p._block(blk, x, None, idx)
        x = x.reshape(L, p.d)
    if p.readout is None:
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
        elif cand is None:
            out.append(p._categorical_logits(name, emb, mask))
        else:
            src = emb
            if type(cand) is SummaryCandidates:
                if summary is None:
                    summary = _summary(p, x)
                src, cand = summary, cand.rows
            wq, bq, wk, bk = p.qk[name]
            q = src @ wq + bq
            k = x.take(cand, axis=0) @ wk + bk
            lg = (q @ k.T) * p.qk_scale
            if mask is not None:
                lg = np.where(mask, lg, _NEG_INF)
            out.append(lg)
    return out
