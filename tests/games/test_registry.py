"""The registry of bundled games (``gymloop.games.registry``) and the lookups that use it: the CLI, ``view_for``."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from enum import Enum

import pytest

import gymloop as gl
from gymloop.cli import main
from gymloop.errors import ConfigError
from gymloop.games import GAMES, GameView, bundled_games, find_game, game_name, get_game, register_game
from gymloop.games import registry as registry_mod


@dataclass
class Coin:
    x: int
    y: int


class Call(Enum):
    HEADS = 0
    TAILS = 1


@gl.game(entities=[Coin], actions=[Call])
def coin_flip(agent, seed):
    """One call per episode: heads scores 1."""
    while True:
        call = agent.act(gl.Obs(score=0).actor(Coin(0, 0)), Call)
        agent.game_over(gl.Obs(score=1 if call is Call.HEADS else 0))


class AlwaysHeads:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, obs, *types):
        return Call.HEADS

    def game_over(self, obs, truncated=False):
        pass


def _draw_coin(obs, canvas):  # never called here: no pygame needed
    raise AssertionError("not drawn in these tests")


@pytest.fixture
def coin(monkeypatch):
    """``coin`` registered for the length of one test."""
    monkeypatch.setattr(registry_mod, "_REGISTRY", dict(registry_mod._REGISTRY))
    return register_game("coin", coin_flip, "call a coin flip", scripted=AlwaysHeads,
                         view=GameView(_draw_coin, 1, 1, keyboard=False, cell=20))


def test_the_bundled_games_are_registered_with_their_modules():
    names = [g.name for g in bundled_games()]
    assert set(names) >= {"snake", "duel", "tactics"}
    assert sorted(GAMES) == sorted(names)
    assert GAMES["snake"] == "gymloop.games.snake:snake"
    from gymloop.games import duel, snake, tactics

    assert get_game("snake") is snake.snake and get_game("tactics") is tactics.tactics
    assert find_game("duel").agents == 2 and find_game("snake").agents == 1
    assert find_game("snake").scripted is snake.GreedyAgent and find_game("tactics").scripted is None
    assert find_game("duel").view.draw is duel.draw_duel
    assert all(g.description for g in bundled_games())


def test_a_registered_game_is_found_by_the_cli(coin, capsys):
    assert get_game("coin") is coin_flip and "coin" in GAMES
    assert main(["run", "coin", "--episodes", "4", "--agent", "scripted"]) == 0
    assert "coin with a scripted agent: 4 episodes, 4 decisions, mean final score 1.00" in capsys.readouterr().out
    assert main(["check", "coin", "--steps", "20"]) == 0
    assert "coin: OK" in capsys.readouterr().out


def test_a_registered_game_has_its_view(coin):
    from gymloop.render.draw import view_for

    for key in ("coin", coin_flip):
        view = view_for(key)
        assert (view.draw, view.width, view.height, view.keyboard, view.cell, view.name) == (_draw_coin, 1, 1, False, 20, "coin")


def test_unknown_names_fail_as_before(coin, capsys):
    with pytest.raises(ConfigError, match=r"unknown game 'con' \(did you mean 'coin'\?\); bundled games are \[.*'coin'.*\], or give module:function"):
        get_game("con")
    assert main(["run", "no_such_game"]) == 2
    assert "gymloop: error: unknown game 'no_such_game'; bundled games are" in capsys.readouterr().err
    assert main(["run", "snak"]) == 2
    assert "unknown game 'snak' (did you mean 'snake'?)" in capsys.readouterr().err
    assert main(["run", "tactics", "--agent", "scripted"]) == 2
    err = capsys.readouterr().err
    assert "no scripted agent for game 'tactics'; games with one: [" in err
    with_one = ast.literal_eval(err.split("games with one: ")[1].split("]")[0] + "]")
    assert with_one == sorted(g.name for g in bundled_games() if g.scripted is not None) and {"coin", "snake"} <= set(with_one)


def test_register_game_refuses_what_it_cannot_keep(coin):
    def other(agent, seed): ...

    with pytest.raises(ConfigError, match="'coin' is already the game .*coin_flip"):
        register_game("coin", other, "another")
    with pytest.raises(ConfigError, match="without ':'"):
        register_game("a:b", other, "bad name")
    from gymloop.games.duel import duel

    with pytest.raises(ConfigError, match=r"agents=1 but the loop declares gl.game\(agents=2\)"):
        register_game("pair", duel, "wrong count", agents=1)
    with pytest.raises(ConfigError, match="agents must be at least 1, got 0"):
        register_game("none", other, "nobody plays", agents=0)
    assert register_game("coin", coin_flip, "again").description == "again"  # the same loop: replaced


def test_the_registry_imports_no_renderer():
    code = (
        "import sys, gymloop.games, gymloop.cli, gymloop.agent_specs\n"
        "gymloop.cli.build_parser()\n"
        "gymloop.agent_specs.load_agent('scripted', 'snake')\n"
        "assert 'pygame' not in sys.modules and 'gymloop.render' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_one_function_names_a_game(coin):
    import functools

    from gymloop.games.snake import snake

    def loose(agent, seed): ...

    assert game_name(snake) == game_name("snake") == game_name(snake, qualified=True) == "snake"
    assert game_name(coin_flip) == "coin"  # a registered loop goes by its registered name
    assert game_name(functools.partial(loose)) == "loose"  # under partial layers
    assert game_name(loose, qualified=True) == f"{__name__}:test_one_function_names_a_game.<locals>.loose"
    assert game_name("mygame:loop") == "mygame:loop"


def test_a_registered_view_takes_the_games_name_and_players(coin):
    from gymloop.render import view_for

    view = find_game("coin").view
    assert isinstance(view, GameView) and (view.name, view.players, view.cell, view.keyboard) == ("coin", 1, 20, False)
    assert view_for("coin") is view and view_for("duel").players == 2
