"""Action types: what a game may ask its agent to choose.

* an ``Enum`` is a categorical action; its member names are the labels;
* a dataclass whose fields are all Enums is a composite action: the product of its fields,
  with labels such as ``"dir=UP,thrust=FULL"``;
* ``gl.SelectEntity("Target", among=Enemy)`` asks the agent to pick one of the observed entities
  of the given type(s); ``act`` returns the chosen game object itself;
* an Enum (or composite) decorated with ``@gl.global_decision`` is one choice for the whole
  observation, tied to no actor entity: ``agent.act(obs, Mode)`` returns one ``Mode``;
* ``gl.global_decision(gl.SelectEntity("Treat", among=Patient))`` picks one observed entity for the
  whole observation, with no actor entity (a doctor who is not an entity choosing a patient):
  ``agent.act(obs, Treat)`` returns one patient.

Each action type has a kind (:mod:`gymloop.kinds`) that owns what differs between kinds.

Example:
    >>> import enum, dataclasses
    >>> import gymloop as gl
    >>> class Dir(enum.Enum):
    ...     UP = 0
    ...     DOWN = 1
    >>> class Thrust(enum.Enum):
    ...     OFF = 0
    ...     FULL = 1
    >>> @dataclasses.dataclass(frozen=True)
    ... class Steer:
    ...     dir: Dir
    ...     thrust: Thrust
    >>> gl.action_spec(Steer).labels
    ('dir=UP,thrust=OFF', 'dir=UP,thrust=FULL', 'dir=DOWN,thrust=OFF', 'dir=DOWN,thrust=FULL')
"""

import dataclasses
import enum
import itertools
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import SchemaError
from .kinds import CATEGORICAL, GLOBAL, GLOBAL_SELECT, SELECT_ENTITY, ActionKind, kind_named
from .schema import schema_of

__all__ = ["SelectEntity", "ActionDesc", "ActionSpec", "action_spec", "global_decision", "CATEGORICAL", "SELECT_ENTITY", "GLOBAL",
           "GLOBAL_SELECT"]

_GLOBAL_ATTR = "__gymloop_global_decision__"


def global_decision(cls: Any) -> Any:
    """Mark an action type as a global decision: one choice per observation, tied to no actor entity.

    It applies to an Enum or a composite dataclass of Enums (as a class decorator), or to a
    :class:`SelectEntity` (``Treat = gl.global_decision(gl.SelectEntity("Treat", among=Patient))``,
    the same as ``gl.SelectEntity("Treat", among=Patient, global_decision=True)``): one of the
    observed entities of the ``among`` types, chosen for the whole observation.

    ``agent.act(obs, Mode)`` returns one ``Mode`` (one patient for ``Treat``) whether the observation
    has actors or not, and may be asked together with actor-bound action types
    (``mode, move = agent.act(obs, Mode, Move)``). Its mask is given with ``obs.mask(Mode, allowed)``
    (the allowed members, or for a select-entity the allowed candidates). The network answers it
    from a summary of the whole observation.

    Example:
        >>> from dataclasses import dataclass
        >>> from enum import Enum
        >>> import gymloop as gl
        >>> @gl.global_decision
        ... class Mode(Enum):
        ...     ATTACK = 0
        ...     DEFEND = 1
        >>> gl.action_spec(Mode).kind
        'global_categorical'
        >>> gl.RandomAgent(seed=0).act(gl.Obs().mask(Mode, [Mode.DEFEND]), Mode)
        <Mode.DEFEND: 1>
        >>> @dataclass
        ... class Patient:
        ...     pain: float
        >>> Treat = gl.global_decision(gl.SelectEntity("Treat", among=Patient))
        >>> gl.action_spec(Treat).kind
        'global_select_entity'
        >>> a, b = Patient(1.0), Patient(9.0)
        >>> gl.RandomAgent(seed=0).act(gl.Obs().entities([a, b]).mask(Treat, [b]), Treat) is b
        True
    """
    if isinstance(cls, SelectEntity):
        if any(k is cls for k in _cache):
            raise SchemaError(
                f"gl.global_decision on {cls!r}: apply it where the SelectEntity is made, before any use "
                f"({cls.name} = gl.global_decision(gl.SelectEntity({cls.name!r}, among=...)))"
            )
        cls.is_global = True
        return cls
    if not (isinstance(cls, type) and (issubclass(cls, enum.Enum) or dataclasses.is_dataclass(cls))):
        raise SchemaError(
            f"@gl.global_decision applies to an Enum, a dataclass of Enums or a gl.SelectEntity, got {cls!r}"
        )
    if cls in _cache:
        raise SchemaError(f"@gl.global_decision on {cls.__qualname__}: apply it where the class is defined, before any use")
    setattr(cls, _GLOBAL_ATTR, True)
    action_spec(cls)  # validates it now
    return cls


class SelectEntity:
    """An action type that selects one observed entity.

    Args:
        name: the action type name (used in batches and checkpoints).
        among: the entity class, or a tuple of classes, the choice is made from. The candidates of
            an actor are all entities of those types in its observation, in type order then in the
            order they were observed.
        global_decision: one choice per observation, tied to no actor entity (the same as
            :func:`global_decision` applied to it): ``agent.act(obs, Treat)`` returns one entity
            whether the observation has actors or not, and its mask is ``obs.mask(Treat, allowed)``.

    Example:
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> @dataclass
        ... class Enemy:
        ...     hp: int
        >>> Target = gl.SelectEntity("Target", among=Enemy)
        >>> Target.name, Target.among
        ('Target', (<class 'gymloop.actions.Enemy'>,))
    """

    __slots__ = ("name", "among", "is_global")

    def __init__(self, name: str, among: type | tuple[type, ...], global_decision: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise SchemaError(f"SelectEntity name must be a non-empty string, got {name!r}")
        among_t = among if isinstance(among, tuple) else (among,)
        if not among_t:
            raise SchemaError(f"SelectEntity {name!r}: among= needs at least one entity class")
        for c in among_t:
            schema_of(c)  # raises SchemaError for classes that cannot be entities
        self.name = name
        self.among: tuple[type, ...] = among_t
        #: one choice per observation (no actor entity): see :func:`global_decision`
        self.is_global = bool(global_decision)

    def __repr__(self) -> str:
        g = ", global_decision=True" if self.is_global else ""
        return f"SelectEntity({self.name!r}, among={tuple(c.__name__ for c in self.among)}{g})"

    # Equal by value, so a copy that crossed a process boundary is the same action type.
    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SelectEntity) and other.name == self.name and other.among == self.among
                and other.is_global == self.is_global)

    def __hash__(self) -> int:
        return hash(("SelectEntity", self.name, self.among, self.is_global))

    def __reduce__(self):
        return (SelectEntity, (self.name, self.among, self.is_global))


@dataclass(frozen=True)
class ActionSpec:
    """The compiled view of one action type.

    Attributes:
        key: the object the game passes to ``act`` (Enum class, composite dataclass or
            :class:`SelectEntity`).
        name: the action type name.
        kind: the :class:`~gymloop.kinds.ActionKind` (it compares equal to its tag, e.g. ``"categorical"``).
        labels: the choice labels of a categorical or global action (empty for select-entity).
        values: the Python value returned for each choice index (categorical and global kinds).
        among: the entity classes a select-entity action chooses from.
    """

    key: Any
    name: str
    kind: ActionKind
    labels: tuple[str, ...] = ()
    values: tuple[Any, ...] = ()
    among: tuple[type, ...] = ()
    index: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    fields: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """Number of choices of a categorical action (0 for select-entity)."""
        return len(self.labels)

    @property
    def desc(self) -> "ActionDesc":
        """The names-only :class:`ActionDesc` of this action type."""
        d = self.__dict__.get("_desc")
        if d is None:
            d = ActionDesc(self.name, self.kind, self.labels, tuple(schema_of(c).name for c in self.among))
            object.__setattr__(self, "_desc", d)
        return d

    def index_of(self, value: Any) -> int:
        """Choice index of a categorical value (an Enum member or a composite instance)."""
        try:
            if self.fields:
                return self.index[tuple(getattr(value, f) for f in self.fields)]
            return self.index[value]
        except (KeyError, AttributeError, TypeError):
            raise SchemaError(
                f"{value!r} is not a choice of action type {self.name!r}; choices are {list(self.labels)}"
            ) from None


@dataclass(frozen=True, init=False)
class ActionDesc:
    """One action type of an action space (names only).

    Attributes:
        name: action type name.
        kind: its :class:`~gymloop.kinds.ActionKind` (a tag string is accepted and converted:
            ``"categorical"``, ``"select_entity"``, ``"global_categorical"`` or
            ``"global_select_entity"``); it compares equal to its tag.
        labels: choice labels (categorical and global kinds).
        among: entity type names a select-entity action (actor-bound or global) chooses from.
        among_any: the candidate types are not recorded (an imported enn-trainer agent); they come
            from the game when the agent is bound to one.

    Raises:
        SchemaError: for an unknown kind, or labels / candidate types that do not fit it.

    Example:
        >>> import gymloop as gl
        >>> d = gl.ActionDesc("Move", "categorical", ("UP", "DOWN"))
        >>> d.kind == "categorical", d.n, d.kind.actor_bound
        (True, 2, True)
    """

    name: str
    kind: ActionKind
    labels: tuple[str, ...] = ()
    among: tuple[str, ...] = ()
    among_any: bool = field(default=False, repr=False)

    def __init__(
        self,
        name: str,
        kind: ActionKind | str,
        labels: Sequence[str] = (),
        among: Sequence[str] = (),
        among_any: bool = False,
    ) -> None:
        k = kind_named(kind, f"action type {name!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", k)
        object.__setattr__(self, "labels", tuple(labels))
        object.__setattr__(self, "among", tuple(among))
        object.__setattr__(self, "among_any", among_any)
        if not (among_any and k.selects_entities and not self.among):
            k.check_desc(name, self.labels, self.among)

    @property
    def n(self) -> int:
        """Number of choices of a categorical action."""
        return len(self.labels)

    def describe(self) -> str:
        """A short human description, e.g. ``categorical with labels ['UP', 'DOWN']``."""
        return self.kind.describe(self.labels, self.among)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind.tag, "labels": list(self.labels), "among": list(self.among)}
        if self.among_any:
            d["among_any"] = True
        return d


_cache: dict[Any, ActionSpec] = {}


def action_spec(key: Any) -> ActionSpec:
    """The :class:`ActionSpec` of an action type (cached).

    Raises:
        SchemaError: if ``key`` is not an Enum, a dataclass of Enums or a :class:`SelectEntity`.

    Example:
        >>> from dataclasses import dataclass
        >>> from enum import Enum
        >>> class Dir(Enum):
        ...     LEFT = 0
        ...     RIGHT = 1
        >>> class Thrust(Enum):
        ...     OFF = 0
        ...     FULL = 1
        >>> @dataclass(frozen=True)
        ... class Steer:
        ...     dir: Dir
        ...     thrust: Thrust
        >>> spec = action_spec(Steer)
        >>> spec.kind, spec.n, spec.labels[1]
        ('categorical', 4, 'dir=LEFT,thrust=FULL')
    """
    try:
        s = _cache.get(key)
    except TypeError:
        s = None
    if s is not None:
        return s
    if isinstance(key, SelectEntity):
        s = ActionSpec(key=key, name=key.name, kind=GLOBAL_SELECT if key.is_global else SELECT_ENTITY, among=key.among)
    elif isinstance(key, type) and issubclass(key, enum.Enum):
        members = list(key)
        if not members:
            raise SchemaError(f"action type {key.__name__} is an Enum with no members")
        s = ActionSpec(
            key=key,
            name=key.__name__,
            kind=GLOBAL if key.__dict__.get(_GLOBAL_ATTR) else CATEGORICAL,
            labels=tuple(m.name for m in members),
            values=tuple(members),
            index={m: i for i, m in enumerate(members)},
        )
    elif isinstance(key, type) and dataclasses.is_dataclass(key):
        try:
            hints = typing.get_type_hints(key)
        except Exception as e:
            raise SchemaError(
                f"cannot resolve the annotations of composite action type {key.__qualname__}: {e}; define its "
                "Enum field types at module level"
            ) from None
        fields = dataclasses.fields(key)
        if not fields:
            raise SchemaError(f"composite action type {key.__name__} has no fields")
        enums = []
        for f in fields:
            tp = hints.get(f.name, f.type)
            if not (isinstance(tp, type) and issubclass(tp, enum.Enum) and len(tp) > 0):
                raise SchemaError(
                    f"composite action type {key.__name__}.{f.name} must be a non-empty Enum, got {tp!r}; "
                    "every field of a composite action is an Enum"
                )
            enums.append(list(tp))
        names = tuple(f.name for f in fields)
        labels, values, index = [], [], {}
        for i, combo in enumerate(itertools.product(*enums)):
            labels.append(",".join(f"{n}={m.name}" for n, m in zip(names, combo)))
            values.append(key(**dict(zip(names, combo))))
            index[combo] = i
        s = ActionSpec(
            key=key, name=key.__name__, kind=GLOBAL if key.__dict__.get(_GLOBAL_ATTR) else CATEGORICAL,
            labels=tuple(labels), values=tuple(values),
            index=index, fields=names,
        )
    else:
        raise SchemaError(
            f"{key!r} is not an action type; pass an Enum class, a dataclass whose fields are Enums, "
            "or gl.SelectEntity(name, among=EntityClass)"
        )
    _cache[key] = s
    return s
