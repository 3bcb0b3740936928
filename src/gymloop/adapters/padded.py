"""The padded layout: the fixed-size Gymnasium view of a game's :class:`~gymloop.spaces.Spaces`, and
what the Gymnasium, vector, Stable-Baselines3 and PettingZoo adapters share around it.

:class:`PaddedLayout` turns a :class:`~gymloop.batch.Batch` into per-slot padded arrays (the
observation ``Dict`` the :mod:`gymloop.adapters.gymnasium` docstring describes) and padded actions
back into gymloop actions; :func:`measure_sizes` finds the sizes not given; :class:`PaddedAdapter`
holds a game's copies in one :class:`gymloop.VecEnv` for an adapter (open, first batch of an
episode, the one warning about replaced actions).

Gymnasium is imported when this module is imported; ``import gymloop`` does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    from gymnasium import spaces as gspaces
except ImportError as e:  # pragma: no cover - depends on the environment
    from ..errors import ConfigError

    raise ConfigError(f"gymloop.adapters.padded needs gymnasium: pip install 'gymloop[gym]' ({e})") from e

from ..batch import Batch
from ..errors import ConfigError, EnvStateError, InvalidActionError, InvalidObservationError
from ..games.registry import game_name
from ..obs import FLOAT32_MAX
from ..spaces import Spaces
from ..vector import VecEnv

__all__ = [
    "ILLEGAL_POLICIES", "MEASURE_ENVS", "RESERVED_KEYS", "Component", "Converted", "PaddedAdapter", "PaddedLayout",
    "MAX_PADDED", "Sizes", "check_illegal", "layout_for", "measure_sizes", "reset_options", "seed_arg", "slot_metrics",
]

#: the adapters' messages (sizes measured, actions replaced) go to the Gymnasium adapter's logger
log = logging.getLogger("gymloop.adapters.gymnasium")

#: observation keys the adapter uses itself (an entity type may not have these names)
RESERVED_KEYS = ("counts", "globals", "actors", "action_mask")
ILLEGAL_POLICIES = ("replace", "raise")
MEASURE_ENVS = 8

Sizes = int | Mapping[str, int] | None
"""``max_entities`` / ``max_actors``: one number for every type, a dict by type (the rest measured), or ``None`` (all measured)."""


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


#: the most entities of one type (or actors of one action type) a padded observation may hold
MAX_PADDED = 65_536


def reset_options(name: str, options: Mapping[str, Any] | None, known: Sequence[str] = (), refuse: bool = True) -> None:
    """Refuse (or, with ``refuse=False``, log a warning about) ``reset(options=...)`` keys an adapter does not use.

    PettingZoo's API test resets with an arbitrary option and expects it to be accepted, so the
    PettingZoo adapter warns instead of refusing; nothing is ignored without a word.

    Raises:
        ConfigError: an option other than ``known`` (with ``refuse``), or options that are not a mapping.
    """
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise ConfigError(f"{name}: reset(options=...) takes a dict or None, got {options!r}")
    unknown = [k for k in options if k not in known]
    if unknown:
        takes = f"it takes {list(known)}" if known else "it takes none: a game's options are arguments of the game function"
        if refuse:
            raise ConfigError(f"{name}: reset() got the options {unknown}, which it would ignore; {takes}")
        log.warning("%s: reset() ignores the options %s; %s", name, unknown, takes)


def _limits(given: Sizes, names: list[str], what: str, name: str) -> dict[str, int]:
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
        if v > MAX_PADDED:
            raise ConfigError(
                f"{name}: {what}[{k!r}] is {v}, more than a padded observation may hold (at most {MAX_PADDED:,} rows per "
                f"type: every observation is padded to that many); give the most the game can show"
            )
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
    """The fixed-size Gymnasium view of a game's :class:`~gymloop.spaces.Spaces` (the layout :mod:`gymloop.adapters.gymnasium` describes).

    Shared by :class:`~gymloop.adapters.gymnasium.GymloopEnv`, :class:`~gymloop.adapters.gymnasium.GymloopVectorEnv`
    and :class:`~gymloop.adapters.pettingzoo.GymloopParallelEnv`.

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
    def action_matrix(self, actions: Any, num_slots: int, what: str, one: bool = False) -> np.ndarray:
        """Actions as an ``(num_slots, n_components)`` int64 array, or :class:`InvalidActionError`.

        ``one``: the action of one copy or agent (an int, or ``(n_components,)`` ints), as errors name it.
        """
        C = len(self.components)
        if one:
            want: tuple[int, ...] = () if C == 1 else (C,)
        else:
            want = (num_slots,) if C == 1 else (num_slots, C)
        shape = "one int" if want == () else f"integers of shape {want}"
        try:
            arr = np.asarray(actions)
        except (TypeError, ValueError) as e:
            raise InvalidActionError(f"{self.name}: {what} must be {shape}, got {actions!r} ({e})") from None
        if arr.dtype.kind not in "iu" or arr.size != num_slots * C or (arr.ndim > max(len(want), 1) and arr.shape != want):
            raise InvalidActionError(
                f"{self.name}: {what} must be {shape} ({self.action_space}), got {arr.dtype} of shape {arr.shape}: {actions!r}"
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


def layout_for(game: Any, spaces: Spaces, max_entities: Sizes, max_actors: Sizes, measure_steps: int, seed: int,
                options: Mapping[str, Any], mask_in_obs: bool, slot_name: Callable[[int], str]) -> PaddedLayout:
    """The layout of a game: given sizes, the rest measured by a short random run (and logged)."""
    name = game_name(game)
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
        log.warning("%s: padded sizes measured from %d random steps of %d copies (entities: twice the most seen): %s; a better agent "
                    "may see more (an observation beyond them is an error): pass max_entities / max_actors to fix them",
                    name, measure_steps, MEASURE_ENVS, layout.describe())
        return layout
    return PaddedLayout(spaces, ents, acts, name, mask_in_obs, slot_name)


def check_illegal(illegal_actions: str) -> None:
    """Raise :class:`ConfigError` for an ``illegal_actions`` policy other than ``"replace"`` or ``"raise"``."""
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


def seed_arg(seed: Any, name: str = "") -> int:
    """``seed`` as the root seed of a ``gl.VecEnv`` (numpy integers accepted), or :class:`ConfigError`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(
            f"{name + ': ' if name else ''}seed must be a non-negative int (gl.VecEnv derives every copy's seed from one "
            f"root seed), got {seed!r} of type {type(seed).__name__}"
        )
    return int(seed)


def slot_metrics(b: Batch, s: int) -> dict[str, Any]:
    """The metrics slot ``s`` reported this step (``info`` of one copy or agent)."""
    out: dict[str, Any] = {}
    for k, v in b.metrics.items():
        x = float(v[s])
        if x == x:  # not NaN: reported this step
            out[k] = x
    return out


class PaddedAdapter:
    """A game's copies in one :class:`gymloop.VecEnv` in the padded layout: what every adapter of this package holds.

    A subclass sets ``name`` and ``illegal_actions``, then calls :meth:`_open`; its ``reset`` checks
    its arguments with :meth:`_reset_args` and starts from :meth:`_restart`.

    Attributes:
        game: the game loop or :class:`gymloop.Environment` class.
        spaces: the game's spaces.
        layout: the :class:`PaddedLayout`.
        components: the action space's components (:class:`Component`), in order.
    """

    game: Any
    name: str
    illegal_actions: str
    spaces: Spaces
    layout: PaddedLayout
    components: list[Component]
    _vec: VecEnv
    _options: dict[str, Any]
    _pending: Batch | None
    _cv: Converted | None
    _warned: bool

    def _open(self, game: Any, num_envs: int, seed: int, options: Mapping[str, Any], max_entities: Sizes, max_actors: Sizes,
              measure_steps: int, mask_in_obs: bool, slot_name: Callable[[int], str]) -> None:
        """Start ``num_envs`` copies (``options`` go to ``gl.VecEnv``) and fix the layout (given sizes, the rest measured)."""
        self.game = game
        self._options = dict(options)
        self._vec = VecEnv(game, num_envs, seed=seed_arg(seed), **options)
        try:
            self._pending = self._vec.reset()
            self.spaces = self._vec.spaces
            self.layout = layout_for(game, self.spaces, max_entities, max_actors, measure_steps, int(seed), options,
                                     mask_in_obs, slot_name)
        except BaseException:
            self._vec.close()
            raise
        self._options.update(_declared(self.spaces))
        self.components = self.layout.components
        self._cv = None
        self._warned = False

    def _reset_args(self, seed: Any, options: Mapping[str, Any] | None, refuse_options: bool = True) -> int | None:
        """Check ``reset``'s arguments and that the adapter is open; returns the seed as an int (or ``None``).

        Raises:
            ConfigError: a seed that is not a non-negative int; options, when ``refuse_options``
                (otherwise they are logged as a warning).
            EnvStateError: the adapter was closed.
        """
        seed = None if seed is None else seed_arg(seed, self.name)
        reset_options(self.name, options, refuse=refuse_options)
        if self._vec.closed:
            raise EnvStateError(f"{self.name}: reset() after close(); make a new {type(self).__name__}")
        return seed

    def _restart(self, num_envs: int, seed: int | None) -> Converted:
        """The first observations of a reset (see :meth:`_first_batch`), converted and kept for ``step``."""
        self._cv = None
        cv = self.layout.convert(self._first_batch(num_envs, seed))
        self._cv = cv
        return cv

    def _first_batch(self, num_envs: int, seed: int | None) -> Batch:
        """The batch ``reset`` starts from.

        With ``seed``, a new ``gl.VecEnv`` seeded with it replaces the old one (which is closed only once the
        new one has started); without, the batch that ended the last episode's step, or a reset.
        """
        if seed is not None:
            vec = VecEnv(self.game, num_envs, seed=seed_arg(seed), **self._options)
            try:
                b = vec.reset()
            except BaseException:
                vec.close()
                raise
            self._vec.close()
            self._vec = vec
        elif self._pending is not None:
            b = self._pending
        else:
            b = self._vec.reset()
        self._pending = None
        return b

    def _warn_replaced(self, message: str, *args: Any) -> None:
        """Log ``message`` (about masked-out actions replaced) the first time only."""
        if not self._warned:
            self._warned = True
            log.warning(message, *args)
