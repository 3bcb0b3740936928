"""The device a run trains on: ``TrainConfig.device`` and ``BCConfig.device`` (``gymloop train --device``).

``"auto"`` (the default) is the first CUDA GPU when PyTorch sees one, else the CPU; ``"cpu"``,
``"cuda"`` (the current GPU) and ``"cuda:N"`` name one. :func:`resolve_device` turns the string into a
:class:`torch.device` before any game starts, and refuses a GPU PyTorch does not see: a run asked
for a GPU never trains on the CPU instead. :func:`device_problem` checks the form alone, without
importing PyTorch (the configurations' ``check()``).

On the device: the network and its input normalizers' statistics, the optimizer's moments, the
sampling generator, the forward passes and the update. On the host: the games, the batches (moved
once per forward pass by :meth:`~gymloop.nn.torch_policy.Policy.inputs`), GAE and the reward and
advantage normalizers (numpy), and every file: checkpoints are written from CPU copies and load
onto whatever device the run that reads them uses.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import DeviceError

if TYPE_CHECKING:
    import torch

__all__ = ["ACCEPTED", "check_device", "device_problem", "resolve_device", "torch_sees"]

#: the forms a device string takes, as messages and ``docs/config.md`` say them.
ACCEPTED = "'auto', 'cpu', 'cuda' or 'cuda:N' (N: a GPU's index)"
_FORM = re.compile(r"(auto|cpu|cuda(:[0-9]+)?)")


def device_problem(value: object) -> str | None:
    """Why ``value`` is not a device string of an accepted form (``None``: it is one); PyTorch is not asked.

    Example:
        >>> device_problem("cuda:1") is None, device_problem("gpu")
        (True, "'gpu' is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N' (N: a GPU's index)")
    """
    if isinstance(value, str) and _FORM.fullmatch(value):
        return None
    return f"{value!r} is not a device; use {ACCEPTED}"


def check_device(value: object, name: str = "device") -> None:
    """Raise :class:`~gymloop.errors.DeviceError` for a device string of no accepted form (the
    configurations' ``check()``; whether PyTorch sees the GPU is asked when the run starts:
    :func:`resolve_device`).

    Example:
        >>> check_device("cpu")
    """
    problem = device_problem(value)
    if problem is not None:
        raise DeviceError(f"{name}={value!r}: {problem}")


def torch_sees() -> str:
    """What PyTorch sees, in words: its version and build, whether CUDA is available and how many GPUs."""
    import torch

    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    available = torch.cuda.is_available()
    return (f"PyTorch {torch.__version__} ({build}) sees torch.cuda.is_available()={available}, "
            f"torch.cuda.device_count()={torch.cuda.device_count() if available else 0}")


def resolve_device(value: str, what: str = "device") -> torch.device:
    """The :class:`torch.device` of a device string (``what``: the field's name in messages).

    ``"auto"`` is ``cuda:0`` (the current GPU) when PyTorch sees a GPU, else ``cpu``; ``"cuda"`` is the
    current GPU, written with its index.

    Raises:
        DeviceError: ``value`` is not of an accepted form (:data:`ACCEPTED`), or names a GPU PyTorch
            does not see (none visible, or an index past the last); the message says what PyTorch
            sees and the fix.

    Example:
        >>> import torch
        >>> resolve_device("cpu")
        device(type='cpu')
        >>> resolve_device("auto") == (torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu"))
        True
    """
    import torch

    problem = device_problem(value)
    if problem is not None:
        raise DeviceError(f"{what}={value!r}: {problem}")
    if value == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if value == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if available else torch.device("cpu")
    count = torch.cuda.device_count() if available else 0
    index = int(value.split(":")[1]) if ":" in value else None
    if not available or count == 0:
        raise DeviceError(f"{what}={value!r} asks for a CUDA GPU, but {torch_sees()}; train on the CPU with --device cpu "
                          f"(device='cpu'), or --device auto to use a GPU only where there is one")
    if index is not None and index >= count:
        raise DeviceError(f"{what}={value!r} asks for GPU {index}, but {torch_sees()} (indices 0 to {count - 1}); use "
                          f"--device cuda:0 .. cuda:{count - 1}, or --device auto")
    return torch.device("cuda", torch.cuda.current_device() if index is None else index)
