"""The low-level API: one environment instance, stepped explicitly (entity-gym style).

For people who want full control over features. A :class:`gl.VecEnv` accepts an
:class:`Environment` subclass in place of a game loop and produces the same batches.

Example:
    >>> import numpy as np
    >>> import gymloop as gl
    >>> class Coin(gl.Environment):
    ...     def obs_space(self):
    ...         return gl.ObsSpace(entities={"Player": ("x",)})
    ...     def action_space(self):
    ...         return {"Guess": gl.ActionDesc("Guess", "categorical", ("HEADS", "TAILS"))}
    ...     def reset(self, seed):
    ...         self.rng = np.random.default_rng(seed)
    ...         return self._obs(0.0, False)
    ...     def act(self, actions):
    ...         win = int(actions["Guess"][0]) == int(self.rng.integers(2))
    ...         return self._obs(float(win), True)
    ...     def _obs(self, reward, done):
    ...         return gl.EnvObservation(entities={"Player": [[0.0]]}, actors={"Guess": [0]},
    ...                                  reward=reward, terminated=done)
    >>> env = gl.VecEnv(Coin, num_envs=2, seed=0)
    >>> env.reset().counts["Player"].tolist()
    [1, 1]
    >>> env.close()
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .spaces import ActionDesc, ObsSpace

__all__ = ["Environment", "EnvObservation"]


@dataclass
class EnvObservation:
    """What a low-level environment returns from ``reset`` and ``act``.

    Attributes:
        entities: entity type name → rows of features, ``(n, n_features)`` (a list of lists or an
            array). Types with no entity may be left out.
        actors: action type name → entity indices (within this observation: types in
            ``obs_space`` order, then rows in order) of the actors of that action type.
        masks: optional action type name → a mask, True (or 1) where a choice is allowed:
            ``(n_actors, n_choices)`` for a categorical action, ``(n_actors, n_candidates)`` for
            select-entity, or the same entries flat (one actor's after another). A mask of any
            other shape (a transposed one), or of values other than booleans and 0/1, is an
            :class:`~gymloop.errors.InvalidObservationError`.
        reward: reward of the transition that led here: a finite real number (a Python or numpy
            scalar).
        terminated: the episode ended for real (``reset`` is called next): a bool (or numpy bool).
        truncated: the episode was cut short (time limit): a bool (or numpy bool).
        globals: the global feature vector, if the observation space has global features (finite
            numbers).
        metrics: custom metrics to report (usually at the end of an episode): name → number.

    A reward, an end or a metric that breaks these rules is a :class:`~gymloop.errors.GameError`
    of that copy (with its seed), caused by an :class:`~gymloop.errors.InvalidObservationError`.
    """

    entities: Mapping[str, Any]
    actors: Mapping[str, Sequence[int]]
    masks: Mapping[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    globals: Sequence[float] | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)


class Environment(ABC):
    """A single environment: ``obs_space``, ``action_space``, ``reset(seed)``, ``act(actions)``.

    ``act`` receives action type name → an int array with one choice per actor (the index among
    the actor's candidates for select-entity: every entity of the action's ``among`` types, in
    entity order). After an observation with ``terminated`` or ``truncated`` the vectorized
    environment calls ``reset`` with a fresh seed.
    """

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The entity types and feature names this environment produces."""

    @abstractmethod
    def action_space(self) -> dict[str, ActionDesc]:
        """The action types by name."""

    @abstractmethod
    def reset(self, seed: int) -> EnvObservation:
        """Start a new episode."""

    @abstractmethod
    def act(self, actions: Mapping[str, np.ndarray]) -> EnvObservation:
        """Apply one action per actor and return the next observation."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (optional)."""


def _is_environment(game: Any) -> bool:
    """A ``gl.Environment`` subclass, or a ``functools.partial`` of one (for constructor arguments)."""
    target = game.func if isinstance(game, functools.partial) else game
    return isinstance(target, type) and issubclass(target, Environment)
