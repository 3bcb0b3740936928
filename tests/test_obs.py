"""The Obs builder, masks, RandomAgent, gl.run and gl.act_all (everything outside a VecEnv)."""

import collections
import re
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest
from support.entities import Ally, Enemy, Fire, Move, Target, Unit
from support.generic_game import events, make_game

import gymloop as gl


@dataclass
class Food:
    x: int
    y: int


@dataclass
class Clock:
    t: int


class Dir(Enum):
    UP = 0
    DOWN = 1
    LEFT = 2


@dataclass(frozen=True)
class Steer:
    dir: Dir
    fire: Fire


AnyOne = gl.SelectEntity("AnyOne", among=(Enemy, Ally))


class Goblin:
    def __init__(self, x):
        self.x = x


gl.entity(Goblin, features=["x"])


# ---------------------------------------------------------------------- building


def test_every_builder_method_chains():
    obs = gl.Obs(score=2.5)
    u = Unit(0, 0)
    assert obs.entities([Food(1, 1)]) is obs
    assert obs.globals(Clock(3)) is obs
    assert obs.metric("coins", 4.0) is obs
    assert obs.actor(u) is obs
    assert obs.score == 2.5
    assert obs.global_features == Clock(3)
    assert obs.metrics == {"coins": 4.0}
    assert obs.actor_list == [u]
    assert obs.is_single_actor


def test_metrics_returns_a_copy():
    obs = gl.Obs().metric("a", 1.0)
    obs.metrics["b"] = 2.0
    assert obs.metrics == {"a": 1.0}


def test_default_observation_is_empty():
    obs = gl.Obs()
    assert obs.score == 0.0
    assert obs.entity_list() == []
    assert obs.actor_list == []
    assert obs.metrics == {}
    assert obs.global_features is None
    assert not obs.is_single_actor


def test_entities_accepts_single_objects_lists_tuples_generators_and_mixed_types():
    f1, f2, f3 = Food(1, 1), Food(2, 2), Food(3, 3)
    e1, e2 = Enemy(5), Enemy(6)
    g = Goblin(7)
    u = Unit(0, 0)
    obs = (
        gl.Obs()
        .entities(f1)
        .entities([f2, e1])
        .entities(f for f in [f3])
        .entities((e2,))
        .entities(g)
        .entities([])
        .entities(iter(()))
        .actor(u)
    )
    assert obs.entity_list() == [u, f1, f2, e1, f3, e2, g]
    assert all(a is b for a, b in zip(obs.entity_list(), [u, f1, f2, e1, f3, e2, g]))
    assert obs.entities_of(Food) == [f1, f2, f3]
    assert obs.entities_of(Enemy) == [e1, e2]
    assert obs.entities_of(Goblin) == [g]
    assert obs.entities_of((Enemy, Food)) == [e1, e2, f1, f2, f3]
    assert obs.entities_of(Unit) == [u]
    assert "entities=7" in repr(obs) and "actors=1" in repr(obs)


def test_entities_of_lists_actors_first_then_entities_in_observation_order():
    a1, a2 = Unit(1, 0), Unit(2, 0)
    o1, o2 = Unit(3, 0), Unit(4, 0)
    obs = gl.Obs().entities([o1]).actors([a1, a2]).entities(o2)
    assert obs.entities_of(Unit) == [a1, a2, o1, o2]


@pytest.mark.parametrize("bad", [3, 2.5, None, object()], ids=["int", "float", "none", "object"])
def test_entities_rejects_what_is_neither_an_entity_nor_iterable(bad):
    with pytest.raises(gl.InvalidObservationError, match=r"Obs.entities expects an entity object or an iterable"):
        gl.Obs().entities(bad)


def test_actor_returns_values_actors_returns_lists():
    u1, u2 = Unit(1, 1), Unit(2, 2)
    single = gl.Obs().actor(u1)
    many = gl.Obs().actors(iter([u1, u2]))
    assert single.is_single_actor and single.actor_list == [u1]
    assert not many.is_single_actor and many.actor_list == [u1, u2]
    agent = gl.RandomAgent(seed=0)
    assert isinstance(agent.act(single, Move), Move)
    res = agent.act(many, Move)
    assert isinstance(res, list) and len(res) == 2 and all(isinstance(m, Move) for m in res)
    move, fire = agent.act(single, Move, Fire)
    assert isinstance(move, Move) and isinstance(fire, Fire)
    moves, fires = agent.act(many, Move, Fire)
    assert len(moves) == len(fires) == 2


@pytest.mark.parametrize("second", ["actor", "actors"])
def test_actors_can_only_be_given_once(second):
    obs = gl.Obs().actor(Unit(0, 0))
    with pytest.raises(gl.InvalidObservationError, match=r"Obs.actor/actors called twice"):
        getattr(obs, second)(Unit(1, 1) if second == "actor" else [Unit(1, 1)])


# ---------------------------------------------------------------------- masks


def test_categorical_mask_as_booleans_or_allowed_members():
    u = Unit(0, 0)
    for mask in ([True, False, True], (True, False, True), np.array([1, 0, 1], dtype=bool), {Move.LEFT, Move.STAY}, [Move.STAY, Move.LEFT]):
        obs = gl.Obs().actor(u, masks={Move: mask})
        assert obs.mask_of(u, Move).tolist() == [True, False, True]
        assert obs.mask_of(0, Move).dtype == bool
        assert obs.legal(u, Move) == [Move.LEFT, Move.STAY]


def test_unmasked_action_types_allow_everything():
    u = Unit(0, 0)
    obs = gl.Obs().actor(u, masks={Fire: [Fire.NO]})
    assert obs.legal(u, Move) == list(Move)
    assert obs.legal(u, Fire) == [Fire.NO]
    assert gl.Obs().actor(u).mask_of(u, Move).tolist() == [True, True, True]


def test_composite_mask_as_instances_or_booleans():
    u = Unit(0, 0)
    allowed = [Steer(Dir.DOWN, Fire.YES), Steer(Dir.UP, Fire.NO)]
    obs = gl.Obs().actor(u, masks={Steer: allowed})
    assert obs.mask_of(u, Steer).tolist() == [True, False, False, True, False, False]
    assert obs.legal(u, Steer) == [Steer(Dir.UP, Fire.NO), Steer(Dir.DOWN, Fire.YES)]
    bools = [False] * 6
    bools[5] = True
    assert gl.Obs().actor(u, masks={Steer: bools}).legal(u, Steer) == [Steer(Dir.LEFT, Fire.YES)]


def test_select_entity_candidates_and_masks():
    u = Unit(0, 0)
    e1, e2, e3 = Enemy(1), Enemy(2), Enemy(3)
    a1 = Ally(9)
    base = gl.Obs().entities([e1, a1, e2]).entities(e3)
    assert base.actor(u).legal(u, Target) == [e1, e2, e3]
    # among several types: type order as given in `among`, then observation order
    assert gl.Obs().entities([e1, a1, e2]).actor(u).legal(u, AnyOne) == [e1, e2, a1]
    by_objects = gl.Obs().entities([e1, e2, e3]).actor(u, masks={Target: [e3, e1]})
    assert by_objects.mask_of(u, Target).tolist() == [True, False, True]
    assert by_objects.legal(u, Target) == [e1, e3]
    by_bools = gl.Obs().entities([e1, e2, e3]).actor(u, masks={Target: [False, True, False]})
    assert by_bools.legal(u, Target) == [e2]


def test_select_entity_candidates_are_identity_based():
    u = Unit(0, 0)
    e1, twin = Enemy(1), Enemy(1)  # equal, not the same object
    obs = gl.Obs().entities([e1, twin]).actor(u, masks={Target: [twin]})
    assert obs.mask_of(u, Target).tolist() == [False, True]
    assert obs.legal(u, Target)[0] is twin


def test_per_actor_masks_for_several_actors():
    u1, u2, u3 = Unit(1, 0), Unit(2, 0), Unit(3, 0)
    e1, e2 = Enemy(1), Enemy(2)
    obs = gl.Obs().entities([e1, e2]).actors(
        [u1, u2, u3],
        masks={
            Move: [[True, False, False], None, {Move.STAY}],
            Target: [[e2], None, [True, False]],
        },
    )
    assert obs.legal(u1, Move) == [Move.LEFT]
    assert obs.legal(u2, Move) == list(Move)
    assert obs.legal(2, Move) == [Move.STAY]
    assert obs.legal(u1, Target) == [e2]
    assert obs.legal(u2, Target) == [e1, e2]
    assert obs.legal(u3, Target) == [e1]


def test_per_actor_masks_as_a_2d_array():
    u1, u2 = Unit(1, 0), Unit(2, 0)
    m = np.array([[True, False, False], [False, True, True]])
    obs = gl.Obs().actors([u1, u2], masks={Move: m})
    assert obs.legal(u1, Move) == [Move.LEFT]
    assert obs.legal(u2, Move) == [Move.RIGHT, Move.STAY]


@pytest.mark.parametrize(
    "mask, match",
    [
        ([True, False], r"mask for action type 'Move' has 2 entries, expected 3 \(one per choice\)"),
        (np.ones(4, dtype=bool), r"mask for action type 'Move' has 4 entries, expected 3"),
        ([Fire.YES], r"mask for action type 'Move' allows <Fire.YES: 1>, which is not one of its choices"),
        (["LEFT"], r"allows the string 'LEFT', but masks take the values of Move.*write Move.LEFT instead of 'LEFT'"),
        ([0, 1], r"allows 0, which is not one of its choices"),
        (5, r"mask for action type 'Move' must be booleans or a collection of allowed values, got 5"),
    ],
    ids=["short", "long", "other-enum", "label", "ints", "scalar"],
)
def test_bad_categorical_masks(mask, match):
    u = Unit(0, 0)
    obs = gl.Obs().actor(u, masks={Move: mask})
    with pytest.raises(gl.InvalidObservationError, match=match):
        obs.legal(u, Move)


def test_bad_composite_mask_value():
    u = Unit(0, 0)
    obs = gl.Obs().actor(u, masks={Steer: [Dir.UP]})
    with pytest.raises(gl.InvalidObservationError, match=r"mask for action type 'Steer' allows <Dir.UP: 0>, which is not one of its choices"):
        obs.legal(u, Steer)


def test_select_entity_mask_errors():
    u = Unit(0, 0)
    e1, e2 = Enemy(1), Enemy(2)
    stranger = Enemy(1)
    obs = gl.Obs().entities([e1, e2]).actor(u, masks={Target: [stranger]})
    with pytest.raises(gl.InvalidObservationError, match=r"select-entity action 'Target' allows Enemy\(hp=1\), which is not among its 2 candidates"):
        obs.legal(u, Target)
    obs = gl.Obs().entities([e1, e2]).actor(u, masks={Target: [True, False, True]})
    with pytest.raises(gl.InvalidObservationError, match=r"mask for action type 'Target' has 3 entries, expected 2 \(one per candidate\)"):
        obs.legal(u, Target)


def test_masks_for_several_actors_need_one_entry_per_actor():
    with pytest.raises(gl.InvalidObservationError, match=r"masks for action type 'Move' have 1 entries but there are 2 actors"):
        gl.Obs().actors([Unit(0, 0), Unit(1, 1)], masks={Move: [[True, True, True]]})
    with pytest.raises(gl.InvalidObservationError, match=r"masks for action type 'Target' have 3 entries but there are 2 actors"):
        gl.Obs().actors([Unit(0, 0), Unit(1, 1)], masks={Target: [None, None, None]})
    # one allowed-move list for three actors: the message says so and shows the form that works
    with pytest.raises(gl.InvalidObservationError, match=r"have 2 entries \(they look like ONE mask, the choices of one actor\) but there are "
                       r"3 actors; give one mask \(or None\) per actor, in the actors' order: masks=\{Move: \[allowed_0, allowed_1, allowed_2\]\}"):
        gl.Obs().actors([Unit(0, 0), Unit(1, 1), Unit(2, 2)], masks={Move: [Move.LEFT, Move.STAY]})


def test_mask_of_an_unknown_actor():
    u = Unit(0, 0)
    obs = gl.Obs().actor(u)
    with pytest.raises(gl.InvalidObservationError, match=r"is not an actor of this observation"):
        obs.mask_of(Unit(0, 0), Move)
    with pytest.raises(gl.InvalidObservationError, match=r"actor index 1 out of range: the observation has 1 actors"):
        obs.legal(1, Move)


# ---------------------------------------------------------------------- RandomAgent


def test_random_agent_respects_categorical_masks():
    u = Unit(0, 0)
    agent = gl.RandomAgent(seed=3)
    obs = gl.Obs().actor(u, masks={Move: [Move.LEFT, Move.STAY]})
    seen = collections.Counter(agent.act(obs, Move) for _ in range(400))
    assert set(seen) == {Move.LEFT, Move.STAY}
    assert min(seen.values()) > 120  # both allowed choices are drawn, roughly uniformly


def test_random_agent_covers_every_choice_without_masks():
    agent = gl.RandomAgent(seed=0)
    obs = gl.Obs().actor(Unit(0, 0))
    assert {agent.act(obs, Steer) for _ in range(300)} == set(gl.action_spec(Steer).values)


def test_random_agent_respects_composite_select_entity_and_per_actor_masks():
    u1, u2 = Unit(1, 0), Unit(2, 0)
    e1, e2, e3 = Enemy(1), Enemy(2), Enemy(3)
    allowed_steer = [Steer(Dir.LEFT, Fire.NO), Steer(Dir.UP, Fire.YES)]
    obs = gl.Obs().entities([e1, e2, e3]).actors(
        [u1, u2],
        masks={Steer: [allowed_steer, None], Target: [[e1, e3], [False, True, False]]},
    )
    agent = gl.RandomAgent(seed=7)
    seen_steer, seen_t1, seen_t2 = set(), set(), set()
    for _ in range(300):
        steers, targets = agent.act(obs, Steer, Target)
        assert steers[0] in allowed_steer
        assert targets[0] is e1 or targets[0] is e3
        assert targets[1] is e2
        seen_steer.add(steers[0])
        seen_t1.add(id(targets[0]))
        seen_t2.add(steers[1])
    assert seen_steer == set(allowed_steer)
    assert seen_t1 == {id(e1), id(e3)}
    assert len(seen_t2) > 2  # the unmasked actor ranges over the whole product


def test_random_agent_is_deterministic_given_its_seed():
    obs = gl.Obs().entities([Enemy(1), Enemy(2), Enemy(3)]).actor(Unit(0, 0), masks={Move: [True, True, False]})

    def draws(seed):
        a = gl.RandomAgent(seed=seed)
        return [(a.act(obs, Move), id(a.act(obs, Target))) for _ in range(50)]

    assert draws(5) == draws(5)
    assert draws(5) != draws(6)


def test_random_agent_errors():
    agent = gl.RandomAgent(seed=0)
    with pytest.raises(gl.ConfigError, match=r"act needs at least one action type"):
        agent.act(gl.Obs().actor(Unit(0, 0)))
    with pytest.raises(gl.InvalidObservationError, match=r"the observation has no actor"):
        agent.act(gl.Obs().entities(Unit(0, 0)), Move)
    with pytest.raises(gl.InvalidObservationError, match=r"actor 0 .* no legal choice for action type 'Move'"):
        agent.act(gl.Obs().actor(Unit(0, 0), masks={Move: [False, False, False]}), Move)
    with pytest.raises(gl.InvalidObservationError, match=r"no legal choice for action type 'Target'"):
        agent.act(gl.Obs().actor(Unit(0, 0)), Target)


def test_agents_satisfy_the_protocol():
    class Scripted:
        def act(self, obs, *action_types):
            return Move.STAY

        def game_over(self, obs, truncated=False):
            pass

    assert isinstance(gl.RandomAgent(0), gl.Agent)
    assert isinstance(Scripted(), gl.Agent)
    assert not isinstance(object(), gl.Agent)


# ---------------------------------------------------------------------- gl.run


def test_run_stops_at_max_steps_and_runs_the_games_finally_blocks():
    log = []
    game = make_game(log=log)
    r = gl.run(game, gl.RandomAgent(seed=0), seed=11, max_steps=5)
    assert r.steps == 5
    assert r.stopped == "max_steps"
    assert r.episodes == []
    assert len(events(log, "act")) == 5
    assert events(log, "start") == [(11, None)]
    assert events(log, "finally") == [(11, None)]


def test_run_with_zero_steps_asks_nothing_and_still_closes_the_game():
    log = []
    r = gl.run(make_game(log=log), gl.RandomAgent(seed=0), max_steps=0)
    assert r.steps == 0 and r.stopped == "max_steps"
    assert events(log, "act") == []
    assert len(events(log, "finally")) == 1


def test_run_stops_at_max_episodes_and_reports_them():
    log = []
    game = make_game(
        on_step=lambda st, a: setattr(st, "score", st.score + 2),
        episode_len=3,
        truncated=True,
        final_obs=lambda st: gl.Obs(score=st.score).metric("coins", st.episode + 10),
        log=log,
    )
    r = gl.run(game, gl.RandomAgent(seed=0), max_episodes=2)
    assert r.stopped == "max_episodes"
    assert r.steps == 6
    assert [(e.agent, e.score, e.length, e.truncated, e.metrics) for e in r.episodes] == [
        (0, 6.0, 3, True, {"coins": 10}),
        (0, 6.0, 3, True, {"coins": 11}),
    ]
    assert r.scores == [6.0, 6.0]
    assert len(events(log, "finally")) == 1


def test_run_until_the_game_returns():
    log = []
    r = gl.run(make_game(max_decisions=4, log=log), gl.RandomAgent(seed=0), seed=3)
    assert r.stopped == "returned"
    assert r.steps == 4
    assert len(events(log, "finally")) == 1


def test_run_hands_the_seed_to_the_game_and_is_reproducible():
    def play(seed):
        log = []
        game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(st.rng.randrange(100), 0)), log=log)
        gl.run(game, gl.RandomAgent(seed=1), seed=seed, max_steps=20)
        return log

    assert play(4) == play(4)
    assert play(4)[0] == ("start", 4, None)


def test_run_multi_agent_game_gets_every_agent():
    seen = []

    def duel(agents, seed):
        a, b = agents
        for t in range(3):
            seen.append(a.act(gl.Obs().actor(Unit(0, t)), Move))
            seen.append(b.act(gl.Obs().actor(Unit(1, t)), Fire))
        a.game_over(gl.Obs(score=1))
        b.game_over(gl.Obs(score=-1))

    r = gl.run(duel, [gl.RandomAgent(0), gl.RandomAgent(1)])
    assert r.steps == 6
    assert [type(x) for x in seen] == [Move, Fire] * 3
    assert [(e.agent, e.score, e.length) for e in r.episodes] == [(0, 1.0, 3), (1, -1.0, 3)]


@pytest.mark.parametrize("kwargs", [{"max_steps": -1}, {"max_episodes": -2}, {"max_steps": 1.5}])
def test_run_rejects_bad_limits(kwargs):
    with pytest.raises(gl.ConfigError, match=r"must be a non-negative int or None"):
        gl.run(make_game(), gl.RandomAgent(0), **kwargs)


class Scripted:
    """Answers with whatever it is told to."""

    def __init__(self, answer):
        self.answer = answer

    def act(self, obs, *action_types):
        return self.answer

    def game_over(self, obs, truncated=False):
        pass


def _masked_game(log=None, action_types=(Move,), actors=1):
    def build(st):
        units = [Unit(i, 0) for i in range(actors)]
        if actors == 1:
            return gl.Obs().actor(units[0], masks={Move: [Move.LEFT]})
        return gl.Obs().actors(units, masks={Move: [[Move.LEFT]] * actors})

    return make_game(build_obs=build, action_types=action_types, log=log)


def test_run_raises_for_an_illegal_scripted_answer_and_closes_the_game():
    log = []
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Move', actor 0: <Move.RIGHT: 1> is not a legal choice; legal choices are \[<Move.LEFT: 0>\]"):
        gl.run(_masked_game(log), Scripted(Move.RIGHT), max_steps=3)
    assert events(log, "act") == []
    assert len(events(log, "finally")) == 1


@pytest.mark.parametrize(
    "answer, action_types, actors, match",
    [
        (Fire.NO, (Move,), 1, r"<Fire.NO: 0> is not a legal choice"),
        ("LEFT", (Move,), 1, r"'LEFT' is not a legal choice"),
        (Move.LEFT, (Move, Fire), 1, r"asked for 2 action types and must return a tuple of 2"),
        ((Move.LEFT,), (Move, Fire), 1, r"must return a tuple of 2"),
        (Move.LEFT, (Move,), 2, r"action type 'Move': expected a list of 2 choices \(one per actor\)"),
        ([Move.LEFT], (Move,), 2, r"expected a list of 2 choices"),
        ([Move.LEFT, Move.STAY], (Move,), 2, r"actor 1: <Move.STAY: 2> is not a legal choice"),
    ],
    ids=["other-enum", "label", "not-tuple", "short-tuple", "not-list", "short-list", "masked-second-actor"],
)
def test_run_checks_the_shape_of_answers(answer, action_types, actors, match):
    with pytest.raises(gl.InvalidActionError, match=match):
        gl.run(_masked_game(action_types=action_types, actors=actors), Scripted(answer), max_steps=3)


def test_run_checks_select_entity_answers_by_identity():
    e1 = Enemy(1)
    game = make_game(build_obs=lambda st: gl.Obs().entities([e1]).actor(Unit(0, 0)), action_types=(Target,))
    assert gl.run(game, Scripted(e1), max_steps=3).steps == 3
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Target', actor 0: Enemy\(hp=1\) is not a legal choice"):
        gl.run(game, Scripted(Enemy(1)), max_steps=3)


def test_run_without_checks_passes_answers_through():
    log = []
    r = gl.run(_masked_game(log), Scripted(Move.RIGHT), max_steps=3, check=False)
    assert r.steps == 3
    assert [a for _, a in events(log, "act")] == [Move.RIGHT] * 3


def test_random_agent_in_run_only_plays_legal_moves():
    log = []
    gl.run(_masked_game(log), gl.RandomAgent(seed=0), max_steps=50)
    assert {a for _, a in events(log, "act")} == {Move.LEFT}


# ---------------------------------------------------------------------- gl.act_all


def test_act_all_with_plain_agents_asks_each_in_order():
    calls = []

    class Recorder(Scripted):
        def act(self, obs, *action_types):
            calls.append((self.answer, obs, action_types))
            return self.answer

    o1, o2, o3 = gl.Obs().actor(Unit(0, 0)), gl.Obs().actor(Unit(1, 1)), gl.Obs().actors([Unit(2, 2)])
    out = gl.act_all([(Recorder(Move.LEFT), o1, Move), (Recorder(Fire.YES), o2, Fire, Move), (Recorder([Move.STAY]), o3, Move)])
    assert out == [Move.LEFT, Fire.YES, [Move.STAY]]
    assert [(c[0], c[1], c[2]) for c in calls] == [(Move.LEFT, o1, (Move,)), (Fire.YES, o2, (Fire, Move)), ([Move.STAY], o3, (Move,))]


def test_act_all_with_random_agents_respects_masks():
    obs_a = gl.Obs().actor(Unit(0, 0), masks={Move: [Move.RIGHT]})
    obs_b = gl.Obs().actors([Unit(1, 1), Unit(2, 2)], masks={Fire: [[Fire.YES], [Fire.NO]]})
    out = gl.act_all([(gl.RandomAgent(0), obs_a, Move), (gl.RandomAgent(1), obs_b, Fire)])
    assert out == [Move.RIGHT, [Fire.YES, Fire.NO]]


def test_act_all_of_nothing_is_empty():
    assert gl.act_all([]) == []


# ---------------------------------------------------------------------- bad input (issue 10: every bad input a GymloopError)


@dataclass
class Pos:
    x: float
    y: float


class Opaque:
    """Neither a dataclass nor declared with gl.entity."""

    def __init__(self):
        self.x = 1.0


@dataclass
class Named:
    name: str  # an unsupported feature type
    x: int


def _one_bad_game(build):
    """A game whose third observation is ``build()`` (the others are fine)."""

    def game(agent, seed):
        t = 0
        while True:
            obs = build() if t == 2 else gl.Obs(score=t).entities(Pos(1.0, 2.0)).actor(Unit(t, 0))
            agent.act(obs, Move)
            t += 1

    return gl.game(entities=[Pos])(game)


def _in_vecenv(game):
    with gl.VecEnv(game, num_envs=2, seed=0) as env:
        env.reset()
        for _ in range(3):
            env.step(env.sample_actions())


def _in_run(game):
    gl.run(game, gl.RandomAgent(0), max_steps=5)


RUNNERS = pytest.mark.parametrize("runner", [_in_run, _in_vecenv], ids=["gl.run", "VecEnv"])


@pytest.mark.parametrize(
    "value, match",
    [
        (None, r"must be a number, got None of type NoneType"),
        (float("nan"), r"must be a finite number, got nan"),
        (float("inf"), r"must be a finite number, got inf"),
        (-float("inf"), r"must be a finite number, got -inf"),
        ("3", r"must be a number, got '3' of type str"),
        ("x", r"must be a number, got 'x' of type str"),
        (10**400, r"must be a finite number, got an int of about 10\*\*400, too large for a float"),
        ([1.0], r"must be a number, got \[1.0\] of type list"),
        (np.array([1.0, 2.0]), r"must be a number, got array"),
        (1 + 2j, r"must be a number, got \(1\+2j\) of type complex"),
    ],
    ids=["None", "nan", "inf", "-inf", "str-number", "str", "10**400", "list", "array", "complex"],
)
def test_metric_refuses_what_is_not_a_finite_number(value, match):
    # before: None/NaN/inf/str raised bare exceptions later (or NaN passed as "no value")
    with pytest.raises(gl.InvalidObservationError, match=r"Obs.metric\('coins', value\) " + match + r".*report a finite int or float"):
        gl.Obs().metric("coins", value)


@pytest.mark.parametrize("value", [3, 2.5, True, np.float32(1.5), np.int64(7), 10**30, np.array(4.0)])
def test_metric_accepts_real_numbers_as_floats(value):
    obs = gl.Obs().metric("coins", value)
    assert obs.metrics == {"coins": float(value)}
    assert type(obs.metrics["coins"]) is float


@pytest.mark.parametrize("name", [None, "", 3, ("a",)])
def test_metric_name_must_be_a_non_empty_string(name):
    with pytest.raises(gl.InvalidObservationError, match=r"Obs.metric: the metric name must be a non-empty string, got"):
        gl.Obs().metric(name, 1.0)


@RUNNERS
@pytest.mark.parametrize(
    "value, match",
    [
        ("3", r"entity type 'Pos': cannot featurize Pos\(x='3', y=2.0\) in env 0 \(slot 0\): feature 'x' must be a number, got '3' of type str"),
        (b"3", r"feature 'x' must be a number, got b'3' of type bytes"),
        (None, r"feature 'x' must be a number, got None"),
        (10**400, r"entity type 'Pos', feature 'x' of Pos\(x=1000.*in env 0 \(slot 0\) must be a finite number, got an int of about 10\*\*400"),
        (10**39, r"entity type 'Pos', feature 'x' of .* is 1000000000000000000000000000000000000000, beyond the float32 range"),
        (1e300, r"entity type 'Pos', feature 'x' of .* is 1e\+300, beyond the float32 range"),
        (float("nan"), r"entity type 'Pos', feature 'x' is nan in env 0 \(slot 0\); features must be finite numbers"),
        (np.datetime64("2020-01-01"), r"feature 'x' must be a number, got (np|numpy)\.datetime64"),
        (1j, r"feature 'x' must be a number, got 1j of type complex"),
    ],
    ids=["str-number", "bytes", "None", "10**400", "10**39", "1e300", "nan", "datetime", "complex"],
)
def test_bad_feature_values_are_refused_naming_type_feature_and_env(runner, value, match):
    # before: '3' was read as 3.0 silently, 10**400 a bare OverflowError, 1e300 a RuntimeWarning,
    # and gl.run checked nothing at all
    game = _one_bad_game(lambda: gl.Obs().entities(Pos(value, 2.0)).actor(Unit(0, 0)))
    with pytest.raises(gl.InvalidObservationError, match=match):
        runner(game)


@RUNNERS
@pytest.mark.parametrize("value", [10**30, 3.4e38, np.float16(2), np.int64(-3), True, np.array(1.5)])
def test_large_but_representable_and_numpy_feature_values_are_accepted(runner, value):
    runner(_one_bad_game(lambda: gl.Obs().entities(Pos(value, 2.0)).actor(Unit(0, 0))))


@RUNNERS
@pytest.mark.parametrize(
    "value, match",
    [
        ("3", r"slot 0: the observation's score must be a number, got '3' of type str"),
        (10**400, r"slot 0: the observation's score must be a finite number, got an int of about 10\*\*400"),
        (float("nan"), r"slot 0: the score is not finite \(nan\)"),
        (None, r"slot 0: the observation's score must be a number, got None"),
        ([1], r"slot 0: the observation's score must be a number, got \[1\] of type list"),
    ],
    ids=["str-number", "10**400", "nan", "None", "list"],
)
def test_bad_scores_are_refused(runner, value, match):
    # before: '3' was read as 3.0 silently and 10**400 a bare OverflowError (in gl.run: nothing)
    with pytest.raises(gl.InvalidObservationError, match=match):
        runner(_one_bad_game(lambda: gl.Obs(score=value).actor(Unit(0, 0))))


@RUNNERS
@pytest.mark.parametrize("value", ["3", 10**400, float("nan"), None])
def test_bad_scores_given_to_game_over_are_refused(runner, value):
    def game(agent, seed):
        while True:
            agent.act(gl.Obs().actor(Unit(0, 0)), Move)
            agent.game_over(gl.Obs(score=value))

    with pytest.raises(gl.GymloopError) as info:
        runner(game)
    # inside a VecEnv an error raised in the game comes as a GameError (env, seed) caused by it
    err = info.value.__cause__ if isinstance(info.value, gl.GameError) else info.value
    assert isinstance(err, gl.InvalidObservationError)
    assert re.search(r"game_over: the observation's score must be a (finite )?number", str(err))


@RUNNERS
@pytest.mark.parametrize(
    "mask, match",
    [
        (np.array([[True, False, True]]), r"must be one-dimensional \(one boolean per choice\), got an array of shape \(1, 3\)"),
        (np.array([1, 0, 1]), r"must be a boolean array, got dtype int64; convert it with mask.astype\(bool\)"),
        (np.array([1.0, 0.0, 1.0]), r"must be a boolean array, got dtype float64"),
        ("LEFT", r"got the string 'LEFT'; choices are values such as Move.X \(not their labels\)"),
        (["LEFT", "STAY"], r"allows the string 'LEFT', but masks take the values of Move, e.g. \[Move.LEFT, Move.RIGHT\], not their labels"),
        ([1, 0, 1], r"allows 1, which is not one of its choices .*a boolean mask must hold bools"),
        ([False, False, False], r"has a mask that leaves no legal choice"),
        ([], r"has a mask that leaves no legal choice"),
    ],
    ids=["2-D", "int-dtype", "float-dtype", "label-string", "labels", "ints", "all-false", "empty"],
)
def test_bad_masks_are_refused(runner, mask, match):
    # before: a (1, n) boolean array was flattened and accepted silently; gl.run checked nothing
    with pytest.raises(gl.InvalidObservationError, match=match):
        runner(_one_bad_game(lambda: gl.Obs().actor(Unit(0, 0), masks={Move: mask})))


def test_bad_global_decision_and_select_entity_masks():
    @gl.global_decision
    class Mode(Enum):
        A = 0
        B = 1

    with pytest.raises(gl.InvalidObservationError, match=r"global decision 'Mode' must be one-dimensional .* shape \(1, 2\)"):
        gl.Obs().mask(Mode, np.array([[True, False]]))
    with pytest.raises(gl.InvalidObservationError, match=r"must be a boolean array, got dtype int64"):
        gl.Obs().mask(Mode, np.array([1, 0])).legal(None, Mode)
    u = Unit(0, 0)
    obs = gl.Obs().entities([Enemy(1), Enemy(2)]).actor(u, masks={Target: "Enemy"})
    with pytest.raises(gl.InvalidObservationError, match=r"select-entity action 'Target' must be booleans or a collection of candidate objects, got the string"):
        obs.legal(u, Target)
    obs = gl.Obs().entities([Enemy(1), Enemy(2)]).actor(u, masks={Target: np.array([[True], [False]])})
    with pytest.raises(gl.InvalidObservationError, match=r"mask for action type 'Target' must be one-dimensional \(one boolean per candidate\)"):
        obs.legal(u, Target)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gl.Obs().actors(5), gl.InvalidObservationError, r"Obs.actors expects an iterable of actor entities, got 5 of type int"),
        (lambda: gl.Obs().actors(None), gl.InvalidObservationError, r"Obs.actors expects an iterable of actor entities, got None"),
        (lambda: gl.Obs().actor(Unit(0, 0), masks=[Move.LEFT]), gl.InvalidObservationError, r"masks must be a dict \{action_type: allowed\}, got \[<Move.LEFT: 0>\]"),
        (lambda: gl.Obs().actors([Unit(0, 0)], masks={Move: 3}), gl.InvalidObservationError, r"masks for action type 'Move' must have one mask \(or None\) per actor, got 3"),
        (lambda: gl.Obs().actors([Unit(0, 0)], masks={Move: np.ones(3, dtype=bool)}), gl.InvalidObservationError, r"masks for action type 'Move' as an array must be 2-D \(n_actors, n_choices\), got shape \(3,\)"),
        (lambda: gl.Obs().globals("3"), gl.SchemaError, r"Obs.globals expects an instance of a dataclass .* got '3' of type str"),
        (lambda: gl.Obs().globals(float("nan")), gl.SchemaError, r"Obs.globals expects an instance of a dataclass .* got nan of type float"),
        (lambda: gl.Obs().globals(Opaque()), gl.SchemaError, r"Opaque is not a dataclass and not declared as an entity"),
    ],
    ids=["actors-int", "actors-None", "masks-list", "per-actor-scalar", "per-actor-1d-array", "globals-str", "globals-nan", "globals-opaque"],
)
def test_bad_arguments_to_obs_methods_are_refused_at_the_call(call, error, match):
    with pytest.raises(error, match=match):
        call()


@RUNNERS
@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: gl.Obs().actor(Opaque()), gl.SchemaError, r"Opaque is not a dataclass and not declared as an entity; decorate it with @dataclass"),
        (lambda: gl.Obs().entities([Opaque()]).actor(Unit(0, 0)), gl.SchemaError, r"Opaque is not a dataclass and not declared"),
        (lambda: gl.Obs().entities([Named("a", 1)]).actor(Unit(0, 0)), gl.SchemaError, r"Named.name: unsupported feature type <class 'str'>"),
        (lambda: gl.Obs().actor("3"), gl.SchemaError, r"where an entity was expected|str is not a dataclass"),
        (lambda: gl.Obs().entities("ab").actor(Unit(0, 0)), gl.SchemaError, r"str"),
        (lambda: gl.Obs().entities([1.0, 2.0]).actor(Unit(0, 0)), gl.SchemaError, r"float"),
    ],
    ids=["opaque-actor", "opaque-entity", "str-field", "str-actor", "str-entities", "float-entities"],
)
def test_types_that_cannot_be_entities_are_schema_errors(runner, build, error, match):
    # before: gl.run with the random agent ran all of these silently
    with pytest.raises(error, match=match):
        runner(_one_bad_game(build))


def _late(build, at):
    def game(agent, seed):
        t = 0
        while True:
            agent.act(build(t, at), Move)
            t += 1

    return game


@pytest.mark.parametrize("agent", [gl.RandomAgent(0), Scripted(Move.LEFT)], ids=["random", "scripted"])
@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda t, at: gl.Obs().actor(Pos(float("nan") if t == at else 1.0, 0.0)), gl.InvalidObservationError, r"entity type 'Pos', feature 'x' is nan"),
        (lambda t, at: gl.Obs(score=float("inf") if t == at else t).actor(Unit(0, 0)), gl.InvalidObservationError, r"the score is not finite \(inf\)"),
        (lambda t, at: gl.Obs().entities(Pos("3" if t == at else 1.0, 0.0)).actor(Unit(0, 0)), gl.InvalidObservationError, r"feature 'x' must be a number, got '3'"),
        (lambda t, at: gl.Obs().entities(Pos(1e39 if t == at else 1.0, 0.0)).actor(Unit(0, 0)), gl.InvalidObservationError, r"beyond the float32 range"),
        (lambda t, at: gl.Obs().entities([Opaque()] if t == at else []).actor(Unit(0, 0)), gl.SchemaError, r"Opaque is not a dataclass"),
    ],
    ids=["nan-feature", "inf-score", "str-feature", "huge-feature", "opaque"],
)
@pytest.mark.parametrize("at", [3, 500], ids=["early", "late"])
def test_run_validates_with_any_agent_early_and_late(agent, build, error, match, at):
    """Full checks for the first decisions, cheap ones after: NaN, strings and new types are still refused."""
    with pytest.raises(error, match=match):
        gl.run(_late(build, at), agent, max_steps=at + 5)


def test_run_refuses_what_is_not_an_obs():
    def game(agent, seed):
        agent.act({"x": 1}, Move)

    with pytest.raises(gl.InvalidObservationError, match=r"agent.act expects a gl.Obs as its first argument, got \{'x': 1\} of type dict"):
        gl.run(game, Scripted(Move.LEFT))


def test_run_grows_its_spaces_for_types_that_appear_later():
    """gl.run needs no declarations: a type first seen in the 200th observation is compiled then."""

    def game(agent, seed):
        for t in range(300):
            agent.act(gl.Obs().entities([Pos(1.0, 2.0)] * (t >= 200)).actor(Unit(t, 0)), Move)

    assert gl.run(game, gl.RandomAgent(0)).steps == 300


def test_view_returns_the_containers_themselves_and_the_readers_agree_with_it():
    f1, f2, e1 = Food(1, 1), Food(2, 2), Enemy(5)
    u, v = Unit(0, 0), Unit(1, 1)
    obs = gl.Obs(score=1).entities([f1, e1, f2]).actors([u, v], masks={Move: [[Move.LEFT], None]}).globals(Clock(3))
    obs.metric("coins", 2)
    actors, chunks, g, masks, metrics, single = obs.view()
    assert actors == [u, v] and chunks == [[f1, e1, f2]] and g == Clock(3) and metrics == {"coins": 2.0}
    assert masks == {Move: [[Move.LEFT], None]} and single is False
    assert obs.view()[1] is chunks  # no copies
    assert obs.n_actors == 2 and obs.has_masks and obs.has_entities and obs.entity_types() == {Food, Enemy, Unit}
    obs.split_chunks_by_type()
    assert obs.view()[1] == [[f1, f2], [e1]]  # one chunk per type, order kept within each
    assert obs.entity_list() == [u, v, f1, f2, e1]
    empty = gl.Obs()
    assert not empty.has_entities and not empty.has_masks and empty.n_actors == 0 and empty.entity_types() == set()


def test_the_view_attributes_are_the_fields_of_view_and_follow_the_observation():
    obs = gl.Obs(score=1).entities([Enemy(3)]).actor(Unit(1, 2), masks={Fire: [Fire.YES]}).metric("kills", 2)
    actors, chunks, _, masks, metrics, single = obs.view()
    assert (obs.view_actors, obs.view_chunks, obs.view_masks, obs.view_metrics, obs.view_single) == (
        actors, chunks, masks, metrics, single)
    assert obs.view_actors is actors and obs.view_chunks is chunks  # the containers themselves, not copies
    obs.entities([Enemy(4)])
    assert [len(c) for c in obs.view_chunks] == [1, 1] and gl.Obs().view_masks is None and not gl.Obs().view_single
