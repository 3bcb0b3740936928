"""Agents beyond Python: export a trained agent's policy to other runtimes.

:func:`to_onnx` writes an agent checkpoint (anything :func:`gymloop.load` reads) as one ONNX model
that onnxruntime (C, C++, C#, Java, JavaScript/onnxruntime-web, ...) runs without Python; see
``docs/onnx.md`` for the model's inputs, outputs and metadata. It needs the ``onnx`` extra
(``pip install 'gymloop[onnx]'``) only when called: importing this package imports neither ``onnx``
nor ``onnxruntime``.
"""

from __future__ import annotations

from .onnx import FORMAT, OPSET, ExportError, onnx_io, policy_to_onnx, to_onnx

__all__ = ["FORMAT", "OPSET", "ExportError", "onnx_io", "policy_to_onnx", "to_onnx"]
