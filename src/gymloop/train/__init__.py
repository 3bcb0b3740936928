"""PPO training for gymloop games (needs the ``train`` extra: PyTorch)."""

from ..nn.config import FrameConfig, NetConfig, RelposConfig
from .config import BCConfig, LeagueConfig, PPOConfig, TrainConfig

__all__ = ["BCConfig", "FrameConfig", "LeagueConfig", "NetConfig", "PPOConfig", "RelposConfig", "TrainConfig", "Trainer", "train"]


def __getattr__(name: str):  # import torch only when the trainer is used
    if name in ("train", "Trainer"):
        from . import ppo

        return getattr(ppo, name)
    raise AttributeError(name)
