"""An agent's policy as one ONNX model (``gymloop export AGENT --onnx OUT.onnx``).

The graph is built directly from the weights of the agent's
:class:`~gymloop.nn.numpy_policy.NumpyPolicy` with ``onnx.helper`` (no torch), computing what the
numpy runtime's one-decision function :func:`gymloop.nn.single.logits_one` computes (that function
folds more at load time, so the operations differ; the parity tests hold them equal). Its inputs are what
:meth:`gymloop.neural.ObsEncoder.prepare_one` gives it: the single-observation builder
:class:`gymloop.featurize.OneObsBuilder` bound to the checkpoint, which checks every value, so the
graph, like that function, takes finite features; onnxruntime's outputs equal
``gl.load``'s up to float32 rounding. One model call is one decision point: one observation, any number of actors.

Inputs (``docs/onnx.md`` has the full contract; the model's metadata ``gymloop.io`` lists them):

* ``entities.<T>``: float32 ``(n_T, F_T)``, the raw features of entity type ``T`` in the
  checkpoint's feature order (normalization happens inside the graph); ``n_T`` may be 0.
* ``globals``: float32 ``(G,)``, only when the network has global features.
* ``actors``: int64 ``(n_actors,)``, only when an action type is actor-bound: each actor's row in
  the concatenation of the entity inputs in the network's type order.
* ``mask.<A>``: bool, per action type: ``(n_actors, n_labels)`` (categorical), ``(1, n_labels)``
  (global decision), ``(n_actors, n_candidates)`` (select-entity), ``(1, n_candidates)`` (global
  select-entity); ``True`` = legal.
* ``candidates.<A>``: int64 ``(n_candidates,)``, per select-entity action type (actor-bound or
  global): the candidates' rows in the same concatenation.

Outputs: per action type ``logits.<A>`` (masked choices ``-inf``) and ``probs.<A>`` of the mask's
shape, and ``value`` float32 ``(1,)``.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> import onnxruntime as ort
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import random_checkpoint
    >>> from gymloop.export import to_onnx
    >>> d = tempfile.mkdtemp()
    >>> random_checkpoint(os.path.join(d, "snake.safetensors"), snake)
    >>> io = to_onnx(os.path.join(d, "snake.safetensors"), os.path.join(d, "snake.onnx"))
    >>> [e["input"] for e in io["entities"]], io["actions"][0]["probs"]
    (['entities.Body', 'entities.Food', 'entities.Head'], 'probs.Move')
    >>> sess = ort.InferenceSession(os.path.join(d, "snake.onnx"))
    >>> feeds = {"entities.Body": np.zeros((0, 2), np.float32), "entities.Food": np.array([[3, 4]], np.float32),
    ...          "entities.Head": np.array([[1, 1]], np.float32), "actors": np.array([1]),
    ...          "mask.Move": np.ones((1, 4), bool)}
    >>> probs, value = sess.run(["probs.Move", "value"], feeds)
    >>> probs.shape, round(float(probs.sum()), 5), value.shape
    ((1, 4), 1.0, (1,))
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import ConfigError, ExportError
from ..files import check_output, write_atomic
from ..nn.config import NetConfig
from ..nn.heads import LINEAR, POINTER, SUMMARY, head_of
from ..nn.numpy_policy import NumpyPolicy

__all__ = ["FORMAT", "OPSET", "ExportError", "onnx_io", "policy_to_onnx", "to_onnx"]

#: the value of the metadata key ``gymloop.format``: the layout of inputs and outputs (bumped on change)
FORMAT = "gymloop-onnx/1"
#: the ONNX operator set the models use (17: LayerNormalization; onnxruntime >= 1.12, onnxruntime-web)
OPSET = 17
_IR_VERSION = 8  # the IR version of opset 17: readable by older runtimes than onnx's default

#: the ``net`` fields the exporter expresses; any other field must keep NetConfig's default
_KNOWN_NET = frozenset({"d_model", "n_layer", "n_head", "d_qk", "relpos", "norm_clip", "mlp_ratio", "readout", "summary_mean",
                        "summary_count", "frame", "relpos_1d"})
_GATES = frozenset({"relu", "gelu", "sigmoid", "linear", None})
_HEADS = frozenset({LINEAR, SUMMARY, POINTER})
_LN_EPS = 1e-5
_F32 = np.float32


def _need_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ConfigError("exporting to ONNX needs the onnx package: pip install 'gymloop[onnx]'") from None
    return onnx


# ---------------------------------------------------------------------- the contract
def onnx_io(policy: NumpyPolicy) -> dict[str, Any]:
    """The names and layout of the model's inputs and outputs for ``policy`` (stored as JSON in the
    model's metadata under ``gymloop.io``).

    Returns a JSON-ready dict: ``format``; ``entities`` (per entity type in network order:
    ``name``, ``input``, ``features``); ``globals`` (``input`` or ``None``, ``features``);
    ``actors`` (the input name, or ``None`` when no action type is actor-bound); ``actions`` (per
    action type: ``name``, ``kind``, ``labels``, ``among``, ``among_any`` (the candidate types are
    not recorded: the game decides), ``mask``, ``mask_rows`` (``"actors"`` or
    ``1``), ``candidates`` (input name or ``None``), ``logits``, ``probs``); ``value``; ``inputs``
    and ``outputs`` (every name, in the model's order).
    """
    ents = [{"name": n, "input": f"entities.{n}", "features": list(policy.entity_features[n])} for n in policy.entity_names]
    glob = list(policy.global_features)
    acts = []
    any_actor = False
    for name, a in policy.action_space.items():
        sel = a.kind.selects_entities
        any_actor |= a.kind.actor_bound
        acts.append({
            "name": name, "kind": a.kind.tag, "labels": list(a.labels), "among": list(a.among),
            "among_any": a.among_any, "mask": f"mask.{name}", "mask_rows": "actors" if a.kind.actor_bound else 1,
            "candidates": f"candidates.{name}" if sel else None,
            "logits": f"logits.{name}", "probs": f"probs.{name}",
        })
    inputs = [e["input"] for e in ents] + (["globals"] if glob else []) + (["actors"] if any_actor else [])
    for ad in acts:
        inputs.append(str(ad["mask"]))
        if ad["candidates"]:
            inputs.append(str(ad["candidates"]))
    outputs = [str(o) for ad in acts for o in (ad["logits"], ad["probs"])] + ["value"]
    return {
        "format": FORMAT, "entities": ents, "globals": {"input": "globals" if glob else None, "features": glob},
        "actors": "actors" if any_actor else None, "actions": acts, "value": "value", "inputs": inputs, "outputs": outputs,
    }


def _check_supported(policy: NumpyPolicy, where: str) -> None:
    """Raise :class:`ExportError` naming ``where`` and the part for anything the graph cannot express."""
    defaults = {f.name: f.default for f in fields(NetConfig)}
    for k, v in policy.cfg.to_dict().items():
        if k not in _KNOWN_NET and v != defaults.get(k, None):
            raise ExportError(
                f"{where}: the network uses net.{k}={v!r}, which the ONNX exporter ({FORMAT}) cannot express; export it with "
                f"a gymloop version that supports it, or train without it"
            )
    rp = policy.relpos
    if rp is not None and rp.gate_kind not in _GATES:
        raise ExportError(
            f"{where}: the relative positions' value gate {rp.gate_kind!r} cannot be expressed in ONNX (supported: "
            f"{sorted(g for g in _GATES if g)} or none)"
        )
    for name, a in policy.action_space.items():
        h = head_of(a, where, ExportError)
        if h not in _HEADS:  # pragma: no cover - every head of gymloop.nn.heads is exported
            raise ExportError(f"{where}: action type {name!r} uses the head {h!r}, which the ONNX exporter cannot express")


# ---------------------------------------------------------------------- graph building
class _Graph:
    """A tiny builder over ``onnx.helper``: every op has one output, named automatically."""

    def __init__(self, onnx: Any) -> None:
        self.onnx = onnx
        self.h = onnx.helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0
        self._consts: dict[tuple, str] = {}

    def name(self, hint: str) -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, arr: Any, hint: str = "c", dtype: Any = None) -> str:
        a = np.asarray(arr, dtype=dtype)
        if a.dtype == np.float64:
            a = a.astype(_F32)
        key = (a.dtype.str, a.shape, hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest())
        nm = self._consts.get(key)
        if nm is None:  # one initializer per distinct constant (the relative-position tables, LayerNorm's ones, ...)
            nm = self._consts[key] = self.name(hint)
            self.inits.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(a), nm))
        return nm

    def i64(self, *v: int) -> str:
        return self.const(np.array(v, dtype=np.int64), "i")

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        o = out or self.name(op_type.lower())
        self.nodes.append(self.h.make_node(op_type, list(inputs), [o], **attrs))
        return o

    # common pieces
    def slice_cols(self, x: str, lo: int, hi: int) -> str:
        return self.op("Slice", x, self.i64(lo), self.i64(hi), self.i64(1))

    def lin(self, x: str, w: np.ndarray, b: np.ndarray | None, hint: str) -> str:
        y = self.op("MatMul", x, self.const(w, hint + "_w"))
        return y if b is None else self.op("Add", y, self.const(b, hint + "_b"))

    def norm(self, x: str, d: int) -> str:
        """LayerNorm without affine part over the last axis (eps 1e-5)."""
        return self.op("LayerNormalization", x, self.const(np.ones(d, _F32), "ones"), self.const(np.zeros(d, _F32), "zeros"),
                       axis=-1, epsilon=_LN_EPS)

    def gelu2(self, x: str) -> str:
        """``x * (1 + erf(x / sqrt 2))`` (twice GELU; the half is folded into the next weights)."""
        e = self.op("Erf", self.op("Mul", x, self.const(np.array(0.7071067811865476, _F32))))
        return self.op("Mul", x, self.op("Add", e, self.const(np.array(1.0, _F32))))


class _Builder:
    """Mirrors :class:`NumpyPolicy`'s one-observation forward pass as ONNX nodes."""

    def __init__(self, policy: NumpyPolicy, g: _Graph) -> None:
        self.p = policy
        self.g = g
        self.d = policy.d
        self.H = policy.H
        self.dh = policy.dh

    # -------------------------------------------------------------- pieces
    def embed(self, t: int, x: str, glob: str | None) -> str:
        p, g = self.p, self.g
        e = p.embeds[t]
        if e[0] == "featureless":
            n = g.op("Slice", g.op("Shape", x), g.i64(0), g.i64(1))
            return g.op("Expand", g.const(e[1], "featureless"), g.op("Concat", n, g.i64(self.d), axis=0))
        _, mean, sd, clip, w, b, lw, lb = e
        if glob is not None:
            n = g.op("Slice", g.op("Shape", x), g.i64(0), g.i64(1))
            gl_rows = g.op("Expand", g.op("Unsqueeze", glob, g.i64(0)), g.op("Concat", n, g.i64(len(p.global_features)), axis=0))
            x = g.op("Concat", x, gl_rows, axis=1)
        # as the numpy runtime's one-observation tables: clip in raw units, centre, then W / sd
        m64, sd64 = mean.astype(np.float64), sd.astype(np.float64)
        lo = (m64 - float(clip) * sd64).astype(_F32)
        hi = (m64 + float(clip) * sd64).astype(_F32)
        z = g.op("Min", g.op("Max", x, g.const(lo, "lo")), g.const(hi, "hi"))
        z = g.op("Sub", z, g.const(mean, "mean"))
        ws = (w.astype(np.float64) / sd64[:, None]).astype(_F32)
        z = g.op("Relu", g.lin(z, ws, b, "embed"))
        return g.op("LayerNormalization", z, g.const(lw, "ln_w"), g.const(lb, "ln_b"), axis=-1, epsilon=_LN_EPS)

    def frame_inputs(self) -> dict[str, str]:
        """The entity inputs the egocentric frame (``net.frame``) changes, in the reference's frame.

        As :func:`~gymloop.nn.inputs.pack_entities`: the first reference entity is the origin, the
        others' position columns become ``(cos h * dx + sin h * dy, cos h * dy - sin h * dx)``;
        without a reference entity (a zero row stands in for it) nothing changes.
        """
        p, g = self.p, self.g
        fr = p.frame
        assert fr is not None  # called only with a frame
        nf = len(p.entity_features[fr.reference])
        first = g.op("Gather", g.op("Concat", f"entities.{fr.reference}", g.const(np.zeros((1, nf), _F32), "no_reference"), axis=0),
                     g.i64(0), axis=0)  # (1, F): the first reference entity, or zeros (origin 0, heading 0)
        ox = g.op("Gather", first, g.i64(fr.ref_cols[0]), axis=1)  # (1, 1)
        oy = g.op("Gather", first, g.i64(fr.ref_cols[1]), axis=1)
        turn = None
        if fr.heading_col is not None:
            a = g.op("Gather", first, g.i64(fr.heading_col), axis=1)
            turn = (g.op("Cos", a), g.op("Sin", a))
        out = {}
        for name, (cx, cy) in fr.cols.items():
            x = f"entities.{name}"
            n = len(p.entity_features[name])
            dx = g.op("Sub", g.op("Gather", x, g.i64(cx), axis=1), ox)  # (n, 1)
            dy = g.op("Sub", g.op("Gather", x, g.i64(cy), axis=1), oy)
            if turn is not None:
                c, s = turn
                dx, dy = (g.op("Add", g.op("Mul", c, dx), g.op("Mul", s, dy)),
                          g.op("Sub", g.op("Mul", c, dy), g.op("Mul", s, dx)))
            keep, ex, ey = np.ones((1, n), _F32), np.zeros((1, n), _F32), np.zeros((1, n), _F32)
            keep[0, [cx, cy]] = 0.0
            ex[0, cx] = ey[0, cy] = 1.0
            kept = g.op("Mul", x, g.const(keep, "frame_keep"))
            out[name] = g.op("Add", kept, g.op("Add", g.op("Mul", dx, g.const(ex, "frame_x")), g.op("Mul", dy, g.const(ey, "frame_y"))))
        return out

    def rel_index(self, pq: str, pk: str) -> str:
        """Relative-position table index of queries ``pq`` ``(..., 1, P)`` minus keys ``pk`` ``(1, L, P)``."""
        g, rp = self.g, self.p.relpos
        assert rp is not None  # called only with relpos
        r = g.op("Sub", pq, pk)
        r = g.op("Min", g.op("Max", r, g.const(-rp.extent, "neg_extent")), g.const(rp.extent, "extent"))
        dlt = g.op("Add", g.op("MatMul", r, g.const(rp.strides, "strides")), g.const(np.array(rp.offset, _F32), "offset"))
        return g.op("Cast", g.op("Round", dlt), to=self.g.onnx.TensorProto.INT64)

    def activate(self, x: str) -> str:
        g, rp = self.g, self.p.relpos
        assert rp is not None
        k = rp.gate_kind
        if k == "relu":
            return g.op("Relu", x)
        if k == "gelu":
            return g.op("Mul", g.gelu2(x), g.const(np.array(0.5, _F32)))
        if k == "sigmoid":
            return g.op("Sigmoid", x)
        return x

    def heads_split(self, a: str) -> tuple[str, str, str, str | None]:
        """``a`` ``(L, 3C [+ dh])`` into query ``(L, C)``, key, value and the gate's projection."""
        g, C = self.g, self.d
        gate = g.slice_cols(a, 3 * C, 3 * C + self.dh) if self.p.relpos is not None and self.p.relpos.wg is not None else None
        return g.slice_cols(a, 0, C), g.slice_cols(a, C, 2 * C), g.slice_cols(a, 2 * C, 3 * C), gate

    def finish(self, blk: Any, x: str, y: str) -> str:
        """``x + proj(y)``, then ``+ mlp(ln2(.))`` (as :meth:`_Block.finish`)."""
        g = self.g
        x1 = g.op("Add", x, g.lin(y, blk.wp, blk.bp, "proj"))
        h = g.lin(g.norm(x1, self.d), blk.w1, blk.b1, "mlp1")
        return g.op("Add", g.lin(g.gelu2(h), blk.w2, blk.b2, "mlp2"), x1)

    def block(self, blk: Any, x: str, idx: str | None) -> str:
        """A full block over ``x`` ``(L, C)``; ``idx`` ``(L, L)`` relative-position indices or ``None``."""
        g, H, dh, C = self.g, self.H, self.dh, self.d
        a = g.lin(g.norm(x, C), blk.w_in, blk.b_in, "qkv")
        q, k, v, gate = self.heads_split(a)
        q3 = g.op("Reshape", q, g.i64(0, H, dh))  # (L, H, dh)
        qh = g.op("Transpose", q3, perm=[1, 0, 2])  # (H, L, dh)
        kh = g.op("Transpose", g.op("Reshape", k, g.i64(0, H, dh)), perm=[1, 2, 0])  # (H, dh, L)
        vh = g.op("Transpose", g.op("Reshape", v, g.i64(0, H, dh)), perm=[1, 0, 2])  # (H, L, dh)
        att = g.op("MatMul", qh, kh)  # (H, Lq, Lk)
        rp = self.p.relpos
        if idx is not None and rp is not None:
            rk = g.op("Gather", g.const(rp.keys, "relpos_keys"), idx, axis=0)  # (Lq, Lk, dh)
            ra = g.op("MatMul", q3, g.op("Transpose", rk, perm=[0, 2, 1]))  # (Lq, H, Lk)
            att = g.op("Add", att, g.op("Transpose", ra, perm=[1, 0, 2]))
        att = g.op("Softmax", g.op("Mul", att, g.const(np.array(self.p.scale, _F32))), axis=-1)
        y = g.op("Transpose", g.op("MatMul", att, vh), perm=[1, 0, 2])  # (L, H, dh)
        if idx is not None and rp is not None:
            vals = g.op("Gather", g.const(rp.values, "relpos_values"), idx, axis=0)  # (Lq, Lk, dh)
            if gate is not None:
                vals = g.op("Mul", vals, g.op("Unsqueeze", self.activate(gate), g.i64(0)))
            y = g.op("Add", y, g.op("MatMul", g.op("Transpose", att, perm=[1, 0, 2]), vals))  # (Lq, H, dh)
        return self.finish(blk, x, g.op("Reshape", y, g.i64(0, C)))

    def readout_rows(self, x: str, a: str, rows: str, pos: str | None) -> str:
        """The readout block at ``rows`` (int64 ``(n,)``) of ``x`` ``(L, C)``; ``a`` its input projection."""
        g, H, dh, C = self.g, self.H, self.dh, self.d
        blk = self.p.readout
        q, k, v, gate = self.heads_split(a)
        q3 = g.op("Reshape", g.op("Gather", q, rows, axis=0), g.i64(0, H, dh))  # (n, H, dh)
        kh = g.op("Transpose", g.op("Reshape", k, g.i64(0, H, dh)), perm=[1, 2, 0])  # (H, dh, L)
        vh = g.op("Transpose", g.op("Reshape", v, g.i64(0, H, dh)), perm=[1, 0, 2])  # (H, L, dh)
        att = g.op("Transpose", g.op("MatMul", g.op("Transpose", q3, perm=[1, 0, 2]), kh), perm=[1, 0, 2])  # (n, H, L)
        rp = self.p.relpos
        idx = None
        if rp is not None and pos is not None:
            pq = g.op("Unsqueeze", g.op("Gather", pos, rows, axis=0), g.i64(1))  # (n, 1, P)
            idx = self.rel_index(pq, g.op("Unsqueeze", pos, g.i64(0)))  # (n, L)
            rk = g.op("Gather", g.const(rp.keys, "relpos_keys"), idx, axis=0)  # (n, L, dh)
            att = g.op("Add", att, g.op("MatMul", q3, g.op("Transpose", rk, perm=[0, 2, 1])))
        att = g.op("Softmax", g.op("Mul", att, g.const(np.array(self.p.scale, _F32))), axis=-1)
        y = g.op("Transpose", g.op("MatMul", g.op("Transpose", att, perm=[1, 0, 2]), vh), perm=[1, 0, 2])  # (n, H, dh)
        if idx is not None and rp is not None:
            vals = g.op("Gather", g.const(rp.values, "relpos_values"), idx, axis=0)  # (n, L, dh)
            if gate is not None:
                vals = g.op("Mul", vals, g.op("Unsqueeze", self.activate(gate), g.i64(0)))
            y = g.op("Add", y, g.op("MatMul", att, vals))
        return self.finish(blk, g.op("Gather", x, rows, axis=0), g.op("Reshape", y, g.i64(0, C)))

    def readout_value(self, a: str) -> str:
        """The readout block at the learned value query: the observation summary ``(1, C)``."""
        g, H, dh, C = self.g, self.H, self.dh, self.d
        blk = self.p.readout
        assert blk is not None and blk.vq is not None and blk.vq_q is not None
        _, k, v, _ = self.heads_split(a)
        att = g.op("ReduceSum", g.op("Mul", g.op("Reshape", k, g.i64(0, H, dh)), g.const(blk.vq_q, "value_query_q")),
                   g.i64(-1), keepdims=0)  # (L, H)
        att = g.op("Softmax", g.op("Transpose", att, perm=[1, 0]), axis=-1)  # (H, L)
        vh = g.op("Transpose", g.op("Reshape", v, g.i64(0, H, dh)), perm=[1, 0, 2])  # (H, L, dh)
        y0 = g.op("Reshape", g.op("MatMul", g.op("Unsqueeze", att, g.i64(1)), vh), g.i64(1, C))
        if self.p.cfg.summary_mean:  # plus the mean of the values (net.summary_mean)
            y0 = g.op("Add", y0, self.mean_summary(v))
        out = self.finish(blk, g.const(blk.vq, "value_query"), y0)
        if blk.count is not None:  # plus the entity count, normalized, times a learned vector (net.summary_count)
            mean, sd, vec = blk.count
            n = g.op("Cast", g.op("Slice", g.op("Shape", v), g.i64(0), g.i64(1)), to=g.onnx.TensorProto.FLOAT)  # (1,)
            z = g.op("Div", g.op("Sub", n, g.const(np.array([mean], _F32), "count_mean")), g.const(np.array([sd], _F32), "count_sd"))
            clip = float(self.p.cfg.norm_clip)
            z = g.op("Clip", z, g.const(np.array(-clip, _F32), "count_lo"), g.const(np.array(clip, _F32), "count_hi"))
            out = g.op("Add", out, g.op("Mul", g.op("Unsqueeze", z, g.i64(0)), g.const(vec, "count_embed")))
        return out

    def mean_summary(self, x: str) -> str:
        """Mean of the rows of ``x`` ``(L, C)`` as ``(1, C)`` (zeros without entities): the final embeddings'
        in the rogue-net layout, the values' in the readout's summary (``net.summary_mean``)."""
        g = self.g
        s = g.op("ReduceSum", x, g.i64(0), keepdims=1)
        n = g.op("Cast", g.op("Slice", g.op("Shape", x), g.i64(0), g.i64(1)), to=g.onnx.TensorProto.FLOAT)
        return g.op("Div", s, g.op("Max", n, g.const(np.array([1.0], _F32))))


def policy_to_onnx(policy: NumpyPolicy, where: str | None = None, source: str | None = None) -> Any:
    """The ONNX model (an ``onnx.ModelProto``) of a loaded policy.

    Args:
        policy: the agent's numpy policy (``gl.load(path).policy``).
        where: the name used in error messages (default: the policy's file).
        source: recorded in the metadata as ``gymloop.source`` (default: the file's base name).

    Raises:
        ExportError: the network uses a part the graph cannot express (named).
        ConfigError: the ``onnx`` package is not installed.
    """
    onnx = _need_onnx()
    where = where or str(policy.path)
    _check_supported(policy, where)
    TP = onnx.TensorProto
    h = onnx.helper
    io = onnx_io(policy)
    g = _Graph(onnx)
    b = _Builder(policy, g)
    p = policy
    d = p.d
    ng = len(p.global_features)
    inputs = []
    glob = "globals" if ng else None
    embs, poss = [], []
    framed = b.frame_inputs() if p.frame is not None else {}  # the embeddings see the frame's positions, relpos the raw ones
    for t, e in enumerate(io["entities"]):
        nm = e["input"]
        inputs.append(h.make_tensor_value_info(nm, TP.FLOAT, [f"n_{e['name']}", len(e["features"])]))
        embs.append(b.embed(t, framed.get(e["name"], nm), glob))
        if p.relpos is not None and p.position_idx is not None:
            poss.append(g.op("Gather", nm, g.i64(*p.position_idx[e["name"]]), axis=1))
    if ng:
        inputs.append(h.make_tensor_value_info("globals", TP.FLOAT, [ng]))
    if not embs:  # pragma: no cover - a network always has an entity type
        raise ExportError(f"{where}: the network has no entity type")
    x = embs[0] if len(embs) == 1 else g.op("Concat", *embs, axis=0)  # (L, d)
    pos = None
    if poss:
        pos = poss[0] if len(poss) == 1 else g.op("Concat", *poss, axis=0)  # (L, P), raw units
    idx = None
    if p.blocks and pos is not None and p.relpos is not None:
        idx = b.rel_index(g.op("Unsqueeze", pos, g.i64(1)), g.op("Unsqueeze", pos, g.i64(0)))  # (L, L): query minus key
    for blk in p.blocks:
        x = b.block(blk, x, idx)
    actors = io["actors"]
    if actors:
        inputs.append(h.make_tensor_value_info(actors, TP.INT64, ["n_actors"]))
    emb = summary = None
    if p.readout is not None:
        a = g.lin(g.norm(x, d), p.readout.w_in, p.readout.b_in, "readout_qkv")
        if actors:
            emb = b.readout_rows(x, a, actors, pos)
        summary = b.readout_value(a)
    else:
        if actors:
            emb = g.op("Gather", x, actors, axis=0)
        summary = b.mean_summary(x)
    outputs = []
    neg_inf = g.const(np.array(-np.inf, _F32), "neg_inf")
    for ad in io["actions"]:
        name = ad["name"]
        desc = p.action_space[name]
        head = head_of(desc, where, ExportError)
        # an actor-bound kind reads the actors' embeddings, a global one the observation summary (one row)
        n_rows: str | int = "n_actors" if desc.kind.actor_bound else 1
        n_cols: str | int
        src = emb if desc.kind.actor_bound else summary
        assert src is not None  # (emb is built whenever an action type is actor-bound)
        if head == POINTER:
            n_cols = f"n_candidates_{name}"
            inputs.append(h.make_tensor_value_info(ad["mask"], TP.BOOL, [n_rows, n_cols]))
            inputs.append(h.make_tensor_value_info(ad["candidates"], TP.INT64, [n_cols]))
            wq, bq, wk, bk = p.qk[name]
            q = g.lin(src, wq, bq, f"qproj_{name}")
            k = g.lin(g.op("Gather", x, ad["candidates"], axis=0), wk, bk, f"kproj_{name}")
            lg = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[1, 0])), g.const(np.array(p.qk_scale, _F32)))
        else:
            n_cols = len(desc.labels)
            inputs.append(h.make_tensor_value_info(ad["mask"], TP.BOOL, [n_rows, n_cols]))
            w, bias = p.heads[name]
            lg = g.lin(src, w, bias, f"head_{name}")
        g.op("Where", ad["mask"], lg, neg_inf, out=ad["logits"])
        g.op("Softmax", ad["logits"], axis=-1, out=ad["probs"])
        outputs.append(h.make_tensor_value_info(ad["logits"], TP.FLOAT, [n_rows, n_cols]))
        outputs.append(h.make_tensor_value_info(ad["probs"], TP.FLOAT, [n_rows, n_cols]))
    val = g.lin(summary, p.value_w, p.value_b, "value_head")
    g.op("Reshape", val, g.i64(1), out="value")
    outputs.append(h.make_tensor_value_info("value", TP.FLOAT, [1]))
    order = {n: i for i, n in enumerate(io["inputs"])}
    inputs.sort(key=lambda vi: order[vi.name])
    graph = h.make_graph(g.nodes, "gymloop_policy", inputs, outputs, initializer=g.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="gymloop", producer_version=__version__,
                         doc_string=f"gymloop policy exported from {source or os.path.basename(where)} ({FORMAT}); see gymloop.io")
    model.ir_version = _IR_VERSION
    obs_json = {"entities": {n: list(p.entity_features[n]) for n in p.entity_names}, "globals": list(p.global_features)}
    act_json = {n: a.to_json() for n, a in p.action_space.items()}
    meta = {
        "gymloop.format": FORMAT,
        "gymloop.version": __version__,
        "gymloop.io": json.dumps(io),
        "gymloop.obs_space": json.dumps(obs_json),
        "gymloop.action_space": json.dumps(act_json),
        "gymloop.net": json.dumps(p.cfg.to_dict()),
        "gymloop.source": source or os.path.basename(where),
    }
    game = p.info.get("game") if isinstance(p.info, Mapping) else None
    if isinstance(game, str) and game:
        meta["gymloop.game"] = game
    h.set_model_props(model, meta)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # onnx's own error types vary between versions
        raise ExportError(f"{where}: the exported ONNX graph does not pass onnx's checker ({e}); this is a bug in gymloop") from None
    return model


def _read_files(src: str) -> list[str]:
    """The files that loading ``src`` reads (a folder: the run's agent, or an enn-trainer checkpoint's files)."""
    if not os.path.isdir(src):
        return [src]
    return [os.path.join(src, f) for f in ("agent.safetensors", "config.ron", "state.ron", "state.agent.msgpack")]


def to_onnx(agent_path: str | os.PathLike, out_path: str | os.PathLike) -> dict[str, Any]:
    """Export an agent checkpoint as one ONNX model (``gymloop export AGENT --onnx OUT``).

    Args:
        agent_path: anything :func:`gymloop.load` reads: a ``.safetensors`` agent, a training run's
            folder, an enn-trainer checkpoint folder or ``.roguenet`` archive.
        out_path: the ``.onnx`` file to write (replaced atomically; never a folder, FIFO or device,
            nor the checkpoint read).

    Returns:
        The model's input/output layout (:func:`onnx_io`), also stored in its metadata.

    Raises:
        CheckpointError: ``agent_path`` is missing, corrupt or not an agent (naming the file).
        ExportError: the network uses a part the exporter cannot express (naming the file and the part).
        OutputPathError: ``out_path`` is a folder, FIFO or device, one of the files read, or cannot
            be written.
        ConfigError: the ``onnx`` package is not installed.
    """
    _need_onnx()
    from ..neural import load

    src = os.fspath(agent_path)
    inputs = _read_files(src)
    check_output(out_path, inputs)  # (before the work: an output that would destroy an input is refused)
    policy = load(src).policy  # (a missing, corrupt or foreign file: CheckpointError naming it)
    model = policy_to_onnx(policy, where=src, source=os.path.basename(os.path.normpath(src)))
    write_atomic(out_path, [model.SerializeToString()], inputs)
    return onnx_io(policy)

