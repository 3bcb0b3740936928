"""Evaluation: per-episode metrics, final scores, the random agent against a checkpoint (``gymloop eval``)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("torch")  # the checkpoints are written by the trainer (evaluating them needs numpy only)

from support import train_games as tg
from support.train_games import Arm, tiny

import gymloop as gl
from gymloop.cli import main
from gymloop.evaluation import LENGTH, RETURN, SCORE, Estimate, _episodes, compare, evaluate_episodes
from gymloop.games.duel import duel
from gymloop.games.snake import snake
from gymloop.games.snake_envs import SnakeEnv
from gymloop.neural import random_checkpoint
from gymloop.train.ppo import Trainer


@pytest.fixture(scope="module")
def snake_run(tmp_path_factory) -> str:
    """The output folder of a snake agent trained for 4096 steps (tiny network): better than random, far from good."""
    out = str(tmp_path_factory.mktemp("snake"))
    Trainer(snake, tiny(4096), out_dir=out, game_name="snake").train()
    return out


@pytest.fixture(scope="module")
def bandit_agent(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("bandit") / "agent.safetensors")
    random_checkpoint(path, tg.bandit, d_model=16, n_head=2)
    return path


# ---------------------------------------------------------------------- per-episode values
def test_exactly_the_episodes_asked_for():
    per = evaluate_episodes(tg.bandit, None, episodes=50, num_envs=16, seed=0)
    assert len(per[RETURN]) == len(per[LENGTH]) == 50  # quotas 4 and 3 per slot, not 16 * ceil(50 / 16) = 64
    assert set(per[RETURN]) <= {0.0, 1.0}


def test_same_seed_same_episodes_and_per_episode_means_match_evaluate():
    from gymloop.train.ppo import evaluate

    a = evaluate_episodes(snake, None, episodes=30, seed=3)
    b = evaluate_episodes(snake, None, episodes=30, seed=3)
    assert a == b
    assert evaluate(snake, None, episodes=30, seed=3) == {k: float(np.mean(v)) for k, v in a.items()}


def test_final_scores_are_reported_apart_from_the_return():
    def from_five(agent, seed):
        """Scores start at 5: the return is the score's change, the final score 5 more."""
        while True:
            arm = agent.act(gl.Obs(score=5).actor(tg.Player(1.0)), Arm)
            agent.game_over(gl.Obs(score=5 + arm.value).metric("arm", arm.value))

    per = evaluate_episodes(from_five, None, episodes=40, seed=0, scores=True)
    assert np.allclose(np.array(per[SCORE]) - 5, per[RETURN])
    assert per["arm"] == per[RETURN]
    snake_per = evaluate_episodes(snake, None, episodes=20, seed=0, scores=True)
    assert snake_per[SCORE] == snake_per["length"]  # snake's score is its length, which starts at 1
    assert np.allclose(np.array(snake_per[SCORE]) - 1, snake_per[RETURN])
    assert SCORE not in evaluate_episodes(snake, None, episodes=5, seed=0)


def test_final_scores_of_lock_step_games_and_low_level_environments():
    per = evaluate_episodes(duel, None, episodes=8, agents_per_game=2, seed=0, scores=True)  # duel asks through gl.act_all
    assert len(per[SCORE]) == 8 and {"won", "draw", "length"} <= set(per)
    low = evaluate_episodes(SnakeEnv, None, episodes=8, seed=0, scores=True)  # rewards, no scores: nothing to add
    assert SCORE not in low and len(low[RETURN]) == 8


def test_estimate_is_the_normal_approximation():
    e = Estimate.of([1.0, 2.0, 3.0])
    assert e.mean == 2.0 and e.n == 3 and e.ci95 == pytest.approx(1.96 * 1.0 / math.sqrt(3))
    assert str(e) == "2.0 ± 1.1"
    assert Estimate.of([4.0]) == Estimate(4.0, None, 1) and str(Estimate.of([4.0])) == "4.00"
    assert Estimate.of([]) == Estimate(None, None, 0) and str(Estimate.of([])) == "-"
    assert Estimate.of([7.0, 7.0]).ci95 == 0.0



def test_estimate_over_games_counts_each_game_once():
    naive = Estimate.of([1.0, 2.0, 3.0, 6.0])
    twice = Estimate.of([1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 6.0, 6.0], games=[7, 7, 3, 3, 9, 9, 1, 1])  # two seats alike: no more information
    assert twice.mean == naive.mean and twice.n == 8 and twice.ci95 == pytest.approx(naive.ci95)
    assert Estimate.of([1.0, 2.0, 3.0, 6.0], games=[0, 1, 2, 3]).ci95 == pytest.approx(naive.ci95)  # one value per game: as before
    zero_sum = Estimate.of([1.0, -1.0, -3.0, 3.0, 2.0, -2.0], games=[0, 0, 1, 1, 2, 2])
    assert zero_sum.mean == 0.0 and zero_sum.ci95 == pytest.approx(0.0)  # the seats' mean is 0 in every game
    assert Estimate.of([1.0, -1.0, 5.0], games=[4, 4, 4]) == Estimate(5.0 / 3, None, 3)  # one game: no interval
    with pytest.raises(gl.ConfigError, match="2 game numbers for 3 values"):
        Estimate.of([1.0, 2.0, 3.0], games=[0, 1])


def test_seats_of_one_game_share_its_number():
    per, games = _episodes(duel, None, episodes=10, num_envs=64, seed=0, agents_per_game=2)
    assert len(per[RETURN]) == len(games[RETURN]) == 10
    ids, counts = np.unique(games[RETURN], return_counts=True)
    assert sorted(counts.tolist()) == [2] * 5  # 5 copies x 2 seats, one episode each: 5 games of two seats
    won, draw, of_game = np.asarray(per["won"]), np.asarray(per["draw"]), np.asarray(games["won"])
    assert games["draw"] == games["won"] == games[RETURN]
    for g in ids:  # one duel's two seats: at most one wins, and a draw is a draw for both
        assert won[of_game == g].sum() <= 1 and len(set(draw[of_game == g].tolist())) == 1


# ---------------------------------------------------------------------- gymloop eval
def test_eval_table_random_and_trained_side_by_side(snake_run, capsys):
    assert main(["eval", "snake", "--agent", snake_run, "--episodes", "60"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"snake: the random agent and the checkpoint {snake_run}, 60 episodes each") and "seed 10000" in lines[0]
    assert "95% interval" in lines[1] and "1.96" in lines[1]
    assert lines[2].split() == ["random", "agent", "agent"]  # (the columns are the JSON's "random" and "agent")
    rows = {ln.split("  ")[1].strip(): ln for ln in lines[3:7]}
    assert list(rows) == ["return", "score", "episode length", "length"]
    assert all(ln.count("±") == 2 for ln in rows.values())
    assert "return: the sum of an episode's rewards" in lines[-1] and "length: reported by the game" in lines[-1]


def test_eval_json(snake_run, capsys):
    assert main(["eval", "snake", "--agent", os.path.join(snake_run, "agent.safetensors"), "--episodes", "60", "--seed", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: doc[k] for k in ("game", "episodes", "seed", "agents_per_game")} == {"game": "snake", "episodes": 60, "seed": 5, "agents_per_game": 1}
    assert doc["metrics"] == [RETURN, SCORE, LENGTH, "length"]
    assert set(doc["agents"]) == {"random", "agent"}
    for who in ("random", "agent"):
        for m in doc["metrics"]:
            est = doc["agents"][who][m]
            assert set(est) == {"mean", "ci95", "n"} and est["n"] == 60 and est["ci95"] > 0, (who, m, est)
    random_len, trained_len = doc["agents"]["random"][LENGTH], doc["agents"]["agent"][LENGTH]
    assert trained_len["mean"] != random_len["mean"]
    # 4096 steps teach the tiny network to stay away from walls: it lives clearly longer than random play
    assert trained_len["mean"] - trained_len["ci95"] > random_len["mean"] + random_len["ci95"], (random_len, trained_len)


def test_score_row_only_when_it_differs_from_the_return(bandit_agent):
    c = compare(tg.bandit, bandit_agent, episodes=20, seed=0)  # the bandit's scores start at 0
    assert c.metrics == [RETURN, LENGTH] and c.game == "bandit"
    assert "score" not in c.table()


def test_eval_of_a_two_seat_game(tmp_path, capsys):
    path = str(tmp_path / "duel.safetensors")
    random_checkpoint(path, duel, agents_per_game=2, d_model=16, n_head=2)
    assert main(["eval", "duel", "--agent", path, "--episodes", "6", "--json"]) == 0  # --agents defaults to duel's 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["agents_per_game"] == 2 and "cluster-robust" in doc["interval"]
    assert {"won", "draw", "length"} <= set(doc["metrics"]) and doc["agents"]["agent"]["won"]["n"] == 6


# ---------------------------------------------------------------------- bad input
@dataclass
class Player:  # the bandit's entity type (same name) with one more feature
    bias: float
    speed: float


def faster_bandit(agent, seed):
    while True:
        arm = agent.act(gl.Obs(score=0).actor(Player(1.0, 2.0)), Arm)
        agent.game_over(gl.Obs(score=1.0 if arm is Arm.C else 0.0))


def test_missing_checkpoint(tmp_path, capsys):
    missing = str(tmp_path / "nope" / "agent.safetensors")
    with pytest.raises(gl.CheckpointError, match=r"agent checkpoint '.*nope.*agent\.safetensors' does not exist; give the agent\.safetensors"):
        compare(snake, missing, episodes=5)
    assert main(["eval", "snake", "--agent", missing]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_file_that_is_not_a_checkpoint(tmp_path, capsys):
    bad = tmp_path / "notes.safetensors"
    bad.write_text("not a checkpoint")
    with pytest.raises(gl.CheckpointError, match=str(bad)):
        compare(snake, str(bad), episodes=5)
    assert main(["eval", "snake", "--agent", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_checkpoint_of_another_game(bandit_agent, capsys):
    with pytest.raises(gl.CheckpointError, match=r"does not fit this game \(entity types only the game has: Body, Food, Head; "
                                                  r"entity types only the checkpoint has: Player; action types only the game has: Move; "
                                                  r"action types only the checkpoint has: Arm\); evaluate it on the game it was trained on"):
        compare(snake, bandit_agent, episodes=5)
    with pytest.raises(gl.CheckpointError, match=r"entity type 'Player': the game has \['bias', 'speed'\], the checkpoint \['bias'\]\); "
                                                  r"evaluate it on the game it was trained on \('bandit'\)"):
        compare(faster_bandit, bandit_agent, episodes=5)
    assert main(["eval", "snake", "--agent", bandit_agent]) == 2
    assert "does not fit this game" in capsys.readouterr().err


def test_episodes_below_one(bandit_agent, capsys):
    with pytest.raises(gl.ConfigError, match="episodes must be at least 1, got 0"):
        compare(tg.bandit, bandit_agent, episodes=0)
    assert main(["eval", "support.train_games:bandit", "--agent", bandit_agent, "--episodes", "0"]) == 2
    assert "--episodes must be at least 1, got 0; e.g. --episodes 200" in capsys.readouterr().err
    with pytest.raises(gl.ConfigError, match="episodes >= 1"):
        evaluate_episodes(tg.bandit, None, episodes=-1)


def test_a_chooser_function_is_a_policy():
    def always_c(b):
        return {"Arm": np.full(b.actor_slot["Arm"].shape[0], Arm.C.value, dtype=np.int64)}

    per = evaluate_episodes(tg.bandit, always_c, episodes=10, seed=0)
    assert per[RETURN] == [1.0] * 10


@pytest.mark.parametrize("agents", [0, -1])
def test_evaluate_refuses_fewer_than_one_agent_per_game(agents):
    from gymloop.evaluation import evaluate_episodes
    from gymloop.games.snake import snake

    with pytest.raises(gl.ConfigError, match=r"agents_per_game \(--agents\) >= 1"):
        evaluate_episodes(snake, None, episodes=4, agents_per_game=agents)


def test_a_checkpoint_whose_pointer_may_choose_any_entity_fits_a_game_with_fewer_candidate_types(tmp_path):
    """An enn-trainer checkpoint (``among_any``: the head may point at any entity type it knows)
    fits a game whose candidates are a subset of its entity types; a candidate type it does not
    know does not fit."""
    from gymloop.evaluation import check_fits
    from gymloop.games.tactics import tactics

    path = tmp_path / "t.safetensors"
    random_checkpoint(path, tactics)
    with gl.VecEnv(tactics, 2, seed=0) as env:
        env.reset()
        spaces = env.spaces
    policy = gl.load(path).policy
    name = next(n for n, a in policy.action_space.items() if a.kind.selects_entities)
    desc = policy.action_space[name]
    policy.action_space[name] = gl.ActionDesc(desc.name, desc.kind, desc.labels, tuple(policy.entity_names), among_any=True)
    check_fits(policy, spaces)  # (the game's candidates are some of the checkpoint's entity types: fits)
    assert evaluate_episodes(tactics, policy, episodes=2, seed=0)
    policy.action_space[name] = gl.ActionDesc(desc.name, desc.kind, desc.labels, (), among_any=True)
    check_fits(policy, spaces)  # (enn-trainer's checkpoints record no candidate types)
    ents = dict(policy.entity_features)
    ents.pop(desc.among[0])  # a candidate type the checkpoint does not know
    policy.entity_features = ents
    with pytest.raises(gl.CheckpointError, match=r"evaluate it on the game it was trained on"):
        check_fits(policy, spaces)


def test_eval_without_an_agent_gives_random_and_scripted_levels_with_intervals(capsys):
    assert main(["eval", "snake", "--episodes", "12", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["agents"]) == ["random", "scripted"] and doc["agent_path"] is None
    rnd, scr = doc["agents"]["random"][RETURN], doc["agents"]["scripted"][RETURN]
    assert rnd["n"] == scr["n"] == 12 and scr["ci95"] is not None
    assert scr["mean"] - scr["ci95"] > rnd["mean"] + rnd["ci95"]  # the scripted snake eats, the random one hardly
    assert doc["agents"]["scripted"][SCORE]["mean"] == pytest.approx(scr["mean"] + 1)  # (snake's score starts at 1)
    assert main(["eval", "snake", "--episodes", "4"]) == 0
    assert capsys.readouterr().out.startswith("snake: the random agent and the scripted agent, 4 episodes each")


def test_eval_of_a_game_without_a_scripted_agent(capsys):
    assert main(["eval", "support.train_games:bandit", "--episodes", "6", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["agents"]) == ["random"]
    assert main(["eval", "support.train_games:bandit", "--agent", "scripted", "--episodes", "6"]) == 2
    assert "no scripted agent for game" in capsys.readouterr().err


def test_agents_run_one_game_at_a_time_number_each_seats_games_for_the_clustered_interval():
    from gymloop.evaluation import _run_episodes

    values, games = _run_episodes(duel, lambda s: gl.RandomAgent(seed=s), 6, 0, 2)
    assert len(values["won"]) == 6 and sorted(games["won"]) == [0, 0, 1, 1, 2, 2]  # the k-th episode of each seat: game k
    assert len(values[RETURN]) == len(values[LENGTH]) == 6
