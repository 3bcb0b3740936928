"""Neural networks: the entity transformer (PyTorch, for training) and its numpy twin.

Importing :mod:`gymloop.nn` does not import torch; :mod:`gymloop.nn.torch_policy` does.
"""

from .config import NetConfig, RelposConfig
from .inputs import Packed, pack

__all__ = ["NetConfig", "RelposConfig", "Packed", "pack"]
