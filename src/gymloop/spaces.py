"""Observation and action spaces: the fixed set of entity types, features and action types.

Spaces are plain data (names only), so they can be compared, printed, saved in checkpoints and
sent between processes. :class:`Spaces` adds the compiled schemas a running executor needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .actions import SELECT_ENTITY, ActionSpec, action_spec
from .errors import ConfigError, SchemaError
from .schema import EntitySchema, schema_of

__all__ = ["ObsSpace", "ActionDesc", "Spaces", "game", "declared_types", "spaces_to_json"]


@dataclass(frozen=True)
class ActionDesc:
    """One action type of an action space.

    Attributes:
        name: action type name.
        kind: ``"categorical"`` or ``"select_entity"``.
        labels: choice labels (categorical).
        among: entity type names a select-entity action chooses from.
    """

    name: str
    kind: str
    labels: tuple[str, ...] = ()
    among: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """Number of choices of a categorical action."""
        return len(self.labels)


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


@dataclass
class Spaces:
    """Compiled spaces: schemas and action specs in canonical (name-sorted) order."""

    entity_schemas: list[EntitySchema]
    globals_schema: EntitySchema | None
    action_specs: list[ActionSpec]
    entity_index: dict[type, int] = field(default_factory=dict)
    action_index: dict[Any, int] = field(default_factory=dict)

    @classmethod
    def build(cls, entity_classes: Iterable[type], globals_class: type | None, action_keys: Iterable[Any]) -> Spaces:
        specs = {}
        for k in action_keys:
            s = action_spec(k)
            if s.name in specs and specs[s.name].key != k:
                raise SchemaError(f"two different action types are both named {s.name!r}; give them distinct names")
            specs[s.name] = s
        classes = set(entity_classes)
        for s in specs.values():
            if s.kind == SELECT_ENTITY:
                classes.update(s.among)
        schemas: dict[str, EntitySchema] = {}
        for c in classes:
            sc = schema_of(c)
            if sc.name in schemas and schemas[sc.name].cls is not c:
                raise SchemaError(
                    f"entity classes {schemas[sc.name].cls.__qualname__} and {c.__qualname__} are both named "
                    f"{sc.name!r}; rename one with @gl.entity(name=...)"
                )
            schemas[sc.name] = sc
        ent = [schemas[n] for n in sorted(schemas)]
        acts = [specs[n] for n in sorted(specs)]
        g = schema_of(globals_class) if globals_class is not None else None
        return cls(
            entity_schemas=ent,
            globals_schema=g,
            action_specs=acts,
            entity_index={s.cls: i for i, s in enumerate(ent)},
            action_index={s.key: i for i, s in enumerate(acts)},
        )

    @property
    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={s.name: s.features for s in self.entity_schemas},
            globals=self.globals_schema.features if self.globals_schema else (),
        )

    @property
    def action_space(self) -> dict[str, ActionDesc]:
        return {
            s.name: ActionDesc(s.name, s.kind, s.labels, tuple(schema_of(c).name for c in s.among))
            for s in self.action_specs
        }


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
        setattr(f, _GAME_ATTR, (list(entities), globals, list(actions)))
        if agents is not None:
            setattr(f, _AGENTS_ATTR, agents)
        return f

    return apply(fn) if fn is not None else apply


def declared_types(fn: Any) -> tuple[list[type], type | None, list[Any]] | None:
    """The types declared on a game loop with :func:`game`, or ``None``."""
    return getattr(fn, _GAME_ATTR, None)


def declared_agents(fn: Any) -> int | None:
    """The number of agents a game loop declared with ``gl.game(agents=N)``, or ``None``."""
    return getattr(fn, _AGENTS_ATTR, None)


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
    acts = {k: {"kind": a.kind, "labels": list(a.labels), "among": list(a.among)} for k, a in action_space.items()}
    return obs, acts
