"""Observation and action spaces: the fixed set of entity types, features and action types.

:class:`Spaces` is the one value that describes them everywhere: the executors, both runtimes, the
process pipe, the torch and numpy policies, checkpoints, agent libraries and traces. Its names-only
part (:class:`ObsSpace` and :class:`ActionDesc` per action type) is plain data that compares, prints
and round-trips through JSON (:meth:`Spaces.to_json` / :meth:`Spaces.from_json`, validated once
there); a game loop's spaces also carry the compiled schemas and action specs its executor needs
(:meth:`Spaces.build`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .actions import ActionDesc, ActionSpec, action_spec
from .errors import ConfigError, GymloopError, SchemaError
from .kinds import kind_named
from .schema import EntitySchema, name_clash_message, schema_of

__all__ = ["ObsSpace", "ActionDesc", "DeclaredTypes", "Spaces", "game", "declared_types", "spaces_to_json"]


@dataclass(frozen=True)
class ObsSpace:
    """Entity types with their feature names, and the global feature names.

    Example:
        >>> import gymloop as gl
        >>> s = gl.ObsSpace(entities={"Head": ("x", "y")}, globals=())
        >>> s.entities["Head"]
        ('x', 'y')
    """

    entities: dict[str, tuple[str, ...]]
    globals: tuple[str, ...] = ()


def _names(x: Any, what: str, error: type[GymloopError], where: str) -> tuple[str, ...]:
    if isinstance(x, tuple):
        x = list(x)
    if not isinstance(x, list) or not all(isinstance(v, str) for v in x):
        raise error(f"{where}{what} must be a list of strings, got {x!r}")
    if len(set(x)) != len(x):
        raise error(f"{where}{what} must be distinct, got {x!r}")
    return tuple(x)


class Spaces:
    """The observation and action spaces: one value for every layer (see the module docstring).

    Attributes:
        obs: the :class:`ObsSpace`.
        actions: :class:`ActionDesc` by name, in the order batches and networks use.
        entity_schemas, globals_schema, action_specs, entity_index, action_index: the compiled
            schemas of a game loop (:meth:`build`); empty for spaces made from names only.

    Example:
        >>> import gymloop as gl
        >>> sp = gl.Spaces.from_json({"entities": {"Head": ["x", "y"]}, "globals": []},
        ...                          {"Move": {"kind": "categorical", "labels": ["UP", "DOWN"]}})
        >>> sp.entity_names, sp.actions["Move"].n
        (['Head'], 2)
        >>> gl.Spaces.from_json(*sp.to_json()) == sp
        True
    """

    def __init__(
        self,
        obs: ObsSpace,
        actions: Mapping[str, ActionDesc],
        entity_schemas: list[EntitySchema] | None = None,
        globals_schema: EntitySchema | None = None,
        action_specs: list[ActionSpec] | None = None,
        error: type[GymloopError] = SchemaError,
        where: str = "",
    ) -> None:
        if not isinstance(obs, ObsSpace):
            raise error(f"{where}the observation space must be a gl.ObsSpace, got {obs!r}")
        if not isinstance(actions, Mapping):
            raise error(f"{where}the action space must be a dict of gl.ActionDesc by name, got {actions!r}")
        ents = {}
        for k, v in obs.entities.items():
            if not isinstance(k, str) or not k:
                raise error(f"{where}entity type names must be non-empty strings, got {k!r}")
            ents[k] = _names(v, f"the features of entity type {k!r}", error, where)
        self.obs = ObsSpace(entities=ents, globals=_names(obs.globals, "the global features", error, where))
        acts: dict[str, ActionDesc] = {}
        for name, d in actions.items():
            if not isinstance(d, ActionDesc) or d.name != name:
                raise error(f"{where}action type {name!r} must be a gl.ActionDesc named {name!r}, got {d!r}")
            unknown = [t for t in d.among if t not in ents]
            if unknown:
                raise error(f"{where}action type {name!r} selects among {unknown}, which are not entity types of the observation space")
            acts[name] = d
        self.actions = acts
        self.entity_schemas = entity_schemas or []
        self.globals_schema = globals_schema
        self.action_specs = action_specs or []
        self.entity_index: dict[type, int] = {s.cls: i for i, s in enumerate(self.entity_schemas)}
        self.action_index: dict[Any, int] = {s.key: i for i, s in enumerate(self.action_specs)}

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, entity_classes: Iterable[type], globals_class: type | None, action_keys: Iterable[Any]) -> Spaces:
        """The compiled spaces of a game loop's classes (canonical, name-sorted order)."""
        specs: dict[str, ActionSpec] = {}
        for k in action_keys:
            s = action_spec(k)
            if s.name in specs and specs[s.name].key != k:
                a, b = specs[s.name].key, k
                where = " and ".join(f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', repr(x))}" for x in (a, b))
                raise SchemaError(f"two different action types are both named {s.name!r} ({where}); give them distinct names")
            specs[s.name] = s
        classes = set(entity_classes)
        for s in specs.values():
            classes.update(s.among)
        schemas: dict[str, EntitySchema] = {}
        for c in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):  # (a clash names them in order)
            sc = schema_of(c)
            if sc.name in schemas and schemas[sc.name].cls is not c:
                raise SchemaError(name_clash_message(schemas[sc.name].cls, c, sc.name))
            schemas[sc.name] = sc
        ent = [schemas[n] for n in sorted(schemas)]
        acts = [specs[n] for n in sorted(specs)]
        g = schema_of(globals_class) if globals_class is not None else None
        obs = ObsSpace(entities={s.name: s.features for s in ent}, globals=g.features if g else ())
        return cls(obs, {s.name: s.desc for s in acts}, ent, g, acts)

    @classmethod
    def from_json(cls, obs: Any, acts: Any, error: type[GymloopError] = SchemaError, where: str = "") -> Spaces:
        """Spaces from their JSON form (:meth:`to_json`), validated; problems raise ``error`` prefixed by ``where``."""
        if not isinstance(obs, Mapping) or not isinstance(obs.get("entities"), Mapping):
            raise error(f"{where}obs_space must be an object with an 'entities' object, got {obs!r}")
        ents = {k: _names(v, f"the features of entity type {k!r}", error, where) for k, v in obs["entities"].items()}
        o = ObsSpace(entities=ents, globals=_names(obs.get("globals", []), "the global features", error, where))
        if not isinstance(acts, Mapping):
            raise error(f"{where}action_space must be an object, got {acts!r}")
        a: dict[str, ActionDesc] = {}
        for k, v in acts.items():
            if not isinstance(v, Mapping):
                raise error(f"{where}action type {k!r} must be an object with kind, labels and among, got {v!r}")
            unknown_keys = set(v) - {"kind", "labels", "among", "among_any"}
            if unknown_keys:
                raise error(f"{where}action type {k!r} has unknown fields {sorted(unknown_keys)}")
            try:
                a[str(k)] = ActionDesc(
                    str(k), kind_named(v.get("kind"), f"action type {k!r}"),
                    _names(v.get("labels", []), f"the labels of action type {k!r}", error, where),
                    _names(v.get("among", []), f"the candidate types of action type {k!r}", error, where),
                    among_any=bool(v.get("among_any", False)),
                )
            except SchemaError as e:
                if error is SchemaError:
                    raise
                raise error(f"{where}{e}") from None
        return cls(o, a, error=error, where=where)

    def to_json(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(obs_space, action_space)`` as JSON objects (what checkpoints and traces store)."""
        return spaces_to_json(self.obs, self.actions)

    # ------------------------------------------------------------------ views
    @property
    def obs_space(self) -> ObsSpace:
        return self.obs

    @property
    def action_space(self) -> dict[str, ActionDesc]:
        return dict(self.actions)

    @property
    def entity_names(self) -> list[str]:
        return list(self.obs.entities)

    @property
    def action_names(self) -> list[str]:
        return list(self.actions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spaces) and other.obs == self.obs and list(other.actions.items()) == list(self.actions.items())

    __hash__ = None  # type: ignore[assignment]  # unhashable (mutable action dict); mypy wants a callable here

    def __repr__(self) -> str:
        return f"Spaces(entities={self.entity_names}, globals={list(self.obs.globals)}, actions={self.action_names})"


class DeclaredTypes(NamedTuple):
    """Entity classes, the globals class (or ``None``) and action types: what ``@gl.game(...)``
    declares (:func:`declared_types`), what a shard discovers, and what every shard receives once the
    spaces are fixed. ``Spaces.build(*declared)`` compiles them."""

    entities: list[type]
    globals: type | None
    actions: list[Any]


_GAME_ATTR = "__gymloop_declared__"
_AGENTS_ATTR = "__gymloop_agents__"


def game(
    fn: Any = None,
    *,
    entities: Iterable[type] = (),
    actions: Iterable[Any] = (),
    globals: type | None = None,
    agents: int | None = None,
) -> Any:
    """Declare the entity, action and globals types a game loop uses (and how many agents it takes).

    A :class:`~gymloop.VecEnv` fixes its spaces at the first ``reset``; types that only appear
    later in an episode (a body segment, a bullet) must be declared, here or with
    ``VecEnv(..., entity_types=[...])``. ``agents=N`` says the game loop takes N agents
    (``game(agents, seed)``); ``gl.run`` and ``gl.VecEnv`` then refuse another number up front.

    Example:
        >>> from dataclasses import dataclass
        >>> from enum import Enum
        >>> import gymloop as gl
        >>> @dataclass
        ... class Bullet:
        ...     x: float
        >>> class Fire(Enum):
        ...     NO = 0
        ...     YES = 1
        >>> @gl.game(entities=[Bullet], actions=[Fire])
        ... def shooter(agent, seed):
        ...     ...
        >>> gl.declared_types(shooter)[0]
        [<class 'gymloop.spaces.Bullet'>]
    """

    if agents is not None and (not isinstance(agents, int) or isinstance(agents, bool) or agents < 1):
        raise ConfigError(f"gl.game(agents=...) must be a positive int, got {agents!r}")

    def apply(f: Any) -> Any:
        for c in entities:
            schema_of(c)
        for a in actions:
            action_spec(a)
        if globals is not None:
            schema_of(globals)
        setattr(f, _GAME_ATTR, DeclaredTypes(list(entities), globals, list(actions)))
        if agents is not None:
            setattr(f, _AGENTS_ATTR, agents)
        return f

    return apply(fn) if fn is not None else apply


def declared_types(fn: Any) -> DeclaredTypes | None:
    """The types declared on a game loop with :func:`game`, or ``None``.

    A ``functools.partial`` of a declared game loop (to pass it options) has the loop's declarations.

    Example:
        >>> import functools
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> [t.__name__ for t in gl.declared_types(functools.partial(snake))[0]]
        ['Head', 'Body', 'Food']
    """
    return getattr(_unwrap(fn), _GAME_ATTR, None)


def declared_agents(fn: Any) -> int | None:
    """The number of agents a game loop declared with ``gl.game(agents=N)``, or ``None``."""
    return getattr(_unwrap(fn), _AGENTS_ATTR, None)


def _unwrap(fn: Any) -> Any:
    """The function under any ``functools.partial`` layers (declarations live on the function)."""
    while isinstance(fn, functools.partial) and not hasattr(fn, _GAME_ATTR):
        fn = fn.func
    return fn


def check_agents(fn: Any, given: int, how: str) -> None:
    """Raise :class:`ConfigError` when ``given`` agents differ from what ``fn`` declared."""
    n = declared_agents(fn)
    if n is not None and n != given:
        name = getattr(fn, "__name__", fn)
        fix = (f"pass a list of {n} agents" if how == "run" else f"use agents_per_game={n}") if n > 1 else (
            "pass one agent" if how == "run" else "use agents_per_game=1")
        raise ConfigError(f"game {name!r} takes {n} agent(s) (declared with gl.game(agents={n})), got {given}; {fix}")


def spaces_to_json(obs_space: ObsSpace, action_space: dict[str, ActionDesc]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON form of an observation and an action space, as checkpoints and traces store them.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.spaces import ActionDesc, spaces_to_json
        >>> obs, acts = spaces_to_json(gl.ObsSpace({"Head": ("x", "y")}), {"Move": ActionDesc("Move", "categorical", ("UP", "DOWN"))})
        >>> obs, acts
        ({'entities': {'Head': ['x', 'y']}, 'globals': []}, {'Move': {'kind': 'categorical', 'labels': ['UP', 'DOWN'], 'among': []}})
    """
    obs = {"entities": {k: list(v) for k, v in obs_space.entities.items()}, "globals": list(obs_space.globals)}
    acts = {k: a.to_json() for k, a in action_space.items()}
    return obs, acts
