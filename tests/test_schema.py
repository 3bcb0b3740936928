"""Entity schemas: feature rules, naming, declarations, caching and errors."""

import dataclasses
import enum
import keyword
import typing
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gymloop as gl


class Color(enum.Enum):
    RED = 0
    GREEN = 1
    BLUE = 2


class Empty(enum.Enum):
    pass


@dataclass
class Vec:
    x: float
    y: float


@dataclass
class Scalars:
    i: int
    f: float
    b: bool
    n: np.float32


@dataclass
class Painted:
    color: Color
    hp: int


@dataclass
class Inner:
    v: Vec
    alive: bool


@dataclass
class Outer:
    inner: Inner
    pos: Vec


@dataclass
class Pair:
    pos: tuple[int, int]
    mixed: tuple[Color, Vec]


@dataclass
class Node:
    child: "Node"


# ---------------------------------------------------------------------- feature rules


def test_scalars_are_one_feature_each_named_after_the_field():
    s = gl.schema_of(Scalars)
    assert s.name == "Scalars"
    assert s.features == ("i", "f", "b", "n")
    arr = s.featurize([Scalars(3, -1.5, True, np.float32(2.5)), Scalars(-7, 0.25, False, np.float32(0))])
    assert arr.dtype == np.float32
    assert arr.tolist() == [[3.0, -1.5, 1.0, 2.5], [-7.0, 0.25, 0.0, 0.0]]


def test_enum_is_one_hot_with_is_member_names():
    s = gl.schema_of(Painted)
    assert s.features == ("color.is_RED", "color.is_GREEN", "color.is_BLUE", "hp")
    arr = s.featurize([Painted(Color.GREEN, 4), Painted(Color.RED, 1), Painted(Color.BLUE, 0)])
    assert arr.tolist() == [[0, 1, 0, 4], [1, 0, 0, 1], [0, 0, 1, 0]]


def test_nested_dataclasses_are_dotted_paths():
    s = gl.schema_of(Outer)
    assert s.features == ("inner.v.x", "inner.v.y", "inner.alive", "pos.x", "pos.y")
    arr = s.featurize([Outer(Inner(Vec(1.0, 2.0), True), Vec(3.0, 4.0))])
    assert arr.tolist() == [[1.0, 2.0, 1.0, 3.0, 4.0]]


def test_fixed_tuples_are_indexed_and_recurse():
    s = gl.schema_of(Pair)
    assert s.features == (
        "pos.0",
        "pos.1",
        "mixed.0.is_RED",
        "mixed.0.is_GREEN",
        "mixed.0.is_BLUE",
        "mixed.1.x",
        "mixed.1.y",
    )
    arr = s.featurize([Pair((5, -6), (Color.BLUE, Vec(0.5, 1.5)))])
    assert arr.tolist() == [[5, -6, 0, 0, 1, 0.5, 1.5]]


def test_featurize_of_no_objects_has_the_right_width():
    arr = gl.schema_of(Outer).featurize([])
    assert arr.shape == (0, 5)
    assert arr.dtype == np.float32


def test_schema_is_built_once_and_cached():
    @dataclass
    class Cached:
        a: int
        b: Color

    first = gl.schema_of(Cached)
    assert gl.schema_of(Cached) is first
    assert isinstance(first.features, tuple)


def test_featurizing_does_no_reflection_after_the_first_use(monkeypatch):
    @dataclass
    class Compiled:
        a: int
        c: Color
        p: tuple[float, float]

    s = gl.schema_of(Compiled)

    def no_reflection(*args, **kwargs):
        raise AssertionError("reflection at featurize time")

    monkeypatch.setattr(dataclasses, "fields", no_reflection)
    monkeypatch.setattr(typing, "get_type_hints", no_reflection)
    assert gl.schema_of(Compiled) is s
    arr = s.featurize([Compiled(1, Color.BLUE, (2.0, 3.0))])
    assert arr.tolist() == [[1, 0, 0, 1, 2, 3]]


# ---------------------------------------------------------------------- declarations


def test_entity_renames_a_dataclass():
    @gl.entity(name="Enemy")
    @dataclass
    class Goblin:
        x: int
        y: int

    s = gl.schema_of(Goblin)
    assert s.name == "Enemy"
    assert s.features == ("x", "y")
    assert s.cls is Goblin


def test_entity_picks_and_orders_a_subset_of_fields():
    @gl.entity(features=["y", "color"])
    @dataclass
    class Wide:
        x: int
        y: int
        color: Color
        label: str  # not observed, so its type does not matter

    s = gl.schema_of(Wide)
    assert s.name == "Wide"
    assert s.features == ("y", "color.is_RED", "color.is_GREEN", "color.is_BLUE")
    assert s.featurize([Wide(1, 2, Color.RED, "hi")]).tolist() == [[2, 1, 0, 0]]


def test_entity_declares_a_plain_class_with_typed_features():
    class Goblin:
        def __init__(self, x, hp, color):
            self.x, self.hp, self.color, self.secret = x, hp, color, "unobserved"

    assert gl.entity(Goblin, name="Enemy", features={"x": int, "color": Color, "hp": float}) is Goblin
    s = gl.schema_of(Goblin)
    assert s.name == "Enemy"
    assert s.features == ("x", "color.is_RED", "color.is_GREEN", "color.is_BLUE", "hp")
    assert s.featurize([Goblin(3, 0.5, Color.GREEN)]).tolist() == [[3, 0, 1, 0, 0.5]]


def test_entity_feature_list_on_a_plain_class_uses_annotations_or_numbers():
    @gl.entity(features=["x", "kind"])
    class Annotated:
        kind: Color

        def __init__(self, x, kind):
            self.x, self.kind = x, kind

    s = gl.schema_of(Annotated)
    assert s.features == ("x", "kind.is_RED", "kind.is_GREEN", "kind.is_BLUE")
    assert s.featurize([Annotated(2.5, Color.BLUE)]).tolist() == [[2.5, 0, 0, 1]]


def test_redeclaring_a_class_replaces_its_cached_schema():
    @dataclass
    class Late:
        a: int
        b: int

    assert gl.schema_of(Late).features == ("a", "b")
    gl.entity(Late, name="Renamed", features=["b"])
    s = gl.schema_of(Late)
    assert (s.name, s.features) == ("Renamed", ("b",))


# ---------------------------------------------------------------------- errors


def test_undeclared_plain_class_is_rejected():
    class Plain:
        x = 1

    with pytest.raises(gl.SchemaError, match=r"Plain is not a dataclass and not declared as an entity"):
        gl.schema_of(Plain)


@pytest.mark.parametrize(
    "tp, why",
    [
        (str, "unsupported feature type"),
        (list, "unsupported feature type"),
        (list[int], "unsupported feature type"),
        (Optional[int], "unsupported feature type"),  # noqa: UP045 - the typing spelling on purpose
        (int | None, "unsupported feature type"),
        (dict, "unsupported feature type"),
        (tuple[int, ...], "has no fixed length"),
        (tuple, "(unsupported feature type|has no fixed length)"),
        (Any, "type Any has no feature layout"),
        (Empty, "Enum Empty has no members"),
    ],
)
def test_unsupported_feature_types_name_the_class_and_field(tp, why):
    Bad = dataclasses.make_dataclass("BadEntity", [("ok", int), ("weird", tp)])
    with pytest.raises(gl.SchemaError, match=rf"BadEntity\.weird: .*{why}"):
        gl.schema_of(Bad)


def test_unsupported_type_deep_inside_names_the_path():
    Deep = dataclasses.make_dataclass("Deep", [("name", str)])
    Holder = dataclasses.make_dataclass("Holder", [("pos", tuple[int, Deep])])
    with pytest.raises(gl.SchemaError, match=r"Holder\.pos\.1\.name: unsupported feature type"):
        gl.schema_of(Holder)


def test_recursive_dataclass_is_rejected():
    with pytest.raises(gl.SchemaError, match=r"Node\.child.*nesting deeper than 8 levels"):
        gl.schema_of(Node)


def test_unresolvable_annotation_is_a_schema_error():
    @dataclass
    class Forward:
        x: "DoesNotExist"  # noqa: F821

    with pytest.raises(gl.SchemaError, match=r"cannot resolve the type annotations of .*Forward"):
        gl.schema_of(Forward)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"features": "x"}, r"must be a list of field names, got the string 'x'"),
        ({"name": ""}, r"must be a non-empty string"),
        ({"name": 3}, r"must be a non-empty string"),
    ],
)
def test_bad_entity_declarations(kwargs, match):
    @dataclass
    class Target:
        x: int

    with pytest.raises(gl.SchemaError, match=match):
        gl.entity(Target, **kwargs)


def test_entity_on_a_non_class_is_rejected():
    with pytest.raises(gl.SchemaError, match=r"gl.entity expects a class"):
        gl.entity(3, name="Three")


@pytest.mark.parametrize(
    "obj",
    [
        3,
        Color.RED,
        pytest.param(
            Vec(1.0, 2.0),
            id="unhashable-instance",
        ),
    ],
)
def test_schema_of_a_non_class_is_rejected(obj):
    with pytest.raises(gl.SchemaError, match=r"entity types are classes"):
        gl.schema_of(obj)


def test_declared_plain_class_without_features_is_rejected():
    @gl.entity(name="Nameless")
    class Plain:
        pass

    with pytest.raises(gl.SchemaError, match=r"Plain is declared with @gl.entity but lists no features"):
        gl.schema_of(Plain)


@pytest.mark.parametrize(
    "features, match",
    [
        (["x", "x"], r"duplicate feature names"),
        (["not valid"], r"feature name 'not valid' is not a valid attribute name"),
    ],
)
def test_bad_feature_lists(features, match):
    @dataclass
    class Target:
        x: int

    gl.entity(Target, features=features)
    with pytest.raises(gl.SchemaError, match=match):
        gl.schema_of(Target)


def test_schema_error_is_in_the_hierarchy():
    assert issubclass(gl.SchemaError, gl.GymloopError)
    assert issubclass(gl.SchemaError, TypeError)


# ---------------------------------------------------------------------- round trips (Hypothesis)

_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))
_member_names = st.lists(st.from_regex(r"[A-Z][A-Z0-9]{0,4}", fullmatch=True), min_size=1, max_size=4, unique=True)

# A type spec is ("int",), ("float",), ("bool",), ("enum", members), ("tuple", [specs]) or
# ("dc", [(field, spec), ...]).
_leaf = st.one_of(
    st.just(("int",)),
    st.just(("float",)),
    st.just(("bool",)),
    _member_names.map(lambda m: ("enum", tuple(m))),
)


def _fields(children):
    return st.lists(st.tuples(_names, children), min_size=1, max_size=4, unique_by=lambda f: f[0])


_spec = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda xs: ("tuple", tuple(xs))),
        _fields(children).map(lambda fs: ("dc", tuple(fs))),
    ),
    max_leaves=10,
)
_top = _fields(_spec)

_counter = iter(range(10**9))


def _build_type(spec):
    kind = spec[0]
    if kind == "int":
        return int
    if kind == "float":
        return float
    if kind == "bool":
        return bool
    if kind == "enum":
        return enum.Enum(f"E{next(_counter)}", list(spec[1]))
    if kind == "tuple":
        return tuple[tuple(_build_type(s) for s in spec[1])]
    return dataclasses.make_dataclass(f"D{next(_counter)}", [(n, _build_type(s)) for n, s in spec[1]])


def _values(tp):
    """A strategy of values of ``tp`` that float32 holds exactly."""
    if tp is int:
        return st.integers(-(2**24), 2**24)
    if tp is float:
        return st.floats(width=32, allow_nan=False, allow_infinity=False)
    if tp is bool:
        return st.booleans()
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if typing.get_origin(tp) is tuple:
        return st.tuples(*(_values(a) for a in typing.get_args(tp)))
    fields = dataclasses.fields(tp)
    return st.builds(tp, **{f.name: _values(f.type) for f in fields})


def _expected(tp, value, path):
    """(name, float) pairs of the features of ``value``, written independently of the library."""
    if tp in (int, float, bool):
        return [(path, float(value))]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [(f"{path}.is_{m.name}", 1.0 if m is value else 0.0) for m in tp]
    if typing.get_origin(tp) is tuple:
        out = []
        for i, (a, v) in enumerate(zip(typing.get_args(tp), value)):
            out += _expected(a, v, f"{path}.{i}")
        return out
    out = []
    for f in dataclasses.fields(tp):
        out += _expected(f.type, getattr(value, f.name), f"{path}.{f.name}")
    return out


@settings(max_examples=60)
@given(data=st.data(), fields=_top, n_objs=st.integers(1, 3))
def test_featurize_puts_every_value_in_its_named_column(data, fields, n_objs):
    cls = dataclasses.make_dataclass(f"Random{next(_counter)}", [(n, _build_type(s)) for n, s in fields])
    objs = [data.draw(_values(cls)) for _ in range(n_objs)]
    schema = gl.schema_of(cls)
    arr = schema.featurize(objs)
    assert arr.dtype == np.float32
    assert arr.shape == (n_objs, len(schema.features))
    for row, obj in zip(arr, objs):
        expected = []
        for f in dataclasses.fields(cls):
            expected += _expected(f.type, getattr(obj, f.name), f.name)
        assert schema.features == tuple(name for name, _ in expected)
        for name, value in expected:
            assert row[schema.features.index(name)] == value, name
