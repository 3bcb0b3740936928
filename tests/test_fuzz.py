"""Hypothesis fuzzers over the public API a game or a user touches: whatever goes in, either it works
or a :class:`gl.GymloopError` subclass comes out, never another exception type.

Covered: ``gl.Obs`` construction and every method with arbitrary values; ``gl.run`` and
``gl.VecEnv`` with games that emit such observations (the two must refuse the same ones);
``VecEnv.step`` with arbitrary action arguments; ``gl.entity`` / ``gl.schema_of`` with odd classes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
from dataclasses import dataclass

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.entities import Move, Pos, Unit

import gymloop as gl


@dataclass
class Enemy:
    hp: float


@dataclass
class Clock:
    t: float


@gl.global_decision
class Phase(enum.Enum):
    BUILD = 0
    FIGHT = 1


Target = gl.SelectEntity("Target", among=Enemy)


class Color(enum.Enum):
    RED = 0
    BLUE = 1


class Opaque:
    """Neither a dataclass nor declared: not an entity."""

    def __init__(self) -> None:
        self.x = 1.0


_NUMPY_DTYPES = [np.bool_, np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64, np.complex64,
                 np.dtype("U3"), np.dtype("S2"), np.dtype("M8[s]"), np.dtype("O")]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.integers(),
    st.sampled_from([10**30, -(10**39), 10**400, -(10**400), 2**63, 2**64 + 1]),
    st.floats(),  # NaN and infinities included
    st.sampled_from([1e39, -1e300, 3.4e38, 1e-320]),
    st.text(max_size=3),
    st.sampled_from(["3", "1.5", "nan", "inf", b"3"]),
    st.complex_numbers(max_magnitude=10),
    st.sampled_from([Color.RED, Move.LEFT, Move, Color, object(), Opaque(), Unit(0, 0), {}, set(), print]),
    st.sampled_from([np.float64("nan"), np.float32(2.5), np.int64(7), np.bool_(True), np.str_("3"), np.array(2.0)]),
)
_arrays = st.sampled_from(_NUMPY_DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
)
#: anything a game might hand over by mistake: numbers, strings, None, nested lists, odd numpy arrays
odd = st.recursive(st.one_of(_scalars, _arrays), lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=6)


_F32 = float(np.finfo(np.float32).max)
_F64 = float(np.finfo(np.float64).max)


def _is_number(v: typing.Any, limit: float = _F64) -> bool:
    """The oracle: a value a score or metric (float64) or a feature (``limit`` float32) may hold,
    judged apart from the library: a real number, finite, within the range of its dtype."""
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "biuf" and _is_number(v[()], limit)
    if isinstance(v, (bool, np.bool_)):
        return True
    if isinstance(v, (int, np.integer)):
        # an int is stored as the float nearest to it: one a little beyond the limit that rounds to it is in range
        try:
            return abs(float(int(v))) <= limit
        except OverflowError:
            return False
    if isinstance(v, (float, np.floating)):
        return math.isfinite(v) and abs(float(v)) <= limit
    return False


# ---------------------------------------------------------------------- gl.Obs


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_obs_methods_with_arbitrary_values_work_or_raise_gymloop_errors(data):
    v = data.draw(odd, label="value")
    w = data.draw(odd, label="second value")
    how = data.draw(st.sampled_from(
        ["score", "entities", "actor", "actor-mask", "actors", "actors-mask", "mask", "globals", "metric", "metric-name",
         "select-mask", "legal-index"]
    ))
    u = Unit(0, 0)
    try:
        if how == "score":
            obs = gl.Obs(score=v).actor(u)
        elif how == "entities":
            obs = gl.Obs().entities(v).actor(u)
        elif how == "actor":
            obs = gl.Obs().actor(v)
        elif how == "actor-mask":
            obs = gl.Obs().actor(u, masks={Move: v})
        elif how == "actors":
            obs = gl.Obs().actors(v)
        elif how == "actors-mask":
            obs = gl.Obs().actors([u, Unit(1, 1)], masks={Move: v})
        elif how == "mask":
            obs = gl.Obs().mask(Phase, v)
        elif how == "globals":
            obs = gl.Obs().globals(v).actor(u)
        elif how == "metric":
            obs = gl.Obs().metric("m", v).actor(u)
            assert _is_number(v), f"metric {v!r} accepted"
            assert obs.metrics["m"] == float(v)
        elif how == "metric-name":
            obs = gl.Obs().metric(v, 1.0).actor(u)
        elif how == "select-mask":
            obs = gl.Obs().entities([Enemy(1.0), Enemy(2.0)]).actor(u, masks={Target: v})
        else:
            obs = gl.Obs().actors([u, Unit(1, 1)])
        # reading it back
        assert len(obs.entity_list()) >= len(obs.actor_list)
        assert isinstance(obs.metrics, dict)
        if how == "mask":
            obs.legal(None, Phase)
        elif how == "select-mask":
            obs.legal(u, Target)
        elif how == "legal-index":
            obs.legal(w, Move)
        elif obs.actor_list:
            obs.legal(0, Move)
    except gl.GymloopError:
        pass


# ---------------------------------------------------------------------- games emitting odd observations

_PLACES = ["feature", "score", "metric", "globals", "mask", "entities", "actor", "final-score", "final-feature"]


def _odd_game(place: str, v: typing.Any, at: int):
    """A game whose observation number ``at`` carries ``v`` at ``place`` (the others are fine)."""

    @gl.game(entities=[Pos, Enemy], globals=Clock)
    def game(agent, seed):
        t = 0
        while True:
            bad = t == at
            obs = gl.Obs(score=v if bad and place == "score" else t)
            obs.entities(Pos(v if bad and place == "feature" else 1.0, 2.0))
            obs.entities(v if bad and place == "entities" else Enemy(3.0))
            obs.globals(v if bad and place == "globals" else Clock(float(t)))
            if bad and place == "metric":
                obs.metric("m", v)
            actor = v if bad and place == "actor" else Unit(t, 0)
            obs.actor(actor, masks={Move: v} if bad and place == "mask" else None)
            agent.act(obs, Move)
            t += 1
            if t % 3 == 0 or (bad and place.startswith("final")):
                end = gl.Obs(score=v if bad and place == "final-score" else 0.0)
                if bad and place == "final-feature":
                    end.entities(Pos(v, 0.0))
                agent.game_over(end, truncated=True)

    return game


def _outcome(fn) -> str:
    """``"ok"`` or the name of the GymloopError raised. A check at the call (``Obs.metric``, ...)
    raises inside the game, which a VecEnv reports as a GameError (env index, seed) caused by it."""
    try:
        fn()
    except gl.GameError as e:
        return type(e.__cause__).__name__ if isinstance(e.__cause__, gl.GymloopError) else "GameError"
    except gl.GymloopError as e:
        return type(e).__name__
    return "ok"


def _vec(game) -> None:
    with gl.VecEnv(game, num_envs=2, seed=0) as env:
        env.reset()
        for _ in range(4):
            env.step(env.sample_actions())


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@example(place="score", v=3.4028235677973366e38, at=0)  # a finite score whose reward overflows float32
@given(place=st.sampled_from(_PLACES), v=odd, at=st.integers(0, 2))
@example(place="score", v=2**127, at=0)  # two such rewards overflowed a float32 sum (a warning, an error here)
def test_run_and_vecenv_refuse_the_same_odd_observations_with_gymloop_errors(place, v, at):
    game = _odd_game(place, v, at)
    by_run = _outcome(lambda: gl.run(game, gl.RandomAgent(0), max_steps=5))
    by_vec = _outcome(lambda: _vec(game))
    event(f"{place}: {by_run}")
    if place in ("feature", "score", "metric", "final-score", "final-feature"):
        # features and scores (whose changes are float32 rewards) within float32's range, metrics float64's
        want = "ok" if _is_number(v, _F64 if place == "metric" else _F32) else "InvalidObservationError"
        assert by_run == want, f"gl.run: {place}={v!r}"
        assert by_vec == want, f"VecEnv: {place}={v!r}"
    else:
        # refused by both, or by neither (an odd but valid mask, an iterable of Enemies, ...)
        assert (by_run == "ok") == (by_vec == "ok"), f"{place}={v!r}: gl.run {by_run}, VecEnv {by_vec}"


class _Scripted:
    """A scripted agent (not RandomAgent): answers LEFT whatever it is shown."""

    def act(self, obs, *action_types):
        return Move.LEFT

    def game_over(self, obs, truncated=False):
        pass


@settings(max_examples=40)
@given(place=st.sampled_from(["feature", "score", "metric"]), v=odd)
@example(place="feature", v=2**128 - 2**104 + 1)  # just beyond float32's largest value, it rounds to it: in range
@example(place="score", v=3.402823466385289e38)  # the float after float32's largest value: out of range
def test_run_with_a_scripted_agent_validates_too(place, v):
    out = _outcome(lambda: gl.run(_odd_game(place, v, 0), _Scripted(), max_steps=3, check=False))
    # as for the other drivers: features and scores (whose changes are float32 rewards) in float32's range, metrics float64's
    assert out == ("ok" if _is_number(v, _F64 if place == "metric" else _F32) else "InvalidObservationError"), f"{place}={v!r}"


# ---------------------------------------------------------------------- VecEnv.step arguments


def _hashable(k: typing.Any) -> bool:
    try:
        hash(k)
    except TypeError:
        return False
    return True


@pytest.fixture(scope="module")
def snake_env():
    from gymloop.games.snake import snake

    env = gl.VecEnv(snake, num_envs=3, seed=0)
    env.reset()
    yield env
    env.close()


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_vecenv_step_with_arbitrary_arguments_works_or_raises_gymloop_errors(snake_env, data):
    how = data.draw(st.sampled_from(["whole", "value", "extra"]))
    if how == "whole":
        actions = data.draw(odd)
    elif how == "value":
        actions = {"Move": data.draw(odd)}
    else:
        actions = {"Move": np.zeros(3, dtype=np.int64), data.draw(odd.filter(_hashable)): 1}
    try:
        snake_env.step(actions)
    except gl.GymloopError:
        pass


# ---------------------------------------------------------------------- schemas


_FIELD_TYPES = [int, float, bool, str, bytes, list, dict, typing.Any, type(None), complex, Color, Pos,
                tuple[int, int], tuple[int, ...], tuple, list[int], int | None, int | str, np.float32,
                np.int64, "Undefined", typing.ClassVar[int], object]


@settings(max_examples=150)
@given(
    fields=st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), st.sampled_from(_FIELD_TYPES)), max_size=4, unique_by=lambda f: f[0]),
    declare=st.one_of(st.none(), st.fixed_dictionaries({
        "name": st.one_of(st.none(), st.text(max_size=4), st.integers()),
        "features": st.one_of(st.none(), st.text(max_size=3), st.lists(st.one_of(st.text(max_size=3), st.integers(), st.none()), max_size=3),
                              st.dictionaries(st.text(max_size=3), st.sampled_from(_FIELD_TYPES), max_size=2)),
    })),
    as_dataclass=st.booleans(),
)
def test_entity_and_schema_of_odd_classes_work_or_raise_schema_errors(fields, declare, as_dataclass):
    try:
        if as_dataclass:
            cls = dataclasses.make_dataclass("Odd", fields)
        else:
            cls = type("Odd", (), {"__annotations__": dict(fields)})
    except (TypeError, ValueError, NameError):
        return  # Python itself refuses the class: nothing for gymloop to judge
    try:
        if declare is not None:
            gl.entity(cls, **declare)
        sc = gl.schema_of(cls)
    except gl.GymloopError as e:
        assert isinstance(e, gl.SchemaError)
        return
    assert isinstance(sc.features, tuple)


@pytest.mark.parametrize("obj", [None, 3, "Pos", Pos(1.0, 2.0), [Pos], Move.LEFT, np.float64])
def test_schema_of_and_entity_refuse_non_classes_with_schema_errors(obj):
    with pytest.raises(gl.SchemaError):
        gl.schema_of(obj)
    if obj is not None and not isinstance(obj, type):  # (gl.entity() with no class is the decorator form)
        with pytest.raises(gl.SchemaError):
            gl.entity(obj)
