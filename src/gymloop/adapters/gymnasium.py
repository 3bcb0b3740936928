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

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces as gspaces
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector import VectorEnv as _GymVectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(f"gymloop.adapters.gymnasium needs gymnasium: pip install 'gymloop[gym]' ({e})") from e

from ..batch import Batch
from ..errors import ConfigError, EnvStateError, InvalidActionError, InvalidObservationError
from ..obs import FLOAT32_MAX
from ..spaces import Spaces, declared_agents
from ..vector import VecEnv

__all__ = ["Component", "GymloopEnv", "GymloopVectorEnv", "PaddedLayout", "measure_sizes"]

log = logging.getLogger("gymloop.adapters.gymnasium")

#: observation keys the adapter uses itself (an entity type may not have these names)
RESERVED_KEYS = ("counts", "globals", "actors", "action_mask")
ILLEGAL_POLICIES = ("replace", "raise")
MEASURE_ENVS = 8


def _game_name(game: Any) -> str:
    return str(getattr(game, "__name__", type(game).__name__))


# ---------------------------------------------------------------------------------------- sizes
def measure_sizes(game: Callable[..., Any] | type, steps: int = 256, num_envs: int = MEASURE_ENVS, seed: int = 0,
                  **options: Any) -> tuple[dict[str, int], dict[str, int]]:
    """The most entities per type and actors per action type one observation had in a random run.

    Runs ``num_envs`` copies of ``game`` for ``steps`` steps of uniformly random legal actions
    (final observations included) in a :class:`gymloop.VecEnv` (``options`` go to it).

    Returns:
        ``(max_entities, max_actors)``: by entity type and by action type (a global decision counts 1).

    Example:
        >>> from gymloop.games.tactics import tactics
        >>> ents, actors = measure_sizes(tactics, steps=4)
        >>> ents, actors
        ({'Enemy': 4, 'Unit': 3, 'Wall': 6}, {'Order': 3, 'Target': 3})
    """
    options = {k: v for k, v in options.items() if k not in ("workers", "backend")}
    env = VecEnv(game, num_envs, seed=seed, **options)
    try:
        b = env.reset()
        ents = dict.fromkeys(env.spaces.obs.entities, 0)
        acts = dict.fromkeys(env.spaces.actions, 0)

        def see(b: Batch) -> None:
            for t, c in b.counts.items():
                ents[t] = max(ents[t], int(c.max(initial=0)))
            if b.final is not None:
                for t, c in b.final.counts.items():
                    ents[t] = max(ents[t], int(c.max(initial=0)))
            for a, sl in b.actor_slot.items():
                if sl.size:
                    acts[a] = max(acts[a], int(np.bincount(sl).max()))

        see(b)
        for _ in range(steps):
            see(env.step(env.sample_actions()))
    finally:
        env.close()
    return ents, acts


def _limits(given: int | Mapping[str, int] | None, names: list[str], what: str, name: str) -> dict[str, int]:
    """``given`` as a dict by name, validated (the names it leaves out are to be measured)."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        unknown = [k for k in given if k not in names]
        if unknown:
            raise ConfigError(f"{name}: {what} names {unknown}, which the game does not have; it has {names}")
        out = dict(given)
    else:
        out = dict.fromkeys(names, given)
    for k, v in out.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"{name}: {what}[{k!r}] must be an int >= 1, got {v!r}")
        out[k] = int(v)
    return out


# ---------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class Component:
    """One component of the action space: the choice of one actor slot of one action type.

    Attributes:
        action: the action type's name.
        actor: the actor slot (``0 .. max_actors - 1``; 0 for a global decision).
        n: number of choices (labels, or padded candidates for select-entity).
    """

    action: str
    actor: int
    n: int

    def __str__(self) -> str:
        return f"{self.action}[{self.actor}]"


@dataclass
class Converted:
    """One batch in the padded layout (arrays with one row per slot; all newly allocated)."""

    obs: dict[str, np.ndarray]
    mask: np.ndarray  # (S, W) bool: the flat action mask
    present: np.ndarray  # (S, C) bool: components whose actor is in the observation
    actors: dict[str, tuple[np.ndarray, np.ndarray]]  # action type -> (slot, actor slot) of each actor, batch order
    counts: dict[str, np.ndarray]  # entity counts per slot, by type (the batch's)

    def slot_obs(self, s: int) -> dict[str, np.ndarray]:
        """Slot ``s``'s observation (views into this conversion's arrays)."""
        return {k: v[s] for k, v in self.obs.items()}


class PaddedLayout:
    """The fixed-size Gymnasium view of a game's :class:`~gymloop.spaces.Spaces` (see the module docstring).

    Shared by :class:`GymloopEnv`, :class:`GymloopVectorEnv` and the PettingZoo adapter.

    Args:
        spaces: the game's spaces.
        max_entities: rows per entity type (every type).
        max_actors: actor slots per actor-bound action type (every such type).
        name: the game's name, for messages.
        mask_in_obs: put the flat action mask in the observation (``action_mask``).
        slot_name: ``slot_name(s)`` names slot ``s`` in messages.
    """

    def __init__(self, spaces: Spaces, max_entities: Mapping[str, int], max_actors: Mapping[str, int], name: str,
                 mask_in_obs: bool = True, slot_name: Callable[[int], str] = lambda s: f"copy {s}") -> None:
        self.spaces = spaces
        self.name = name
        self.slot_name = slot_name
        self.types = list(spaces.obs.entities)
        clash = [t for t in self.types if t in RESERVED_KEYS]
        if clash:
            raise ConfigError(f"{name}: entity type(s) {clash} have names the Gymnasium observation uses for itself "
                              f"{list(RESERVED_KEYS)}; rename them with @gl.entity(name=...)")
        self.max_n = {t: int(max_entities[t]) for t in self.types}
        self.max_actors = {a: (int(max_actors[a]) if d.kind.actor_bound else 1) for a, d in spaces.actions.items()}
        self.pad_off: dict[str, int] = {}
        off = 0
        for t in self.types:
            self.pad_off[t] = off
            off += self.max_n[t]
        self.n_padded = off
        self.n_globals = len(spaces.obs.globals)
        self.mask_in_obs = mask_in_obs
        # action components
        comps: list[Component] = []
        self.col0: dict[str, int] = {}
        self.actor_col0: dict[str, int] = {}  # first column of the "actors" array, per actor-bound type
        self.cand_off: dict[str, np.ndarray] = {}  # select-entity: padded offset of each among type
        n_actor_cols = 0
        for a, d in spaces.actions.items():
            if d.kind.selects_entities:
                if not d.among:
                    raise ConfigError(f"{name}: select-entity action {a!r} has no recorded candidate types")
                widths = [self.max_n[t] for t in d.among]
                self.cand_off[a] = np.cumsum([0] + widths[:-1]).astype(np.int64)
                n = int(sum(widths))
            else:
                n = d.n
            self.col0[a] = len(comps)
            if d.kind.actor_bound:
                self.actor_col0[a] = n_actor_cols
                n_actor_cols += self.max_actors[a]
            comps += [Component(a, r, n) for r in range(self.max_actors[a])]
        if not comps:
            raise ConfigError(f"{name}: the game has no action types; a Gymnasium environment needs at least one")
        self.components = comps
        self.nvec = np.array([c.n for c in comps], dtype=np.int64)
        self.comp_start = (np.cumsum(self.nvec) - self.nvec).astype(np.int64)
        self.mask_width = int(self.nvec.sum())
        self.n_actor_cols = n_actor_cols
        self.observation_space = self._obs_space()
        self.action_space: gspaces.Space[Any] = (
            gspaces.Discrete(int(self.nvec[0])) if len(comps) == 1 else gspaces.MultiDiscrete(self.nvec)
        )

    def _obs_space(self) -> gspaces.Dict:
        big = FLOAT32_MAX
        d: dict[str, gspaces.Space[Any]] = {}
        for t in self.types:
            d[t] = gspaces.Box(-big, big, (self.max_n[t], len(self.spaces.obs.entities[t])), np.float32)
        if self.types:
            d["counts"] = gspaces.Box(0, np.array([self.max_n[t] for t in self.types], dtype=np.int64), (len(self.types),), np.int64)
        if self.n_globals:
            d["globals"] = gspaces.Box(-big, big, (self.n_globals,), np.float32)
        if self.n_actor_cols:
            d["actors"] = gspaces.Box(-1, max(self.n_padded - 1, 0), (self.n_actor_cols,), np.int64)
        if self.mask_in_obs:
            d["action_mask"] = gspaces.MultiBinary(self.mask_width)
        return gspaces.Dict(d)

    def describe(self) -> str:
        """The sizes, as the constructor arguments that reproduce them."""
        acts = {a: k for a, k in self.max_actors.items() if self.spaces.actions[a].kind.actor_bound}
        return f"max_entities={self.max_n}, max_actors={acts}"

    # ------------------------------------------------------------------ batch -> padded arrays
    def _too_many(self, what: str, s: int, n: int, limit: int, fix: str) -> InvalidObservationError:
        return InvalidObservationError(
            f"{self.name}: {self.slot_name(s)} has {n} {what}, more than the {limit} the Gymnasium spaces were made "
            f"for (fixed-size arrays; nothing is truncated); pass {fix} (at least {n}) to the adapter"
        )

    def convert(self, b: Batch) -> Converted:
        """``b`` in the padded layout; raises :class:`InvalidObservationError` for what does not fit."""
        S = b.num_slots
        obs: dict[str, np.ndarray] = {}
        slots = np.arange(S)
        for t in self.types:
            c = b.counts[t]
            m = self.max_n[t]
            top = int(c.max(initial=0))
            if top > m:
                s = int(np.argmax(c))
                raise self._too_many(f"{t!r} entities", s, top, m, f"max_entities={{{t!r}: N}} (or one number for every type)")
            out = np.zeros((S, m, len(self.spaces.obs.entities[t])), dtype=np.float32)
            total = b.entities[t].shape[0]
            if total:
                row_slot = np.repeat(slots, c)
                out[row_slot, np.arange(total) - np.repeat(np.cumsum(c) - c, c)] = b.entities[t]
            obs[t] = out
        if self.types:
            obs["counts"] = np.stack([b.counts[t] for t in self.types], axis=1).astype(np.int64)
        if self.n_globals:
            obs["globals"] = np.array(b.globals, dtype=np.float32)
        mask = np.zeros((S, self.mask_width), dtype=bool)
        mask[:, self.comp_start] = True  # an absent actor's component: choice 0 only
        present = np.zeros((S, len(self.components)), dtype=bool)
        actor_pos = np.full((S, self.n_actor_cols), -1, dtype=np.int64) if self.n_actor_cols else None
        offsets = b.entity_offsets() if self.n_actor_cols else None
        actors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for a, d in self.spaces.actions.items():
            sl = b.actor_slot[a]
            n_act = sl.size
            per_slot = np.bincount(sl, minlength=S)
            rank = np.arange(n_act) - np.repeat(np.cumsum(per_slot) - per_slot, per_slot)
            actors[a] = (sl, rank)
            if not n_act:
                continue
            k = self.max_actors[a]
            if int(per_slot.max()) > k:
                s = int(np.argmax(per_slot))
                if d.kind.actor_bound:
                    raise self._too_many(f"actors of action type {a!r}", s, int(per_slot[s]), k,
                                         f"max_actors={{{a!r}: N}} (or one number for every action type)")
                raise InvalidObservationError(f"{self.name}: {self.slot_name(s)} asks for global decision {a!r} "
                                              f"{int(per_slot[s])} times in one observation; it takes one")
            cols = self.col0[a] + rank
            present[sl, cols] = True
            start = self.comp_start[cols]
            if d.kind.selects_entities:
                ncomp = int(self.nvec[self.col0[a]])
                mask[sl[:, None], start[:, None] + np.arange(ncomp)] = False
                nc = b.num_candidates[a]
                tot = int(nc.sum())
                if tot:
                    # padded position of every candidate: per (actor, among type) a run of rows
                    seg_len = np.stack([b.counts[t][sl] for t in d.among], axis=1).reshape(-1)
                    seg_start = np.tile(self.cand_off[a], n_act)
                    pos = np.repeat(seg_start - (np.cumsum(seg_len) - seg_len), seg_len) + np.arange(tot)
                    rows = np.repeat(sl, nc)
                    mask[rows, np.repeat(start, nc) + pos] = b.masks[a]
            else:
                mask[sl[:, None], start[:, None] + np.arange(d.n)] = b.masks[a]
            if d.kind.actor_bound and actor_pos is not None and offsets is not None:
                idx = b.actor_index[a]
                off = offsets[:, sl]
                t_of = (off <= idx).sum(axis=0) - 1
                pad = np.array([self.pad_off[t] for t in self.types], dtype=np.int64)
                actor_pos[sl, self.actor_col0[a] + rank] = pad[t_of] + idx - off[t_of, np.arange(n_act)]
        if actor_pos is not None:
            obs["actors"] = actor_pos
        if self.mask_in_obs:
            obs["action_mask"] = mask.astype(np.int8)
        return Converted(obs=obs, mask=mask, present=present, actors=actors, counts=b.counts)

    def empty(self, num_slots: int) -> Converted:
        """The observation of slots with nothing to show (zero counts, only choice 0 allowed)."""
        return self.convert(Batch.empty(self.spaces, num_slots))

    # ------------------------------------------------------------------ padded actions -> batch actions
    def action_matrix(self, actions: Any, num_slots: int, what: str) -> np.ndarray:
        """Actions as an ``(num_slots, n_components)`` int64 array, or :class:`InvalidActionError`."""
        C = len(self.components)
        want = (num_slots,) if C == 1 else (num_slots, C)
        try:
            arr = np.asarray(actions)
        except (TypeError, ValueError) as e:
            raise InvalidActionError(f"{self.name}: {what} must be integers of shape {want}, got {actions!r} ({e})") from None
        if arr.dtype.kind not in "iu" or arr.size != num_slots * C or (arr.ndim > len(want) and arr.shape != want):
            raise InvalidActionError(
                f"{self.name}: {what} must be integers of shape {want} ({self.action_space}), got "
                f"{arr.dtype} of shape {arr.shape}: {actions!r}"
            )
        return arr.astype(np.int64).reshape(num_slots, C)

    def decode(self, cv: Converted, acts: np.ndarray, illegal: str, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Per action type, the gymloop actions of ``acts`` (``(S, C)`` int64); and the masked-out count per slot.

        ``illegal="replace"`` replaces each masked-out choice of a present actor by a random legal
        one (drawn from ``rng``); ``"raise"`` raises :class:`InvalidActionError`.
        """
        bad = (acts < 0) | (acts >= self.nvec)
        if bad.any():
            s, c = (int(x[0]) for x in np.nonzero(bad))
            comp = self.components[c]
            raise InvalidActionError(f"{self.name}: {self.slot_name(s)}: action {int(acts[s, c])} for {comp} is outside the "
                                     f"action space {self.action_space} (component {c} takes [0, {comp.n}))")
        legal = np.take_along_axis(cv.mask, self.comp_start + acts, axis=1)
        wrong = cv.present & ~legal
        n_wrong = wrong.sum(axis=1)
        if n_wrong.any():
            si, ci = np.nonzero(wrong)
            if illegal == "raise":
                s, c = int(si[0]), int(ci[0])
                comp = self.components[c]
                seg = np.flatnonzero(cv.mask[s, self.comp_start[c]: self.comp_start[c] + comp.n]).tolist()
                raise InvalidActionError(
                    f"{self.name}: {self.slot_name(s)}: action {int(acts[s, c])} for {comp} is masked out (legal: {seg}); "
                    "choose among the legal actions (action_masks(), or the observation's 'action_mask'), or pass "
                    "illegal_actions='replace'"
                )
            acts = acts.copy()
            n = self.nvec[ci]
            width = int(n.max())
            cols = np.minimum(np.arange(width), n[:, None] - 1)
            ok = (np.arange(width) < n[:, None]) & cv.mask[si[:, None], self.comp_start[ci][:, None] + cols]
            r = rng.random((si.size, width))
            r[~ok] = -1.0
            acts[si, ci] = r.argmax(axis=1)
        out: dict[str, np.ndarray] = {}
        for a, (sl, rank) in cv.actors.items():
            v = acts[sl, self.col0[a] + rank]
            if a in self.cand_off and v.size:
                among = self.spaces.actions[a].among
                off = self.cand_off[a]
                t = np.searchsorted(off, v, side="right") - 1
                counts = np.stack([cv.counts[x][sl] for x in among], axis=1)
                before = np.cumsum(counts, axis=1) - counts
                v = before[np.arange(v.size), t] + v - off[t]
            out[a] = v.astype(np.int64)
        return out, n_wrong


def _layout_for(game: Any, spaces: Spaces, max_entities: Any, max_actors: Any, measure_steps: int, seed: int,
                options: Mapping[str, Any], mask_in_obs: bool, slot_name: Callable[[int], str]) -> PaddedLayout:
    """The layout of a game: given sizes, the rest measured by a short random run (and logged)."""
    name = _game_name(game)
    types = list(spaces.obs.entities)
    bound = [a for a, d in spaces.actions.items() if d.kind.actor_bound]
    ents = _limits(max_entities, types, "max_entities", name)
    if isinstance(max_actors, Mapping):
        glob = [a for a in max_actors if a in spaces.actions and a not in bound]
        if glob:
            raise ConfigError(f"{name}: max_actors names global decision(s) {glob}, which take one choice per observation; leave them out")
    acts = _limits(max_actors, bound, "max_actors", name)
    if len(ents) < len(types) or len(acts) < len(bound):
        if isinstance(measure_steps, bool) or not isinstance(measure_steps, int) or measure_steps < 1:
            raise ConfigError(f"{name}: measure_steps must be an int >= 1, got {measure_steps!r}; or give max_entities and max_actors")
        seen_e, seen_a = measure_sizes(game, measure_steps, MEASURE_ENVS, seed, **options)
        e = {t: max(1, 2 * seen_e.get(t, 0)) for t in types} | ents
        a = {x: max(1, seen_a.get(x, 0)) for x in bound} | acts
        layout = PaddedLayout(spaces, e, a, name, mask_in_obs, slot_name)
        log.info("%s: Gymnasium sizes from %d random steps of %d copies (entities: twice the most seen): %s; a better agent may see "
                 "more: pass max_entities / max_actors to fix them", name, measure_steps, MEASURE_ENVS, layout.describe())
        return layout
    return PaddedLayout(spaces, ents, acts, name, mask_in_obs, slot_name)


def _check_single_agent(game: Any, options: Mapping[str, Any], what: str) -> None:
    n = declared_agents(game)
    apg = options.get("agents_per_game", 1)
    if (n is not None and n > 1) or apg != 1:
        k = n if n is not None and n > 1 else apg
        raise ConfigError(
            f"game {_game_name(game)!r} takes {k} agents per game, but {what} runs single-agent games (one agent, "
            "one decision per step, as Gymnasium's Env has); use gymloop.adapters.pettingzoo.GymloopParallelEnv(game) "
            "for a multi-agent game"
        )


def _check_illegal(illegal_actions: str) -> None:
    if illegal_actions not in ILLEGAL_POLICIES:
        raise ConfigError(f"illegal_actions must be one of {list(ILLEGAL_POLICIES)}, got {illegal_actions!r}")


def _declared(spaces: Spaces) -> dict[str, Any]:
    """The VecEnv arguments that fix a game loop's types to ``spaces`` (a re-seeded copy then has the same spaces)."""
    if not spaces.entity_schemas and not spaces.action_specs:
        return {}
    out: dict[str, Any] = {
        "entity_types": [s.cls for s in spaces.entity_schemas],
        "action_types": [s.key for s in spaces.action_specs],
    }
    if spaces.globals_schema is not None:
        out["globals_type"] = spaces.globals_schema.cls
    return out


def _first_batch(owner: Any, num_envs: int, seed: int | None) -> Batch:
    """The batch an adapter's ``reset`` starts from (``owner`` holds ``game``, ``_options``, ``_vec``, ``_pending``).

    With ``seed``, a new ``gl.VecEnv`` seeded with it replaces the old one (which is closed only once the
    new one has started); without, the batch that ended the last episode's step, or a reset.
    """
    if seed is not None:
        vec = VecEnv(owner.game, num_envs, seed=_seed_arg(seed), **owner._options)
        try:
            b = vec.reset()
        except BaseException:
            vec.close()
            raise
        owner._vec.close()
        owner._vec = vec
    elif owner._pending is not None:
        b = owner._pending
    else:
        b = owner._vec.reset()
    owner._pending = None
    return b


def _seed_arg(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(
            f"seed must be a non-negative int (gl.VecEnv derives every copy's seed from one root seed), got {seed!r}"
        )
    return int(seed)


def _metrics(b: Batch, s: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in b.metrics.items():
        x = float(v[s])
        if x == x:  # not NaN: reported this step
            out[k] = x
    return out


# ---------------------------------------------------------------------------------------- Env
class GymloopEnv(gymnasium.Env):
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

    def __init__(
        self,
        game: Callable[..., Any] | type,
        *,
        max_entities: int | Mapping[str, int] | None = None,
        max_actors: int | Mapping[str, int] | None = None,
        seed: int = 0,
        illegal_actions: str = "replace",
        mask_in_obs: bool = True,
        measure_steps: int = 256,
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        _check_single_agent(game, options, "GymloopEnv")
        _check_illegal(illegal_actions)
        if render_mode is not None:
            raise ConfigError(f"GymloopEnv has no render modes; render_mode must be None, got {render_mode!r} "
                              "(gymloop play / gymloop record draw a game)")
        self.game = game
        self.name = _game_name(game)
        self.render_mode = None
        self.illegal_actions = illegal_actions
        self._options = dict(options)
        self._vec = VecEnv(game, 1, seed=_seed_arg(seed), **options)
        try:
            self._pending: Batch | None = self._vec.reset()
            self.spaces = self._vec.spaces
            self.layout = _layout_for(game, self.spaces, max_entities, max_actors, measure_steps, int(seed), options,
                                      mask_in_obs, lambda s: "the game")
        except BaseException:
            self._vec.close()
            raise
        self._options.update(_declared(self.spaces))
        self.components = self.layout.components
        self.observation_space = self.layout.observation_space
        self.action_space = self.layout.action_space
        self._cv: Converted | None = None
        self._warned = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode: ``seed`` restarts the game with that seed; without one, the next episode."""
        super().reset(seed=seed)
        if self._vec.closed:
            raise EnvStateError(f"{self.name}: reset() after close(); make a new GymloopEnv")
        self._cv = None
        b = _first_batch(self, 1, seed)
        cv = self.layout.convert(b)
        self._cv = cv
        return cv.slot_obs(0), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply one action (an int for ``Discrete``, an int array of shape ``(n_components,)`` for ``MultiDiscrete``)."""
        cv = self._cv
        if cv is None:
            why = "after close()" if self._vec.closed else "before reset() or after the episode ended"
            raise EnvStateError(f"{self.name}: step() {why}; call reset() first")
        acts = self.layout.action_matrix(action, 1, "the action")
        gl_actions, wrong = self.layout.decode(cv, acts, self.illegal_actions, self.np_random)
        self._cv = None  # until the step has succeeded
        b = self._vec.step(gl_actions)
        info = _metrics(b, 0)
        if wrong[0]:
            info["illegal_actions"] = int(wrong[0])
            self._warn(int(wrong[0]))
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

    def _warn(self, n: int) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s: %d masked-out action(s) were replaced by random legal ones (counted in info['illegal_actions']); "
                        "use the action masks (MaskablePPO, env.action_masks()) or illegal_actions='raise'", self.name, n)


# ---------------------------------------------------------------------------------------- VectorEnv
class GymloopVectorEnv(_GymVectorEnv):
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

    def __init__(
        self,
        game: Callable[..., Any] | type,
        num_envs: int,
        *,
        workers: int = 0,
        seed: int = 0,
        max_entities: int | Mapping[str, int] | None = None,
        max_actors: int | Mapping[str, int] | None = None,
        illegal_actions: str = "replace",
        mask_in_obs: bool = True,
        measure_steps: int = 256,
        **options: Any,
    ) -> None:
        _check_single_agent(game, options, "GymloopVectorEnv")
        _check_illegal(illegal_actions)
        self.game = game
        self.name = _game_name(game)
        self.illegal_actions = illegal_actions
        self._vec = VecEnv(game, num_envs, workers=workers, seed=_seed_arg(seed), **options)
        self.num_envs = self._vec.num_envs
        self._options = dict(options, workers=workers)
        try:
            self._pending: Batch | None = self._vec.reset()
            self.spaces = self._vec.spaces
            self.layout = _layout_for(game, self.spaces, max_entities, max_actors, measure_steps, int(seed), options,
                                      mask_in_obs, lambda s: f"copy {s}")
        except BaseException:
            self._vec.close()
            raise
        self._options.update(_declared(self.spaces))
        self.components = self.layout.components
        self.single_observation_space = self.layout.observation_space
        self.single_action_space = self.layout.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._cv: Converted | None = None
        self._warned = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Restart every copy (from root seed ``seed`` when given); returns the batched first observations."""
        if options and "reset_mask" in options:
            raise ConfigError(f"{self.name}: options['reset_mask'] is for AutoresetMode.DISABLED; GymloopVectorEnv resets "
                              "each copy itself (AutoresetMode.SAME_STEP): call reset() without it")
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise ConfigError(f"{self.name}: reset(seed=...) takes one int (the copies' seeds derive from it), got {seed!r}")
        super().reset(seed=seed)
        if self._vec.closed:
            raise EnvStateError(f"{self.name}: reset() after close(); make a new GymloopVectorEnv")
        self._cv = None
        b = _first_batch(self, self.num_envs, seed)
        cv = self.layout.convert(b)
        self._cv = cv
        return cv.obs, {}

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
            if not self._warned:
                self._warned = True
                log.warning("%s: masked-out actions were replaced by random legal ones (counted in info['illegal_actions']); "
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
