"""The snake of :mod:`gymloop.games.snake`, written two more ways: low-level and Gymnasium.

Same rules (they share :class:`~gymloop.games.snake.SnakeGame`), three ways to drive them:

* :func:`gymloop.games.snake.snake`: the game loop (``agent.act(obs, Move)``);
* :class:`SnakeEnv`: a hand-written :class:`gl.Environment` (``reset(seed)`` / ``act(actions)``),
  the fastest thing the low-level API allows;
* :class:`GymSnakeEnv`: a ``gymnasium.Env`` with a fixed-size grid observation, as a Gymnasium
  user would write it. Gymnasium (the ``gym`` extra) is imported only when this class is first
  used.

They exist to measure the overhead of each API (``benchmarks/throughput.py``) and to check that
the three drivers agree step for step (``tests/games/test_snake_envs.py``).

**Seeding.** The game loop seeds one :class:`SnakeGame` per run and restarts its episodes in place,
continuing that game's random stream. The other two follow it: a reset that comes right after an
episode ended (``SnakeEnv``), or a reset without a seed (``GymSnakeEnv``, Gymnasium's convention),
starts the next episode of the same stream; any other reset seeds a new game. So with the same
seed and the same moves all three produce the same episodes, one after the other; e.g.
``gl.VecEnv(snake, ...)`` and ``gl.VecEnv(SnakeEnv, ...)`` give bit-identical batches.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake_envs import SnakeEnv, GymSnakeEnv
    >>> env = gl.VecEnv(SnakeEnv, num_envs=4, seed=0)
    >>> batch = env.reset()
    >>> batch = env.step(env.sample_actions())
    >>> batch.counts["Head"].tolist()
    [1, 1, 1, 1]
    >>> env.close()
    >>> gym_env = GymSnakeEnv()
    >>> obs, info = gym_env.reset(seed=0)
    >>> obs.shape, float(obs[..., 0].sum())
    ((10, 10, 3), 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..env import Environment, EnvObservation
from ..errors import ConfigError, EnvStateError, InvalidActionError
from ..kinds import CATEGORICAL
from ..spaces import ActionDesc, ObsSpace
from . import snake as _snake
from .grid import MOVES, Move
from .snake import SIZE, SnakeGame

__all__ = ["SnakeEnv", "GymSnakeEnv"]

_LABELS = tuple(m.name for m in Move)
_XY = ("x", "y")
_CELL = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)  # grid channels of a free/body/food cell


def _move(game: SnakeGame, a: int, before: int) -> tuple[int, float]:
    """Step ``game`` with move ``a`` (an index into ``Move``): the snake's new length, and the reward (its change from ``before``)."""
    game.step(MOVES[a])
    length = game.length
    return length, float(length - before)


def _max_steps(max_steps: int | None) -> int:
    if max_steps is None:
        return _snake.MAX_STEPS  # read at construction, so the loop and the envs agree
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ConfigError(f"max_steps must be an int >= 1 or None (the game loop's {_snake.MAX_STEPS}), got {max_steps!r}")
    return int(max_steps)


def _size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
        raise ConfigError(f"size must be an int >= 2, got {size!r}")
    return int(size)


class SnakeEnv(Environment):
    """Snake as a low-level :class:`gl.Environment`, with the rules of the game loop ``snake``.

    **Observation.** Entity types, in ``obs_space`` order (which is also the order of the entity
    index): ``Body`` (the segments behind the head, nearest first), ``Food`` (every food, oldest
    first), ``Head`` (one); each with features ``x``, ``y`` (integers in ``[0, size)``). Rows are
    plain Python lists (the batcher's fast path). The actor of ``Move`` is the ``Head``, entity
    index ``len(body) + len(food)``.

    **Action.** ``Move``, categorical: ``UP`` (y+1), ``DOWN`` (y-1), ``LEFT`` (x-1), ``RIGHT``
    (x+1); no masks (a move opposite to the heading is ignored while the snake has a body).

    **Reward.** The change of the snake's length (head plus segments) on this step.

    **Termination.** Running into a wall or into the body *terminates* the episode; ``max_steps``
    moves (500, like the game loop) *truncate* it. The last observation of an episode carries the
    metric ``length``.

    **Seeding.** ``reset(seed)`` seeds a new game, except right after an episode ended: then the
    next episode continues the game's random stream, as the game loop's in-place restart does
    (see the module docstring). Either way the sequence of episodes is a function of the first
    seed and the moves.

    Args:
        max_steps: moves per episode before truncation (default: the game loop's ``MAX_STEPS``).
        size: board width and height.

    Example:
        >>> import numpy as np
        >>> env = SnakeEnv()
        >>> obs = env.reset(seed=0)
        >>> sorted(obs.entities), obs.actors["Move"] == [len(obs.entities["Body"]) + len(obs.entities["Food"])]
        (['Body', 'Food', 'Head'], True)
        >>> obs = env.act({"Move": np.array([0])})
        >>> obs.reward in (-1.0, 0.0, 1.0)
        True
    """

    def __init__(self, max_steps: int | None = None, size: int = SIZE) -> None:
        self.max_steps = _max_steps(max_steps)
        self.size = _size(size)
        self._game: SnakeGame | None = None
        self._length = 1
        self._ended = False

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Body": _XY, "Food": _XY, "Head": _XY})

    def action_space(self) -> dict[str, ActionDesc]:
        return {"Move": ActionDesc("Move", CATEGORICAL, _LABELS)}

    def reset(self, seed: int) -> EnvObservation:
        game = self._game
        if self._ended and game is not None:
            game.reset()  # the next episode of the same random stream, like the game loop
        else:
            game = self._game = SnakeGame(seed, self.size)
        self._ended = False
        self._length = 1 + len(game.body)
        return self._observe(game, 0.0, False, False)

    def act(self, actions: Mapping[str, np.ndarray]) -> EnvObservation:
        game = self._game
        if game is None or self._ended:
            raise EnvStateError("act() before reset(), or after the episode ended; call reset(seed) first")
        try:
            a = int(actions["Move"][0])
        except (KeyError, IndexError, TypeError) as e:
            raise InvalidActionError(f"SnakeEnv.act expects {{'Move': an int array of shape (1,)}}, got {actions!r}") from e
        if not 0 <= a < 4:
            raise InvalidActionError(f"Move must be in [0, 4) {_LABELS}, got {a}")
        length, reward = _move(game, a, self._length)
        self._length = length
        if game.over or game.steps >= self.max_steps:
            self._ended = True
            obs = self._observe(game, reward, game.over, not game.over)
            obs.metrics = {"length": length}
            return obs
        return self._observe(game, reward, False, False)

    @staticmethod
    def _observe(game: SnakeGame, reward: float, terminated: bool, truncated: bool) -> EnvObservation:
        body = game.body
        food = game.food
        h = game.head
        return EnvObservation(
            entities={
                "Body": [[b.x, b.y] for b in body],
                "Food": [[f.x, f.y] for f in food],
                "Head": [[h.x, h.y]],
            },
            actors={"Move": [len(body) + len(food)]},
            reward=reward,
            terminated=terminated,
            truncated=truncated,
        )


# ---------------------------------------------------------------------------------------- Gymnasium
def __getattr__(name: str) -> Any:
    # GymSnakeEnv subclasses gymnasium.Env, so it is built on first access: importing this module
    # (for SnakeEnv) needs no gymnasium.
    if name == "GymSnakeEnv":
        cls = _build_gym_snake_env()
        globals()["GymSnakeEnv"] = cls  # cached; pickling by reference finds it here
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"GymSnakeEnv"})


def _build_gym_snake_env() -> type:
    try:
        import gymnasium
        from gymnasium import spaces
        from gymnasium.error import ResetNeeded
    except ImportError as e:  # pragma: no cover - gymnasium is in the dev extra
        raise ImportError("GymSnakeEnv needs gymnasium: pip install 'gymloop[gym]'") from e

    class GymSnakeEnv(gymnasium.Env):
        """Snake as a ``gymnasium.Env``, with the rules of the game loop ``snake``.

        **Observation.** ``Box(0, 1, (size, size, 3), float32)``, a grid indexed ``[x, y, channel]``:
        channel 0 is the head, 1 the body segments, 2 the food (1.0 where present). A grid, as most
        Gymnasium snakes have it; unlike the entity observation it does not tell the order of the
        segments.

        **Action.** ``Discrete(4)``: 0 ``UP`` (y+1), 1 ``DOWN`` (y-1), 2 ``LEFT`` (x-1), 3
        ``RIGHT`` (x+1). A move opposite to the heading is ignored while the snake has a body.

        **Reward.** The change of the snake's length (head plus segments) on this step.

        **Termination.** Running into a wall or into the body *terminates* the episode;
        ``max_steps`` moves (500, like the game loop) *truncate* it. The last step's ``info`` has
        ``"length"``; other steps return an empty ``info``.

        **Seeding.** ``reset(seed=s)`` starts the game the loop starts with ``snake(agent, s)``;
        ``reset()`` without a seed starts the next episode of the same random stream (so the
        vector envs' autoreset continues it, like the loop's in-place restart).

        Args:
            max_steps: moves per episode before truncation (default: the game loop's ``MAX_STEPS``).
            size: board width and height.
            render_mode: only ``None`` (no rendering).

        Example:
            >>> from gymloop.games.snake_envs import GymSnakeEnv
            >>> env = GymSnakeEnv()
            >>> obs, info = env.reset(seed=0)
            >>> obs, reward, terminated, truncated, info = env.step(0)
            >>> obs.dtype.name, reward in (-1.0, 0.0, 1.0)
            ('float32', True)
        """

        metadata = {"render_modes": []}

        def __init__(self, max_steps: int | None = None, size: int = SIZE, render_mode: str | None = None) -> None:
            if render_mode is not None:
                raise ConfigError(f"GymSnakeEnv has no render modes; render_mode must be None, got {render_mode!r}")
            self.max_steps = _max_steps(max_steps)
            self.size = _size(size)
            self.render_mode = None
            self.observation_space = spaces.Box(0.0, 1.0, (self.size, self.size, 3), np.float32)
            self.action_space = spaces.Discrete(4)
            self._game: SnakeGame | None = None
            self._length = 1

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
            super().reset(seed=seed)
            if seed is not None:
                self._game = SnakeGame(seed, self.size)
            elif self._game is None:
                self._game = SnakeGame(int(self.np_random.integers(2**63)), self.size)
            else:
                self._game.reset()  # the next episode of the same random stream
            self._length = 1 + len(self._game.body)
            return self._observe(self._game), {}

        def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
            game = self._game
            if game is None:
                raise ResetNeeded("GymSnakeEnv.step() before reset(); call env.reset(seed=...) first")
            a = int(action)
            if not 0 <= a < 4:
                raise ValueError(f"action must be an int in [0, 4) (UP, DOWN, LEFT, RIGHT), got {action!r}")
            length, reward = _move(game, a, self._length)
            self._length = length
            terminated = game.over
            truncated = not terminated and game.steps >= self.max_steps
            info = {"length": length} if terminated or truncated else {}
            return self._observe(game), reward, terminated, truncated, info

        def _observe(self, game: SnakeGame) -> np.ndarray:
            s = self.size
            # occupied[x * size + y]: 0 free, 1 body, 2 food -> one-hot rows of _CELL (a new array)
            obs = _CELL.take(np.frombuffer(game.occupied, dtype=np.uint8), axis=0).reshape(s, s, 3)
            h = game.head
            obs[h.x, h.y, 0] = 1.0
            return obs

    GymSnakeEnv.__qualname__ = "GymSnakeEnv"
    GymSnakeEnv.__module__ = __name__
    return GymSnakeEnv
