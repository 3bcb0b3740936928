"""gymloop rate: agents rated against one another; rated libraries; picking an opponent by skill."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

import gymloop as gl
from gymloop.agent_library import write_ratings
from gymloop.cli import main
from gymloop.games.duel import duel
from gymloop.games.suite.cycles import cycles
from gymloop.neural import random_checkpoint
from gymloop.rating import PlayerRating, Rating, RatingTable, rate

pytest.importorskip("openskill")


def test_the_scripted_rider_rates_above_random_ones_and_the_table_is_reproducible() -> None:
    agents = {"random": "random", "scripted": "scripted", "random2": gl.RandomAgent(5)}
    t = rate(cycles, agents, episodes=6, seed=1)
    assert t.order()[0] == "scripted"
    assert t.ratings["scripted"].mu > t.ratings["random"].mu
    w, d, lo = t.wins[("scripted", "random")]
    assert w + d + lo == 6 and w > lo
    assert t.wins[("random", "scripted")] == (lo, d, w)
    again = rate(cycles, {"random": "random", "scripted": "scripted", "random2": gl.RandomAgent(5)}, episodes=6, seed=1)
    assert again.document() == t.document()


def test_seats_and_seeds_are_balanced() -> None:
    t = rate(cycles, {"a": "random", "b": "scripted"}, episodes=4, seed=0)
    first_seat = [m["seats"][0] for m in t.matches]
    assert first_seat.count("a") == first_seat.count("b") == 2
    seeds = [m["seed"] for m in t.matches]
    assert seeds[0] == seeds[1] and seeds[2] == seeds[3] and seeds[0] != seeds[2]  # each seed played from both sides


def test_a_one_player_game_gets_scores_with_intervals() -> None:
    from gymloop.games.snake import snake

    t = rate(snake, {"random": "random", "scripted": "scripted"}, episodes=4)
    assert not t.ratings and t.order()[0] == "scripted"
    assert t.scores["scripted"].n == 4 and t.scores["scripted"].ci95 is not None
    assert "scores, not ratings" in t.table()


def test_fewer_agents_than_seats_is_refused() -> None:
    with pytest.raises(gl.ConfigError, match="seats 2 agents a game; give at least 2, got 1"):
        rate(cycles, {"only": "random"})
    with pytest.raises(gl.ConfigError, match="episodes must be an int >= 1"):
        rate(cycles, {"a": "random", "b": "random"}, episodes=0)


def test_an_agent_of_another_game_is_refused_before_any_game(tmp_path: Path) -> None:
    from gymloop.games.snake import snake

    path = tmp_path / "snake.safetensors"
    random_checkpoint(path, snake)
    played: list[Any] = []
    with pytest.raises(gl.CheckpointError):
        rate(cycles, {"a": "random", "snake": str(path)}, progress=lambda d, t: played.append(d))
    assert played == []


def test_player_rating_follows_results() -> None:
    p = PlayerRating()
    strong = Rating(35.0, 1.0)
    p.update(strong, "loss")
    after_loss = p.rating.mu
    p.update(strong, "win")
    assert after_loss < 25.0 < p.rating.mu + 5 and p.rating.mu > after_loss
    assert p.rating.sigma < 25.0 / 3
    with pytest.raises(gl.ConfigError, match="outcome must be 'win', 'draw' or 'loss'"):
        p.update(strong, "tie")


def _library(tmp_path: Path, n: int = 5) -> Path:
    d = tmp_path / "lib"
    d.mkdir()
    for i in range(n):
        random_checkpoint(d / f"u{i}.safetensors", duel, seed=i, agents_per_game=2)
    return d


def _doc(mus: dict[str, float]) -> dict[str, Any]:
    t = RatingTable("duel", 2, 10, 0, ratings={n: Rating(m, 1.0) for n, m in mus.items()})
    return t.document()


def test_picking_by_level_and_by_rating_in_a_rated_folder_and_its_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _library(tmp_path)
    write_ratings(d, _doc({"u0": 10.0, "u1": 20.0, "u2": 30.0, "u3": 40.0, "u4": 50.0, "gone": 99.0}))
    lib = gl.library(d)
    assert "gone" not in lib.ratings() and lib.ratings()["u2"] == Rating(30.0, 1.0)
    assert (lib.pick(level="easy"), lib.pick(level="medium"), lib.pick(level="hard")) == ("u0", "u2", "u4")
    assert lib.pick(level=0.75) == "u3" and lib.pick(rating=27.0) == "u2"
    archive = tmp_path / "lib.safetensors"
    gl.pack_library(archive, d)  # the folder's ratings travel into the archive

    import gymloop.agent_library as al

    monkeypatch.setattr(al, "NumpyPolicy", None)  # ratings and pick read no weights
    arch = gl.library(archive)
    assert arch.ratings() == lib.ratings() and arch.pick(level="hard") == "u4"


def test_ratings_written_into_an_archive_keep_its_agents_loadable(tmp_path: Path) -> None:
    d = _library(tmp_path, 3)
    archive = tmp_path / "lib.safetensors"
    gl.pack_library(archive, d)
    before = gl.library(archive).load("u1", seed=0)
    write_ratings(archive, _doc({"u0": 1.0, "u1": 2.0, "u2": 3.0}), levels={"boss": "u0"})
    lib = gl.library(archive)
    assert lib.pick(level="boss") == "u0" and lib.pick(level="hard") == "u2"
    agent = lib.load("u1", seed=0)  # checksums still hold
    r1 = gl.run(duel, [before, before.fork(1)], seed=0, max_steps=20)
    r2 = gl.run(duel, [agent, agent.fork(1)], seed=0, max_steps=20)
    assert r1.steps == r2.steps == 20


def test_pick_without_ratings_or_with_bad_arguments_says_what_to_do(tmp_path: Path) -> None:
    lib = gl.library(_library(tmp_path, 2))
    with pytest.raises(gl.ConfigError, match="has no ratings; rate its agents first: gymloop rate GAME --library"):
        lib.pick(level="easy")
    write_ratings(lib.path, _doc({"u0": 1.0, "u1": 2.0}))
    with pytest.raises(gl.ConfigError, match="takes a level or a rating"):
        lib.pick()
    with pytest.raises(gl.ConfigError, match=r"level must be one of \['easy', 'hard', 'medium'\]"):
        lib.pick(level="nightmare")
    with pytest.raises(gl.ConfigError, match="rating must be a finite number"):
        lib.pick(rating=float("nan"))
    with pytest.raises(gl.CheckpointError, match="level 'boss' names 'nobody'"):
        write_ratings(lib.path, _doc({"u0": 1.0}), levels={"boss": "nobody"})


def test_a_corrupt_ratings_file_is_named(tmp_path: Path) -> None:
    d = _library(tmp_path, 2)
    (d / "ratings.json").write_text("{not json")
    with pytest.raises(gl.CheckpointError, match="ratings.json: the ratings are not valid JSON"):
        gl.library(d).ratings()
    (d / "ratings.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(gl.CheckpointError, match="not a gymloop ratings document"):
        gl.library(d).pick(level="easy")


def test_cli_rates_a_library_writes_it_back_and_draws_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _library(tmp_path, 4)
    plot = tmp_path / "ratings.png"
    assert main(["rate", "duel", "random", "--library", str(d), "--episodes", "4", "--into", str(d), "--plot", str(plot),
                 "--level", "easy=u1"]) == 0
    out = capsys.readouterr().out
    assert "openskill Plackett-Luce" in out and "wins/draws/losses" in out and "wrote the ratings of 4 agents" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lib = gl.library(d)
    assert set(lib.ratings()) == {"u0", "u1", "u2", "u3"} and lib.pick(level="easy") == "u1"
    assert main(["library", "list", str(d)]) == 0
    listing = capsys.readouterr().out
    assert "4 rated (gymloop rate)" in listing and "rating=" in listing
    assert main(["rate", "cycles", "random", "scripted", "--episodes", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "gymloop-ratings/1" and set(doc["agents"]) == {"random", "scripted"}
    assert main(["rate", "snake", "random", "--into", str(d), "--episodes", "1"]) == 2
    assert "one-player game: its agents get scores, not ratings" in capsys.readouterr().err
    assert main(["rate", "duel", "random", "random", "--level", "easy=u1"]) == 2
    assert "give --into LIB too" in capsys.readouterr().err
    assert main(["rate", "duel", "random", "random", "--into", str(d), "--level", "easy", "--episodes", "2"]) == 2
    assert "--level takes LEVEL=AGENT" in capsys.readouterr().err


def test_agents_given_after_the_options_with_agent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rate", "cycles", "--episodes", "2", "--agent", "random", "--agent", "scripted", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["agents"]) == {"random", "scripted"}


def test_two_specs_of_one_name_are_both_rated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rate", "cycles", "random", "random", "--episodes", "2", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["agents"]) == {"random", "random#2"}


def test_agents_may_follow_the_options_and_other_leftovers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rate", "cycles", "--episodes", "2", "random", "scripted", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["agents"]) == {"random", "scripted"}
    with pytest.raises(SystemExit):
        main(["rate", "cycles", "random", "--episodes", "2", "--nonsense"])
    assert "unrecognized arguments: --nonsense" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "snake", "--episodes", "2", "stray"])
    assert "unrecognized arguments: stray" in capsys.readouterr().err


def test_path_like_library_arguments(tmp_path: Path) -> None:
    d = _library(tmp_path, 2)
    write_ratings(os.fspath(d), _doc({"u0": 1.0, "u1": 2.0}))
    assert gl.library(d).pick(level="hard") == "u1"


def test_write_ratings_refuses_what_it_could_not_read_back(tmp_path: Path) -> None:
    d = _library(tmp_path, 2)
    archive = tmp_path / "lib.safetensors"
    gl.pack_library(archive, d)
    good = _doc({"u0": 1.0, "u1": 2.0})
    bad_rating = {**good, "agents": {**good["agents"], "u1": {"mu": float("nan"), "sigma": -1.0}}}
    cases = [
        ({"agents": {"u0": {"mu": 30, "sigma": 2}}}, "not a gymloop ratings document"),  # no format
        (bad_rating, r"the rating of 'u1': mu must be finite and sigma positive"),
        ({**good, "levels": ["easy"]}, "levels must map level names to agent names"),
    ]
    for where in (d, archive):
        for doc, match in cases:
            with pytest.raises(gl.ConfigError, match=match):
                write_ratings(where, doc)
        with pytest.raises(gl.ConfigError, match=r"got RatingTable \(pass table.document\(\)\)"):
            write_ratings(where, RatingTable("duel", 2, 10, 0, ratings={"u0": Rating(1.0, 1.0)}))
        with pytest.raises(gl.ConfigError, match="level 'boss' names 'u1', which has no rating here"):
            write_ratings(where, _doc({"u0": 1.0}), levels={"boss": "u1"})
        assert gl.library(where).ratings() == {}  # nothing was written


def test_bad_ratings_in_a_file_are_named_and_the_library_still_opens_to_be_rated_again(tmp_path: Path) -> None:
    d = _library(tmp_path, 2)
    good = _doc({"u0": 1.0, "u1": 2.0})
    (d / "ratings.json").write_text(json.dumps({**good, "levels": {"easy": "u0", "boss": "nobody"}}))
    with pytest.raises(gl.CheckpointError, match="level 'boss' names 'nobody', which has no rating here.*gymloop rate GAME"):
        gl.library(d).pick(level="easy")
    (d / "ratings.json").write_text(json.dumps({**good, "agents": {"u0": {"mu": "x", "sigma": 1}}}))
    archive = tmp_path / "lib.safetensors"
    with pytest.raises(gl.CheckpointError, match="the rating of 'u0': expected"):
        gl.pack_library(archive, d)
    (d / "ratings.json").unlink()
    gl.pack_library(archive, d)
    from gymloop.checkpoint import SafetensorsFile, write_safetensors

    f = SafetensorsFile(archive)  # an archive whose stored ratings went bad (written by something else)
    meta = dict(f.metadata)
    lib_doc = json.loads(meta["gymloop_library"])
    lib_doc["ratings"] = {"format": good["format"], "agents": {"u0": {"mu": 1.0, "sigma": 0.0}}}
    meta["gymloop_library"] = json.dumps(lib_doc)
    meta.pop("checksum", None)
    write_safetensors(tmp_path / "bad.safetensors", {k: f.tensor(k) for k in f.keys()}, meta)
    lib = gl.library(tmp_path / "bad.safetensors")  # it opens: its agents load, its ratings are named as bad
    assert lib.load("u0", seed=0) is not None
    with pytest.raises(gl.CheckpointError, match="its ratings: the rating of 'u0': mu must be finite and sigma positive"):
        lib.ratings()
    write_ratings(tmp_path / "bad.safetensors", good)  # and rating it again mends it
    assert gl.library(tmp_path / "bad.safetensors").pick(level="hard") == "u1"


def test_pick_takes_numpy_quantiles(tmp_path: Path) -> None:
    import numpy as np

    d = _library(tmp_path, 3)
    write_ratings(d, _doc({"u0": 1.0, "u1": 2.0, "u2": 3.0}))
    assert gl.library(d).pick(level=np.float32(0.5)) == "u1" and gl.library(d).pick(level=np.float64(1.0)) == "u2"


@dataclass
class _Hand:
    v: float


class _Call(Enum):
    LOW = 0
    HIGH = 1


def _coin_pair(agents: Any, seed: int) -> None:
    """A two-player game that does not declare its seats: the higher of two calls wins."""
    import random as _random

    a, b = agents
    rng = _random.Random(seed)
    while True:
        calls = [ag.act(gl.Obs(score=0).actor(_Hand(rng.random())), _Call) for ag in (a, b)]
        for ag, mine, theirs in ((a, calls[0], calls[1]), (b, calls[1], calls[0])):
            ag.game_over(gl.Obs(score=float(mine.value > theirs.value)))


def test_seats_of_an_undeclared_game_are_given_with_agents(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    mod = type(sys)("coin_pair_game")
    mod.game = _coin_pair  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "coin_pair_game", mod)
    t = rate(_coin_pair, {"a": "random", "b": "random"}, episodes=4, agents_per_game=2)
    assert t.seats == 2 and set(t.ratings) == {"a", "b"} and sum(t.wins[("a", "b")]) == 4
    with pytest.raises(gl.ConfigError, match="agents_per_game must be an int >= 1"):
        rate(_coin_pair, {"a": "random"}, agents_per_game=0)
    assert main(["rate", "coin_pair_game:game", "random", "random", "--agents", "2", "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seats"] == 2


def test_cli_checks_what_goes_into_the_library_before_playing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import gymloop.rating as rating_mod

    played = []
    monkeypatch.setattr(rating_mod, "run", lambda *a, **k: played.append(1))  # no game may be played below
    d = _library(tmp_path, 2)
    for argv, message in [
        (["duel", "--library", str(d), "--level", "easy=u0"], "--level names agents of the library the ratings go into: give --into"),
        (["duel", "--library", str(d), "--into", str(d), "--level", "hard"], "--level takes LEVEL=AGENT"),
        (["duel", "--library", str(d), "--into", str(d), "--level", "hard=nosuch"], "--level hard=nosuch: agent library .* has no agent 'nosuch'"),
        (["snake", "random", "scripted", "--into", str(d)], "one-player game: its agents get scores, not ratings"),
        (["duel", "random", "random", "--into", str(tmp_path / "missing")], "missing"),
        (["duel", str(d), "random"], "is a folder; for every agent of an agent library give --library"),
    ]:
        assert main(["rate", *argv]) == 2
        assert re.search(message, capsys.readouterr().err), argv
    assert not played
