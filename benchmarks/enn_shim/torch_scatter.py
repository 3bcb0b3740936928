"""A stand-in for ``torch_scatter`` (no wheel exists for this torch), enough for rogue-net 0.1.9.

rogue-net calls only ``torch_scatter.scatter(src, index, dim=0, reduce="mean" | "max", out=...)``;
``torch.Tensor.scatter_reduce`` with ``include_self=False`` computes the same: a row of the output
that no index points at stays 0, as in torch_scatter. Put this folder on the path of the venv that
has enn-trainer (``.ci/run`` and ``benchmarks/entity_gym_suite.py`` do it with a ``.pth`` file).
"""

from __future__ import annotations

import torch

_REDUCE = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin", "mul": "prod"}


def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> torch.Tensor:
    if reduce not in _REDUCE:
        raise ValueError(f"torch_scatter stand-in: reduce={reduce!r} is not supported ({sorted(_REDUCE)})")
    dim = dim % src.dim()
    shape = [1] * src.dim()
    shape[dim] = -1
    idx = index.reshape(shape).expand_as(src) if index.dim() == 1 else index.expand_as(src)
    size = list(src.shape)
    if out is not None:
        size[dim] = out.shape[dim]
    else:
        size[dim] = dim_size if dim_size is not None else (int(index.max()) + 1 if index.numel() else 0)
    zeros = torch.zeros(size, dtype=src.dtype, device=src.device)
    result = zeros.scatter_reduce(dim, idx, src, reduce=_REDUCE[reduce], include_self=False)
    if out is None:
        return result
    out.copy_(result)  # rogue-net passes a fresh zeros tensor as out and reads it afterwards
    return out
