"""--game-arg: a game's options from the command line, typed from its signature."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.optioned import Speed, line

import gymloop as gl
from gymloop.cli import main
from gymloop.game_args import bind_game_args, game_options


def test_options_are_the_parameters_after_agent_and_seed_but_display() -> None:
    assert list(game_options(line)) == ["length", "speed", "bonus", "loop", "name", "mode", "limit"]
    assert list(game_options(functools.partial(line, length=3))) == ["speed", "bonus", "loop", "name", "mode", "limit"]


def test_values_are_typed_from_the_signature() -> None:
    g = bind_game_args(line, ["length=7", "speed=fast", "bonus=0.5", "loop=no", "name=x=y", "mode=hard", "limit=none"])
    assert g.keywords == {"length": 7, "speed": Speed.FAST, "bonus": 0.5, "loop": False, "name": "x=y", "mode": "hard",
                          "limit": None}
    assert bind_game_args(line, ["limit=12"]).keywords == {"limit": 12}
    assert bind_game_args(line, []) is line


@pytest.mark.parametrize("pair, match", [
    ("size=3", r"line\(agent.*has no option 'size' \(its options: length, speed"),
    ("length=3.5", r"option 'length' of line\(.*takes an int, got '3.5'"),
    ("speed=warp", r"takes a Speed member \(SLOW, FAST\), got 'warp'"),
    ("loop=maybe", r"takes a bool"),
    ("mode=medium", r"takes one of 'easy', 'hard'"),
    ("limit=lots", r"takes int or NoneType"),
    ("length", r"--game-arg takes key=value, got 'length'"),
    ("display=x", r"has no option 'display'"),
    ("seed=3", r"has no option 'seed'"),
    ("bonus=nan", r"option 'bonus' .* takes a finite number, got 'nan'"),
    ("bonus=-inf", r"takes a finite number, got '-inf'"),
])
def test_bad_options_name_the_option_and_the_signature(pair: str, match: str) -> None:
    with pytest.raises(gl.ConfigError, match=match):
        bind_game_args(line, [pair])


def test_options_are_typed_when_another_annotation_names_a_type_checking_only_import() -> None:
    from support.typecheck_only_game import race

    assert bind_game_args(race, ["laps=5", "speed=2.5", "fast=yes"]).keywords == {"laps": 5, "speed": 2.5, "fast": True}
    with pytest.raises(gl.ConfigError, match="option 'laps' .* takes an int"):
        bind_game_args(race, ["laps=many"])


def test_an_option_given_twice_is_refused() -> None:
    with pytest.raises(gl.ConfigError, match="--game-arg length is given twice"):
        bind_game_args(line, ["length=3", "length=4"])


@given(st.integers(min_value=-10**12, max_value=10**12))
def test_ints_round_trip(n: int) -> None:
    assert bind_game_args(line, [f"length={n}"]).keywords["length"] == n


@given(st.text(max_size=20))
def test_any_text_is_an_error_or_a_value_of_the_right_type(text: str) -> None:
    for key, tp in (("length", int), ("bonus", float), ("loop", bool), ("speed", Speed)):
        try:
            v = bind_game_args(line, [f"{key}={text}"]).keywords[key]
        except gl.ConfigError as e:
            assert key in str(e)
        else:
            assert isinstance(v, tp)


def test_cli_check_and_run_pass_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "support.optioned:line", "--game-arg", "length=3", "--steps", "60"]) == 0
    capsys.readouterr()
    assert main(["run", "support.optioned:line", "--game-arg", "length=2", "--game-arg", "bonus=1.5", "--episodes", "2"]) == 0
    assert "mean final score" in capsys.readouterr().out
    assert main(["check", "support.optioned:line", "--game-arg", "colour=red"]) == 2
    assert "has no option 'colour'" in capsys.readouterr().err
