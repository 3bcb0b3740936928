"""``gl.load``: a trained agent back in the game, numpy only.

The agent's direct path (one ``gl.Obs`` to network inputs, no VecEnv) is checked against the
executor's batches: the same arrays exactly, and the same outputs as numpy and torch forward passes.
"""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.policies import game_policy, write_policy
from support.train_games import rovers

import gymloop as gl  # noqa: E402
from gymloop.games import duel as duel_mod  # noqa: E402
from gymloop.games import snake as snake_mod  # noqa: E402
from gymloop.games import tactics as tactics_mod  # noqa: E402
from gymloop.neural import NeuralAgent, load  # noqa: E402
from gymloop.nn.config import NetConfig  # noqa: E402
from gymloop.nn.numpy_policy import NumpyPolicy  # noqa: E402


# ---------------------------------------------------------------------- a test game with everything
@dataclass
class Trooper:
    x: int
    y: int
    hp: float


@dataclass
class Raider:
    x: int
    y: int
    hp: float


@dataclass
class Clock:
    t: int
    left: int


class Stance(Enum):
    HOLD = 0
    ADVANCE = 1
    RETREAT = 2


Aim = gl.SelectEntity("Aim", among=(Trooper, Raider))  # candidate order is not the type order


@gl.game(entities=[Trooper, Raider], actions=[Stance, Aim], globals=Clock)
def skirmish(agent, seed):
    """Several actors, two action types (categorical and select-entity over two types), masks, globals, relpos."""
    rng = random.Random(seed)
    t = 0
    while True:
        troopers = [Trooper(rng.randrange(-12, 12), rng.randrange(8), rng.random()) for _ in range(rng.randint(1, 3))]
        raiders = [Raider(rng.randrange(8), rng.randrange(-12, 12), rng.random()) for _ in range(rng.randint(0, 4))]
        cands = troopers + raiders
        stance = [[rng.random() < 0.6 for _ in Stance] for _ in troopers]
        for m in stance:
            m[rng.randrange(3)] = True
        aim = [rng.sample(cands, rng.randint(1, len(cands))) if rng.random() < 0.7 else None for _ in troopers]
        obs = gl.Obs(score=t).entities(raiders[:1]).actors(troopers, masks={Stance: stance, Aim: aim})
        obs = obs.entities(raiders[1:]).globals(Clock(t, 50 - t))
        agent.act(obs, Stance, Aim)
        t += 1
        if t == 50:
            agent.game_over(gl.Obs(score=t), truncated=True)
            t = 0


@dataclass
class Marker:
    hp: float


@dataclass
class Token:  # a featureless entity type
    pass


class Flip(Enum):
    HEADS = 0
    TAILS = 1


Pick = gl.SelectEntity("Pick", among=(Token, Marker))


@gl.game(entities=[Marker, Token], actions=[Flip, Pick])
def tokens(agent, seed):
    """A featureless entity type (no globals, so its embedding is a learned vector)."""
    rng = random.Random(seed)
    while True:
        markers = [Marker(rng.random() * 4) for _ in range(rng.randint(1, 3))]
        toks = [Token() for _ in range(rng.randint(0, 3))]
        agent.act(gl.Obs().entities(toks).actors(markers), Flip, Pick)


@gl.game(entities=[Marker, Token], actions=[Flip], globals=Clock)
def beacons(agent, seed):
    """An entity type without features of its own, embedded from the global features alone."""
    rng = random.Random(seed)
    t = 0
    while True:
        markers = [Marker(rng.random() * 4) for _ in range(rng.randint(1, 2))]
        obs = gl.Obs().entities([Token() for _ in range(rng.randint(0, 3))]).actors(markers).globals(Clock(t, 9 - t))
        agent.act(obs, Flip)
        t = (t + 1) % 10


GAMES = {
    "snake": (snake_mod.snake, 1),
    "tactics": (tactics_mod.tactics, 1),
    "duel": (duel_mod.duel, 2),
    "skirmish": (skirmish, 1),
    "tokens": (tokens, 1),
    "beacons": (beacons, 1),
    "rovers": (rovers, 1),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


_ckpt: dict[tuple, tuple] = {}


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ckpt")


def checkpoint(ckpt_dir, name: str, cfg: NetConfig | None = None):
    """(path, torch policy) of a random agent for one of GAMES (cached per module)."""
    key = (name, repr(cfg))
    if key not in _ckpt:
        game, apg = GAMES[name]
        pol = game_policy_apg(game, apg, cfg)
        path = ckpt_dir / f"{name}{len(_ckpt)}.safetensors"
        write_policy(path, pol)
        _ckpt[key] = (path, pol)
    return _ckpt[key]


def game_policy_apg(game, apg, cfg):
    if apg == 1:
        return game_policy(game, cfg)
    from support.policies import random_policy

    with gl.VecEnv(game, num_envs=2, agents_per_game=apg, seed=0) as env:
        b = env.reset()
        pol = random_policy(env.obs_space, env.action_space, cfg or NetConfig())
        for n in pol.norms.values():
            n.count.zero_()
        for _ in range(4):
            pol.update_norms(pol.pack(b))
            b = env.step(env.sample_actions())
    return pol


def env_batches(name: str, steps: int, num_envs: int = 6):
    """(batch, [(obs, action types) per slot]) of a VecEnv playing randomly."""
    game, apg = GAMES[name]
    with gl.VecEnv(game, num_envs=num_envs, agents_per_game=apg, seed=1) as env:
        b = env.reset()
        for _ in range(steps):
            ex = env._state.backend.ex
            assert all(o is not None for o in ex.pobs)
            yield b, [(ex.pobs[s], ex.ptypes[s]) for s in range(env.num_slots)]
            b = env.step(env.sample_actions())


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


# ---------------------------------------------------------------------- the direct path is exact
CONFIGS = {
    "snake": [None, NetConfig(readout=False, n_layer=2)],
    "tactics": [None, NetConfig(n_layer=2)],
    "duel": [None],
    "skirmish": [None, NetConfig(readout=False), NetConfig(n_layer=3)],
    "tokens": [None, NetConfig(readout=False, n_layer=2)],
    "beacons": [None, NetConfig(readout=False)],
    "rovers": [None, NetConfig(readout=False, n_layer=2)],  # net.frame auto (checked below)
}


def test_the_rover_game_uses_the_frame(ckpt_dir):
    _, tpol = checkpoint(ckpt_dir, "rovers")
    assert tpol.frame is not None and tpol.frame.reference == "Rover" and load(checkpoint(ckpt_dir, "rovers")[0]).policy.frame == tpol.frame


@pytest.mark.parametrize("name", list(GAMES))
def test_direct_path_packs_exactly_like_the_executors_batch(ckpt_dir, name):
    path, _ = checkpoint(ckpt_dir, name)
    agent = load(path, seed=0)
    npol = agent.policy
    for b, reqs in env_batches(name, 12):
        ref = npol.pack(b)
        mine, _ = agent.encoder.packed([(agent, obs, *types) for obs, types in reqs])
        assert (mine.S, mine.L) == (ref.S, ref.L)
        for k in ref.feats:
            np.testing.assert_array_equal(mine.feats[k], ref.feats[k], err_msg=k)
            np.testing.assert_array_equal(mine.dest[k], ref.dest[k], err_msg=k)
        for field in ("valid", "lengths", "positions"):
            a, r = getattr(mine, field), getattr(ref, field)
            assert (a is None) == (r is None), field
            if r is not None:
                np.testing.assert_array_equal(a, r, err_msg=field)
                assert a.dtype == r.dtype, field
        for field in ("actors", "masks", "cand", "cand_seg", "n_cand"):
            a, r = getattr(mine, field), getattr(ref, field)
            assert a.keys() == r.keys(), field
            for k in r:
                np.testing.assert_array_equal(a[k], r[k], err_msg=f"{field}[{k}]")


@pytest.mark.parametrize("name, cfg", [(n, c) for n, cs in CONFIGS.items() for c in cs])
def test_single_observation_equals_batched_numpy_and_torch(ckpt_dir, name, cfg):
    path, tpol = checkpoint(ckpt_dir, name, cfg)
    agent = load(path, seed=0)
    npol = agent.policy
    for b, reqs in env_batches(name, 6, num_envs=4):
        out = npol.forward(npol.pack(b))
        with torch.no_grad():
            tout = tpol(tpol.pack(b))
        pos = {k: 0 for k in npol.action_space}
        for obs, types in reqs:
            logits = agent.logits(obs, *types)
            n_act = len(obs.actor_list)
            for t, lg in zip(types, logits):
                name_t = gl.action_spec(t).name
                o = pos[name_t]
                if lg.ndim == 2 and gl.action_spec(t).kind == "categorical":
                    ref_np = out.logits[name_t][o : o + n_act]
                    ref_torch = tout.logits[name_t][o : o + n_act].numpy()
                    pos[name_t] += n_act
                else:
                    nc = lg.shape[1]
                    ref_np = out.logits[name_t][o : o + n_act * nc].reshape(n_act, nc)
                    ref_torch = tout.logits[name_t][o : o + n_act * nc].numpy().reshape(n_act, nc)
                    pos[name_t] += n_act * nc
                assert np.array_equal(np.isneginf(lg), np.isneginf(ref_np))
                fin = np.isfinite(lg)
                np.testing.assert_allclose(lg[fin], ref_np[fin], atol=1e-4, rtol=0)
                lp = log_softmax(lg)
                np.testing.assert_allclose(np.exp(lp), np.exp(ref_torch), atol=1e-5, rtol=0)
                np.testing.assert_allclose(lp[fin], ref_torch[fin], atol=1e-4, rtol=0)


def test_mixed_type_chunks_and_emptied_lists(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    agent = load(path)
    S = snake_mod
    head, food, body = S.Head(3, 3), [S.Food(1, 1), S.Food(5, 2)], [S.Body(3, 2), S.Body(3, 1)]
    grouped = gl.Obs().entities(food).entities(body).actor(head)
    mixed = gl.Obs().entities([body[0], food[0], body[1], food[1]]).entities([]).actor(head)
    np.testing.assert_array_equal(agent.logits(mixed, S.Move)[0], agent.logits(grouped, S.Move)[0])


# ---------------------------------------------------------------------- playing
@pytest.mark.parametrize("name", ["snake", "tactics", "skirmish", "tokens", "beacons"])
def test_plays_a_game_legally_and_reproducibly(ckpt_dir, name):
    path, _ = checkpoint(ckpt_dir, name)
    game = GAMES[name][0]
    runs = [gl.run(game, load(path, seed=s), seed=3, max_steps=150) for s in (0, 0, 1)]  # check=True: legal
    assert runs[0].steps == 150
    key = [(e.score, e.length) for e in runs[0].episodes], [(e.score, e.length) for e in runs[1].episodes]
    assert key[0] == key[1]


def test_seeded_and_greedy_choices(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "skirmish")
    obs_list = []

    class Rec:
        def act(self, obs, *types):
            obs_list.append((obs, types))
            return gl.RandomAgent(0).act(obs, *types)

        def game_over(self, obs, truncated=False):
            pass

    gl.run(skirmish, Rec(), seed=0, max_steps=30)

    def choices(agent):
        return [agent.act(o, *t) for o, t in obs_list]

    assert choices(load(path, seed=4)) == choices(load(path, seed=4))
    assert choices(load(path, seed=4)) != choices(load(path, seed=5))
    greedy = load(path, greedy=True)
    for obs, types in obs_list:
        stances, aims = greedy.act(obs, *types)
        lg_stance, lg_aim = greedy.logits(obs, *types)
        assert [s.name for s in stances] == [greedy.policy.action_space["Stance"].labels[i] for i in lg_stance.argmax(-1)]
        cands = obs.entities_of(Aim.among)
        assert all(a is cands[i] for a, i in zip(aims, lg_aim.argmax(-1)))
    assert choices(greedy) == choices(load(path, seed=9, greedy=True))


def test_single_actor_results_are_values_and_several_are_lists(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "skirmish")
    agent = load(path, seed=0)
    t1, t2, r = Trooper(0, 0, 1.0), Trooper(1, 1, 0.5), Raider(2, 2, 1.0)
    stance, aim = agent.act(gl.Obs().entities(r).actor(t1).globals(Clock(1, 2)), Stance, Aim)
    assert isinstance(stance, Stance) and (aim is t1 or aim is r)
    only = agent.act(gl.Obs().actors([t1, t2], masks={Aim: [[r], [r]]}).entities(r).globals(Clock(1, 2)), Aim)
    assert only == [r, r]


def test_act_all_serves_agents_of_one_policy_with_one_forward_pass(ckpt_dir, monkeypatch):
    path, _ = checkpoint(ckpt_dir, "duel")
    a, b = load(path, seed=1), load(path, seed=2)
    assert a.policy is b.policy and a._act_group is b._act_group
    c = a.fork(seed=3)
    assert c.policy is a.policy and not c.greedy
    game = duel_mod.DuelGame(5)
    expected = []
    observations = []
    ref_a, ref_b = load(path, seed=1), load(path, seed=2)
    for _ in range(20):
        o0, o1 = game.observe(0), game.observe(1)
        observations.append(copy.deepcopy((o0, o1)))  # the game mutates the lists it observed
        expected.append([ref_a.act(o0, duel_mod.Move), ref_b.act(o1, duel_mod.Move)])
        game.step(expected[-1])
        if game.over:
            game.reset()
    calls = {"forward": 0}
    forward = a.policy.logits

    def counting(*args, **kw):
        calls["forward"] += 1
        return forward(*args, **kw)

    monkeypatch.setattr(a.policy, "logits", counting)
    monkeypatch.setattr(a.policy, "logits_one", None)  # the one-observation path must not run
    got = [gl.act_all([(a, o0, duel_mod.Move), (b, o1, duel_mod.Move)]) for o0, o1 in observations]
    assert calls["forward"] == len(observations)
    assert got == expected  # the same draws from each agent's generator as its own act


def test_duel_self_play_through_run(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "duel")
    a = load(path, seed=0)
    r = gl.run(duel_mod.duel, [a, a.fork(seed=1)], seed=0, max_steps=200)
    assert r.steps == 200


# ---------------------------------------------------------------------- matching by name
def test_game_with_added_features_types_and_labels_loads_an_older_agent(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    agent = load(path, greedy=True)
    S = snake_mod

    @gl.entity(name="Head")
    @dataclass
    class NewHead:
        speed: float
        y: int
        x: int

    @gl.entity(name="Food")
    @dataclass
    class NewFood:
        x: int
        y: int
        calories: float

    @dataclass
    class Rock:  # an entity type the checkpoint does not know: not fed to the network
        x: int
        y: int

    class Move(Enum):  # labels in another order, and one more
        NOOP = 9
        RIGHT = 3
        LEFT = 2
        DOWN = 1
        UP = 0

    old = gl.Obs().entities([S.Food(1, 1), S.Food(7, 2)]).entities([S.Body(3, 2)]).actor(S.Head(3, 3))
    new = gl.Obs().entities([Rock(0, 0)]).entities([NewFood(1, 1, 9.0), NewFood(7, 2, 1.0)])
    new = new.entities([S.Body(3, 2), Rock(5, 5)]).actor(NewHead(2.5, 3, 3))
    np.testing.assert_array_equal(agent.logits(new, Move)[0], agent.logits(old, S.Move)[0])
    assert agent.act(new, Move).name == agent.act(old, S.Move).name
    # masks are mapped by name; a legal choice the checkpoint cannot make is never chosen
    m = gl.Obs().actor(NewHead(0, 3, 3), masks={Move: [Move.NOOP, Move.LEFT]})
    assert agent.act(m, Move) is Move.LEFT
    only_new = gl.Obs().actor(NewHead(0, 3, 3), masks={Move: [Move.NOOP]})
    with pytest.raises(gl.CheckpointError, match=r"may only choose \['NOOP'\].*labels the checkpoint does not know"):
        agent.act(only_new, Move)


def test_what_the_game_lacks_is_named(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    agent = load(path)
    S = snake_mod

    @gl.entity(name="Head")
    @dataclass
    class FlatHead:
        x: int

    class Move(Enum):
        UP = 0
        DOWN = 1
        LEFT = 2

    class Jump(Enum):
        YES = 0

    @dataclass
    class Rock:
        x: int
        y: int

    with pytest.raises(gl.CheckpointError, match=r"entity type 'Head' \(class .*FlatHead\) lacks the features \['y'\]"):
        agent.act(gl.Obs().actor(FlatHead(1)), S.Move)
    with pytest.raises(gl.CheckpointError, match=r"action type 'Move' lacks the labels \['RIGHT'\]"):
        agent.act(gl.Obs().actor(S.Head(1, 1)), Move)
    with pytest.raises(gl.CheckpointError, match=r"has no action type 'Jump'; it was trained for \['Move'\]"):
        agent.act(gl.Obs().actor(S.Head(1, 1)), Jump)
    with pytest.raises(gl.CheckpointError, match=r"an actor is of entity type 'Rock', which the checkpoint does not know"):
        agent.act(gl.Obs().actor(Rock(1, 1)), S.Move)
    Pick = gl.SelectEntity("Move", among=S.Food)
    with pytest.raises(gl.CheckpointError, match="action type 'Move' is select_entity in the game but categorical in the checkpoint"):
        agent.act(gl.Obs().actor(S.Head(1, 1)).entities(S.Food(2, 2)), Pick)
    with pytest.raises(gl.InvalidObservationError, match="feature 'x' is nan"):
        agent.act(gl.Obs().actor(S.Head(float("nan"), 1)), S.Move)


def test_missing_globals_and_candidate_types_are_named(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "skirmish")
    agent = load(path, seed=0)

    @gl.entity(name="Clock")
    @dataclass
    class ShortClock:
        t: int

    t = Trooper(0, 0, 1.0)
    with pytest.raises(gl.CheckpointError, match=r"needs the global features \['t', 'left'\].*obs.globals"):
        agent.act(gl.Obs().actor(t), Stance)
    with pytest.raises(gl.CheckpointError, match=r"the globals 'Clock' lack the features \['left'\]"):
        agent.act(gl.Obs().actor(t).globals(ShortClock(1)), Stance)
    NarrowAim = gl.SelectEntity("Aim", among=Raider)
    with pytest.raises(gl.CheckpointError, match=r"lacks the entity types \['Trooper'\] of the checkpoint"):
        agent.act(gl.Obs().actor(t).entities(Raider(1, 1, 1.0)).globals(Clock(0, 1)), NarrowAim)


def test_check_a_declared_game(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    load(path, game=snake_mod.snake)  # fine
    S = snake_mod

    @gl.game(entities=[S.Head, S.Body], actions=[S.Move])
    def no_food(agent, seed):
        while True:
            agent.act(gl.Obs().actor(S.Head(1, 1)), S.Move)

    with pytest.raises(gl.CheckpointError, match=r"the game lacks the entity types \['Food'\].*declaration and its first observation"):
        load(path, game=no_food)
    with pytest.raises(gl.GameError, match="returned without asking its agent for a decision"):
        load(path, game=lambda agent, seed: None)  # the check runs the game to its first observation


def test_check_an_undeclared_game_by_what_it_builds(ckpt_dir):
    """Issue 11: a game need not declare its types (or globals) for ``gl.load(path, game=...)``: the
    types of its first observation count, matched by name; a real mismatch is still a CheckpointError."""
    path, _ = checkpoint(ckpt_dir, "duel")  # entity types, globals (DuelStatus) and two agents
    D = duel_mod

    def make(status, declare=True):
        def game(agents, seed):
            while True:
                for a in agents:
                    obs = (gl.Obs().actor(D.Head(1, 1)).entities([D.Body(1, 0)]).entities([D.Food(3, 3)])
                           .entities(D.OpponentHead(5, 5)).entities([D.OpponentBody(5, 4)]))
                    if status is not None:
                        obs.globals(status(3, 2, 10))
                    a.act(obs, D.Move)

        return gl.game(agents=2)(game) if declare else game

    agent = load(path, game=make(D.DuelStatus))  # no entities=, no globals= declared
    assert agent.act(gl.Obs().actor(D.Head(1, 1)).globals(D.DuelStatus(1, 1, 5)), D.Move) in list(D.Move)
    agent.check(make(D.DuelStatus, declare=False), agents_per_game=2)  # not even agents=2

    @gl.entity(name="DuelStatus")
    @dataclass
    class Short:
        length: int
        opponent_length: int

        def __init__(self, length, opponent_length, steps_left):
            self.length, self.opponent_length = length, opponent_length

    with pytest.raises(gl.CheckpointError, match=r"the globals 'DuelStatus' lack the features \['steps_left'\]"):
        load(path, game=make(Short))
    with pytest.raises(gl.CheckpointError, match=r"needs the global features \['length', 'opponent_length', 'steps_left'\], "
                                                 r"but the game neither declares globals .* nor gives them in its first observation"):
        load(path, game=make(None))


# ---------------------------------------------------------------------- torch is never needed
def test_load_and_play_without_torch(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any "import torch" now fails
        import gymloop as gl
        from gymloop.games.snake import snake
        from gymloop.neural import load
        agent = load({str(path)!r}, seed=0)
        r = gl.run(snake, agent, seed=0, max_steps=300)
        assert r.steps == 300, r
        assert sys.modules["torch"] is None
        assert "gymloop.nn.torch_policy" not in sys.modules
        print("ok", len(r.episodes))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_repr_and_metadata(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    agent = load(path)
    assert isinstance(agent, gl.Agent) and isinstance(agent, NeuralAgent)
    assert agent.info["step"] == 0 and agent.info["format_version"] == 1
    assert str(path) in repr(agent)
    assert isinstance(agent.policy, NumpyPolicy)


def test_embedding_paths(ckpt_dir):
    """Featureless types take the type-by-type path; everything else the fused one."""
    assert load(checkpoint(ckpt_dir, "tokens")[0]).policy.one_tables is None
    beacons = load(checkpoint(ckpt_dir, "beacons")[0]).policy
    assert beacons.one_tables is not None and beacons.entity_features["Token"] == ()


def test_bad_calls(ckpt_dir):
    path, _ = checkpoint(ckpt_dir, "snake")
    agent = load(path)
    S = snake_mod
    with pytest.raises(gl.ConfigError, match="at least one action type"):
        agent.act(gl.Obs().actor(S.Head(1, 1)))
    with pytest.raises(gl.InvalidObservationError, match="expects a gl.Obs"):
        agent.act({"head": (1, 1)}, S.Move)
    with pytest.raises(gl.InvalidObservationError, match="has no actor"):
        agent.act(gl.Obs().entities(S.Food(1, 1)), S.Move)
    with pytest.raises(gl.ConfigError, match="agents sharing one policy"):
        agent.act_batch([(gl.RandomAgent(0), gl.Obs().actor(S.Head(1, 1)), S.Move)])
    assert agent.act_batch([]) == []



@pytest.mark.parametrize(
    "value, match",
    [
        ("3", r"entity type 'Head': cannot featurize Head\(x='3', y=1\) in the observation: feature 'x' must be a number, got '3' of type str"),
        (None, r"feature 'x' must be a number, got None"),
        (1e300, r"entity type 'Head', feature 'x' of Head\(x=1e\+300, y=1\) in the observation is 1e\+300, beyond the float32 range"),
        (10**400, r"feature 'x' of .* must be a finite number, got an int of about 10\*\*400"),
        (float("inf"), r"entity type 'Head', feature 'x' is inf in the observation; features must be finite numbers"),
    ],
    ids=["str", "None", "1e300", "10**400", "inf"],
)
def test_bad_feature_values_are_refused_as_a_vecenv_refuses_them(ckpt_dir, value, match):
    """The agent featurizes with the batch builder's checks: nothing is coerced (a string "3" is not
    3.0), and a value beyond float32 is refused by name, without a numpy RuntimeWarning."""
    agent = load(checkpoint(ckpt_dir, "snake")[0], seed=0)
    S = snake_mod
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for obs in (gl.Obs().actor(S.Head(value, 1)), gl.Obs().actor(S.Head(0, 0)).entities([S.Food(1, 1), S.Head(value, 1)])):
            with pytest.raises(gl.InvalidObservationError, match=match):
                agent.act(obs, S.Move)
            with pytest.raises(gl.InvalidObservationError, match=match):
                agent.logits(obs, S.Move)
        with pytest.raises(gl.InvalidObservationError, match=match):
            agent.act_batch([(agent, gl.Obs().actor(S.Head(value, 1)), S.Move)])


def test_global_features_and_masks_are_checked_as_a_vecenv_checks_them(ckpt_dir):
    agent = load(checkpoint(ckpt_dir, "skirmish")[0], seed=0)
    units = [Trooper(0, 0, 1.0), Raider(1, 1, 1.0)]

    def obs(clock=None, masks=None):
        return gl.Obs().actors(units[:1], masks=masks).entities(units[1:]).globals(clock or Clock(1, 2))

    agent.act(obs(), Stance, Aim)
    with pytest.raises(gl.InvalidObservationError, match=r"entity type 'Clock': cannot featurize .* feature 't' must be a number, got '1'"):
        agent.act(obs(Clock("1", 2)), Stance)
    with pytest.raises(gl.InvalidObservationError, match=r"action type 'Stance': actor 0 has a mask that leaves no legal choice"):
        agent.act(obs(masks={Stance: [[False] * 3]}), Stance)
    with pytest.raises(gl.InvalidObservationError, match=r"the observation has masks for \[<enum 'Stance'>\], which act\(\) was not asked for"):
        agent.act(obs(masks={Stance: [None]}), Aim)

@pytest.mark.slow
def test_inference_benchmark_runs():
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "inference.py")
    out = subprocess.run([sys.executable, script, "--quick"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "NeuralAgent.act" in out.stdout and "decisions/s" in out.stdout


def test_load_accepts_a_training_run_folder(tmp_path):
    from gymloop.games.snake import snake
    from gymloop.neural import random_checkpoint

    run_dir = tmp_path / "runs" / "snake"
    run_dir.mkdir(parents=True)
    random_checkpoint(run_dir / "agent.safetensors", snake, seed=0)
    agent = gl.load(run_dir, seed=0)
    assert agent.policy.path.endswith("agent.safetensors")
    with pytest.raises(gl.CheckpointError, match="not a complete enn-trainer checkpoint folder"):
        gl.load(tmp_path / "runs")


@pytest.mark.parametrize("shape", [[1e999], [10**30], [2**40, 2**40], [-1]])
def test_absurd_tensor_shapes_in_a_header_are_checkpoint_errors(tmp_path, shape):
    import json
    import struct

    header = json.dumps({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    with pytest.raises(gl.CheckpointError, match="'w'"):
        gl.load(path)
