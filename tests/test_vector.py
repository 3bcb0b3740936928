"""gl.VecEnv with workers=0: the batch format, decoding actions, episodes, errors, fuzzing."""

import gc
import math
import pickle
import random
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from support.entities import Ally, Enemy, Fire, Move, Pos, Target, Unit
from support.generic_game import events, make_game, start_seeds

import gymloop as gl


@dataclass
class Apple:
    x: int
    y: int


@dataclass
class Wall:
    x: int


@dataclass
class Bullet:
    v: float


class Color(Enum):
    RED = 0
    GREEN = 1


@dataclass
class Glob:
    time: int
    phase: Color


@dataclass(frozen=True)
class Steer:
    move: Move
    fire: Fire


Pick = gl.SelectEntity("Pick", among=(Enemy, Ally))


def entity_row(env, batch, slot, idx):
    """(type name, feature row) of entity ``idx`` of ``slot``, computed from the documented layout."""
    start = 0
    for name in env.obs_space.entities:
        c = int(batch.counts[name][slot])
        if idx < start + c:
            first = int(batch.counts[name][:slot].sum())
            return name, batch.entities[name][first + idx - start]
        start += c
    raise AssertionError(f"entity index {idx} is outside slot {slot}")


def slot_rows(batch, name, slot):
    """The rows of entity type ``name`` that belong to ``slot``."""
    first = int(batch.counts[name][:slot].sum())
    return batch.entities[name][first : first + int(batch.counts[name][slot])]


def feats(obj):
    return gl.schema_of(type(obj)).featurize([obj])[0]


def same_batches(a, b):
    """Bit-identical: same keys, dtypes, shapes and bytes in every array."""

    def eq(x, y):
        if isinstance(x, dict):
            return list(x) == list(y) and all(eq(x[k], y[k]) for k in x)
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()

    fields = ("entities", "counts", "globals", "actor_slot", "actor_index", "masks", "num_candidates",
              "reward", "terminated", "truncated", "active", "metrics")
    return a.num_slots == b.num_slots and all(eq(getattr(a, f), getattr(b, f)) for f in fields)


@pytest.fixture
def closing():
    """Collects VecEnvs and closes them after the test, whatever happened."""
    envs = []

    def make(*args, **kwargs):
        env = gl.VecEnv(*args, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


# ---------------------------------------------------------------------- the batch format


def _rich_game(current):
    """Apples, walls, an actor Unit and other Units; records what each run observed."""

    def build(st):
        apples = [Apple(st.rng.randrange(50), i) for i in range(st.rng.randrange(3))]
        walls = [Wall(st.rng.randrange(50)) for _ in range(st.rng.randrange(2))]
        others = [Unit(-1 - i, st.total) for i in range(st.rng.randrange(3))]
        actor = Unit(st.seed % 1000, st.total)
        current[st.seed] = {"Apple": apples, "Unit": [actor] + others, "Wall": walls, "actor": actor}
        # the actor is given last and units are split over two calls: the batch still puts it first
        return gl.Obs(score=st.total).entities(others[:1]).entities(apples).entities(walls + others[1:]).actor(actor)

    return make_game(build_obs=build)


def test_batch_format_invariants(closing):
    current = {}
    env = closing(_rich_game(current), num_envs=4, seed=2)
    b = env.reset()
    assert list(env.obs_space.entities) == ["Apple", "Unit", "Wall"]
    assert env.obs_space.entities["Unit"] == ("x", "y")
    assert env.obs_space.globals == ()
    assert env.action_space["Move"] == gl.ActionDesc("Move", "categorical", ("LEFT", "RIGHT", "STAY"))
    seeds = list(current)  # runs started in env order, one per env
    assert len(seeds) == 4
    for _ in range(12):
        n = env.num_slots
        assert isinstance(b, gl.Batch) and b.num_slots == n == 4
        for name, features in env.obs_space.entities.items():
            arr, cnt = b.entities[name], b.counts[name]
            assert arr.dtype == np.float32 and arr.ndim == 2 and arr.shape[1] == len(features)
            assert cnt.dtype == np.int64 and cnt.shape == (n,)
            assert int(cnt.sum()) == arr.shape[0]
            for slot, seed in enumerate(seeds):
                expected = current[seed][name]
                assert cnt[slot] == len(expected)
                np.testing.assert_array_equal(slot_rows(b, name, slot), np.array([feats(o) for o in expected]).reshape(-1, len(features)))
        assert b.globals.dtype == np.float32 and b.globals.shape == (n, 0)
        assert b.reward.dtype == np.float32 and b.reward.shape == (n,)
        for flags in (b.terminated, b.truncated, b.active, b.done):
            assert flags.dtype == np.bool_ and flags.shape == (n,)
        assert b.active.all()
        assert b.actor_slot["Move"].dtype == np.int64 and b.actor_index["Move"].dtype == np.int64
        assert b.actor_slot["Move"].tolist() == list(range(n))
        assert b.masks["Move"].dtype == np.bool_ and b.masks["Move"].shape == (n, 3) and b.masks["Move"].all()
        assert b.num_actors("Move") == n
        for j in range(n):
            slot, idx = int(b.actor_slot["Move"][j]), int(b.actor_index["Move"][j])
            name, row = entity_row(env, b, slot, idx)
            assert name == "Unit"
            np.testing.assert_array_equal(row, feats(current[seeds[slot]]["actor"]))
            assert idx == len(current[seeds[slot]]["Apple"])  # Apple comes first, then the actor leads Unit
        b = env.step(env.sample_actions())


def test_batch_arrays_are_not_overwritten_by_later_steps(closing):
    current = {}
    env = closing(_rich_game(current), num_envs=3, seed=0)
    first = env.reset()
    snapshot = {k: {n: a.copy() for n, a in getattr(first, k).items()} for k in ("entities", "counts", "actor_index", "masks")}
    reward = first.reward.copy()
    for _ in range(5):
        env.step(env.sample_actions())
    for k, arrays in snapshot.items():
        for n, a in arrays.items():
            np.testing.assert_array_equal(getattr(first, k)[n], a)
    np.testing.assert_array_equal(first.reward, reward)


def test_entity_offsets_and_candidate_index_follow_the_layout(closing):
    current = {}

    def build(st):
        enemies = [Enemy(10 * st.total + i) for i in range(1 + st.rng.randrange(3))]
        allies = [Ally(-i) for i in range(st.rng.randrange(3))]
        current[st.seed] = enemies + allies
        return gl.Obs().entities(allies).entities(enemies).actor(Unit(0, st.total))

    log = []
    env = closing(make_game(build_obs=build, action_types=(Pick,), log=log), num_envs=3, seed=4)
    b = env.reset()
    seeds = start_seeds(log)
    for _ in range(5):
        offs = b.entity_offsets()
        names = list(b.counts)
        for s in range(3):
            start = 0
            for t, name in enumerate(names):
                assert offs[t, s] == start
                start += b.counts[name][s]
        ci = b.candidate_index("Pick")
        assert ci.dtype == np.int64 and ci.shape == b.masks["Pick"].shape
        pos = 0
        for j in range(b.num_actors("Pick")):
            slot = int(b.actor_slot["Pick"][j])
            nc = int(b.num_candidates["Pick"][j])
            # candidates: enemies then allies (the order of `among`), whatever the space order
            cands = current[seeds[slot]]
            assert nc == len(cands)
            for k, cand in enumerate(cands):
                name, row = entity_row(env, b, slot, int(ci[pos + k]))
                assert name == type(cand).__name__
                np.testing.assert_array_equal(row, feats(cand))
            pos += nc
        b = env.step(env.sample_actions())


# ---------------------------------------------------------------------- decisions


def test_several_action_types_in_one_decision(closing):
    log = []
    env = closing(make_game(action_types=(Move, Fire, Steer), log=log), num_envs=3, seed=1)
    b = env.reset()
    seeds = start_seeds(log)
    for name in ("Move", "Fire", "Steer"):
        assert b.actor_slot[name].tolist() == [0, 1, 2]
    assert b.masks["Steer"].shape == (3, 6)
    env.step({"Move": np.array([0, 1, 2]), "Fire": np.array([1, 0, 1]), "Steer": np.array([5, 0, 3])})
    acts = dict(events(log, "act"))
    steer = gl.action_spec(Steer).values
    assert acts[seeds[0]] == (Move.LEFT, Fire.YES, steer[5])
    assert acts[seeds[1]] == (Move.RIGHT, Fire.NO, steer[0])
    assert acts[seeds[2]] == (Move.STAY, Fire.YES, Steer(Move.RIGHT, Fire.YES))


def test_several_actors_get_a_list_in_actor_order(closing):
    def build(st):
        actors = [Unit(100 + k, st.seed % 997) for k in range(1 + st.rng.randrange(3))]
        st.data["actors"] = actors
        return gl.Obs().entities(Apple(0, 0)).actors(actors)

    log = []
    current = {}

    def on_step(st, answer):
        current[st.seed] = st.data["actors"]

    env = closing(make_game(build_obs=build, action_types=(Move, Fire), on_step=on_step, log=log), num_envs=3, seed=7)
    b = env.reset()
    seeds = start_seeds(log)
    n_act = b.num_actors("Move")
    assert b.num_actors("Fire") == n_act
    slots = b.actor_slot["Move"].tolist()
    assert slots == sorted(slots)
    moves = np.arange(n_act) % 3
    fires = (np.arange(n_act) + 1) % 2
    env.step({"Move": moves, "Fire": fires})
    acts = dict(events(log, "act"))
    for slot, seed in enumerate(seeds):
        js = [j for j in range(n_act) if slots[j] == slot]
        actors = current[seed]
        assert len(js) == len(actors)
        assert acts[seed] == ([list(Move)[moves[j]] for j in js], [list(Fire)[fires[j]] for j in js])
        for k, j in enumerate(js):
            assert b.actor_index["Move"][j] == 1 + k  # Apple first, then the actors in order
            np.testing.assert_array_equal(entity_row(env, b, slot, int(b.actor_index["Move"][j]))[1], feats(actors[k]))


def test_games_asking_for_different_action_types_in_one_batch(closing):
    started = []
    got = []

    def game(agent, seed):
        k = len(started)  # env index: games start in env order
        started.append(seed)
        t = 0
        while True:
            wants = Fire if (t + k) % 2 else Move
            answer = agent.act(gl.Obs().actor(Unit(k, t)), wants)
            got.append((k, t, answer))
            t += 1

    env = closing(game, num_envs=3, seed=0, action_types=[Fire])
    b = env.reset()
    assert b.actor_slot["Move"].tolist() == [0, 2] and b.actor_slot["Fire"].tolist() == [1]
    b = env.step({"Move": [2, 1], "Fire": [1]})
    assert sorted(got) == [(0, 0, Move.STAY), (1, 0, Fire.YES), (2, 0, Move.RIGHT)]
    assert b.actor_slot["Move"].tolist() == [1] and b.actor_slot["Fire"].tolist() == [0, 2]
    got.clear()
    env.step({"Move": [0], "Fire": [0, 1]})
    assert sorted(got) == [(0, 1, Fire.NO), (1, 1, Move.LEFT), (2, 1, Fire.YES)]


def test_select_entity_among_the_actor_type_includes_the_actor_first(closing):
    Buddy = gl.SelectEntity("Buddy", among=Unit)
    chosen = []

    def build(st):
        me = Unit(0, st.total)
        others = [Unit(1, 0), Unit(2, 0)]
        st.data["cands"] = [me] + others
        return gl.Obs().entities(others).actor(me, masks={Buddy: [me, others[1]]})

    def on_step(st, answer):
        chosen.append([k for k, c in enumerate(st.data["cands"]) if c is answer])

    env = closing(make_game(build_obs=build, action_types=(Buddy,), on_step=on_step), num_envs=2, seed=0)
    b = env.reset()
    assert b.num_candidates["Buddy"].tolist() == [3, 3]
    assert b.masks["Buddy"].tolist() == [True, False, True] * 2
    assert b.candidate_index("Buddy").tolist() == [0, 1, 2, 0, 1, 2]
    env.step({"Buddy": [0, 2]})
    assert chosen == [[0], [2]]
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Buddy', actor 0 \(env 0, slot 0\): action 1 is masked out"):
        env.step({"Buddy": [1, 0]})


@pytest.mark.parametrize("action", [Target, Pick], ids=["one-type", "two-types"])
def test_select_entity_returns_the_chosen_object(closing, action):
    chosen = {}

    def build(st):
        enemies = [Enemy(i) for i in range(1 + st.rng.randrange(4))]
        allies = [Ally(50 + i) for i in range(st.rng.randrange(3))]
        st.data["cands"] = enemies + (allies if action is Pick else [])
        return gl.Obs().entities(allies).entities(enemies).actor(Unit(0, 0))

    def on_step(st, answer):
        chosen[st.seed] = [k for k, c in enumerate(st.data["cands"]) if c is answer]

    log = []
    env = closing(make_game(build_obs=build, action_types=(action,), on_step=on_step, log=log), num_envs=4, seed=3)
    b = env.reset()
    seeds = start_seeds(log)
    for _ in range(6):
        nc = b.num_candidates[action.name]
        assert nc.dtype == np.int64 and b.masks[action.name].shape == (int(nc.sum()),)
        pick = nc - 1  # the last candidate of each actor
        b = env.step({action.name: pick})
        for slot, seed in enumerate(seeds):
            assert chosen[seed] == [int(pick[slot])]  # exactly that object, by identity


def test_masks_in_the_batch_are_the_masks_the_game_set(closing):
    expected = {}

    def build(st):
        rng = st.rng
        move_ok = [rng.random() < 0.5 for _ in Move]
        move_ok[rng.randrange(3)] = True
        enemies = [Enemy(i) for i in range(1 + rng.randrange(3))]
        allowed = [e for e in enemies if rng.random() < 0.5] or [enemies[0]]
        expected[st.seed] = (move_ok, [any(e is a for a in allowed) for e in enemies], allowed)
        masks = {Move: move_ok if rng.random() < 0.5 else [m for m, ok in zip(Move, move_ok) if ok], Target: allowed}
        return gl.Obs().entities(enemies).actor(Unit(0, 0), masks=masks)

    def on_step(st, answer):
        move, target = answer
        move_ok, _, allowed = expected[st.seed]
        assert move_ok[list(Move).index(move)], "a masked-out move reached the game"
        assert any(target is a for a in allowed), "a masked-out target reached the game"

    log = []
    env = closing(make_game(build_obs=build, action_types=(Move, Target), on_step=on_step, log=log), num_envs=5, seed=9)
    b = env.reset()
    seeds = start_seeds(log)
    seen = set()
    for _ in range(30):
        pos = 0
        for slot, seed in enumerate(seeds):
            move_ok, target_ok, _ = expected[seed]
            assert b.masks["Move"][slot].tolist() == move_ok
            nc = int(b.num_candidates["Target"][slot])
            assert b.masks["Target"][pos : pos + nc].tolist() == target_ok
            pos += nc
        actions = env.sample_actions()
        assert b.masks["Move"][np.arange(5), actions["Move"]].all()
        start = np.cumsum(b.num_candidates["Target"]) - b.num_candidates["Target"]
        assert b.masks["Target"][start + actions["Target"]].all()
        seen.update(actions["Move"].tolist())
        b = env.step(actions)
    assert seen == {0, 1, 2}


def test_sample_actions_is_seeded_and_covers_unmasked_choices(closing):
    def draws(seed):
        env = closing(make_game(), num_envs=4, seed=seed)
        env.reset()
        return np.concatenate([env.sample_actions()["Move"] for _ in range(30)])

    a = draws(0)
    np.testing.assert_array_equal(a, draws(0))
    assert set(a.tolist()) == {0, 1, 2}
    assert not np.array_equal(a, draws(1))


# ---------------------------------------------------------------------- rewards, episodes, metrics


@pytest.mark.parametrize("truncated", [False, True])
def test_reward_is_score_change_and_game_over_ends_the_episode(closing, truncated):
    def on_step(st, answer):
        st.score += 1 + list(Move).index(answer)  # LEFT +1, RIGHT +2, STAY +3

    game = make_game(
        on_step=on_step,
        episode_len=3,
        truncated=truncated,
        final_obs=lambda st: gl.Obs(score=st.score + 10).metric("coins", st.score),
    )
    env = closing(game, num_envs=2, seed=0)
    b = env.reset()
    assert b.reward.tolist() == [0.0, 0.0]
    assert not b.done.any() and b.metrics == {}
    b = env.step({"Move": [0, 1]})  # scores 1, 2
    assert b.reward.tolist() == [1.0, 2.0]
    assert not b.done.any() and b.metrics == {}
    b = env.step({"Move": [2, 2]})  # scores 4, 5
    assert b.reward.tolist() == [3.0, 3.0]
    b = env.step({"Move": [0, 0]})  # scores 5, 6; game over with final scores 15, 16
    assert b.reward.tolist() == [11.0, 11.0]
    assert b.terminated.tolist() == [not truncated] * 2
    assert b.truncated.tolist() == [truncated] * 2
    assert b.done.all()
    assert b.metrics["episode_return"].dtype == np.float64
    assert b.metrics["episode_return"].tolist() == [15.0, 16.0]
    assert b.metrics["episode_length"].tolist() == [3.0, 3.0]
    assert b.metrics["coins"].tolist() == [5.0, 6.0]
    # the next episode has started: its first observation brings no reward of its own
    b = env.step({"Move": [0, 0]})
    assert b.reward.tolist() == [1.0, 1.0]
    assert not b.done.any() and b.metrics == {}


def test_metrics_are_nan_where_no_episode_ended(closing):
    lengths = {}

    def ep_len_game(agent, seed):
        # episode length 2 in env 0, 3 in env 1
        lengths[seed] = 2 + len(lengths)
        t = 0
        while True:
            agent.act(gl.Obs(score=t).actor(Unit(0, t)), Move)
            t += 1
            if t == lengths[seed]:
                agent.game_over(gl.Obs(score=t).metric("won", 1.0))
                t = 0

    env = closing(ep_len_game, num_envs=2, seed=0)
    env.reset()
    b = env.step({"Move": [0, 0]})
    b = env.step({"Move": [0, 0]})
    assert b.terminated.tolist() == [True, False]
    assert b.metrics["episode_length"][0] == 2 and math.isnan(b.metrics["episode_length"][1])
    assert b.metrics["won"][0] == 1.0 and math.isnan(b.metrics["won"][1])
    b = env.step({"Move": [0, 0]})
    assert b.terminated.tolist() == [False, True]
    assert math.isnan(b.metrics["episode_return"][0]) and b.metrics["episode_return"][1] == 3.0


def test_metric_reported_on_a_decision_appears_in_the_batch(closing):
    game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(0, 0)).metric("fuel", 7.0 + st.total))
    env = closing(game, num_envs=2, seed=0)
    b = env.reset()
    assert b.metrics["fuel"].tolist() == [7.0, 7.0]


def test_a_game_that_returns_is_restarted_with_a_fresh_deterministic_seed(closing):
    def play(seed):
        log = []
        env = closing(make_game(max_decisions=2, log=log), num_envs=3, seed=seed)
        env.reset()
        assert len(start_seeds(log)) == 3
        b = env.step(env.sample_actions())
        assert not b.done.any()
        b = env.step(env.sample_actions())  # every game returns here and is restarted
        assert len(start_seeds(log)) == 6
        assert b.truncated.all() and not b.terminated.any()
        assert b.metrics["episode_length"].tolist() == [2.0, 2.0, 2.0]
        assert b.active.all() and b.actor_slot["Move"].tolist() == [0, 1, 2]
        assert len(events(log, "finally")) == 3  # the returned runs ended cleanly
        for _ in range(2):
            b = env.step(env.sample_actions())
        return start_seeds(log)

    seeds = play(0)
    assert len(seeds) == len(set(seeds)) == 9
    assert play(0) == seeds
    assert not set(play(1)) & set(seeds)


def test_a_game_that_returns_after_game_over_is_not_truncated_again(closing):
    env = closing(make_game(episode_len=2, max_decisions=2), num_envs=2, seed=0)
    env.reset()
    env.step({"Move": [0, 0]})
    b = env.step({"Move": [0, 0]})
    assert b.terminated.all() and not b.truncated.any()
    assert b.metrics["episode_length"].tolist() == [2.0, 2.0]


def _random_game(agent, seed):
    """Randomness everywhere: counts, float features, masks, scores, episode ends."""
    rng = random.Random(seed)
    t = 0
    while True:
        pos = [Pos(rng.random(), rng.uniform(-5, 5)) for _ in range(rng.randrange(4))]
        enemies = [Enemy(rng.randrange(9)) for _ in range(1 + rng.randrange(3))]
        ok = [rng.random() < 0.6 for _ in Move]
        ok[rng.randrange(3)] = True
        obs = (
            gl.Obs(score=rng.random() * t)
            .entities(pos)
            .entities(enemies)
            .globals(Glob(t, Color(rng.randrange(2))))
            .actor(Unit(t, rng.randrange(5)), masks={Move: ok, Target: enemies[: 1 + rng.randrange(len(enemies))]})
        )
        agent.act(obs, Move, Target)
        t += 1
        if rng.random() < 0.15:
            agent.game_over(gl.Obs(score=rng.random()).metric("t", t), truncated=rng.random() < 0.5)
            t = 0


def test_identical_seeds_give_bit_identical_batches(closing):
    def trajectory(seed):
        env = closing(_random_game, num_envs=4, seed=seed)
        out = [env.reset()]
        for _ in range(25):
            out.append(env.step(env.sample_actions()))
        return out

    a, b = trajectory(5), trajectory(5)
    assert all(same_batches(x, y) for x, y in zip(a, b))
    assert any(x.done.any() for x in a)
    c = trajectory(6)
    assert not all(same_batches(x, y) for x, y in zip(a, c))


# ---------------------------------------------------------------------- globals


def test_global_features(closing):
    def build(st):
        return gl.Obs().globals(Glob(st.total * 10 + st.seed % 7, Color(st.total % 2))).actor(Unit(0, 0))

    log = []
    env = closing(make_game(build_obs=build, log=log), num_envs=3, seed=0)
    b = env.reset()
    seeds = start_seeds(log)
    assert env.obs_space.globals == ("time", "phase.is_RED", "phase.is_GREEN")
    assert b.globals.dtype == np.float32 and b.globals.shape == (3, 3)
    for step in range(3):
        for slot, seed in enumerate(seeds):
            assert b.globals[slot].tolist() == [step * 10 + seed % 7, float(step % 2 == 0), float(step % 2 == 1)]
        b = env.step(env.sample_actions())


def test_globals_missing_on_a_later_observation(closing):
    def build(st):
        obs = gl.Obs().actor(Unit(0, 0))
        return obs.globals(Glob(1, Color.RED)) if st.total == 0 else obs

    env = closing(make_game(build_obs=build), num_envs=2, seed=0)
    env.reset()
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0: the observation space has globals of type 'Glob' but the observation gave None"):
        env.step({"Move": [0, 0]})


def test_declared_globals_type(closing):
    env = closing(make_game(build_obs=lambda st: gl.Obs().globals(Glob(3, Color.GREEN)).actor(Unit(0, 0))), num_envs=1, globals_type=Glob)
    assert env.reset().globals.tolist() == [[3.0, 0.0, 1.0]]


# ---------------------------------------------------------------------- multi-agent


def test_act_all_puts_both_agents_in_the_same_batch(closing):
    log = []

    def duel(agents, seed):
        a, b = agents
        t = 0
        while True:
            ra, rb = gl.act_all([(a, gl.Obs(score=t).actor(Unit(0, t)), Move), (b, gl.Obs(score=-t).actor(Unit(1, t)), Move)])
            log.append((seed, ra, rb))
            t += 1

    env = closing(duel, num_envs=2, seed=0, agents_per_game=2)
    b = env.reset()
    assert b.num_slots == 4
    assert b.active.tolist() == [True, True, True, True]
    assert b.actor_slot["Move"].tolist() == [0, 1, 2, 3]
    b = env.step({"Move": [0, 1, 2, 0]})
    assert [(ra, rb) for _, ra, rb in log] == [(Move.LEFT, Move.RIGHT), (Move.STAY, Move.LEFT)]
    assert b.active.all()
    assert b.reward.tolist() == [1.0, -1.0, 1.0, -1.0]


def test_turn_based_two_agent_game_alternates_slots(closing):
    log = []

    def turns(agents, seed):
        t = 0
        while True:
            for i, agent in enumerate(agents):
                answer = agent.act(gl.Obs(score=t).actor(Unit(i, t)), Move)
                log.append((seed, i, answer))
            t += 1
            if t == 2:
                agents[0].game_over(gl.Obs(score=5))
                agents[1].game_over(gl.Obs(score=7))
                t = 0

    env = closing(turns, num_envs=2, seed=0, agents_per_game=2)
    b = env.reset()
    assert b.num_slots == env.num_slots == 4
    assert b.active.tolist() == [True, False, True, False]
    assert b.actor_slot["Move"].tolist() == [0, 2]
    assert b.counts["Unit"].tolist() == [1, 0, 1, 0]
    assert b.entities["Unit"].tolist() == [[0, 0], [0, 0]]
    b = env.step({"Move": np.array([1, 2])})
    assert [(i, a) for _, i, a in log] == [(0, Move.RIGHT), (0, Move.STAY)]
    assert b.active.tolist() == [False, True, False, True]
    assert b.actor_slot["Move"].tolist() == [1, 3]
    assert b.counts["Unit"].tolist() == [0, 1, 0, 1]
    assert b.entities["Unit"].tolist() == [[1, 0], [1, 0]]
    b = env.step({"Move": np.array([0, 0])})
    assert b.active.tolist() == [True, False, True, False]
    assert b.reward.tolist() == [1.0, 0.0, 1.0, 0.0]
    b = env.step({"Move": np.array([0, 0])})
    assert b.reward.tolist() == [0.0, 1.0, 0.0, 1.0]
    b = env.step({"Move": np.array([0, 0])})  # both agents' episodes end, slot 0 moves next
    assert b.active.tolist() == [True, False, True, False]
    assert b.terminated.all()
    assert b.reward.tolist() == [4.0, 6.0, 4.0, 6.0]
    assert b.metrics["episode_return"].tolist() == [5.0, 7.0, 5.0, 7.0]
    assert b.metrics["episode_length"].tolist() == [2.0, 2.0, 2.0, 2.0]


def test_invalid_action_message_names_env_and_slot_in_multi_agent_games(closing):
    def turns(agents, seed):
        while True:
            for agent in agents:
                agent.act(gl.Obs().actor(Unit(0, 0)), Move)

    env = closing(turns, num_envs=2, seed=0, agents_per_game=2)
    env.reset()
    env.step({"Move": [0, 0]})
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Move', actor 1 \(env 1, slot 3\): action 7 is out of range \[0, 3\)"):
        env.step({"Move": [0, 7]})


# ---------------------------------------------------------------------- the low-level Environment


class Guess(gl.Environment):
    """Three rounds; reward = the guess index; the Pick action chooses among coins; records seeds."""

    seeds: list = []

    def obs_space(self):
        return gl.ObsSpace(entities={"Coin": ("v",), "Player": ("x", "y")}, globals=("round",))

    def action_space(self):
        return {
            "Guess": gl.ActionDesc("Guess", "categorical", ("A", "B", "C")),
            "Pick": gl.ActionDesc("Pick", "select_entity", among=("Coin",)),
        }

    def reset(self, seed):
        Guess.seeds.append(seed)
        self.rng = np.random.default_rng(seed)
        self.round = 0
        self.total = 0.0
        return self._obs(0.0)

    def act(self, actions):
        g, p = int(actions["Guess"][0]), int(actions["Pick"][0])
        assert 0 <= p < self.n_coins
        self.total += g
        self.round += 1
        return self._obs(float(g))

    def _obs(self, reward):
        self.n_coins = 1 + int(self.rng.integers(3))
        done = self.round == 3
        return gl.EnvObservation(
            entities={"Player": [[1.0, 2.0]], "Coin": [[float(i)] for i in range(self.n_coins)]},
            actors={"Guess": [self.n_coins], "Pick": [self.n_coins]},
            masks={"Guess": [[True, True, self.round != 1]]},
            reward=reward,
            terminated=done,
            globals=[float(self.round)],
            metrics={"total": self.total} if done else {},
        )


def test_environment_subclass_through_vecenv(closing):
    Guess.seeds = []
    env = closing(Guess, num_envs=2, seed=0)
    b = env.reset()
    assert env.obs_space == gl.ObsSpace(entities={"Coin": ("v",), "Player": ("x", "y")}, globals=("round",))
    assert env.action_space["Pick"].among == ("Coin",)
    assert b.counts["Player"].tolist() == [1, 1]
    assert b.actor_slot["Guess"].tolist() == [0, 1]
    for j in range(2):
        name, row = entity_row(env, b, j, int(b.actor_index["Guess"][j]))
        assert name == "Player" and row.tolist() == [1.0, 2.0]
    assert b.num_candidates["Pick"].tolist() == b.counts["Coin"].tolist()
    assert b.globals.tolist() == [[0.0], [0.0]]
    b = env.step({"Guess": [1, 0], "Pick": [0, 0]})
    assert b.reward.tolist() == [1.0, 0.0]
    assert b.masks["Guess"].tolist() == [[True, True, False]] * 2
    with pytest.raises(gl.InvalidActionError, match=r"action type 'Guess', actor 0 \(env 0, slot 0\): action 2 is masked out"):
        env.step({"Guess": [2, 0], "Pick": [0, 0]})
    b = env.step({"Guess": [0, 1], "Pick": b.num_candidates["Pick"] - 1})
    assert not b.done.any()
    b = env.step({"Guess": [2, 2], "Pick": [0, 0]})
    assert b.terminated.tolist() == [True, True]
    assert b.metrics["episode_return"].tolist() == [3.0, 3.0]
    assert b.metrics["episode_length"].tolist() == [3.0, 3.0]
    assert b.metrics["total"].tolist() == [3.0, 3.0]
    assert b.globals.tolist() == [[0.0], [0.0]]  # the next episode's first observation
    assert len(Guess.seeds) == 4 and len(set(Guess.seeds)) == 4
    first = list(Guess.seeds)
    Guess.seeds = []
    again = closing(Guess, num_envs=2, seed=0)
    again.reset()
    for _ in range(3):
        again.step(again.sample_actions())
    assert Guess.seeds == first


def test_environment_errors_through_vecenv(closing):
    class Broken(Guess):
        def act(self, actions):
            raise KeyError("no such coin")

    env = closing(Broken, num_envs=2, seed=0)
    env.reset()
    with pytest.raises(gl.GameError, match=r"environment copy 0 raised KeyError") as info:
        env.step(env.sample_actions())
    assert info.value.env_index == 0
    assert "no such coin" in info.value.original_traceback

    class NaNs(Guess):
        def reset(self, seed):
            obs = super().reset(seed)
            obs.entities["Player"] = [[1.0, float("nan")]]
            return obs

    env = closing(NaNs, num_envs=2, seed=0)
    with pytest.raises(gl.InvalidObservationError, match=r"entity type 'Player', feature 'y' is nan in env 0"):
        env.reset()


def test_environment_partial_through_vecenv(closing):
    import functools

    env = closing(functools.partial(Guess), num_envs=2, seed=0)
    b = env.reset()
    assert b.counts["Player"].tolist() == [1, 1]


# ---------------------------------------------------------------------- invalid observations


@pytest.mark.parametrize("bad, feature", [(float("nan"), "x"), (float("inf"), "y"), (-float("inf"), "x")])
def test_non_finite_feature_names_type_feature_and_env(closing, bad, feature):
    target = {}

    def build(st):
        p = Pos(0.0, 0.0)
        if st.seed == target.get("seed") and st.total == 1:
            setattr(p, feature, bad)
        return gl.Obs().entities([Pos(1.0, 1.0), p]).actor(Unit(0, 0))

    log = []
    env = closing(make_game(build_obs=build, log=log), num_envs=3, seed=0)
    env.reset()
    target["seed"] = start_seeds(log)[2]
    with pytest.raises(gl.InvalidObservationError, match=rf"entity type 'Pos', feature '{feature}' is -?(nan|inf) in env 2 \(slot 2\)"):
        env.step({"Move": [0, 0, 0]})


def test_non_finite_feature_at_reset(closing):
    env = closing(make_game(build_obs=lambda st: gl.Obs().actor(Pos(0.0, float("nan")))), num_envs=2)
    with pytest.raises(gl.InvalidObservationError, match=r"entity type 'Pos', feature 'y' is nan in env 0"):
        env.reset()


def test_non_finite_or_non_numeric_score(closing):
    env = closing(make_game(build_obs=lambda st: gl.Obs(score=float("inf") if st.total else 0).actor(Unit(0, 0))), num_envs=2)
    env.reset()
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0: the score is not finite"):
        env.step({"Move": [0, 0]})
    env = closing(make_game(build_obs=lambda st: gl.Obs(score="high" if st.total else 0).actor(Unit(0, 0))), num_envs=2)
    env.reset()
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0: the observation's score must be a number, got 'high'"):
        env.step({"Move": [0, 0]})


def test_non_numeric_feature_names_type_and_env(closing):
    env = closing(make_game(build_obs=lambda st: gl.Obs().actor(Unit(0, "far" if st.total else 1))), num_envs=2)
    env.reset()
    with pytest.raises(gl.InvalidObservationError, match=r"entity type 'Unit': cannot featurize Unit\(x=0, y='far'\) in env 0"):
        env.step({"Move": [0, 0]})


@pytest.mark.parametrize("where", ["chunk", "single", "mixed", "actor"])
def test_unknown_entity_type_after_the_spaces_are_fixed(closing, where):
    def build(st):
        obs = gl.Obs().entities(Apple(0, 0))
        if st.total == 1:
            if where == "chunk":
                obs.entities([Bullet(1.0)])
            elif where == "single":
                obs.entities(Bullet(1.0))
            elif where == "mixed":
                obs.entities([Apple(1, 1), Bullet(1.0)])
            else:
                return obs.actor(Bullet(1.0))
        return obs.actor(Unit(0, 0))

    env = closing(make_game(build_obs=build), num_envs=2)
    env.reset()
    with pytest.raises(
        gl.InvalidObservationError,
        match=r"entity type 'Bullet' appeared after the observation space was fixed \(known entity types: \['Apple', 'Unit'\]\)",
    ):
        env.step({"Move": [0, 0]})


def test_declared_entity_types_may_appear_later(closing):
    def build(st):
        return gl.Obs().entities([Bullet(float(i)) for i in range(st.total)]).actor(Unit(0, 0))

    env = closing(make_game(build_obs=build), num_envs=2, entity_types=[Bullet])
    b = env.reset()
    assert b.counts["Bullet"].tolist() == [0, 0]
    env.step({"Move": [0, 0]})
    b = env.step({"Move": [0, 0]})
    assert b.counts["Bullet"].tolist() == [2, 2]
    assert b.entities["Bullet"].tolist() == [[0.0], [1.0], [0.0], [1.0]]
    game = gl.game(make_game(build_obs=build), entities=[Bullet])
    env = closing(game, num_envs=1)
    env.reset()
    assert "Bullet" in env.obs_space.entities


@pytest.mark.parametrize(
    "late",
    [
        Fire,
        pytest.param(
            Steer,
        ),
        Target,
    ],
    ids=["enum", "composite", "select-entity"],
)
def test_unknown_action_type_after_the_spaces_are_fixed(closing, late):
    def build(st):
        return gl.Obs().entities(Enemy(1)).actor(Unit(0, 0))

    def game(agent, seed):
        t = 0
        while True:
            agent.act(build(None), late if t == 1 else Move)
            t += 1

    env = closing(game, num_envs=2, entity_types=[Enemy])
    env.reset()
    with pytest.raises(
        gl.InvalidObservationError,
        match=rf"action type .*{late.__name__ if isinstance(late, type) else late.name}.* appeared after the action space "
        r"was fixed \(known action types: \['Move'\]\)",
    ):
        env.step({"Move": [0, 0]})


def test_declared_action_types_may_appear_later(closing):
    def game(agent, seed):
        t = 0
        while True:
            agent.act(gl.Obs().entities(Enemy(1)).actor(Unit(0, 0)), Fire if t % 2 else Move)
            t += 1

    env = closing(game, num_envs=2, action_types=[Fire, Target])
    b = env.reset()
    assert sorted(env.action_space) == ["Fire", "Move", "Target"]
    assert b.num_actors("Fire") == 0 and b.num_actors("Target") == 0
    b = env.step({"Move": [0, 1]})
    assert b.num_actors("Fire") == 2 and b.num_actors("Move") == 0
    env.step({"Fire": [1, 1]})


@pytest.mark.parametrize(
    "mask",
    [[False, False, False], [], np.zeros(3, dtype=bool)],
    ids=["bools", "empty-collection", "array"],
)
def test_a_mask_that_leaves_no_legal_choice(closing, mask):
    def build(st):
        obs = gl.Obs()
        return obs.actor(Unit(0, 0), masks={Move: mask} if st.seed == seeds.get(1) else None)

    log = []
    seeds = {}
    env = closing(make_game(build_obs=build, log=log), num_envs=2, seed=0)
    env.reset()
    seeds[1] = start_seeds(log)[1]
    with pytest.raises(gl.InvalidObservationError, match=r"action type 'Move': an actor of slot 1 \(env 1\) has a mask that leaves no legal choice"):
        env.step({"Move": [0, 0]})


def test_a_select_entity_mask_that_leaves_no_legal_choice(closing):
    game = make_game(build_obs=lambda st: gl.Obs().entities([Enemy(1), Enemy(2)]).actor(Unit(0, 0), masks={Target: [False, False]}), action_types=(Target,))
    env = closing(game, num_envs=2)
    with pytest.raises(gl.InvalidObservationError, match=r"action type 'Target': an actor of slot 0 \(env 0\) has a mask that leaves no legal choice"):
        env.reset()


def test_select_entity_without_a_candidate(closing):
    game = make_game(build_obs=lambda st: gl.Obs().entities([Enemy(1)] * (1 - st.total)).actor(Unit(0, 0)), action_types=(Target,))
    env = closing(game, num_envs=2)
    env.reset()
    with pytest.raises(gl.InvalidObservationError, match=r"select-entity action 'Target': the actor of slot 0 has no candidate"):
        env.step({"Target": [0, 0]})


def test_bad_masks_inside_a_vecenv_name_the_slot(closing):
    game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(0, 0), masks={Move: [True]}))
    env = closing(game, num_envs=1)
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0, actor 0: mask for action type 'Move' has 1 entries, expected 3"):
        env.reset()
    game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(0, 0), masks={Fire: [Fire.NO]}))
    env = closing(game, num_envs=1, action_types=[Fire])
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0: the observation has masks for .*Fire.*, which act\(\) was not asked for"):
        env.reset()


def test_observation_without_actor(closing):
    env = closing(make_game(build_obs=lambda st: gl.Obs().entities(Unit(0, 0))), num_envs=1)
    with pytest.raises(gl.InvalidObservationError, match=r"slot 0: the observation has no actor, but action type\(s\) \[.Move.\] take one choice per actor"):
        env.reset()


def test_duplicate_type_names_are_schema_errors(closing):
    OtherMove = Enum("Move", ["A", "B"])
    game = make_game(build_obs=lambda st: gl.Obs().actor(Unit(0, 0)), action_types=(Move, OtherMove))
    with pytest.raises(gl.SchemaError, match=r"two different action types are both named 'Move'"):
        closing(game, num_envs=1).reset()

    @dataclass
    class Unit2:
        x: int

    gl.entity(Unit2, name="Unit")
    game = make_game(build_obs=lambda st: gl.Obs().entities(Unit2(1)).actor(Unit(0, 0)))
    with pytest.raises(gl.SchemaError, match=r"are both named 'Unit'; rename one with @gl.entity\(name=...\)"):
        closing(game, num_envs=1).reset()


# ---------------------------------------------------------------------- invalid actions


def _masked_env(closing):
    def build(st):
        return gl.Obs().entities([Enemy(1), Enemy(2)]).actor(Unit(0, 0), masks={Move: [Move.LEFT, Move.STAY], Target: [False, True]})

    env = closing(make_game(build_obs=build, action_types=(Move, Target)), num_envs=3, seed=0)
    env.reset()
    return env


@pytest.mark.parametrize(
    "actions, match",
    [
        ({"Move": [0, 3, 0], "Target": [1, 1, 1]}, r"action type 'Move', actor 1 \(env 1, slot 1\): action 3 is out of range \[0, 3\)"),
        ({"Move": [0, 0, -1], "Target": [1, 1, 1]}, r"action type 'Move', actor 2 \(env 2, slot 2\): action -1 is out of range"),
        ({"Move": [0, 0, 1], "Target": [1, 1, 1]}, r"action type 'Move', actor 2 \(env 2, slot 2\): action 1 is masked out \(legal: \['LEFT', 'STAY'\]\)"),
        ({"Move": [0, 0, 0], "Target": [1, 2, 1]}, r"action type 'Target', actor 1 \(env 1, slot 1\): action 2 is out of range \[0, 2\)"),
        ({"Move": [0, 0, 0], "Target": [0, 1, 1]}, r"action type 'Target', actor 0 \(env 0, slot 0\): action 0 is masked out \(legal candidate indices: \[1\]\)"),
        ({"Move": [0, 0], "Target": [1, 1, 1]}, r"actions for 'Move' must have shape \(3,\) \(one per actor\), got \(2,\)"),
        ({"Move": [[0], [0], [0]], "Target": [1, 1, 1]}, r"actions for 'Move' must have shape \(3,\) \(one per actor\), got \(3, 1\)"),
        ({"Move": 0, "Target": [1, 1, 1]}, r"actions for 'Move' must have shape \(3,\) \(one per actor\), got \(\)"),
        ({"Move": [0.0, 0.0, 0.0], "Target": [1, 1, 1]}, r"actions for 'Move' must be integers, got dtype float64"),
        ({"Move": [True, False, True], "Target": [1, 1, 1]}, r"actions for 'Move' must be integers, got dtype bool"),
        ({"Move": ["0", "0", "0"], "Target": [1, 1, 1]}, r"actions for 'Move' must be integers, got dtype <U1"),
        ({"Move": [0, 0, 0]}, r"missing actions for action type 'Target': expected an int array of shape \(3,\)"),
        ({"Move": [0, 0, 0], "Target": [1, 1, 1], "Jump": [0]}, r"unknown action type\(s\) \['Jump'\]"),
    ],
    ids=["high", "negative", "masked", "select-high", "select-masked", "short", "2d", "scalar", "float", "bool", "str", "missing", "unknown"],
)
def test_invalid_actions(closing, actions, match):
    env = _masked_env(closing)
    with pytest.raises(gl.InvalidActionError, match=match):
        env.step({k: np.asarray(v) if not isinstance(v, int) else v for k, v in actions.items()})
    b = env.step({"Move": np.array([2, 0, 2]), "Target": np.array([1, 1, 1])})  # still usable
    assert isinstance(b, gl.Batch)


def test_actions_must_be_a_mapping(closing):
    env = _masked_env(closing)
    with pytest.raises(gl.InvalidActionError, match=r"step expects a dict from action type name to an int array, got list"):
        env.step([[0, 0, 0], [1, 1, 1]])


def test_ragged_actions_are_invalid_actions(closing):
    env = _masked_env(closing)
    with pytest.raises(gl.InvalidActionError, match=r"actions for 'Move'"):
        env.step({"Move": [[0], [0, 0], 0], "Target": [1, 1, 1]})


def test_unchecked_vecenv_still_checks_the_first_step(closing):
    def build(st):
        return gl.Obs().actor(Unit(0, 0), masks={Move: [Move.LEFT]})

    env = closing(make_game(build_obs=build), num_envs=2, checked=False)
    env.reset()
    with pytest.raises(gl.InvalidActionError, match=r"masked out"):
        env.step({"Move": [1, 1]})
    env.step({"Move": [0, 0]})
    env.step({"Move": np.array([0, 0], dtype=np.int32)})


_FUZZ_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32, np.float64, np.bool_]


def _fuzz_game(agent, seed):
    rng = random.Random(seed)
    while True:
        enemies = [Enemy(i) for i in range(1 + rng.randrange(3))]
        ok = [rng.random() < 0.5 for _ in Move]
        ok[rng.randrange(3)] = True
        targets = [e for e in enemies if rng.random() < 0.5] or [enemies[-1]]
        agent.act(gl.Obs().entities(enemies).actor(Unit(0, 0), masks={Move: ok, Target: targets}), Move, Target)


def _is_legal(b, actions):
    """The oracle: is ``actions`` legal for batch ``b``, judged independently of the library."""
    if set(actions) - {"Move", "Target"}:
        return False
    for name in ("Move", "Target"):
        n_act = b.num_actors(name)
        if name not in actions:
            return n_act == 0
        arr = np.asarray(actions[name])
        if arr.dtype.kind not in "iu" or arr.shape != (n_act,):
            return False
        nc = b.num_candidates.get(name)
        start = 0
        for j, v in enumerate(int(x) for x in arr):
            if name == "Move":
                if not (0 <= v < 3 and b.masks["Move"][j, v]):
                    return False
            else:
                if not (0 <= v < nc[j] and b.masks["Target"][start + v]):
                    return False
                start += int(nc[j])
    return True


@settings(max_examples=150)
@given(data=st.data(), seed=st.integers(0, 3), steps=st.integers(1, 3))
def test_fuzzed_actions_are_accepted_or_invalid_action_errors(data, seed, steps):
    env = gl.VecEnv(_fuzz_game, num_envs=3, seed=seed)
    try:
        b = env.reset()
        for _ in range(steps):
            actions = {}
            for name in ("Move", "Target"):
                how = data.draw(st.sampled_from(["legal", "legal", "array", "array-of-right-shape", "python", "missing"]))
                if how == "legal":
                    dtype = data.draw(st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint64]))
                    actions[name] = env.sample_actions()[name].astype(dtype)
                elif how.startswith("array"):
                    dtype = data.draw(st.sampled_from(_FUZZ_DTYPES))
                    shape = (b.num_actors(name),) if how == "array-of-right-shape" else data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
                    actions[name] = data.draw(hnp.arrays(dtype, shape))
                elif how == "python":
                    actions[name] = data.draw(st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.floats(), st.lists(st.integers(-2, 4), max_size=4)))
            if data.draw(st.integers(0, 9), label="extra key") == 0:
                actions["Jump"] = np.zeros(3, dtype=np.int64)
            legal = _is_legal(b, actions)
            try:
                out = env.step(actions)
            except gl.InvalidActionError:
                event("rejected")
                assert not legal, f"legal actions rejected: {actions}"
            else:
                event("accepted")
                assert legal, f"illegal actions accepted: {actions}"
                assert isinstance(out, gl.Batch)
                b = out
    finally:
        env.close()


# ---------------------------------------------------------------------- game errors


def test_a_game_that_raises_becomes_a_game_error(closing):
    target = {}

    def on_step(st, answer):
        if st.seed == target.get("seed") and st.total == 2:
            raise ZeroDivisionError("boom in the game")

    log = []
    game = make_game(on_step=on_step, log=log)
    env = closing(game, num_envs=3, seed=0)
    env.reset()
    seeds = start_seeds(log)
    target["seed"] = seeds[1]
    env.step({"Move": [0, 0, 0]})
    with pytest.raises(gl.GameError, match=r"game copy 1 raised ZeroDivisionError: boom in the game \(replay it with gl.run\(game, agent, seed=\d+\)\)") as info:
        env.step({"Move": [0, 0, 0]})
    err = info.value
    assert err.env_index == 1
    assert err.seed == seeds[1]
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert "Traceback" in err.original_traceback and "ZeroDivisionError: boom in the game" in err.original_traceback
    assert isinstance(err, gl.GymloopError)
    # the other games went on: they answered both decisions and wait for the next one
    acts = [s for s, _ in events(log, "act")]
    assert acts.count(seeds[0]) == acts.count(seeds[2]) == 2
    assert [s for s, _ in events(log, "finally")] == [seeds[1]]
    with pytest.raises(gl.EnvStateError, match=r"a game raised in an earlier step; call env.reset\(\)"):
        env.step({"Move": [0, 0, 0]})
    env.close()
    assert sorted(s for s, _ in events(log, "finally")) == sorted(seeds)
    # the reported seed replays the failure outside the VecEnv
    with pytest.raises(ZeroDivisionError, match="boom in the game"):
        gl.run(game, gl.RandomAgent(0), seed=err.seed, max_steps=10)


def test_reset_after_a_game_error_restarts_every_game(closing):
    def on_step(st, answer):
        if st.total == 1 and st.data.setdefault("first", not failed):
            failed.append(st.seed)
            raise RuntimeError("once")

    failed = []
    log = []
    env = closing(make_game(on_step=on_step, log=log), num_envs=2, seed=0)
    env.reset()
    with pytest.raises(gl.GameError, match=r"game copy 0 raised RuntimeError: once"):
        env.step({"Move": [0, 0]})
    b = env.reset()
    assert len(start_seeds(log)) == 4
    assert len(events(log, "finally")) == 2  # the failed game and the one closed by reset
    assert b.active.all()
    env.step({"Move": [0, 0]})


def test_game_error_at_reset_and_in_several_games(closing):
    def game(agent, seed):
        raise ValueError(f"bad start {seed}")

    env = closing(game, num_envs=3)
    with pytest.raises(gl.GameError, match=r"game copy 0 raised ValueError: bad start \d+[\s\S]*\(2 other game copies failed in the same step: \d+, \d+\)") as info:
        env.reset()
    assert info.value.env_index == 0


def test_game_error_pickles_with_its_attributes():
    err = gl.GameError("game copy 3 raised", env_index=3, seed=42, original_traceback="Traceback ...")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is gl.GameError
    assert (str(back), back.env_index, back.seed, back.original_traceback) == ("game copy 3 raised", 3, 42, "Traceback ...")


def test_a_game_that_returns_without_acting(closing):
    def game(agent, seed):
        return None

    env = closing(game, num_envs=2)
    with pytest.raises(gl.GameError, match=r"game 'game' \(env 0\) returned without asking its agent for a decision") as info:
        env.reset()
    assert info.value.env_index == 0


def test_a_restarted_game_that_returns_without_acting(closing):
    runs = []

    def game(agent, seed):
        runs.append(seed)
        if len(runs) <= 2:
            agent.act(gl.Obs().actor(Unit(0, 0)), Move)

    env = closing(game, num_envs=2)
    env.reset()
    with pytest.raises(gl.GameError, match=r"returned without asking its agent for a decision"):
        env.step({"Move": [0, 0]})


def test_act_without_action_types_in_a_vecenv(closing):
    def game(agent, seed):
        agent.act(gl.Obs().actor(Unit(0, 0)))

    with pytest.raises(gl.GameError, match=r"raised ConfigError: act needs at least one action type"):
        closing(game, num_envs=1).reset()


# ---------------------------------------------------------------------- lifecycle


def test_step_and_spaces_before_reset(closing):
    env = closing(make_game(), num_envs=2)
    with pytest.raises(gl.EnvStateError, match=r"step\(\) before reset\(\); call env.reset\(\) first"):
        env.step({"Move": [0, 0]})
    with pytest.raises(gl.EnvStateError, match=r"sample_actions\(\) before reset\(\)"):
        env.sample_actions()
    with pytest.raises(gl.EnvStateError, match=r"the spaces are fixed by the first reset\(\)"):
        env.obs_space  # noqa: B018 - the property raises


def test_step_and_reset_after_close():
    env = gl.VecEnv(make_game(), num_envs=2)
    env.reset()
    env.close()
    assert env.closed
    with pytest.raises(gl.EnvStateError, match=r"step\(\) after close\(\); make a new VecEnv"):
        env.step({"Move": [0, 0]})
    with pytest.raises(gl.EnvStateError, match=r"reset\(\) after close\(\)"):
        env.reset()


def test_close_twice_and_close_before_reset_are_fine():
    env = gl.VecEnv(make_game(), num_envs=2)
    env.close()
    env.close()
    assert env.closed
    env = gl.VecEnv(make_game(), num_envs=2)
    env.reset()
    env.close()
    env.close()


def test_close_runs_every_games_finally_block_at_its_act_call():
    log = []
    env = gl.VecEnv(make_game(log=log), num_envs=4, seed=0)
    env.reset()
    env.step(env.sample_actions())
    assert events(log, "finally") == []
    env.close()
    assert sorted(s for s, _ in events(log, "finally")) == sorted(start_seeds(log))
    assert len(events(log, "act")) == 4  # closed at the second act call, which never returned


def test_reset_closes_the_running_games_first():
    log = []
    env = gl.VecEnv(make_game(log=log), num_envs=2, seed=0)
    env.reset()
    env.reset()
    assert len(events(log, "finally")) == 2 and len(start_seeds(log)) == 4
    env.close()
    assert len(events(log, "finally")) == 4


def test_context_manager_and_garbage_collection_close_the_games():
    log = []
    with gl.VecEnv(make_game(log=log), num_envs=2) as env:
        env.reset()
    assert env.closed and len(events(log, "finally")) == 2
    log.clear()
    env = gl.VecEnv(make_game(log=log), num_envs=2)
    env.reset()
    del env
    gc.collect()
    assert len(events(log, "finally")) == 2


def test_close_survives_a_game_raising_in_its_finally_block(caplog):
    log = []

    def game(agent, seed):
        try:
            while True:
                agent.act(gl.Obs().actor(Unit(0, 0)), Move)
        finally:
            log.append(seed)
            if len(log) == 1:
                raise RuntimeError("finally went wrong")

    env = gl.VecEnv(game, num_envs=3)
    env.reset()
    env.close()
    assert len(log) == 3
    assert "raised while being closed" in caplog.text


def test_a_game_that_asks_again_while_closing_is_stopped():
    log = []

    def game(agent, seed):
        try:
            agent.act(gl.Obs().actor(Unit(0, 0)), Move)
        finally:
            try:
                agent.act(gl.Obs().actor(Unit(0, 0)), Move)
            finally:
                log.append(seed)

    env = gl.VecEnv(game, num_envs=2)
    env.reset()
    env.close()
    assert len(log) == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_envs": 0}, r"num_envs must be an int >= 1, got 0"),
        ({"num_envs": -3}, r"num_envs must be an int >= 1, got -3"),
        ({"num_envs": 2.0}, r"num_envs must be an int >= 1, got 2.0"),
        ({"num_envs": True}, r"num_envs must be an int >= 1, got True"),
        ({"num_envs": 2, "workers": -1}, r"workers must be an int >= 0, got -1"),
        ({"num_envs": 2, "workers": 3}, r"workers=3 is more than num_envs=2"),
        ({"num_envs": 2, "agents_per_game": 0}, r"agents_per_game must be an int >= 1, got 0"),
        ({"num_envs": 2, "seed": -1}, r"seed must be a non-negative int, got -1"),
        ({"num_envs": 2, "seed": 1.5}, r"seed must be a non-negative int, got 1.5"),
    ],
)
def test_bad_vecenv_arguments(kwargs, match):
    with pytest.raises(gl.ConfigError, match=match):
        gl.VecEnv(make_game(), **kwargs)


def test_bad_game_arguments():
    with pytest.raises(gl.ConfigError, match=r"game must be a game loop function or a gl.Environment class, got 3"):
        gl.VecEnv(3, num_envs=1)
    with pytest.raises(gl.ConfigError, match=r"agents_per_game applies to game loops"):
        gl.VecEnv(Guess, num_envs=1, agents_per_game=2)


def test_chained_resumption_with_act_all_returns_and_a_raise():
    """Games resumed as a chain: some ask through act_all, some return (restart), one raises."""
    from enum import Enum as _Enum

    class Pick(_Enum):
        A = 0
        B = 1
        C = 2

    @dataclass
    class Who:
        env: int

    got: dict[int, list[str]] = {}

    def game(agent, seed):
        env = seed % 1000  # the test passes env indices through the seed below
        t = 0
        while True:
            obs = gl.Obs(score=t).actor(Who(env))
            if env % 3 == 1:
                (m,) = gl.act_all([(agent, obs, Pick)])
            else:
                m = agent.act(obs, Pick)
            got.setdefault(env, []).append(m.name)
            t += 1
            if env % 3 == 2 and t % 4 == 0:
                return  # restarted with a fresh seed
            if env == 4 and t == 6:
                raise ValueError("env 4 fails at its 6th decision")

    import gymloop.runtime.shard as shard_mod

    orig = shard_mod.seed_base, shard_mod.seed_of_run
    # seed == env index, for the test
    shard_mod.seed_base, shard_mod.seed_of_run = (lambda seed, env, gen=0: env), (lambda base, restart: base)
    try:
        env = gl.VecEnv(game, num_envs=6, seed=0)
        b = env.reset()
        sent = []
        for i in range(5):
            n = b.actor_index["Pick"].shape[0]
            a = np.array([(i + s) % 3 for s in range(n)], dtype=np.int64)
            sent.append(a)
            b = env.step({"Pick": a})
        with pytest.raises(gl.GameError, match="env 4 fails at its 6th decision") as info:
            env.step({"Pick": np.zeros(b.actor_index["Pick"].shape[0], dtype=np.int64)})
        assert info.value.env_index == 4
        env.close()
    finally:
        shard_mod.seed_base, shard_mod.seed_of_run = orig
    names = ["A", "B", "C"]
    for e in range(6):
        assert got[e][:5] == [names[(i + e) % 3] for i in range(5)], (e, got[e])


def test_keyboard_interrupt_inside_a_game_leaves_no_stale_chain():
    """Ctrl-C arrives while some game runs; after reset every game gets its own actions again."""
    from enum import Enum as _Enum

    class Go(_Enum):
        A = 0
        B = 1

    @dataclass
    class Me:
        env: int

    state = {"interrupt": False}
    got: dict[int, list[str]] = {}

    def game(agent, seed):
        env = seed % 1000
        while True:
            m = agent.act(gl.Obs().actor(Me(env)), Go)
            got.setdefault(env, []).append(m.name)
            if state["interrupt"] and env == 1:
                state["interrupt"] = False
                raise KeyboardInterrupt

    import gymloop.runtime.shard as shard_mod

    orig = shard_mod.seed_base, shard_mod.seed_of_run
    shard_mod.seed_base, shard_mod.seed_of_run = (lambda seed, env, gen=0: env), (lambda base, restart: base)
    try:
        with gl.VecEnv(game, num_envs=4) as env:
            env.reset()
            state["interrupt"] = True
            with pytest.raises(KeyboardInterrupt):
                env.step({"Go": np.zeros(4, dtype=np.int64)})
            got.clear()
            env.reset()
            assert env._state.backend.ex.chain is None
            env.step({"Go": np.array([0, 1, 0, 1])})
            env.step({"Go": np.array([1, 1, 0, 0])})
    finally:
        shard_mod.seed_base, shard_mod.seed_of_run = orig
    assert {e: got[e] for e in range(4)} == {0: ["A", "B"], 1: ["B", "B"], 2: ["A", "A"], 3: ["B", "A"]}
