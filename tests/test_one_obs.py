"""The single-observation builder (:mod:`gymloop.featurize`) against the batch builder.

A trace's decision and ``gl.run``'s checks go through :class:`~gymloop.featurize.OneSlotFeaturizer`,
a VecEnv's batch through :class:`~gymloop.runtime.builder.BatchBuilder`: for any observation the two
give the same one-slot batch (bit for bit), or both refuse it with the same kind of error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.entities import Ally, Enemy, Move, Pos, Unit

import gymloop as gl
from gymloop.errors import InvalidObservationError, SchemaError
from gymloop.featurize import ObsValidator, OneSlotFeaturizer, checked_features
from gymloop.runtime.builder import BatchBuilder
from gymloop.schema import schema_of


@dataclass
class Clock:
    t: float
    day: int


class Fire(Enum):
    NO = 0
    YES = 1


@dataclass
class Order:
    """A composite action: every (Move, Fire) pair."""

    move: Move
    fire: Fire


@gl.global_decision
class Phase(Enum):
    BUILD = 0
    FIGHT = 1
    REST = 2


Target = gl.SelectEntity("Target", among=Enemy)
Pick = gl.SelectEntity("Pick", among=(Ally, Enemy))  # candidate order is not the type order
Heal = gl.global_decision(gl.SelectEntity("Heal", among=(Ally, Enemy)))  # a global select-entity: no actor entity

BAD_VALUES = [float("nan"), float("inf"), "3", None, 1e300, 10**400]
ACTION_TYPES = [Move, Order, Target, Pick, Phase, Heal]
GLOBAL_TYPES = (Phase, Heal)


def _n_choices(key, obs: gl.Obs) -> int:
    spec = gl.actions.action_spec(key)
    return len(obs.entities_of(spec.among)) if spec.kind.selects_entities else spec.n


@st.composite
def observations(draw):
    """``(obs, action types)``: actors of one or two types (or none), chunks (some mixing types),
    globals or none, masks of every kind (some partial), now and then a bad value or a bad mask."""
    num = st.integers(-5, 5)
    flt = st.floats(-1e3, 1e3, allow_nan=False)
    make = {
        Unit: lambda: Unit(draw(num), draw(num)),
        Pos: lambda: Pos(draw(flt), draw(flt)),
        Enemy: lambda: Enemy(draw(num)),
        Ally: lambda: Ally(draw(num)),
    }
    bad = draw(st.sampled_from([None, "feature", "globals", "mask-none-legal", "mask-unknown-key"] + [None] * 6))
    bad_value = draw(st.sampled_from(BAD_VALUES))
    classes = draw(st.lists(st.sampled_from([Unit, Pos]), min_size=0, max_size=3))
    actors = [make[c]() for c in classes]
    chunks = []
    for _ in range(draw(st.integers(0, 3))):
        cs = draw(st.lists(st.sampled_from([Unit, Pos, Enemy, Ally]), min_size=1, max_size=4))
        chunks.append([make[c]() for c in cs])
    if bad == "feature":
        victim = Pos(bad_value, 0.0)
        if draw(st.booleans()) and actors:
            actors[0] = victim
        else:
            chunks.append([victim])
    asked = draw(st.lists(st.sampled_from(ACTION_TYPES), min_size=1, max_size=3, unique=True))
    if not actors:  # (a no-actor observation asking actor-bound types: refused by both)
        asked = draw(st.sampled_from([[Phase], [Heal], [Heal, Phase]])) if draw(st.booleans()) else asked
    single = len(actors) == 1 and draw(st.booleans())
    obs = gl.Obs(score=draw(st.integers(-3, 3)))
    for ch in chunks:
        obs.entities(ch)
    if draw(st.booleans()):
        obs.globals(Clock(bad_value if bad == "globals" else draw(flt), draw(num)))
    # masks: built once the entities are known (select-entity masks have one entry per candidate)
    masks = {}
    probe = gl.Obs()
    for ch in chunks:
        probe.entities(ch)
    probe.actors(actors)
    for key in asked:
        if key in GLOBAL_TYPES or not actors or not draw(st.booleans()):
            continue
        n = _n_choices(key, probe)
        per_actor = []
        for _ in actors:
            if draw(st.booleans()):
                per_actor.append(None)  # a partial mask: this actor has none
            else:
                m = draw(st.lists(st.booleans(), min_size=n, max_size=n))
                if m and not any(m):
                    m[draw(st.integers(0, n - 1))] = True
                if bad == "mask-none-legal":
                    m = [False] * n
                per_actor.append(m)
        masks[key] = per_actor
    if bad == "mask-unknown-key" and actors:
        masks[next(k for k in ACTION_TYPES if k not in asked and k not in GLOBAL_TYPES)] = [None] * len(actors)
    if single:
        obs.actor(actors[0], masks={k: v[0] for k, v in masks.items()})
    elif actors:
        obs.actors(actors, masks=masks)
    if Phase in asked and draw(st.booleans()):
        m = draw(st.lists(st.booleans(), min_size=3, max_size=3))
        obs.mask(Phase, m if any(m) or bad == "mask-none-legal" else [True, False, True])
    if Heal in asked and draw(st.booleans()):
        n = _n_choices(Heal, probe)
        m = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        if n and not any(m) and bad != "mask-none-legal":
            m[draw(st.integers(0, n - 1))] = True
        obs.mask(Heal, m)
    return obs, tuple(asked)


def _outcome(fn):
    try:
        return fn()
    except (InvalidObservationError, SchemaError) as e:
        return type(e)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(observations())
def test_one_slot_batches_equal_the_batch_builders(case):
    obs, asked = case
    f = OneSlotFeaturizer(None)
    got = _outcome(lambda: f.batch(obs, asked)[0])
    assert f.space is not None  # (the spaces were laid out before any value was checked)
    want = _outcome(lambda: BatchBuilder(f.space, 1).build([obs], [asked]))
    event(want.__name__ if isinstance(want, type) else f"built, {len(obs.actor_list)} actor(s)")
    if isinstance(want, gl.Batch):
        assert isinstance(got, gl.Batch), got
        assert got.equal(want)
        assert got.layout_problem(f.space) is None
        assert ObsValidator().check(obs, asked) is None  # (the validator accepts it too)
    else:
        assert got is want
        with pytest.raises(want):
            ObsValidator().check(obs, asked)


@pytest.mark.parametrize("value", BAD_VALUES + [b"3", 1j, np.datetime64("2020-01-01")])
def test_checked_features_refuses_what_is_not_a_finite_float32_number(value):
    sc = schema_of(Pos)
    with pytest.raises(InvalidObservationError, match=r"entity type 'Pos'") as info:
        checked_features(sc, [Pos(1.0, 2.0), Pos(value, 0.0)], lambda i: f"place {i}")
    assert "feature 'x'" in str(info.value) and "in place 1" in str(info.value)


@pytest.mark.parametrize("value", [10**30, 3.4e38, np.float16(2), np.int64(-3), True, np.array(1.5)])
def test_checked_features_keeps_numbers_that_fit(value):
    got = checked_features(schema_of(Pos), [Pos(value, 2.0)], lambda i: "here")
    assert got.dtype == np.float32 and got.tolist() == [[np.float32(float(value)), 2.0]]
    assert math.isfinite(got[0, 0])
