"""A self-play league: snapshots as opponents, ratings while training, a rated library at the end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("openskill")

import gymloop as gl  # noqa: E402
from gymloop.games.duel import duel  # noqa: E402
from gymloop.train import LeagueConfig, TrainConfig  # noqa: E402
from gymloop.train.ppo import Trainer  # noqa: E402


def _cfg(steps: int = 8 * 2 * 16 * 6, **league: object) -> TrainConfig:
    cfg = TrainConfig(steps=steps, num_envs=8, rollout_steps=16, agents_per_game=2, seed=3, threads=1)
    cfg.ppo.minibatch_size = 64
    cfg.league = LeagueConfig(enabled=True, snapshot_every=2, **league)  # type: ignore[arg-type]
    return cfg


def test_a_league_run_leaves_a_rated_library_of_its_snapshots(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Trainer(duel, _cfg(), str(out), game_name="duel").train()
    lib = gl.library(out / "league")
    assert lib.names() == ["final", "u00002", "u00004", "u00006"]
    r = lib.ratings()
    assert set(r) == set(lib.names()) and all(x.sigma > 0 for x in r.values())
    assert lib.pick(level="hard") in lib.names()
    agent = lib.load("u00004", seed=0, game=duel)  # a snapshot plays the game
    assert gl.run(duel, [agent, agent.fork(1)], seed=0, max_steps=10).steps == 10
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and "league_rating_mean" in rows[0] and "league/pool" in rows[0]
    assert [float(r["league/pool"]) for r in rows] == [0, 1, 1, 2, 2, 3]
    assert float(rows[-1]["league_rating_count"]) > 0  # games against snapshots were rated


def test_only_the_newest_snapshots_are_drawn_and_some_copies_are_plain_self_play(tmp_path: Path) -> None:
    out = tmp_path / "run"
    t = Trainer(duel, _cfg(steps=8 * 2 * 16 * 10, max_snapshots=2, live_fraction=0.25), str(out), game_name="duel")
    t.train()
    assert t.league is not None
    assert [m.policy is not None for m in t.league.members] == [False, False, False, True, True]
    # 8 copies: the first 2 self-play (4 learning slots), the other 6 against the league (seat 0 learns)
    assert t.learner_slots.tolist() == [0, 1, 2, 3, 4, 6, 8, 10, 12, 14]
    assert t.league.pairs.tolist() == [[4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]


@pytest.mark.parametrize("fraction, learners", [(0.0, 8), (1.0, 15)])
def test_at_least_one_copy_plays_the_league(fraction: float, learners: int, tmp_path: Path) -> None:
    t = Trainer(duel, _cfg(steps=8 * 2 * 16, live_fraction=fraction), None, game_name="duel")
    t.train()
    assert t.learner_slots.size == learners and t.league is not None and len(t.league.pairs) == 16 - learners


def test_a_new_run_replaces_an_earlier_run_s_league_in_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Trainer(duel, _cfg(steps=8 * 2 * 16 * 4), str(out), game_name="duel").train()
    assert gl.library(out / "league").names() == ["final", "u00002", "u00004"]
    (out / "league" / "notes.txt").write_text("mine")
    Trainer(duel, _cfg(steps=8 * 2 * 16 * 2), str(out), game_name="duel").train()
    lib = gl.library(out / "league")
    assert lib.names() == ["final", "u00002"] and set(lib.ratings()) == {"final", "u00002"}
    assert (out / "league" / "notes.txt").read_text() == "mine"  # what the league did not write stays


def test_resume_continues_the_league(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Trainer(duel, _cfg(), str(out), game_name="duel").train()
    state = json.loads((out / "league" / "league.json").read_text())
    cfg = _cfg(steps=8 * 2 * 16 * 10)
    t = Trainer(duel, cfg, str(out), game_name="duel", resume=True)
    t.train()
    assert t.league is not None
    names = [m.name for m in t.league.members]
    assert names[:3] == [m["name"] for m in state["members"]] and names[3:] == ["u00008", "u00010"]
    assert t.league.games >= state["games"]


def test_opponents_follow_the_learner_s_losses() -> None:
    from gymloop.nn.torch_policy import Policy
    from gymloop.train.league import League, _Member

    with gl.VecEnv(duel, 2, seed=0, agents_per_game=2) as env:
        env.reset()
        pol = Policy(env.obs_space, env.action_space, TrainConfig().net)
    lg = League(LeagueConfig(enabled=True), pol, seed=0, folder=None, game="duel")
    lg.members = [_Member("beaten", pol, wins=40), _Member("strong", pol, losses=40)]
    picks = [lg._draw() for _ in range(400)]
    assert picks.count(1) > 10 * picks.count(0)  # the opponent it loses to is played far more


@pytest.mark.parametrize("kw, match", [
    ({"agents_per_game": 1}, "two-player game against its own snapshots, but agents_per_game=1"),
    ({"agents_per_game": 2, "opponents": ["x.safetensors"]}, "leave opponents"),
])
def test_a_league_needs_two_seats_and_no_fixed_opponents(kw: dict, match: str) -> None:
    cfg = TrainConfig(**kw)
    cfg.league.enabled = True
    with pytest.raises(gl.ConfigError, match=match):
        cfg.check()


@pytest.mark.parametrize("field, value", [("snapshot_every", 0), ("max_snapshots", 0), ("live_fraction", 1.5),
                                          ("priority_power", -1.0), ("live_fraction", float("nan"))])
def test_league_fields_out_of_range_are_refused(field: str, value: float) -> None:
    cfg = TrainConfig(agents_per_game=2)
    setattr(cfg.league, field, value)
    with pytest.raises(gl.ConfigError, match=f"league.{field}"):
        cfg.check()


def test_cli_league_flag(tmp_path: Path) -> None:
    from gymloop.cli import main

    out = tmp_path / "run"
    assert main(["train", "duel", "--league", "--steps", "2048", "--num-envs", "8", "--out", str(out), "--set",
                 "league.snapshot_every=1", "--set", "threads=1", "--eval-episodes", "0"]) == 0
    assert (out / "league" / "ratings.json").is_file() and (out / "league" / "final.safetensors").is_file()
    assert np.isfinite(gl.library(out / "league").ratings()["final"].mu)
