"""Entity schemas: how a class becomes named features, compiled once per class.

Feature rules (applied recursively to a dataclass's fields):

* ``int``, ``float``, ``bool`` (and numpy scalar types) → one feature named after the field;
* an ``Enum`` → one-hot features ``field.is_MEMBER``;
* a nested dataclass → ``field.sub`` for each of its features;
* a fixed-length tuple such as ``tuple[int, int]`` → ``field.0``, ``field.1``.

Any dataclass is an entity type named after its class. ``@gl.entity(name=..., features=[...])``
renames a class, picks a subset of its fields, or declares a class that is not a dataclass.

Example:
    >>> from dataclasses import dataclass
    >>> import gymloop as gl
    >>> @dataclass
    ... class Ship:
    ...     x: float
    ...     pos: tuple[int, int]
    ...     alive: bool
    >>> gl.schema_of(Ship).features
    ('x', 'pos.0', 'pos.1', 'alive')
"""

from __future__ import annotations

import dataclasses
import enum
import numbers
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .errors import SchemaError

__all__ = ["entity", "EntitySchema", "schema_of", "name_clash_message"]

T = TypeVar("T", bound=type)

_DECL_ATTR = "__gymloop_entity__"
_cache: dict[type, EntitySchema] = {}


@dataclass(frozen=True)
class _Declaration:
    name: str | None
    features: tuple[str, ...] | dict[str, Any] | None


def name_clash_message(a: type, b: type, name: str, where: str = "") -> str:
    """The message for two different classes that are both the entity type ``name``: it names
    each by module and qualified name (``mygame.Head``, ``othergame.Head``) and gives the fix.

    Example:
        >>> from dataclasses import make_dataclass
        >>> A, B = make_dataclass("Head", ["x"]), make_dataclass("Head", ["x"])
        >>> A.__module__, B.__module__ = "mygame", "othergame"
        >>> name_clash_message(A, B, "Head")  # doctest: +ELLIPSIS
        "entity classes mygame.Head and othergame.Head are both named 'Head'; rename one with @gl.entity(name=...), e.g. ...
    """
    pa = f"{a.__module__}.{a.__qualname__}"
    pb = f"{b.__module__}.{b.__qualname__}"
    fix = "rename one with @gl.entity(name=...)"
    if pa == pb:  # one class defined twice: a module imported twice or reloaded, a class made in a function
        return (f"entity classes {pa} and {pb} (two different classes of the same name) are both named {name!r}{where}: "
                f"the class was defined twice (a module reloaded or imported under two names, or a class made inside a "
                f"function); define it once at module level, or {fix}")
    other = b.__module__.rpartition(".")[2]
    return f"entity classes {pa} and {pb} are both named {name!r}{where}; {fix}, e.g. @gl.entity(name='{other}_{name}') on {pb}"


def entity(
    cls: type | None = None,
    *,
    name: str | None = None,
    features: Sequence[str] | dict[str, Any] | None = None,
) -> Any:
    """Declare how a class is seen as an entity type.

    Use it as a decorator (``@gl.entity(name="Enemy")``) or call it on a class you do not own
    (``gl.entity(Goblin, name="Enemy", features=["x", "y"])``).

    Args:
        cls: the class, when called directly rather than as a decorator.
        name: the entity type name; defaults to the class name.
        features: the fields (or attributes) to observe, in order. A list of names takes each
            field's type from the class annotations (numbers if the class has none); a dict maps
            names to types explicitly. Defaults to all dataclass fields.

    Returns:
        The class itself (unchanged apart from a marker attribute), or a decorator.

    Example:
        >>> import gymloop as gl
        >>> @gl.entity(name="Enemy", features={"x": int, "hp": float})
        ... class Goblin:
        ...     def __init__(self):
        ...         self.x, self.hp, self.secret = 1, 5.0, "unobserved"
        >>> gl.schema_of(Goblin).name, gl.schema_of(Goblin).features
        ('Enemy', ('x', 'hp'))
    """

    def apply(c: type) -> type:
        if not isinstance(c, type):
            raise SchemaError(f"gl.entity expects a class, got {c!r} of type {type(c).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise SchemaError(f"entity name for {c.__qualname__} must be a non-empty string, got {name!r}")
        feats: tuple[str, ...] | dict[str, Any] | None
        if features is None:
            feats = None
        elif isinstance(features, dict):
            feats = dict(features)
        elif isinstance(features, str):
            raise SchemaError(
                f"features for {c.__qualname__} must be a list of field names, got the string "
                f"{features!r}; write features=[{features!r}]"
            )
        else:
            feats = tuple(features)
        setattr(c, _DECL_ATTR, _Declaration(name, feats))
        _cache.pop(c, None)
        return c

    if cls is not None:
        return apply(cls)
    return apply


@dataclass(frozen=True)
class EntitySchema:
    """The compiled view of one entity class.

    Attributes:
        cls: the Python class.
        name: the entity type name used in spaces, batches and checkpoints.
        features: the feature names, in column order.
        rows: ``rows(objs) -> list[tuple]``: one tuple of feature values per object, generated
            once for the class (no per-step reflection).
        flat: ``flat(objs) -> list``: the same values in one flat list (the fast path).
        fields: the top-level fields read.
    """

    cls: type
    name: str
    features: tuple[str, ...]
    rows: Callable[[Sequence[Any]], list]
    flat: Callable[[Sequence[Any]], list]
    fields: tuple[str, ...]

    def featurize(self, objs: Sequence[Any]) -> np.ndarray:
        """Features of ``objs`` as a ``(len(objs), len(features))`` float32 array."""
        if not objs:
            return np.zeros((0, len(self.features)), dtype=np.float32)
        return np.array(self.flat(objs), dtype=np.float32).reshape(len(objs), len(self.features))


def _is_scalar_type(tp: Any) -> bool:
    if tp in (int, float, bool):
        return True
    return isinstance(tp, type) and issubclass(tp, (numbers.Real, np.number, np.bool_))


def _expand(tp: Any, path: str, expr: str, owner: str, ns: dict[str, Any], depth: int = 0) -> tuple[list[str], list[str]]:
    """Feature names and expressions for a value of type ``tp`` reached by ``expr``."""
    if depth > 8:
        raise SchemaError(f"{owner}.{path}: nesting deeper than 8 levels (a recursive dataclass?)")
    if tp is Any:
        raise SchemaError(
            f"{owner}.{path}: type Any has no feature layout; annotate it as int, float, bool, an Enum, "
            "a dataclass or a fixed-length tuple"
        )
    if _is_scalar_type(tp):
        return [path], [expr]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        if not members:
            raise SchemaError(f"{owner}.{path}: Enum {tp.__name__} has no members")
        key = f"_oh{len(ns)}"
        onehot: dict[Any, tuple[float, ...]] = {}
        for i, m in enumerate(members):
            onehot[m] = tuple(1.0 if j == i else 0.0 for j in range(len(members)))
        ns[key] = onehot
        return [f"{path}.is_{m.name}" for m in members], [f"*{key}[{expr}]"]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        names: list[str] = []
        exprs: list[str] = []
        for f in dataclasses.fields(tp):
            n, e = _expand(hints.get(f.name, f.type), f"{path}.{f.name}", f"{expr}.{f.name}", owner, ns, depth + 1)
            names += n
            exprs += e
        return names, exprs
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            raise SchemaError(
                f"{owner}.{path}: {tp} has no fixed length; annotate it as tuple[int, int] "
                "(one type per element)"
            )
        names, exprs = [], []
        for i, a in enumerate(args):
            n, e = _expand(a, f"{path}.{i}", f"{expr}[{i}]", owner, ns, depth + 1)
            names += n
            exprs += e
        return names, exprs
    raise SchemaError(
        f"{owner}.{path}: unsupported feature type {tp!r}; features must be int, float, bool, an Enum, "
        "a dataclass or a fixed-length tuple. Leave the field out with "
        f"@gl.entity(features=[...]) or observe it through a small view class"
    )


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as e:  # unresolved forward references and the like
        raise SchemaError(f"cannot resolve the type annotations of {cls.__qualname__}: {e}") from e


def schema_of(cls: type) -> EntitySchema:
    """The :class:`EntitySchema` of ``cls``, built on first use and cached.

    Raises:
        SchemaError: if ``cls`` is neither a dataclass nor declared with :func:`entity`, or one of
            its features has an unsupported type.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Unit:
        ...     pos: tuple[int, int]
        ...     hp: float
        ...     alive: bool
        >>> schema_of(Unit).name, schema_of(Unit).features
        ('Unit', ('pos.0', 'pos.1', 'hp', 'alive'))
    """
    if not isinstance(cls, type):
        raise SchemaError(f"entity types are classes, got {cls!r} of type {type(cls).__name__}; pass the class itself")
    s = _cache.get(cls)
    if s is not None:
        return s
    decl = cls.__dict__.get(_DECL_ATTR)
    is_dc = dataclasses.is_dataclass(cls)
    if decl is None and not is_dc:
        raise SchemaError(
            f"{cls.__qualname__} is not a dataclass and not declared as an entity; decorate it with "
            "@dataclass, or declare it with @gl.entity(features=[...]) / gl.entity(YourClass, features=[...])"
        )
    name = (decl.name if decl is not None else None) or cls.__name__
    annotations = _hints(cls) if (is_dc or getattr(cls, "__annotations__", None)) else {}
    fields: list[tuple[str, Any]]
    if decl is None or decl.features is None:
        if not is_dc:
            raise SchemaError(f"{cls.__qualname__} is declared with @gl.entity but lists no features and is not a dataclass")
        fields = [(f.name, annotations.get(f.name, f.type)) for f in dataclasses.fields(cls)]
    elif isinstance(decl.features, dict):
        fields = list(decl.features.items())
    else:
        fields = [(n, annotations.get(n, float)) for n in decl.features]
    ns: dict[str, Any] = {}
    names: list[str] = []
    exprs: list[str] = []
    for fname, ftype in fields:
        if not isinstance(fname, str) or not fname.isidentifier():
            raise SchemaError(f"{cls.__qualname__}: feature name {fname!r} is not a valid attribute name")
        n, e = _expand(ftype, fname, f"o.{fname}", cls.__qualname__, ns)
        names += n
        exprs += e
    if len(set(names)) != len(names):
        raise SchemaError(f"{cls.__qualname__}: duplicate feature names in {names}")
    body = ", ".join(exprs) + ("," if len(exprs) == 1 else "")
    src = f"def rows(objs):\n    return [({body}) for o in objs]\n"
    # ``flat`` returns every feature value of every object in one flat list: converting a flat
    # list to numpy is markedly faster than a list of tuples.
    if len(exprs) == 1 and not exprs[0].startswith("*"):
        src += f"def flat(objs):\n    return [{exprs[0]} for o in objs]\n"
    elif not exprs:
        src += "def flat(objs):\n    return []\n"
    else:
        src += f"def flat(objs):\n    out = []\n    e = out.extend\n    for o in objs:\n        e(({body}))\n    return out\n"
    exec(compile(src, f"<gymloop featurizer {cls.__qualname__}>", "exec"), ns)
    s = EntitySchema(
        cls=cls, name=name, features=tuple(names), rows=ns["rows"], flat=ns["flat"], fields=tuple(f for f, _ in fields)
    )
    _cache[cls] = s
    return s
