"""The bundled multi-actor and multi-agent games: tactics and duel."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import gymloop as gl
from gymloop.games import duel as duel_mod
from gymloop.games import tactics as tac
from gymloop.games.duel import DuelGame, OpponentBody, OpponentHead, duel
from gymloop.games.snake import Body, Food, Head, Move
from gymloop.games.tactics import Dir, Enemy, EnemyKind, Order, Stance, TacticsGame, Target, Unit, tactics

ALL_ORDERS = [Order(m, s) for m in Dir for s in Stance]


def _dist(u: Unit, e: Enemy) -> int:
    return abs(u.pos.x - e.pos[0]) + abs(u.pos.y - e.pos[1])


class FocusFire:
    """Scripted tactics agent: every unit fires at the weakest (then closest) enemy it may target,
    reloads when empty, and otherwise walks towards the nearest enemy."""

    def act(self, obs: gl.Obs, *types: object) -> tuple[list[Order], list[Enemy]]:
        assert types == (Order, Target)
        enemies = obs.entities_of(Enemy)
        orders, targets = [], []
        for i, u in enumerate(obs.actor_list):
            targets.append(min(obs.legal(i, Target), key=lambda e: (e.hp, _dist(u, e))))
            legal = obs.legal(i, Order)
            if Order(Dir.STAY, Stance.FIRE) in legal:
                orders.append(Order(Dir.STAY, Stance.FIRE))
                continue
            near = min(enemies, key=lambda e: _dist(u, e))
            dx, dy = near.pos[0] - u.pos.x, near.pos[1] - u.pos.y
            dirs = [d for d, ok in ((Dir.RIGHT, dx > 0), (Dir.LEFT, dx < 0), (Dir.UP, dy > 0), (Dir.DOWN, dy < 0)) if ok]
            stance = Stance.RELOAD if u.ammo == 0 else Stance.GUARD
            wanted = (Order(d, s) for d in dirs + [Dir.STAY] for s in (stance, Stance.GUARD))
            orders.append(next(o for o in wanted if o in legal))
        return orders, targets

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass


def _inspected(game, on_act):
    """Wrap a game so that ``on_act(obs, action_types, answer)`` sees every decision of its agents,
    at the time it is taken (an observation refers to live game objects, so it is checked at once)."""

    class Inspect:
        def __init__(self, inner):
            self.inner = inner

        def act(self, obs, *types):
            res = self.inner.act(obs, *types)
            on_act(obs, types, res)
            return res

        def game_over(self, obs, truncated=False):
            self.inner.game_over(obs, truncated)

    ents, glob, acts = gl.declared_types(game)

    @gl.game(entities=ents, actions=acts, globals=glob)
    def wrapped(agents, seed):
        if isinstance(agents, (list, tuple)):
            return game(type(agents)(Inspect(a) for a in agents), seed)
        return game(Inspect(agents), seed)

    return wrapped


def _check_tactics_answer(obs, types, res):
    assert types == (Order, Target)
    orders, targets = res
    n = len(obs.actor_list)
    assert 1 <= n <= tac.N_UNITS and len(orders) == len(targets) == n
    assert obs.entities_of(Enemy), "asked for a target with no enemy left"
    for i, (o, t) in enumerate(zip(orders, targets)):
        assert isinstance(o, Order) and isinstance(o.move, Dir) and isinstance(o.stance, Stance)
        assert isinstance(t, Enemy) and t.hp > 0
        assert o in obs.legal(i, Order)
        assert any(t is c for c in obs.legal(i, Target))


# ---------------------------------------------------------------------- tactics
def test_tactics_passes_check():
    report = gl.check(tactics, steps=300)
    assert report.entity_types == ["Enemy", "Unit", "Wall"]
    assert report.action_types == ["Order", "Target"]
    assert report.episodes > 0


def test_tactics_declares_all_types():
    ents, glob, acts = gl.declared_types(tactics)
    assert set(ents) == {Unit, Enemy, tac.Wall}
    assert glob is tac.Status
    assert acts == [Order, Target]
    feats = gl.schema_of(Enemy).features
    assert {"kind.is_GRUNT", "kind.is_HEAVY", "kind.is_SNIPER", "pos.0", "pos.1"} <= set(feats)
    assert gl.schema_of(Unit).features[:2] == ("pos.x", "pos.y")
    assert gl.schema_of(tac.Status).features == ("turn", "turns_left", "enemies_left", "units_left")


def test_tactics_run_random_answers_are_legal_objects():
    seen: list = []
    game = _inspected(tactics, lambda *a: (_check_tactics_answer(*a), seen.append(1)))
    r = gl.run(game, gl.RandomAgent(seed=3), seed=1, max_episodes=5)
    assert len(r.episodes) == 5
    for e in r.episodes:
        assert 0 <= e.metrics["enemies_killed"] <= tac.N_ENEMIES
        assert e.metrics["won"] in (0.0, 1.0)
        assert e.truncated == (e.length >= tac.MAX_TURNS)
    assert len(seen) == r.steps


def test_tactics_masks():
    g = TacticsGame(0)
    # one unit in the corner next to a wall, empty magazine; one far from every enemy, full magazine
    g.walls = [tac.Wall(1, 0)]
    g.wall_cells = {(1, 0)}
    empty = Unit(tac.Pos(0, 0), 3, 0, False)
    far = Unit(tac.Pos(0, 7), 3, tac.MAX_AMMO, False)
    g.units = [empty, far]
    near = Enemy(EnemyKind.GRUNT, 2, (0, 3))
    away = Enemy(EnemyKind.SNIPER, 1, (7, 0))
    g.enemies = [near, away]
    obs = g.observe()
    legal = obs.legal(0, Order)
    # off the board (DOWN, LEFT) and into the wall (RIGHT) are masked; no ammo: no FIRE
    assert {o.move for o in legal} == {Dir.STAY, Dir.UP}
    assert {o.stance for o in legal} == {Stance.RELOAD, Stance.GUARD}
    assert obs.legal(0, Target) == [near]  # only the enemy within range
    legal = obs.legal(1, Order)
    assert {o.move for o in legal} == {Dir.STAY, Dir.DOWN, Dir.RIGHT}
    assert {o.stance for o in legal} == {Stance.FIRE, Stance.GUARD}  # full magazine: no RELOAD
    assert obs.legal(1, Target) == [near]
    # nobody in range: FIRE is masked and every enemy is an allowed (moot) target
    g.enemies = [away]
    obs = g.observe()
    assert Stance.FIRE not in {o.stance for o in obs.legal(1, Order)}
    assert obs.legal(1, Target) == [away]
    assert Order(Dir.STAY, Stance.GUARD) in obs.legal(0, Order)


def test_tactics_fire_hits_and_kills_score():
    g = TacticsGame(0)
    g.walls, g.wall_cells = [], set()
    u = Unit(tac.Pos(3, 3), 3, tac.MAX_AMMO, False)
    e = Enemy(EnemyKind.SNIPER, 1, (3, 4))  # distance 1: 90% hit chance
    g.units, g.enemies = [u], [e]
    for _ in range(20):
        if g.over:
            break
        g.step([Order(Dir.STAY, Stance.FIRE if u.ammo else Stance.RELOAD)], [e])
    assert g.over and not g.enemies and e.hp == 0
    assert g.killed == 1
    assert g.score == tac.HIT_SCORE + tac.KILL_SCORE + tac.WIN_SCORE


def test_tactics_vecenv_sample_actions():
    seen: list = []
    game = _inspected(tactics, lambda *a: (_check_tactics_answer(*a), seen.append(1)))
    env = gl.VecEnv(game, num_envs=8, seed=0)
    try:
        b = env.reset()
        assert env.action_space["Order"].n == len(ALL_ORDERS)
        assert env.action_space["Order"].labels[0] == "move=STAY,stance=FIRE"
        assert env.action_space["Target"].kind == "select_entity"
        assert env.action_space["Target"].among == ("Enemy",)
        assert b.globals.shape == (8, 4)
        ends = 0
        for _ in range(300):
            assert b.active.all()
            n = b.num_actors("Order")
            assert b.num_actors("Target") == n and 8 <= n <= 8 * tac.N_UNITS
            assert b.masks["Order"].shape == (n, len(ALL_ORDERS)) and b.masks["Order"].any(axis=1).all()
            assert b.masks["Order"][:, ALL_ORDERS.index(Order(Dir.STAY, Stance.GUARD))].all()  # always legal
            nc = b.num_candidates["Target"]
            assert (nc == b.counts["Enemy"][b.actor_slot["Target"]]).all() and (nc >= 1).all()
            legal = np.add.reduceat(b.masks["Target"].astype(int), np.cumsum(nc) - nc)
            assert (legal >= 1).all()
            b = env.step(env.sample_actions())
            ends += int(b.done.sum())
        assert ends > 0
        assert np.isfinite(b.reward).all()
    finally:
        env.close()
    assert len(seen) == 8 * 300  # every answer the training agents gave was checked in the game


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_tactics_focus_fire_beats_random():
    scripted = gl.run(tactics, FocusFire(), seed=5, max_episodes=150)
    rand = gl.run(tactics, gl.RandomAgent(seed=5), seed=5, max_episodes=150)
    s, r = statistics.mean(scripted.scores), statistics.mean(rand.scores)
    won_s = statistics.mean(e.metrics["won"] for e in scripted.episodes)
    won_r = statistics.mean(e.metrics["won"] for e in rand.episodes)
    assert s > r + 4, (s, r)
    assert won_s > won_r + 0.25, (won_s, won_r)


def test_tactics_deterministic():
    a = gl.run(tactics, gl.RandomAgent(seed=2), seed=9, max_episodes=10)
    b = gl.run(tactics, gl.RandomAgent(seed=2), seed=9, max_episodes=10)
    assert a.scores == b.scores and a.steps == b.steps


# ---------------------------------------------------------------------- duel
def test_duel_passes_check():
    report = gl.check(duel, steps=300, agents_per_game=2)
    assert report.entity_types == ["Body", "Food", "Head", "OpponentBody", "OpponentHead"]
    assert report.action_types == ["Move"]


def test_duel_run_two_random_agents():
    seen: list = []

    def check_answer(obs, types, move):
        assert types == (Move,) and isinstance(move, Move)
        assert obs.is_single_actor and isinstance(obs.actor_list[0], Head)
        assert len(obs.entities_of(OpponentHead)) == 1
        assert len(obs.entities_of(Food)) == duel_mod.N_FOOD
        g = obs.global_features
        assert g.length == 1 + len(obs.entities_of(Body))
        assert g.opponent_length == 1 + len(obs.entities_of(OpponentBody))
        seen.append(1)

    game = _inspected(duel, check_answer)
    r = gl.run(game, [gl.RandomAgent(seed=0), gl.RandomAgent(seed=1)], seed=0, max_episodes=60)
    eps = r.episodes
    assert len(eps) == 60
    for e0, e1 in zip(eps[0::2], eps[1::2]):  # both agents end every episode together
        assert (e0.agent, e1.agent) == (0, 1)
        assert e0.truncated == e1.truncated
        assert e0.metrics["won"] + e1.metrics["won"] <= 1
        assert e0.metrics["draw"] == e1.metrics["draw"]
        for e in (e0, e1):
            assert e.score == e.metrics["length"] + duel_mod.WIN_BONUS * e.metrics["won"]
    assert any(e.metrics["won"] for e in eps)
    assert len(seen) == r.steps and r.steps % 2 == 0  # both snakes decide every frame


def _board(heads, bodies=((), ()), headings=(Move.UP, Move.UP), food=()):
    g = DuelGame(0)
    size = g.size
    g.heads = [Head(*h) for h in heads]
    g.bodies = [[Body(*c) for c in b] for b in bodies]
    g.headings = list(headings)
    g.food = [Food(*f) for f in food]
    g.occupied = bytearray(size * size)
    for b in g.bodies:
        for s in b:
            g.occupied[s.x * size + s.y] = 1
    for f in g.food:
        g.occupied[f.x * size + f.y] = 2
    return g


def test_duel_collision_rules():
    # head-on into the same cell: draw
    g = _board([(2, 2), (4, 2)])
    g.step([Move.RIGHT, Move.LEFT])
    assert g.over and g.winner is None
    # swapping cells is head-on too
    g = _board([(2, 2), (3, 2)])
    g.step([Move.RIGHT, Move.LEFT])
    assert g.over and g.winner is None
    # off the board: the other snake wins
    g = _board([(0, 5), (5, 5)])
    g.step([Move.LEFT, Move.UP])
    assert g.over and g.winner == 1
    # into the other snake's body: the other wins
    g = _board([(2, 2), (4, 3)], bodies=((), [(3, 3), (3, 2), (3, 1)]))
    g.step([Move.RIGHT, Move.UP])
    assert g.over and g.winner == 1
    # into the other's tail cell as it moves away: fine
    g = _board([(2, 1), (4, 3)], bodies=((), [(3, 3), (3, 2), (3, 1)]))
    g.step([Move.RIGHT, Move.UP])
    assert not g.over and (g.heads[0].x, g.heads[0].y) == (3, 1)


def test_duel_eating_grows_and_target_length_wins():
    g = _board([(1, 1), (8, 8)], food=[(1, 2)])
    g.step([Move.UP, Move.DOWN])
    assert not g.over and g.length(0) == 2 and g.length(1) == 1
    assert len(g.food) == duel_mod.N_FOOD  # eaten food reappears; the board is topped up
    body = [(1, 0 + k) for k in range(6)]  # a length-7 snake about to eat
    g = _board([(1, 6), (8, 8)], bodies=(body[::-1], ()), food=[(2, 6)])
    g.step([Move.RIGHT, Move.DOWN])
    assert g.over and g.winner == 0 and g.length(0) == duel_mod.TARGET_LENGTH
    assert g.final(0).score == duel_mod.TARGET_LENGTH + duel_mod.WIN_BONUS
    assert g.final(1).score == 1 and g.final(1).metrics["won"] == 0.0


def test_duel_vecenv_sample_actions():
    env = gl.VecEnv(duel, num_envs=8, seed=0, agents_per_game=2)
    try:
        b = env.reset()
        assert b.num_slots == 16
        ends = 0
        for _ in range(300):
            n = b.num_actors("Move")
            assert b.masks["Move"].shape == (n, 4)
            assert (b.counts["Head"][b.actor_slot["Move"]] == 1).all()
            assert (b.counts["OpponentHead"][b.active] == 1).all()
            assert (b.counts["Food"][b.active] == duel_mod.N_FOOD).all()
            b = env.step(env.sample_actions())
            done = b.done
            assert (done[0::2] == done[1::2]).all()  # both agents of a game end together
            ends += int(done.sum())
        assert ends > 0
    finally:
        env.close()


def test_duel_vecenv_lock_step():
    env = gl.VecEnv(duel, num_envs=8, seed=0, agents_per_game=2)
    try:
        b = env.reset()
        for _ in range(50):
            assert b.active.all(), b.active
            assert (b.actor_slot["Move"] == np.arange(16)).all()
            b = env.step(env.sample_actions())
    finally:
        env.close()


def test_a_snake_of_length_two_keeps_its_length_while_moving():
    from gymloop.games.snake import Move, SnakeGame

    g = SnakeGame(seed=0)
    g.head.x, g.head.y = 5, 5
    g.body = []
    g.food = []
    g.occupied = bytearray(g.size * g.size)
    g.heading = Move.RIGHT
    g.occupied[6 * g.size + 5] = 2  # food right of the head
    from gymloop.games.snake import Food

    g.food.append(Food(6, 5))
    g.step(Move.RIGHT)  # eats: length 2
    assert g.length == 2 and not g.over
    for _ in range(3):
        g.step(Move.UP)
        assert g.length == 2 and not g.over
    assert (g.body[0].x, g.body[0].y) == (6, 7)
    assert g.occupied.count(1) == 1  # exactly one body cell marked


def test_run_with_zero_episodes_or_steps_takes_no_decision():
    from gymloop.games.snake import snake

    r = gl.run(snake, gl.RandomAgent(0), seed=0, max_episodes=0)
    assert r.steps == 0 and r.episodes == [] and r.stopped == "max_episodes"
    r = gl.run(snake, gl.RandomAgent(0), seed=0, max_steps=0)
    assert r.steps == 0 and r.stopped == "max_steps"


def test_a_game_that_declares_its_agents_refuses_another_number_up_front():
    from gymloop.games.duel import duel
    from gymloop.spaces import declared_agents

    assert declared_agents(duel) == 2
    with pytest.raises(gl.ConfigError, match=r"game 'duel' takes 2 agent\(s\) .*got 1; pass a list of 2 agents"):
        gl.run(duel, gl.RandomAgent(0))
    with pytest.raises(gl.ConfigError, match=r"got 3; pass a list of 2 agents"):
        gl.run(duel, [gl.RandomAgent(i) for i in range(3)])
    with pytest.raises(gl.ConfigError, match=r"got 1; use agents_per_game=2"):
        gl.VecEnv(duel, num_envs=2)
    with pytest.raises(gl.ConfigError, match=r"agents=\.\.\.\) must be a positive int, got 0"):
        gl.game(agents=0)
    assert len(gl.run(duel, [gl.RandomAgent(0), gl.RandomAgent(1)], seed=0, max_episodes=2).episodes) == 2
