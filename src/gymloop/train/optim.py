"""The optimizer the trainers use."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["make_adam"]


def make_adam(params: Any, lr: float) -> torch.optim.Adam:
    """Adam (eps 1e-5) with PyTorch's fused CPU kernel where the build has one.

    For the small networks trained here most of an Adam step is per-parameter overhead; the fused
    kernel makes a step 3-4x faster than the default single-tensor loop (measured on 50 small
    tensors: 1.36 ms -> 0.38 ms).
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True)
    except (RuntimeError, TypeError):  # a build or device without the fused kernel
        return torch.optim.Adam(params, lr=lr, eps=1e-5)
