"""Any single-agent gymloop game as a Stable-Baselines3 ``VecEnv``, so SB3 trains it at gymloop's batched speed.

:class:`GymloopSB3VecEnv` puts SB3's ``VecEnv`` API (``reset`` / ``step_async`` / ``step_wait``
and the attribute calls) over a :class:`~gymloop.adapters.gymnasium.GymloopVectorEnv`: every
copy runs in one :class:`gymloop.VecEnv` (optionally ``workers`` processes) and is padded for all
copies at once, instead of SB3's ``DummyVecEnv`` stepping one ``GymloopEnv`` after another. The
spaces are the Gymnasium adapter's (a ``Dict`` observation: use ``"MultiInputPolicy"``; see
:mod:`gymloop.adapters.gymnasium`). ``GymloopEnv`` also works with SB3 as it is (SB3 wraps it in
a ``DummyVecEnv``); this class is the fast path.

What SB3 gets, as from ``DummyVecEnv`` over ``Monitor``-wrapped envs:

- ``step_wait()`` returns ``(obs, rewards, dones, infos)``: ``obs`` a dict of ``(num_envs, ...)``
  arrays (new arrays every step), ``rewards`` float32, ``dones = terminated | truncated``, one
  ``info`` dict per copy;
- at the end of a copy's episode (the copy restarts itself in the same step, and ``obs`` holds its
  next first observation), its ``info`` has ``terminal_observation`` (the final observation, as
  the Gymnasium adapter defines it), ``TimeLimit.truncated`` (truncated and not terminated, so
  SB3 bootstraps the value of a time limit), ``episode = {"r": return, "l": length, "t": seconds}``
  (from the game's ``episode_return`` / ``episode_length``: SB3 logs ``rollout/ep_rew_mean`` from
  it) and the game's other end-of-episode metrics by name;
- ``illegal_actions`` in a copy's ``info`` when a masked-out action was replaced (see
  ``illegal_actions`` in :mod:`gymloop.adapters.gymnasium`);
- ``env_method("action_masks")`` returns each copy's flat bool mask, which is what sb3-contrib's
  ``MaskablePPO`` asks for (:meth:`GymloopSB3VecEnv.action_masks` gives them as one array).

``env.seed(s)`` (which ``PPO(..., seed=s)`` calls) makes the next ``reset()`` restart every copy
from root seed ``s`` (their seeds derive from it, as for ``gl.VecEnv(game, n, seed=s)``; SB3's
per-copy ``s + i`` are not used); a ``reset()`` without a seed set continues with the next
episodes. The copies share one ``gl.VecEnv``, so they have no per-copy Python objects:
``get_attr`` reads (and ``set_attr`` writes, for every copy at once) attributes of the
``GymloopVectorEnv``, and ``env_method`` knows only ``action_masks``.

:func:`sb3_chooser` turns a trained model back into gymloop's terms (a function from a
:class:`~gymloop.Batch` to its actions), so :func:`gymloop.evaluation.evaluate_episodes` scores
it on exactly the episodes it scores gymloop's own policies on.

Stable-Baselines3 (and Gymnasium) are imported when this module is imported; ``import gymloop``
does not.

Example:
    >>> from stable_baselines3 import PPO
    >>> from gymloop.adapters.sb3 import GymloopSB3VecEnv
    >>> from gymloop.games.snake import snake
    >>> env = GymloopSB3VecEnv(snake, 4, max_entities=100)
    >>> env.num_envs, env.action_space
    (4, Discrete(4))
    >>> obs = env.reset()
    >>> obs["Head"].shape, env.action_masks().shape
    ((4, 100, 2), (4, 4))
    >>> model = PPO("MultiInputPolicy", env, n_steps=8, batch_size=32, n_epochs=1, seed=0, device="cpu")
    >>> model = model.learn(total_timesteps=32)
    >>> model.num_timesteps
    32
    >>> env.close()
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

try:
    import gymnasium
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(f"gymloop.adapters.sb3 needs stable-baselines3: pip install 'gymloop[sb3]' ({e})") from e

from ..batch import Batch
from ..errors import ConfigError, EnvStateError
from .gymnasium import GymloopVectorEnv
from .padded import PaddedLayout

__all__ = ["GymloopSB3VecEnv", "sb3_chooser"]

#: the only method ``env_method`` calls (per copy): what sb3-contrib's maskable algorithms ask for
MASK_METHOD = "action_masks"


class GymloopSB3VecEnv(VecEnv):
    """``num_envs`` copies of a single-agent game as a Stable-Baselines3 ``VecEnv`` (see the module docstring).

    Args:
        game: a game loop or a :class:`gymloop.Environment` class.
        num_envs: game copies.
        **kwargs: the arguments of :class:`~gymloop.adapters.gymnasium.GymloopVectorEnv`
            (``workers``, ``seed``, ``max_entities``, ``max_actors``, ``illegal_actions``,
            ``mask_in_obs``, ``measure_steps`` and other :class:`gymloop.VecEnv` options).

    Attributes:
        vector_env: the :class:`~gymloop.adapters.gymnasium.GymloopVectorEnv` underneath.
        layout: its :class:`~gymloop.adapters.padded.PaddedLayout`.

    Raises:
        ConfigError: as :class:`~gymloop.adapters.gymnasium.GymloopVectorEnv` (a multi-agent
            game, bad sizes or options); from ``reset``, reset options (the copies take none);
            from ``env_method`` / ``set_attr``, a per-copy call the shared copies cannot answer.
        InvalidObservationError: from ``reset`` / ``step``, an observation with more entities or
            actors than the sizes.
        InvalidActionError: from ``step``, an action outside the action space.
        EnvStateError: ``step_wait`` without ``step_async``.
    """

    def __init__(self, game: Callable[..., Any] | type, num_envs: int, **kwargs: Any) -> None:
        self.vector_env = GymloopVectorEnv(game, num_envs, **kwargs)
        self.layout = self.vector_env.layout
        self.name = self.vector_env.name
        self._actions: np.ndarray | None = None
        self._t0 = time.perf_counter()
        try:
            super().__init__(self.vector_env.num_envs, self.vector_env.single_observation_space, self.vector_env.single_action_space)
        except BaseException:
            self.vector_env.close()
            raise

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        """Restart every copy: from the root seed :meth:`seed` set (then forgotten), else with the next episodes."""
        if any(self._options):
            raise ConfigError(f"{self.name}: GymloopSB3VecEnv takes no reset options, got {self._options[0]!r} (set_options); "
                              "the game's options go to the constructor (GymloopVectorEnv / gl.VecEnv arguments)")
        seed = self._seeds[0]
        obs, _ = self.vector_env.reset(seed=seed)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._actions = None
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Remember one action per copy (``(num_envs,)`` for ``Discrete``, ``(num_envs, n_components)`` for ``MultiDiscrete``)."""
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        """Step every copy with the remembered actions; ended copies restart in the same step."""
        actions = self._actions
        if actions is None:
            raise EnvStateError(f"{self.name}: step_wait() without step_async(actions); call step(actions)")
        self._actions = None
        obs, rewards, terminated, truncated, info = self.vector_env.step(actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for k, v in info.items():
            if k.startswith("_") or k in ("final_obs", "final_info"):
                continue
            is_int = k == "illegal_actions"
            for i in np.flatnonzero(info["_" + k]):
                infos[i][k] = int(v[i]) if is_int else float(v[i])
        if dones.any():
            final_obs, ended = info["final_obs"], info["final_info"]
            t = round(time.perf_counter() - self._t0, 6)
            for i in np.flatnonzero(dones):
                d = infos[i]
                for k, v in ended.items():
                    if not k.startswith("_") and ended["_" + k][i]:
                        d[k] = float(v[i])
                d["terminal_observation"] = final_obs[i]
                d["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                d["episode"] = {"r": d.get("episode_return", float("nan")), "l": int(d.get("episode_length", 0)), "t": t}
        return obs, rewards.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        """``(num_envs, sum(nvec))`` bool: each copy's flat action mask (a new array)."""
        return self.vector_env.action_masks()

    def close(self) -> None:
        """Close every copy (and worker processes); idempotent."""
        self.vector_env.close()

    # ------------------------------------------------------------------ attribute calls
    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        out = [int(indices)] if isinstance(indices, (int, np.integer)) else [int(i) for i in indices]
        bad = [i for i in out if not 0 <= i < self.num_envs]
        if bad:
            raise ConfigError(f"{self.name}: env indices {bad} are outside [0, {self.num_envs}) (num_envs={self.num_envs})")
        return out

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The ``GymloopVectorEnv``'s attribute ``attr_name``, once per index (``AttributeError`` if it has none)."""
        value = getattr(self.vector_env, attr_name)
        return [value] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the ``GymloopVectorEnv``: for every copy at once, so ``indices`` must be all of them."""
        idx = self._indices(indices)
        if sorted(set(idx)) != list(range(self.num_envs)):
            raise ConfigError(f"{self.name}: set_attr({attr_name!r}) for copies {idx}: the {self.num_envs} copies share one "
                              "GymloopVectorEnv, so an attribute can only be set for all of them (indices=None)")
        setattr(self.vector_env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any) -> list[Any]:
        """Per-copy method calls: only ``action_masks`` (each copy's flat mask, for ``MaskablePPO``)."""
        idx = self._indices(indices)
        if method_name != MASK_METHOD or method_args or method_kwargs:
            raise ConfigError(
                f"{self.name}: env_method({method_name!r}, ...): the copies share one gl.VecEnv and have no per-copy "
                f"objects, so GymloopSB3VecEnv.env_method knows only {MASK_METHOD!r}(); call the method on "
                "env.vector_env (the GymloopVectorEnv) instead"
            )
        masks = self.vector_env.action_masks()
        return [masks[i] for i in idx]

    def env_is_wrapped(self, wrapper_class: type[gymnasium.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """``False`` for every copy: the copies are not ``gymnasium.Env`` objects and carry no wrappers."""
        return [False] * len(self._indices(indices))

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Restart every copy from root seed ``seed`` at the next ``reset()`` (``None``: a random one).

        Returns:
            The seed of each copy's list as SB3 keeps it (``seed + i``); the copies' seeds derive
            from ``seed`` itself, as for ``gl.VecEnv(game, num_envs, seed=seed)``.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ConfigError(f"{self.name}: seed must be a non-negative int (the copies' seeds derive from it), got {seed!r}")
        return super().seed(None if seed is None else int(seed))


def sb3_chooser(model: Any, layout: PaddedLayout, *, deterministic: bool = False, seed: int = 0) -> Callable[[Batch], Mapping[str, np.ndarray]]:
    """A function from a :class:`~gymloop.Batch` to its actions, chosen by an SB3 model.

    The batch is padded with ``layout`` (the one the model was trained on: ``env.layout``), the
    model predicts (a maskable model, one whose ``predict`` takes ``action_masks``, gets the
    masks), and the padded choices become gymloop actions; a masked-out choice of a model that
    ignores the masks is replaced by a random legal one (drawn from ``seed``). Pass it to
    :func:`gymloop.evaluation.evaluate_episodes` (or ``VecEnv.step``).

    Args:
        model: a Stable-Baselines3 (or sb3-contrib) model trained on ``layout``'s spaces.
        layout: the padded layout (:attr:`GymloopSB3VecEnv.layout`, ``GymloopEnv.layout``).
        deterministic: the model's most probable actions instead of samples.
        seed: seeds the replacement of masked-out choices.

    Raises:
        ConfigError: the model's observation space is not ``layout``'s.

    Example:
        >>> from stable_baselines3 import PPO
        >>> from gymloop.adapters.sb3 import GymloopSB3VecEnv, sb3_chooser
        >>> from gymloop.evaluation import evaluate_episodes
        >>> from gymloop.games.snake import snake
        >>> env = GymloopSB3VecEnv(snake, 2, max_entities=100)
        >>> model = PPO("MultiInputPolicy", env, n_steps=8, batch_size=16, seed=0, device="cpu")
        >>> per_episode = evaluate_episodes(snake, sb3_chooser(model, env.layout), episodes=4, num_envs=2)
        >>> len(per_episode["episode_return"])
        4
        >>> env.close()
    """
    if model.observation_space != layout.observation_space:
        raise ConfigError(f"{layout.name}: the model's observation space {model.observation_space} is not the layout's "
                          f"{layout.observation_space}; pass the layout of the env the model was trained on (env.layout)")
    maskable = "action_masks" in inspect.signature(model.predict).parameters
    rng = np.random.default_rng(seed)

    def choose(b: Batch) -> dict[str, np.ndarray]:
        cv = layout.convert(b)
        if maskable:
            acts, _ = model.predict(cv.obs, deterministic=deterministic, action_masks=cv.mask)
        else:
            acts, _ = model.predict(cv.obs, deterministic=deterministic)
        matrix = layout.action_matrix(np.asarray(acts, dtype=np.int64), b.num_slots, "the model's actions")
        actions, _ = layout.decode(cv, matrix, "replace", rng)
        return actions

    return choose
