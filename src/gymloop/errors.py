"""The exceptions gymloop raises, all rooted in :class:`GymloopError`.

Tree::

    GymloopError
    ├── SchemaError              a class cannot be an entity, globals or action type
    ├── InvalidObservationError  an observation the game built is malformed (NaN, unknown type, ...)
    ├── InvalidActionError       an action is out of range, masked out, or of the wrong shape/dtype
    ├── GameError                a game function raised; carries the env index and seed
    │   └── GameTimeoutError     a game ran longer than the step timeout without asking for a decision
    ├── WorkerError              a worker process died or stopped answering; names the worker and its copies
    ├── EnvStateError            a call at the wrong time (step before reset, step after close)
    ├── ConfigError              an argument that cannot work (zero envs, bad worker count, ...)
    │   └── DeviceError          a training device that is not one, or that PyTorch does not see (no GPU)
    ├── CheckpointError          a checkpoint file that is corrupt, foreign or incompatible
    ├── TraceError               a trace file that is corrupt or foreign, or a replay that diverges
    ├── TrainingError            training cannot continue (a NaN loss, ...)
    ├── ExportError              an agent's network uses something an exporter (ONNX) cannot express
    ├── OutputPathError          a file cannot be written there (a folder, FIFO or device; one of the inputs)
    ├── InputPathError           a file to read is a folder, FIFO or device, not a file
    └── render.PlayerQuit        not a failure: the player closed the window or pressed Escape

Every message names the thing, what was expected, what came, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "GymloopError",
    "SchemaError",
    "InvalidObservationError",
    "InvalidActionError",
    "GameError",
    "GameTimeoutError",
    "WorkerError",
    "EnvStateError",
    "ConfigError",
    "DeviceError",
    "DisplayClosed",
    "CheckpointError",
    "TraceError",
    "TrainingError",
    "ExportError",
    "OutputPathError",
    "InputPathError",
]


class GymloopError(Exception):
    """Base class of every error gymloop raises on purpose."""


class SchemaError(GymloopError, TypeError):
    """A class cannot be turned into an entity, globals or action type."""


class InvalidObservationError(GymloopError, ValueError):
    """An observation built by a game is malformed."""


class InvalidActionError(GymloopError, ValueError):
    """An action given to an environment or returned by an agent is not legal."""


class EnvStateError(GymloopError, RuntimeError):
    """A method was called when the environment was not in a state to accept it."""


class DisplayClosed(GymloopError):
    """The player closed a game's window (:meth:`gymloop.Display.tick` raises it; ``gymloop play`` stops there)."""


class ConfigError(GymloopError, ValueError):
    """An argument or configuration value that cannot work."""


class DeviceError(ConfigError):
    """A training device (``TrainConfig.device``, ``gymloop train --device``) that is not one of the
    accepted forms, or that PyTorch cannot use here (``cuda`` without a visible GPU, ``cuda:N`` past
    the last one); the message says what PyTorch sees."""


class CheckpointError(GymloopError, ValueError):
    """A checkpoint is truncated, corrupt, not a gymloop agent, or does not fit the game."""


class TraceError(GymloopError, ValueError):
    """A trace file is truncated, corrupt, not a gymloop trace or of an unknown format version, or
    a replay of a trace observed something other than what was recorded."""


class TrainingError(GymloopError, RuntimeError):
    """Training cannot continue (for example a NaN in the loss)."""


class ExportError(GymloopError, ValueError):
    """An agent cannot be exported: its network uses a part the exporter cannot express (the
    message names the file and the part)."""


class OutputPathError(GymloopError, OSError):
    """A file cannot be written at the path asked: the path names a folder, a FIFO, a device or a
    socket (which writing would destroy or block on), or one of the command's own inputs, or the
    system refused the write (the message gives its reason). Nothing at the path was changed."""


class InputPathError(GymloopError, OSError):
    """A file to read is a folder, a FIFO, a device or a socket, not a regular file (reading it
    would fail or wait forever)."""


class GameError(GymloopError, RuntimeError):
    """A game function raised an exception.

    Attributes:
        env_index: index of the game copy that failed.
        seed: the seed that game copy was started with; ``gl.run(game, agent, seed=seed)``
            replays it.
        original_traceback: the formatted traceback of the game's own exception.
    """

    def __init__(self, message: str, *, env_index: int, seed: int, original_traceback: str = "") -> None:
        super().__init__(message)
        self.env_index = env_index
        self.seed = seed
        self.original_traceback = original_traceback

    def __reduce__(self):  # keep the attributes when crossing a process boundary
        return (
            _rebuild_game_error,
            (self.args[0], self.env_index, self.seed, self.original_traceback),
        )


def _rebuild_game_error(message: str, env_index: int, seed: int, tb: str) -> GameError:
    return GameError(message, env_index=env_index, seed=seed, original_traceback=tb)


class GameTimeoutError(GameError):
    """A game copy ran longer than the step timeout without asking for its next decision.

    It carries the env index and seed like every :class:`GameError`; with
    ``on_game_error="restart"`` the copy is restarted like any other faulting game.
    """

    def __reduce__(self):  # keep the subclass and attributes across a process boundary
        return (
            _rebuild_game_timeout_error,
            (self.args[0], self.env_index, self.seed, self.original_traceback),
        )


def _rebuild_game_timeout_error(message: str, env_index: int, seed: int, tb: str) -> GameTimeoutError:
    return GameTimeoutError(message, env_index=env_index, seed=seed, original_traceback=tb)


class WorkerError(GymloopError, RuntimeError):
    """A worker process died or stopped answering.

    Attributes:
        worker: the worker's index (1 for the first child process; 0 is the calling process).
        env_indices: the game copies that worker runs, as a ``range``.
    """

    def __init__(self, message: str, *, worker: int, env_indices: range) -> None:
        super().__init__(message)
        self.worker = worker
        self.env_indices = env_indices

    def __reduce__(self):
        return (_rebuild_worker_error, (self.args[0], self.worker, self.env_indices))


def _rebuild_worker_error(message: str, worker: int, env_indices: range) -> WorkerError:
    return WorkerError(message, worker=worker, env_indices=env_indices)
