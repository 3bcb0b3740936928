"""entity-gym itself, imported for both of its adapters (:mod:`~gymloop.adapters.entity_gym` and
:mod:`~gymloop.adapters.entity_gym_vec`): without it, a :class:`~gymloop.errors.ConfigError` that says how to install it.
"""

from __future__ import annotations

try:
    import entity_gym.env as eg
    from ragged_buffer import RaggedBufferBool, RaggedBufferF32, RaggedBufferI64
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(
        "gymloop's entity-gym adapters need entity-gym: pip install --ignore-requires-python --prefer-binary "
        f'entity-gym==0.1.10 "numpy<2" ({e})'
    ) from e

__all__ = ["RaggedBufferBool", "RaggedBufferF32", "RaggedBufferI64", "eg"]
