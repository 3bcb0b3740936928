"""An agent's decisions through onnxruntime: ``gl.load(path, runtime="onnx")`` (importing gymloop
imports this module, which registers the runtime; onnx and onnxruntime are imported at first use).

The policy is turned into its ONNX model in memory (:func:`~gymloop.export.onnx.policy_to_onnx`,
the same graph ``gymloop export --onnx`` writes) and run by an onnxruntime session with one thread
(its products are small: more threads only wait on one another, and a game keeps the other cores
busy). The observation becomes the model's inputs through the agent's own single-observation
builder, so the checks, the bindings by name and the choices are those of the numpy runtime; only
the arithmetic runs elsewhere, and its logits equal numpy's within float32 rounding.

Example:
    >>> import os, tempfile
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import random_checkpoint
    >>> path = os.path.join(tempfile.mkdtemp(), "snake.safetensors")
    >>> random_checkpoint(path, snake)
    >>> agent = gl.load(path, seed=0, runtime="onnx")
    >>> gl.run(snake, agent, seed=0, max_steps=20).steps
    20
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..neural import register_runtime
from ..nn.numpy_policy import NumpyPolicy
from ..nn.single import SummaryCandidates
from .onnx import onnx_io, policy_to_onnx

__all__ = ["OnnxRunner", "model_inputs"]


def _need_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError("runtime='onnx' needs onnxruntime (and onnx to build the model): pip install 'gymloop[onnx]'; "
                          "or leave runtime='numpy', which needs nothing else") from None
    return onnxruntime


def model_inputs(io: dict[str, Any], parts: list[tuple[int, Any]], g: np.ndarray | None, rows: np.ndarray,
                 requests: Sequence[tuple[str, Any, Any]]) -> dict[str, np.ndarray]:
    """The model's inputs for one observation as the single-observation builder prepared it
    (``ObsEncoder.prepare_one``: ``parts``, ``g``, ``rows``, ``requests``); an action type not
    asked gets an all-legal mask (and no candidates), its outputs unused."""
    have = dict(parts)
    feeds: dict[str, np.ndarray] = {}
    for t, e in enumerate(io["entities"]):
        x = have.get(t)
        if isinstance(x, (int, np.integer)):  # a featureless type: only its row count
            x = np.zeros((int(x), 0), np.float32)
        feeds[e["input"]] = x if x is not None else np.zeros((0, len(e["features"])), np.float32)
    if io["globals"]["input"]:
        feeds[io["globals"]["input"]] = g if g is not None else np.zeros(len(io["globals"]["features"]), np.float32)
    if io["actors"]:
        feeds[io["actors"]] = rows.astype(np.int64, copy=False)
    asked = {name: (mask, cand) for name, mask, cand in requests}
    for a in io["actions"]:
        mask, cand = asked.get(a["name"], (None, None))
        n_rows = rows.size if a["mask_rows"] == "actors" else 1
        if a["candidates"]:
            if type(cand) is SummaryCandidates:  # a global select-entity: its candidates' rows
                cand = cand.rows
            c = np.zeros(0, np.int64) if cand is None else np.asarray(cand, dtype=np.int64)
            feeds[a["candidates"]] = c
            n = c.size
        else:
            n = len(a["labels"])
        feeds[a["mask"]] = np.ones((n_rows, n), bool) if mask is None else mask
    return feeds


class OnnxRunner:
    """One policy's ONNX model in an onnxruntime session: the one-decision function of the numpy
    runtime (:meth:`NumpyPolicy.logits_one <gymloop.nn.numpy_policy.NumpyPolicy.logits_one>`),
    computed by onnxruntime.

    Args:
        policy: the loaded policy.
        threads: onnxruntime's intra-op threads (1: the decision's products are small).

    Raises:
        ConfigError: onnx or onnxruntime is not installed.
        ExportError: the network uses a part the ONNX graph cannot express (named).
    """

    def __init__(self, policy: NumpyPolicy, threads: int = 1) -> None:
        ort = _need_onnxruntime()
        model = policy_to_onnx(policy)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.io = onnx_io(policy)
        self._logits = {a["name"]: a["logits"] for a in self.io["actions"]}

    def logits_one(self, parts: list[tuple[int, Any]], g: np.ndarray | None, actor_rows: np.ndarray,
                   requests: list[tuple[str, Any, Any]]) -> list[np.ndarray]:
        """Masked logits per request, as :func:`gymloop.nn.single.logits_one` returns them."""
        feeds = model_inputs(self.io, parts, g, actor_rows, requests)
        return list(self.session.run([self._logits[name] for name, _, _ in requests], feeds))


register_runtime("onnx", OnnxRunner)
