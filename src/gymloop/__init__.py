"""gymloop: turn a Python game loop into a fast reinforcement-learning environment.

A game calls ``agent.act(obs, Move)`` wherever it needs a decision; the same code then runs with a
random, scripted, trained or human agent, or as thousands of copies in a :class:`VecEnv`.
"""

from __future__ import annotations

from . import enn as _enn  # noqa: F401 (importing it registers enn-trainer checkpoints with gl.load: gymloop.formats)
from ._version import __version__
from .actions import SelectEntity, action_spec, global_decision
from .agent import Agent, EpisodeResult, RandomAgent, RunResult, act_all, run
from .agent_library import AgentLibrary, library, pack_library
from .batch import Batch
from .checker import CheckError, check
from .display import HEADLESS, Display
from .env import Environment, EnvObservation
from .errors import (
    CheckpointError,
    ConfigError,
    DisplayClosed,
    EnvStateError,
    ExportError,
    GameError,
    GameTimeoutError,
    GymloopError,
    InputPathError,
    InvalidActionError,
    InvalidObservationError,
    OutputPathError,
    SchemaError,
    TraceError,
    TrainingError,
    WorkerError,
)
from .export import runtime as _onnx_runtime  # noqa: F401 (importing it registers gl.load(runtime="onnx"))
from .neural import NeuralAgent, load
from .obs import Obs
from .schema import EntitySchema, entity, schema_of
from .spaces import ActionDesc, ObsSpace, Spaces, declared_types, game
from .trace import Recorder, Trace, load_trace, record_trace, replay
from .vector import VecEnv

__all__ = [
    "Agent",
    "AgentLibrary",
    "ActionDesc",
    "Batch",
    "CheckError",
    "CheckpointError",
    "ConfigError",
    "Display",
    "DisplayClosed",
    "EntitySchema",
    "EnvObservation",
    "EnvStateError",
    "ExportError",
    "Environment",
    "EpisodeResult",
    "GameError",
    "GameTimeoutError",
    "GymloopError",
    "HEADLESS",
    "InputPathError",
    "InvalidActionError",
    "InvalidObservationError",
    "NeuralAgent",
    "Obs",
    "ObsSpace",
    "OutputPathError",
    "RandomAgent",
    "Recorder",
    "RunResult",
    "SchemaError",
    "SelectEntity",
    "Spaces",
    "Trace",
    "TraceError",
    "TrainingError",
    "VecEnv",
    "act_all",
    "action_spec",
    "check",
    "declared_types",
    "game",
    "global_decision",
    "library",
    "load",
    "load_trace",
    "pack_library",
    "entity",
    "record_trace",
    "replay",
    "run",
    "schema_of",
    "__version__",
    "WorkerError",
]
