"""Any single-agent gymloop game as a ``gymnasium.Env``, and many copies as a ``gymnasium.vector.VectorEnv``.

- :class:`GymloopEnv`: one copy of the game (it runs in a ``gl.VecEnv(game, 1)``, so the game code
  runs unchanged); passes ``gymnasium.utils.env_checker.check_env``.
- :class:`GymloopVectorEnv`: ``num_envs`` copies in one :class:`gymloop.VecEnv` (optionally
  ``workers`` processes), so Gymnasium users get gymloop's batched speed. Autoreset mode:
  ``AutoresetMode.SAME_STEP``.

**Observation.** A ``Dict`` of fixed-size arrays (float32 features, padded with zeros):

=================  ===============================================================================
key                value
=================  ===============================================================================
``<EntityType>``   ``Box((max_entities[type], n_features), float32)``: that type's rows in the
                   game's order, then zero rows (one key per entity type)
``counts``         ``Box((n_types,), int64)``: how many rows of each type are real, in
                   ``entity_types`` order (the ``Dict``'s keys are sorted; this order is not)
``globals``        ``Box((n_globals,), float32)`` (only when the game has global features)
``actors``         ``Box((n_actor_components,), int64)``: for each actor-bound action component,
                   the actor's position in the padded entities (types in ``entity_types`` order,
                   each ``max_entities[type]`` rows), ``-1`` when that actor is absent
``action_mask``    ``MultiBinary(sum(nvec))``: the flat action mask (``mask_in_obs=True``)
=================  ===============================================================================

Feature bounds are the finite float32 range (gymloop rejects non-finite features). Entity types
named ``counts``, ``globals``, ``actors`` or ``action_mask`` are refused (rename them with
``@gl.entity(name=...)``).

**Sizes.** ``max_entities`` (one number for every type, or a dict by type) and ``max_actors``
(one number for every actor-bound action type, or a dict by action type) fix the padding. What
is not given is measured by a short random run (``measure_steps`` steps of 8 copies): twice the
most entities of each type the run saw, the most actors it saw (at least 1 each), reported with
``logging.info`` (a game's actors are usually fixed by its structure: one head, a squad of three). A random agent sees fewer
entities than a good one (a long snake), so give the sizes for training. An observation with more entities or actors than the
sizes fails with :class:`~gymloop.errors.InvalidObservationError` naming the type, the count,
the limit and the fix; nothing is ever truncated.

**Actions.** Each action type asks for one choice per actor (per observation for a global
decision). The action space has one *component* per (action type, actor slot), action types in
the game's order, actor slots ``0 .. max_actors[type] - 1`` in the order the batch lists actors:

===============================  ==================================================================
gymloop                          component
===============================  ==================================================================
categorical (an Enum)            ``n_labels`` choices
composite (a dataclass of Enums) one component over the product labels (``move=UP,stance=FIRE``):
                                 its mask is over the combinations (a move can be legal with one
                                 stance and not another), which independent sub-actions cannot say
global decision                  ``n_labels`` choices, one component
select-entity                    the padded candidates: ``sum(max_entities[t] for t in among)``
                                 choices, in the padded entity order; a padding row is never legal
global select-entity             the padded candidates, one component (no ``actors`` column)
several actors                   ``max_actors[type]`` components; an absent actor's component
                                 allows only choice 0 and its value is ignored
===============================  ==================================================================

One component is ``Discrete(n)``; more are ``MultiDiscrete(nvec)`` (:attr:`GymloopEnv.components`
names them). ``action_masks()`` returns the flat bool mask over the components (``sum(nvec)``,
component after component), as sb3-contrib's ``MaskablePPO`` expects; the same mask is the
observation's ``action_mask``. An action in the action space that the mask forbids is replaced
by a uniformly random legal choice (``illegal_actions="replace"``, the default: every action in
the action space is accepted, as Gymnasium's contract and ``check_env`` want), counted in
``info["illegal_actions"]`` and logged once; ``illegal_actions="raise"`` makes it an
:class:`~gymloop.errors.InvalidActionError` instead. An action outside the action space always is.

**Episodes.** Rewards, ``terminated`` and ``truncated`` are the game's. The game restarts itself
when an episode ends, so the observation returned at the end of an episode is the final
observation the game passed to ``game_over`` (entities included) when it gave one, else an
*empty* observation (zero counts); :class:`GymloopEnv`'s next ``reset()`` returns the next
episode's first observation. The game's metrics (``episode_return``, ``episode_length``, its own)
are in ``info`` at the step that reports them. ``reset(seed=s)`` restarts the game with the seed
``gl.VecEnv(game, 1, seed=s)`` gives its copy; ``reset()`` continues.

Gymnasium is imported when this module is imported; ``import gymloop`` does not.

Example:
    >>> from gymloop.adapters.gymnasium import GymloopEnv
    >>> from gymloop.games.snake import snake
    >>> env = GymloopEnv(snake, max_entities=100)
    >>> env.action_space, sorted(env.observation_space.spaces)
    (Discrete(4), ['Body', 'Food', 'Head', 'action_mask', 'actors', 'counts'])
    >>> obs, info = env.reset(seed=0)
    >>> obs["Head"].shape, obs["counts"].tolist(), env.action_masks().tolist()
    ((100, 2), [0, 1, 1], [True, True, True, True])
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

try:
    import gymnasium
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector import VectorEnv as _GymVectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(f"gymloop.adapters.gymnasium needs gymnasium: pip install 'gymloop[gym]' ({e})") from e

from ..errors import ConfigError, EnvStateError
from ..games.registry import game_name
from ..spaces import declared_agents
from .padded import (
    Component,
    PaddedAdapter,
    PaddedLayout,
    Sizes,
    check_illegal,
    measure_sizes,
    slot_metrics,
)

__all__ = ["Component", "GymloopEnv", "GymloopVectorEnv", "PaddedLayout", "measure_sizes"]

def _check_single_agent(game: Any, options: Mapping[str, Any], what: str) -> None:
    n = declared_agents(game)
    apg = options.get("agents_per_game", 1)
    if (n is not None and n > 1) or apg != 1:
        k = n if n is not None and n > 1 else apg
        raise ConfigError(
            f"game {game_name(game)!r} takes {k} agents per game, but {what} runs single-agent games (one agent, "
            "one decision per step, as Gymnasium's Env has); use gymloop.adapters.pettingzoo.GymloopParallelEnv(game) "
            "for a multi-agent game"
        )


# ---------------------------------------------------------------------------------------- Env
class GymloopEnv(PaddedAdapter, gymnasium.Env):
    """A single-agent gymloop game as a ``gymnasium.Env`` (see the module docstring for the spaces).

    Args:
        game: a game loop ``game(agent, seed)`` or a :class:`gymloop.Environment` class.
        max_entities: rows per entity type: one int for every type, or a dict by type (the rest
            measured); ``None`` measures them all.
        max_actors: actor slots per actor-bound action type: one int or a dict (the rest measured).
        seed: the seed of the game before the first ``reset(seed=...)``.
        illegal_actions: ``"replace"`` (a masked-out choice becomes a random legal one, counted in
            ``info["illegal_actions"]``) or ``"raise"``.
        mask_in_obs: put the flat action mask in the observation as ``action_mask``.
        measure_steps: random steps (of 8 copies) that measure the sizes not given (entities: twice the most seen).
        render_mode: only ``None``.
        **options: other :class:`gymloop.VecEnv` arguments (``entity_types``, ``step_timeout``, ...).

    Attributes:
        components: the action space's components (:class:`Component`), in order.
        layout: the :class:`PaddedLayout`.

    Raises:
        ConfigError: a multi-agent game (use :mod:`gymloop.adapters.pettingzoo`), bad sizes or options.
        InvalidObservationError: from ``reset`` / ``step``, an observation with more entities or
            actors than the sizes (the message names the limit and the argument that raises it).
        InvalidActionError: from ``step``, an action outside the action space (or masked out with
            ``illegal_actions="raise"``).
        EnvStateError: ``step`` before ``reset``, after an episode ended, or after ``close``.

    Example:
        >>> from gymloop.adapters.gymnasium import GymloopEnv
        >>> from gymloop.games.tactics import tactics
        >>> env = GymloopEnv(tactics, max_entities={"Unit": 3, "Enemy": 4, "Wall": 6}, max_actors=3)
        >>> [str(c) for c in env.components]
        ['Order[0]', 'Order[1]', 'Order[2]', 'Target[0]', 'Target[1]', 'Target[2]']
        >>> env.action_space
        MultiDiscrete([15 15 15  4  4  4])
        >>> obs, info = env.reset(seed=1)
        >>> obs["counts"].tolist(), obs["globals"].tolist(), env.action_masks().shape
        ([4, 3, 6], [0.0, 50.0, 4.0, 3.0], (57,))
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> env.close()
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, game: Callable[..., Any] | type, *, max_entities: Sizes = None, max_actors: Sizes = None, seed: int = 0,
                 illegal_actions: str = "replace", mask_in_obs: bool = True, measure_steps: int = 256,
                 render_mode: str | None = None, **options: Any) -> None:
        _check_single_agent(game, options, "GymloopEnv")
        check_illegal(illegal_actions)
        if render_mode is not None:
            raise ConfigError(f"GymloopEnv has no render modes; render_mode must be None, got {render_mode!r} "
                              "(gymloop play / gymloop record draw a game)")
        self.name = game_name(game)
        self.render_mode = None
        self.illegal_actions = illegal_actions
        self._open(game, 1, seed, options, max_entities, max_actors, measure_steps, mask_in_obs, lambda s: "the game")
        self.observation_space = self.layout.observation_space
        self.action_space = self.layout.action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode: ``seed`` restarts the game with that seed; without one, the next episode.

        Raises:
            ConfigError: a seed that is not a non-negative int (numpy integers are ints), or options
                (a game's options are arguments of the game function).
        """
        seed = self._reset_args(seed, options)
        super().reset(seed=seed)
        return self._restart(1, seed).slot_obs(0), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply one action (an int for ``Discrete``, an int array of shape ``(n_components,)`` for ``MultiDiscrete``)."""
        cv = self._cv
        if cv is None:
            why = "after close()" if self._vec.closed else "before reset() or after the episode ended"
            raise EnvStateError(f"{self.name}: step() {why}; call reset() first")
        acts = self.layout.action_matrix(action, 1, "the action", one=True)
        gl_actions, wrong = self.layout.decode(cv, acts, self.illegal_actions, self.np_random)
        self._cv = None  # until the step has succeeded
        b = self._vec.step(gl_actions)
        info = slot_metrics(b, 0)
        if wrong[0]:
            info["illegal_actions"] = int(wrong[0])
            self._warn_replaced("%s: %d masked-out action(s) were replaced by random legal ones (counted in "
                                "info['illegal_actions']); use the action masks (MaskablePPO, env.action_masks()) or "
                                "illegal_actions='raise'", self.name, int(wrong[0]))
        terminated, truncated = bool(b.terminated[0]), bool(b.truncated[0])
        if terminated or truncated:
            self._pending = b
            final = self.layout.convert(b.final) if b.final is not None else self.layout.empty(1)
            return final.slot_obs(0), float(b.reward[0]), terminated, truncated, info
        cv = self.layout.convert(b)
        self._cv = cv
        return cv.slot_obs(0), float(b.reward[0]), False, False, info

    def action_masks(self) -> np.ndarray:
        """The flat bool mask over the components of the current observation (for ``MaskablePPO``)."""
        if self._cv is None:
            raise EnvStateError(f"{self.name}: action_masks() before reset() or after the episode ended; call reset() first")
        return self._cv.mask[0].copy()

    def close(self) -> None:
        """Close the game (idempotent)."""
        self._cv = None
        self._vec.close()


# ---------------------------------------------------------------------------------------- VectorEnv
class GymloopVectorEnv(PaddedAdapter, _GymVectorEnv):
    """``num_envs`` copies of a single-agent game as a ``gymnasium.vector.VectorEnv``, backed by :class:`gymloop.VecEnv`.

    The spaces are those of :class:`GymloopEnv`, batched (``single_observation_space``,
    ``single_action_space``). Autoreset is ``AutoresetMode.SAME_STEP``: the step that ends a copy's
    episode returns the next episode's first observation for it, with the final one (see the module
    docstring) in ``info["final_obs"]`` and the episode's metrics in ``info["final_info"]`` (each
    with its ``_key`` mask, as ``SyncVectorEnv`` in that mode). Other metrics and
    ``illegal_actions`` are in ``info`` as arrays with ``_key`` masks.

    Args:
        game: a game loop or a :class:`gymloop.Environment` class.
        num_envs: game copies.
        workers: processes, as for :class:`gymloop.VecEnv`.
        seed: root seed of the copies before the first ``reset(seed=...)``.
        max_entities, max_actors, illegal_actions, mask_in_obs, measure_steps: as for :class:`GymloopEnv`.
        **options: other :class:`gymloop.VecEnv` arguments.

    ``reset(seed=s)`` restarts every copy from root seed ``s`` (one int: the copies' seeds derive from
    it); ``reset()`` restarts them with the next seeds (the first call returns the games the
    constructor started). Every array returned is new (nothing is overwritten by a later step).

    Example:
        >>> from gymloop.adapters.gymnasium import GymloopVectorEnv
        >>> from gymloop.games.snake import snake
        >>> envs = GymloopVectorEnv(snake, 4, max_entities=100)
        >>> envs.action_space, envs.metadata["autoreset_mode"].name
        (MultiDiscrete([4 4 4 4]), 'SAME_STEP')
        >>> obs, info = envs.reset(seed=0)
        >>> obs["Head"].shape, envs.action_masks().shape
        ((4, 100, 2), (4, 4))
        >>> obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> rewards.shape, terminated.dtype
        ((4,), dtype('bool'))
        >>> envs.close()
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, game: Callable[..., Any] | type, num_envs: int, *, workers: int = 0, seed: int = 0,
                 max_entities: Sizes = None, max_actors: Sizes = None, illegal_actions: str = "replace",
                 mask_in_obs: bool = True, measure_steps: int = 256, **options: Any) -> None:
        _check_single_agent(game, options, "GymloopVectorEnv")
        check_illegal(illegal_actions)
        self.name = game_name(game)
        self.illegal_actions = illegal_actions
        self._open(game, num_envs, seed, dict(options, workers=workers), max_entities, max_actors, measure_steps, mask_in_obs,
                   lambda s: f"copy {s}")
        self.num_envs = self._vec.num_envs
        self.single_observation_space = self.layout.observation_space
        self.single_action_space = self.layout.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Restart every copy (from root seed ``seed`` when given); returns the batched first observations."""
        if isinstance(options, Mapping) and "reset_mask" in options:
            raise ConfigError(f"{self.name}: options['reset_mask'] is for AutoresetMode.DISABLED; GymloopVectorEnv resets "
                              "each copy itself (AutoresetMode.SAME_STEP): call reset() without it")
        if isinstance(seed, (list, tuple)):
            raise ConfigError(f"{self.name}: reset(seed=...) takes one int (the copies' seeds derive from it), got {seed!r}")
        seed = self._reset_args(seed, options)
        super().reset(seed=seed)
        return self._restart(self.num_envs, seed).obs, {}

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One action per copy (``(num_envs,)`` or ``(num_envs, n_components)`` ints); autoreset in the same step."""
        cv = self._cv
        if cv is None:
            why = "after close()" if self._vec.closed else "before reset() (or after a step that failed)"
            raise EnvStateError(f"{self.name}: step() {why}; call reset() first")
        acts = self.layout.action_matrix(actions, self.num_envs, "the actions")
        gl_actions, wrong = self.layout.decode(cv, acts, self.illegal_actions, self.np_random)
        self._cv = None
        b = self._vec.step(gl_actions)
        cv = self.layout.convert(b)
        info: dict[str, Any] = {}
        done = b.terminated | b.truncated
        if wrong.any():
            info["illegal_actions"], info["_illegal_actions"] = wrong, wrong > 0
            self._warn_replaced("%s: masked-out actions were replaced by random legal ones (counted in info['illegal_actions']); "
                                "use the action masks (MaskablePPO, envs.action_masks()) or illegal_actions='raise'", self.name)
        ended: dict[str, Any] = {}
        for k, v in b.metrics.items():
            have = ~np.isnan(v)
            mid = have & ~done
            if mid.any():
                info[k], info["_" + k] = np.where(mid, v, 0.0), mid
            fin = have & done
            if fin.any():
                ended[k], ended["_" + k] = np.where(fin, v, 0.0), fin
        if done.any():
            final = self.layout.convert(b.final) if b.final is not None else self.layout.empty(self.num_envs)
            fo = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done):
                fo[i] = final.slot_obs(int(i))
            info["final_obs"], info["_final_obs"] = fo, done.copy()
            info["final_info"], info["_final_info"] = ended, done.copy()
        self._cv = cv
        return cv.obs, b.reward.astype(np.float64), b.terminated.copy(), b.truncated.copy(), info

    def action_masks(self) -> np.ndarray:
        """``(num_envs, sum(nvec))`` bool: each copy's flat action mask (for maskable trainers)."""
        if self._cv is None:
            raise EnvStateError(f"{self.name}: action_masks() before reset(); call reset() first")
        return self._cv.mask.copy()

    def close_extras(self, **kwargs: Any) -> None:
        """Close every copy (and worker processes)."""
        self._cv = None
        self._vec.close()
