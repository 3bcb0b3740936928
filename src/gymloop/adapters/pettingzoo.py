"""Multi-agent gymloop games (``@gl.game(agents=N)``) as a ``pettingzoo.ParallelEnv``.

:class:`GymloopParallelEnv` runs one copy of the game in a ``gl.VecEnv(game, 1,
agents_per_game=N)`` (the game code runs unchanged). Its agents are ``player_0 .. player_{N-1}``,
the game's agents in the order it receives them. Every agent has the observation and action
spaces of :mod:`gymloop.adapters.gymnasium` (a ``Dict`` of padded per-type arrays, counts,
globals, actors and ``action_mask``; ``Discrete`` or ``MultiDiscrete`` actions; the same sizes
for every agent, given or measured), except for the layout of ``action_mask`` below, and the
same rules for masked-out actions (``illegal_actions``).

**Action masks.** PettingZoo's convention (its ``parallel_api_test`` and ``api_test`` do this)
is that a learner samples a legal action with ``env.action_space(agent).sample(mask=obs["action_mask"])``,
so the observation's ``action_mask`` has the layout gymnasium's ``sample(mask=...)`` takes:

========================  ==========================================================================
action space              ``action_mask`` (``mask_in_obs=True``)
========================  ==========================================================================
``Discrete(n)``           one component: a flat int8 array of ``n`` zeros and ones; space
                          ``MultiBinary(n)``
``MultiDiscrete(nvec)``   several components (actors, action types): a tuple with one int8 array
                          per component, ``(nvec[i],)`` each, in component order
                          (:attr:`~GymloopParallelEnv.components`); space
                          ``Tuple(MultiBinary(n) for n in nvec)``
========================  ==========================================================================

(The Gymnasium adapter's observation has the flat mask over every component instead, which
sb3-contrib's ``MaskablePPO`` wants, and ``MultiDiscrete.sample`` refuses.) An absent actor's
components allow only choice 0. :meth:`GymloopParallelEnv.action_masks` gives an agent's flat
bool mask (``sum(nvec)``, component after component: the concatenation of the tuple) for
learners that want one vector.

**Steps.** ``step`` takes an action for every live agent that has a decision; an agent the game
does not ask this step (a turn-based game) gets an observation with no actor (only choice 0 is
legal) and its action is ignored. An agent's episode ends when the game calls its
``game_over``: it is then terminated or truncated and leaves ``agents``; the PettingZoo episode
ends when every agent's has. The observation given with an agent's end is the final observation
its ``game_over`` carried (or an empty one), as for Gymnasium; the next ``reset()`` returns the
next episode's first observations (the game restarts itself), ``reset(seed=s)`` restarts the game
with that seed. A game that asks an agent for a decision after that agent's episode ended,
while others play on, cannot be expressed (PettingZoo agents do not come back before a reset):
:class:`~gymloop.errors.InvalidObservationError` says so.

**AEC.** :meth:`GymloopParallelEnv.aec` gives the same game as an AEC environment
(PettingZoo's ``parallel_to_aec``): agents act one after another, the game steps once all have.

PettingZoo (and Gymnasium) are imported when this module is imported; ``import gymloop`` does not.

Example:
    >>> from gymloop.adapters.pettingzoo import GymloopParallelEnv
    >>> from gymloop.games.duel import duel
    >>> env = GymloopParallelEnv(duel, max_entities=100)
    >>> env.possible_agents, env.action_space("player_0")
    (['player_0', 'player_1'], Discrete(4))
    >>> obs, infos = env.reset(seed=0)
    >>> obs["player_0"]["counts"].tolist()   # Body, Food, Head, OpponentBody, OpponentHead
    [0, 3, 1, 0, 1]
    >>> obs, rewards, terminations, truncations, infos = env.step({a: 0 for a in env.agents})
    >>> sorted(rewards)
    ['player_0', 'player_1']
    >>> env.close()

A game whose agents command several actors has ``MultiDiscrete`` actions and a tuple of masks:

    >>> from dataclasses import dataclass
    >>> import gymloop as gl
    >>> from gymloop.games.tactics import Dir
    >>> @dataclass
    ... class Bot:
    ...     x: int
    >>> @gl.game(agents=2, entities=[Bot], actions=[Dir])
    ... def pairs(agents, seed):
    ...     first = {Dir: [[True, False, True, True, True], None]}  # Bot 0 may not go UP
    ...     while True:
    ...         gl.act_all([(a, gl.Obs().actors([Bot(0), Bot(1)], masks=first), Dir) for a in agents])
    >>> env = GymloopParallelEnv(pairs, max_entities=2, max_actors=2)
    >>> env.action_space("player_0")
    MultiDiscrete([5 5])
    >>> obs, infos = env.reset(seed=0)
    >>> [m.tolist() for m in obs["player_0"]["action_mask"]]
    [[1, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    >>> action = env.action_space("player_0").sample(mask=obs["player_0"]["action_mask"])
    >>> env.action_masks("player_0").astype(int).tolist()
    [1, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

try:
    from pettingzoo import ParallelEnv
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(f"gymloop.adapters.pettingzoo needs pettingzoo: pip install 'gymloop[pettingzoo]' ({e})") from e

from gymnasium import spaces as gspaces

from ..errors import ConfigError, EnvStateError, InvalidActionError, InvalidObservationError
from ..games.registry import game_name
from ..spaces import declared_agents
from .padded import Converted, PaddedAdapter, Sizes, check_illegal, slot_metrics

__all__ = ["GymloopParallelEnv"]


class GymloopParallelEnv(PaddedAdapter, ParallelEnv):
    """A multi-agent gymloop game as a ``pettingzoo.ParallelEnv`` (see the module docstring).

    Args:
        game: a game loop ``game(agents, seed)``.
        agents: agents per game (default: what the game declares with ``gl.game(agents=N)``).
        max_entities, max_actors, illegal_actions, mask_in_obs, measure_steps: as for
            :class:`gymloop.adapters.gymnasium.GymloopEnv` (one set of sizes for every agent); the
            observation's ``action_mask`` is a tuple of per-component masks for ``MultiDiscrete``
            actions (see the module docstring).
        seed: the seed of the game before the first ``reset(seed=...)``.
        render_mode: only ``None``.
        **options: other :class:`gymloop.VecEnv` arguments.

    Raises:
        ConfigError: no agent count (undeclared and not given), one that disagrees with the
            declaration, bad sizes or options.
        InvalidObservationError: more entities or actors than the sizes, or an agent asked for a
            decision after its episode ended while others play on.
        InvalidActionError: an action outside the action space, a missing action for an agent
            with a decision, an action for an agent that is not live.
        EnvStateError: ``step`` before ``reset``, after every agent's episode ended, or after ``close``.
    """

    metadata: dict[str, Any] = {"name": "gymloop", "render_modes": [], "is_parallelizable": True}

    def __init__(self, game: Callable[..., Any], *, agents: int | None = None, max_entities: Sizes = None,
                 max_actors: Sizes = None, seed: int = 0, illegal_actions: str = "replace", mask_in_obs: bool = True,
                 measure_steps: int = 256, render_mode: str | None = None, **options: Any) -> None:
        check_illegal(illegal_actions)
        name = game_name(game)
        if render_mode is not None:
            raise ConfigError(f"GymloopParallelEnv has no render modes; render_mode must be None, got {render_mode!r}")
        if "agents_per_game" in options:
            raise ConfigError(f"{name}: pass agents=N (not agents_per_game) to GymloopParallelEnv")
        n = agents if agents is not None else declared_agents(game)
        if n is None:
            raise ConfigError(f"game {name!r} does not declare its number of agents; declare it with @gl.game(agents=N) "
                              "or pass agents=N to GymloopParallelEnv")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"{name}: agents must be an int >= 1, got {n!r}")
        self.name = name
        self.render_mode = None
        self.illegal_actions = illegal_actions
        self.possible_agents = [f"player_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._open(game, 1, seed, dict(options, agents_per_game=n), max_entities, max_actors, measure_steps, mask_in_obs,
                   lambda s: f"agent {self.possible_agents[s]!r}")
        # MultiDiscrete: the observation's mask is a tuple of per-component masks (see the module docstring)
        self._split: list[int] | None = None
        space = self.layout.observation_space
        if self.layout.mask_in_obs and len(self.components) > 1:
            self._split = self.layout.comp_start[1:].tolist()
            space = gspaces.Dict({
                **space.spaces,
                "action_mask": gspaces.Tuple([gspaces.MultiBinary(int(n)) for n in self.layout.nvec]),
            })
        self.observation_spaces = dict.fromkeys(self.possible_agents, space)
        self.action_spaces = dict.fromkeys(self.possible_agents, self.layout.action_space)
        self._rng = np.random.default_rng(seed)
        self._live = np.zeros(n, dtype=bool)

    def observation_space(self, agent: str) -> Any:
        """The (shared) observation space of ``agent``."""
        self._known(agent)
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        """The (shared) action space of ``agent``."""
        self._known(agent)
        return self.action_spaces[agent]

    def _known(self, agent: Any) -> None:
        try:
            known = agent in self.action_spaces
        except TypeError:  # unhashable
            known = False
        if not known:
            raise ConfigError(f"{self.name}: no agent {agent!r}; the agents are {self.possible_agents}")

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode for every agent: ``seed`` restarts the game with that seed; without one, the next episode.

        ``options`` are not used (a game's options are arguments of the game function); PettingZoo's
        API requires accepting them, so any given are logged as a warning.

        Raises:
            ConfigError: a seed that is not a non-negative int (numpy integers are ints).
        """
        seed = self._reset_args(seed, options, refuse_options=False)
        cv = self._restart(1, seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._live[:] = True
        self.agents = list(self.possible_agents)
        return {a: self._obs(cv, i) for i, a in enumerate(self.possible_agents)}, {a: {} for a in self.agents}

    def _obs(self, cv: Converted, s: int) -> dict[str, Any]:
        """Slot ``s``'s observation, with a ``MultiDiscrete`` agent's mask split by component."""
        obs: dict[str, Any] = cv.slot_obs(s)
        if self._split is not None:
            obs["action_mask"] = tuple(np.split(obs["action_mask"], self._split))
        return obs

    def step(self, actions: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        """One action per live agent (agents without a decision this step may be left out)."""
        cv = self._cv
        if cv is None:
            why = "after close()" if self._vec.closed else "before reset() or after every agent's episode ended"
            raise EnvStateError(f"{self.name}: step() {why}; call reset() first")
        if not isinstance(actions, Mapping):
            raise InvalidActionError(f"{self.name}: step expects a dict of actions by agent, got {type(actions).__name__}")
        unknown = [a for a in actions if a not in self.agents]
        if unknown:
            raise InvalidActionError(f"{self.name}: actions for {unknown}, which are not live agents {self.agents}")
        S = len(self.possible_agents)
        acts = np.zeros((S, len(self.components)), dtype=np.int64)
        for i, a in enumerate(self.possible_agents):
            if a in actions:
                acts[i] = self.layout.action_matrix(actions[a], 1, f"the action of {a!r}", one=True)[0]
            elif self._live[i] and cv.present[i].any():
                raise InvalidActionError(f"{self.name}: no action for agent {a!r}, which has a decision this step; "
                                         f"give one for every agent in env.agents")
        gl_actions, wrong = self.layout.decode(cv, acts, self.illegal_actions, self._rng)
        self._cv = None
        b = self._vec.step(gl_actions)
        done = b.terminated | b.truncated
        live = self._live
        comeback = (~live | done) & b.active  # asked again: a new episode for that agent
        still = live & ~done
        if comeback.any() and still.any():
            s = int(np.flatnonzero(comeback)[0])
            raise InvalidObservationError(
                f"{self.name}: the game asks agent {self.possible_agents[s]!r} for a decision after its episode ended, while "
                f"{[self.possible_agents[i] for i in np.flatnonzero(still)]} play on; a PettingZoo agent cannot come back "
                "before reset(): end every agent's episode together (game_over for each), or stop asking an agent whose "
                "episode ended until the game restarts"
            )
        ended = live & done
        final = None
        if ended.any():
            final = self.layout.convert(b.final) if b.final is not None else self.layout.empty(S)
        if still.any():
            cv = self.layout.convert(b)
            self._cv = cv
        else:
            self._pending = b
        obs: dict[str, Any] = {}
        rewards: dict[str, float] = {}
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        infos: dict[str, Any] = {}
        for i, a in enumerate(self.possible_agents):
            if not live[i]:
                continue
            obs[a] = self._obs(final, i) if ended[i] and final is not None else self._obs(cv, i)
            rewards[a] = float(b.reward[i])
            terms[a], truncs[a] = bool(b.terminated[i]), bool(b.truncated[i])
            infos[a] = slot_metrics(b, i)
            if wrong[i]:
                infos[a]["illegal_actions"] = int(wrong[i])
        if wrong.any():
            self._warn_replaced("%s: masked-out actions were replaced by random legal ones (counted in info['illegal_actions']); "
                                "use the observations' action_mask or illegal_actions='raise'", self.name)
        self._live = still
        self.agents = [a for i, a in enumerate(self.possible_agents) if still[i]]
        return obs, rewards, terms, truncs, infos

    def action_masks(self, agent: str) -> np.ndarray:
        """``agent``'s flat bool action mask for the current observation.

        ``sum(nvec)`` booleans, component after component (for ``Discrete`` actions, ``n``): the
        observation's ``action_mask`` as one vector, for learners that want it (the
        observation's is a tuple of per-component masks when the action space is ``MultiDiscrete``).
        """
        if self._cv is None or agent not in self.agents:
            raise EnvStateError(f"{self.name}: no current observation for agent {agent!r} (live agents: {self.agents}); call reset()")
        return self._cv.mask[self.possible_agents.index(agent)].copy()

    def aec(self) -> Any:
        """This game as a PettingZoo AEC environment (``pettingzoo.utils.conversions.parallel_to_aec``)."""
        from pettingzoo.utils.conversions import parallel_to_aec

        return parallel_to_aec(self)

    def render(self) -> None:
        raise NotImplementedError("GymloopParallelEnv does not render; use gymloop play / gymloop record on the game")

    def close(self) -> None:
        """Close the game (idempotent)."""
        self._cv = None
        self._vec.close()
