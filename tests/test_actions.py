"""Action types: categorical Enums, composite dataclasses of Enums, SelectEntity."""

import dataclasses
import enum
import itertools
import pickle
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.entities import Ally, Enemy

import gymloop as gl
from gymloop.actions import CATEGORICAL, SELECT_ENTITY


class Dir(enum.Enum):
    UP = 0
    DOWN = 1


class Thrust(enum.Enum):
    OFF = 0
    HALF = 1
    FULL = 2


class Move(enum.Enum):
    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3


class NoMembers(enum.Enum):
    pass


@dataclass(frozen=True)
class Steer:
    dir: Dir
    thrust: Thrust


# ---------------------------------------------------------------------- categorical


def test_enum_is_categorical_with_member_names_as_labels():
    s = gl.action_spec(Move)
    assert s.kind == CATEGORICAL
    assert s.name == "Move"
    assert s.labels == ("UP", "DOWN", "LEFT", "RIGHT")
    assert s.values == (Move.UP, Move.DOWN, Move.LEFT, Move.RIGHT)
    assert s.n == 4
    assert s.among == ()
    assert [s.index_of(m) for m in Move] == [0, 1, 2, 3]


def test_enum_aliases_are_not_extra_choices():
    class Aliased(enum.Enum):
        A = 0
        B = 1
        ALSO_A = 0

    s = gl.action_spec(Aliased)
    assert s.labels == ("A", "B")
    assert s.index_of(Aliased.ALSO_A) == 0


def test_action_spec_is_cached():
    assert gl.action_spec(Move) is gl.action_spec(Move)
    assert gl.action_spec(Steer) is gl.action_spec(Steer)


# ---------------------------------------------------------------------- composite


def test_composite_is_the_product_of_its_fields():
    s = gl.action_spec(Steer)
    assert s.kind == CATEGORICAL
    assert s.name == "Steer"
    assert s.labels == (
        "dir=UP,thrust=OFF",
        "dir=UP,thrust=HALF",
        "dir=UP,thrust=FULL",
        "dir=DOWN,thrust=OFF",
        "dir=DOWN,thrust=HALF",
        "dir=DOWN,thrust=FULL",
    )
    assert s.values[2] == Steer(Dir.UP, Thrust.FULL)
    assert all(type(v) is Steer for v in s.values)
    assert s.index_of(Steer(Dir.DOWN, Thrust.HALF)) == 4


def test_composite_index_of_accepts_an_equal_non_frozen_instance():
    @dataclass
    class Loose:
        dir: Dir
        thrust: Thrust

    s = gl.action_spec(Loose)
    assert s.index_of(Loose(Dir.DOWN, Thrust.OFF)) == 3
    assert s.values[3] == Loose(Dir.DOWN, Thrust.OFF)


@pytest.mark.parametrize(
    "value",
    [Dir.UP, "dir=UP,thrust=OFF", 0, None, Enemy(3)],
    ids=["other-enum", "label", "index", "none", "entity"],
)
def test_index_of_rejects_what_is_not_a_choice(value):
    with pytest.raises(gl.SchemaError, match=r"is not a choice of action type 'Steer'"):
        gl.action_spec(Steer).index_of(value)


def test_index_of_rejects_a_member_of_another_enum():
    with pytest.raises(gl.SchemaError, match=r"Dir.UP: 0>? is not a choice of action type 'Move'; choices are"):
        gl.action_spec(Move).index_of(Dir.UP)


_member_lists = st.lists(st.integers(1, 4), min_size=1, max_size=3)
_counter = iter(range(10**9))


@settings(max_examples=40)
@given(sizes=_member_lists, data=st.data())
def test_composite_labels_and_index_round_trip(sizes, data):
    enums = [enum.Enum(f"F{next(_counter)}", [f"M{j}" for j in range(n)]) for n in sizes]
    names = [f"f{i}" for i in range(len(sizes))]
    cls = dataclasses.make_dataclass(f"Combo{next(_counter)}", list(zip(names, enums)), frozen=True)
    s = gl.action_spec(cls)
    combos = list(itertools.product(*enums))
    assert s.n == len(combos)
    for i, combo in enumerate(combos):
        assert s.labels[i] == ",".join(f"{n}={m.name}" for n, m in zip(names, combo))
    members = [data.draw(st.sampled_from(list(e))) for e in enums]
    value = cls(*members)
    i = s.index_of(value)
    assert s.values[i] == value
    assert combos[i] == tuple(members)
    assert s.labels[i] == ",".join(f"{n}={m.name}" for n, m in zip(names, members))


@settings(max_examples=30)
@given(st.sampled_from(list(Dir)), st.sampled_from(list(Thrust)))
def test_steer_index_round_trip(d, t):
    s = gl.action_spec(Steer)
    i = s.index_of(Steer(d, t))
    assert s.values[i] == Steer(d, t)
    assert s.labels[i] == f"dir={d.name},thrust={t.name}"


# ---------------------------------------------------------------------- select-entity


def test_select_entity_spec():
    target = gl.SelectEntity("Target", among=Enemy)
    assert target.name == "Target"
    assert target.among == (Enemy,)
    s = gl.action_spec(target)
    assert s.kind == SELECT_ENTITY
    assert s.name == "Target"
    assert s.among == (Enemy,)
    assert s.labels == () and s.n == 0


def test_select_entity_equality_and_hash_are_by_value():
    a = gl.SelectEntity("Target", among=Enemy)
    b = gl.SelectEntity("Target", among=(Enemy,))
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a != gl.SelectEntity("Other", among=Enemy)
    assert a != gl.SelectEntity("Target", among=(Enemy, Ally))
    assert a != gl.SelectEntity("Target", among=(Ally,))
    assert gl.SelectEntity("T", among=(Enemy, Ally)) != gl.SelectEntity("T", among=(Ally, Enemy))
    assert a != "Target"
    assert gl.action_spec(b) is gl.action_spec(a)


def test_select_entity_pickles_to_an_equal_action_type():
    a = gl.SelectEntity("Target", among=(Enemy, Ally))
    b = pickle.loads(pickle.dumps(a))
    assert b is not a
    assert b == a and hash(b) == hash(a)
    assert b.among == (Enemy, Ally)
    assert gl.action_spec(b).among == (Enemy, Ally)


def test_select_entity_repr_names_it():
    assert repr(gl.SelectEntity("Target", among=(Enemy, Ally))) == "SelectEntity('Target', among=('Enemy', 'Ally'))"


@pytest.mark.parametrize(
    "name, among, match",
    [
        ("", Enemy, r"SelectEntity name must be a non-empty string"),
        (3, Enemy, r"SelectEntity name must be a non-empty string"),
        ("Target", (), r"SelectEntity 'Target': among= needs at least one entity class"),
        ("Target", int, r"int is not a dataclass"),
        ("Target", (Enemy, str), r"str is not a dataclass"),
    ],
)
def test_select_entity_rejects_bad_arguments(name, among, match):
    with pytest.raises(gl.SchemaError, match=match):
        gl.SelectEntity(name, among=among)


# ---------------------------------------------------------------------- bad action types


@dataclass
class HasInt:
    dir: Dir
    n: int


@dataclass
class HasEmptyEnum:
    dir: Dir
    nothing: NoMembers


@dataclass
class NoFields:
    pass


class PlainClass:
    pass


@pytest.mark.parametrize(
    "key, match",
    [
        (int, r"is not an action type; pass an Enum class"),
        ("Move", r"'Move' is not an action type"),
        (Move.UP, r"is not an action type"),
        (PlainClass, r"PlainClass'> is not an action type"),
        (Enemy(1), r"is not an action type"),
        ([Move], r"is not an action type"),
        (NoMembers, r"action type NoMembers is an Enum with no members"),
        (HasInt, r"composite action type HasInt\.n must be a non-empty Enum, got <class 'int'>"),
        (HasEmptyEnum, r"composite action type HasEmptyEnum\.nothing must be a non-empty Enum"),
        (NoFields, r"composite action type NoFields has no fields"),
    ],
)
def test_bad_action_types_are_schema_errors(key, match):
    with pytest.raises(gl.SchemaError, match=match):
        gl.action_spec(key)



def test_unresolvable_composite_field_annotation_is_a_schema_error():
    @dataclass
    class Forward:
        dir: "DoesNotExist"  # noqa: F821

    with pytest.raises(gl.SchemaError, match=r"Forward"):
        gl.action_spec(Forward)
