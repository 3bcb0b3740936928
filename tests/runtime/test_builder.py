"""The batch builder on its own: hand-made observations → batches, without greenlets or a VecEnv."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest
from support.entities import Fire, Unit

import gymloop as gl
from gymloop.batch import Batch
from gymloop.runtime.builder import BatchBuilder
from gymloop.runtime.episodes import EpisodeState
from gymloop.spaces import Spaces


@dataclass
class Enemy:
    hp: float


@dataclass
class Glob:
    time: int


class Move(Enum):
    UP = 0
    DOWN = 1
    LEFT = 2


Target = gl.SelectEntity("Target", among=Enemy)


@gl.global_decision
class Plan(Enum):
    ATTACK = 0
    DEFEND = 1


def spaces(glob: type | None = None, actions: tuple = (Move,)) -> Spaces:
    return Spaces.build([Unit, Enemy], glob, list(actions))


# ---------------------------------------------------------------------- building
def test_one_actor_per_slot():
    bb = BatchBuilder(spaces(), num_slots=3)
    pobs = [gl.Obs(score=1).entities([Enemy(1.5)]).actor(Unit(0, 1)), None, gl.Obs(score=2).actor(Unit(3, 4))]
    b = bb.build(pobs, [(Move,), None, (Move,)])
    assert b.num_slots == 3
    assert b.entities["Unit"].tolist() == [[0, 1], [3, 4]]
    assert b.counts["Unit"].tolist() == [1, 0, 1]
    assert b.entities["Enemy"].tolist() == [[1.5]]
    assert b.counts["Enemy"].tolist() == [1, 0, 0]
    assert b.active.tolist() == [True, False, True]
    assert b.actor_slot["Move"].tolist() == [0, 2]
    assert b.actor_index["Move"].tolist() == [1, 0]  # entity index in the slot: Enemy comes before Unit
    assert b.masks["Move"].shape == (2, 3) and b.masks["Move"].all()
    # without episode state: no rewards, no ends, no metrics
    assert b.reward.tolist() == [0, 0, 0] and not b.terminated.any() and not b.truncated.any() and b.metrics == {}
    assert b.final is None
    assert bb.plan.simple and bb.plan.a_slot == [[0, 2]]
    assert bb.decode([np.array([2, 1])]) == [[Move.LEFT, Move.DOWN]]


def test_slot_numbering_is_global():
    bb = BatchBuilder(spaces(), num_slots=2, slot_lo=6, env_lo=3, agents_per_game=2)
    b = bb.build([gl.Obs().actor(Unit(0, 0)), gl.Obs().actor(Unit(1, 1))], [(Move,), (Move,)])
    assert b.actor_slot["Move"].tolist() == [6, 7]


def test_several_actors_types_masks_and_globals():
    sp = spaces(Glob, (Move, Fire, Target, Plan))
    bb = BatchBuilder(sp, num_slots=2)
    e1, e2, e3 = Enemy(1), Enemy(2), Enemy(3)
    o0 = (
        gl.Obs(score=0).globals(Glob(7)).entities([e1, e2])
        .actors([Unit(0, 0), Unit(1, 1)], masks={Move: [[True, False, True], None], Target: [None, [e2]]})
        .mask(Plan, [Plan.DEFEND])
    )
    o1 = gl.Obs(score=0).globals(Glob(8)).entities([e3]).actor(Unit(5, 5))
    b = bb.build([o0, o1], [(Move, Target, Plan), (Fire, Target)])
    assert not bb.plan.simple
    assert b.globals.tolist() == [[7], [8]]
    assert b.actor_slot["Move"].tolist() == [0, 0] and b.actor_index["Move"].tolist() == [2, 3]
    assert b.masks["Move"].tolist() == [[True, False, True], [True, True, True]]
    assert b.actor_slot["Fire"].tolist() == [1] and b.actor_index["Fire"].tolist() == [1]
    assert b.num_candidates["Target"].tolist() == [2, 2, 1]
    assert b.masks["Target"].tolist() == [True, True, False, True, True]
    assert b.candidate_types["Target"] == ("Enemy",)
    assert b.actor_slot["Plan"].tolist() == [0] and b.actor_index["Plan"].tolist() == [-1]
    assert b.masks["Plan"].tolist() == [[False, True]]
    # decoding, in space order (Fire, Move, Plan, Target)
    got = bb.decode([np.array([1]), np.array([0, 2]), np.array([1]), np.array([1, 0, 0])])
    assert got[0] == [Fire.YES] and got[1] == [Move.UP, Move.LEFT] and got[2] == [Plan.DEFEND]
    assert got[3][0] is e2 and got[3][1] is e1 and got[3][2] is e3


def test_mixed_entity_chunks_are_regrouped():
    bb = BatchBuilder(spaces(), num_slots=1)
    obs = gl.Obs().entities([Enemy(1), Unit(9, 9), Enemy(2)]).actor(Unit(0, 0))
    b = bb.build([obs], [(Move,)])
    assert b.entities["Enemy"].tolist() == [[1], [2]]
    assert b.entities["Unit"].tolist() == [[0, 0], [9, 9]]  # the actor first within its type


def test_the_same_batch_as_the_executor():
    """Rebuilding an executor's pending decisions gives its batch (rewards aside)."""
    from gymloop.games.snake import snake
    from gymloop.runtime.executor import Executor

    ex = Executor(snake, env_lo=0, num_games=4, agents_per_game=1, seed=3)
    try:
        b = ex.reset()
        rng = np.random.default_rng(0)
        for _ in range(3):
            b = ex.step([rng.integers(0, 4, 4)])
        again = BatchBuilder(ex.spaces, 4).build(list(ex.pobs), list(ex.ptypes))
    finally:
        ex.close_games()
    for f in ("entities", "counts", "actor_slot", "actor_index", "masks", "num_candidates"):
        x, y = getattr(b, f), getattr(again, f)
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x), f
    assert np.array_equal(b.globals, again.globals) and np.array_equal(b.active, again.active)


# ---------------------------------------------------------------------- episode state
def test_rewards_ends_returns_and_metrics():
    bb = BatchBuilder(spaces(), num_slots=2)
    ep = EpisodeState(2)
    types = [(Move,), (Move,)]
    b = bb.build([gl.Obs(score=1).actor(Unit(0, 0)), gl.Obs(score=5).actor(Unit(0, 0))], types, ep)
    assert b.reward.tolist() == [0, 0]  # no previous score yet
    b = bb.build([gl.Obs(score=3).actor(Unit(0, 0)), gl.Obs(score=4).metric("m", 1.5).actor(Unit(0, 0))], types, ep)
    assert b.reward.tolist() == [2, -1] and b.reward.dtype == np.float32
    assert math.isnan(b.metrics["m"][0]) and b.metrics["m"][1] == 1.5
    ep.game_over(0, gl.Obs(score=10).metric("len", 4), truncated=False)
    ep.game_over(1, gl.Obs(score=4).entities([Enemy(2)]), truncated=True)
    b = bb.build([gl.Obs(score=0).actor(Unit(0, 0)), gl.Obs(score=1).actor(Unit(0, 0))], types, ep)
    assert b.reward.tolist() == [7, 0]
    assert b.terminated.tolist() == [True, False] and b.truncated.tolist() == [False, True]
    assert b.metrics["episode_return"].tolist() == [9, -1]
    assert b.metrics["episode_length"].tolist() == [2, 2]
    assert b.metrics["len"][0] == 4 and math.isnan(b.metrics["len"][1])
    f = b.final
    assert f is not None and f.active.tolist() == [False, True]
    assert f.entities["Enemy"].tolist() == [[2]] and f.counts["Enemy"].tolist() == [0, 1]
    assert all(v.size == 0 for v in f.actor_slot.values())
    b = bb.build([gl.Obs(score=0).actor(Unit(0, 0)), gl.Obs(score=1).actor(Unit(0, 0))], types, ep)
    assert b.final is None and not b.done.any() and b.metrics == {} and b.reward.tolist() == [0, 0]


def test_a_returned_game_closes_its_open_episode_as_truncated():
    bb = BatchBuilder(spaces(), num_slots=1)
    ep = EpisodeState(1)
    bb.build([gl.Obs(score=1).actor(Unit(0, 0))], [(Move,)], ep)
    ep.game_returned(0)
    ep.game_returned(0)  # no open episode any more: nothing
    b = bb.build([gl.Obs(score=1).actor(Unit(0, 0))], [(Move,)], ep)
    assert b.truncated.tolist() == [True] and b.metrics["episode_length"].tolist() == [1] and b.final is None


# ---------------------------------------------------------------------- empty batches
def test_empty_batch_follows_the_kinds():
    sp = spaces(Glob, (Move, Target, Plan))
    b = Batch.empty(sp, 3)
    assert b.num_slots == 3 and not b.active.any() and b.globals.shape == (3, 1)
    assert b.entities["Unit"].shape == (0, 2) and b.counts["Enemy"].tolist() == [0, 0, 0]
    assert b.masks["Move"].shape == (0, 3) and b.masks["Plan"].shape == (0, 2) and b.masks["Target"].shape == (0,)
    assert set(b.num_candidates) == {"Target"} and b.candidate_types == {"Target": ("Enemy",)}
    full = BatchBuilder(sp, 3).build([gl.Obs().globals(Glob(1)).entities(Enemy(1)).actor(Unit(0, 0))] * 3, [(Move, Target, Plan)] * 3)
    nf = full.no_final()
    for f in ("entities", "counts", "actor_slot", "actor_index", "masks", "num_candidates"):
        x, y = getattr(b, f), getattr(nf, f)
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) and x[k].shape == y[k].shape for k in x), f
    assert nf.candidate_types == b.candidate_types and nf.globals.shape == b.globals.shape


# ---------------------------------------------------------------------- errors
def _bad_cases():
    nan_unit = Unit(0, 0)
    nan_unit.y = float("nan")
    return {
        "nan-feature": ([gl.Obs().actor(nan_unit)], (Move,), None, r"entity type 'Unit', feature 'y' is nan in env 0 \(slot 0\)"),
        "bad-feature": ([gl.Obs().actor(Unit(0, "far"))], (Move,), None, r"entity type 'Unit': cannot featurize Unit\(x=0, y='far'\) in env 0"),
        "score-type": ([gl.Obs(score="high").actor(Unit(0, 0))], (Move,), None, r"slot 0: the observation's score must be a number, got 'high'"),
        "score-inf": ([gl.Obs(score=math.inf).actor(Unit(0, 0))], (Move,), None, r"slot 0: the score is not finite \(inf\)"),
        "no-legal": ([gl.Obs().actor(Unit(0, 0), masks={Move: [False] * 3})], (Move,), None,
                     r"action type 'Move': an actor of slot 0 \(env 0\) has a mask that leaves no legal choice"),
        "no-candidate": ([gl.Obs().actor(Unit(0, 0))], (Target,), None, r"select-entity action 'Target': the actor of slot 0 has no candidate"),
        "mask-size": ([gl.Obs().actor(Unit(0, 0), masks={Move: [True]})], (Move,), None,
                      r"slot 0, actor 0: mask for action type 'Move' has 1 entries, expected 3"),
        "mask-unasked": ([gl.Obs().actor(Unit(0, 0), masks={Fire: [Fire.NO]})], (Move,), None,
                         r"slot 0: the observation has masks for .*Fire.*, which act\(\) was not asked for"),
        "no-actor": ([gl.Obs().entities(Unit(0, 0))], (Move,), None,
                     r"slot 0: the observation has no actor, but action type\(s\) \[.Move.\] take one choice per actor"),
        "no-globals": ([gl.Obs().actor(Unit(0, 0))], (Move,), Glob,
                       r"slot 0: the observation space has globals of type 'Glob' but the observation gave None"),
    }


@pytest.mark.parametrize("case", list(_bad_cases()))
def test_bad_observations_give_the_executors_errors(case):
    """Each bad observation: the builder's message, and exactly the one a VecEnv raises for it."""
    pobs, types, glob, match = _bad_cases()[case]
    sp = spaces(glob, (Move, Fire, Target))
    with pytest.raises(gl.InvalidObservationError, match=match) as direct:
        BatchBuilder(sp, 1).build(pobs, [types], EpisodeState(1))

    @gl.game(entities=[Unit, Enemy], actions=[Move, Fire, Target], globals=glob)
    def game(agent, seed):
        while True:
            agent.act(_bad_cases()[case][0][0], *types)

    with gl.VecEnv(game, num_envs=1) as env, pytest.raises(gl.InvalidObservationError) as via_env:
        env.reset()
    assert str(via_env.value) == str(direct.value)


def test_errors_name_the_global_slot_and_env():
    bb = BatchBuilder(spaces(), num_slots=4, slot_lo=8, env_lo=4, agents_per_game=2)
    ok = gl.Obs().actor(Unit(0, 0))
    bad = gl.Obs().actor(Unit(0, 0), masks={Move: [False] * 3})
    with pytest.raises(gl.InvalidObservationError, match=r"an actor of slot 11 \(env 5\) has a mask that leaves no legal choice"):
        bb.build([ok, ok, ok, bad], [(Move,)] * 4)
    nan = Unit(0, 0)
    nan.x = math.inf
    with pytest.raises(gl.InvalidObservationError, match=r"feature 'x' is inf in env 5 \(slot 10\)"):
        bb.build([ok, ok, gl.Obs().actor(nan), ok], [(Move,)] * 4)
    with pytest.raises(gl.InvalidObservationError, match=r"slot 9: the observation's score must be a number"):
        bb.build([ok, gl.Obs(score=None).actor(Unit(0, 0)), ok, ok], [(Move,)] * 4, EpisodeState(4, 8))


def test_unknown_types_after_the_spaces_are_fixed():
    @dataclass
    class Bullet:
        x: float

    bb = BatchBuilder(spaces(), num_slots=1)
    with pytest.raises(gl.InvalidObservationError, match=r"entity type .*Bullet.* appeared after the observation space was fixed \(known entity types: \['Enemy', 'Unit'\]\)"):
        bb.build([gl.Obs().entities(Bullet(1)).actor(Unit(0, 0))], [(Move,)])
    with pytest.raises(gl.InvalidObservationError, match=r"action type 'Fire' appeared after the action space was fixed \(known action types: \['Move'\]\)"):
        bb.build([gl.Obs().actor(Unit(0, 0))], [(Fire,)])
