"""Bundled games. Each module documents its Observation, Action, Reward and Termination.

* :mod:`gymloop.games.snake`: the classic snake (entity-gym-rs bevy_snake rules);
* :mod:`gymloop.games.tactics`: a small squad tactics game (several actors, composite and
  select-entity actions, masks, global features);
* :mod:`gymloop.games.duel`: two snakes on one board (multi-agent, lock-step);
* :mod:`gymloop.games.skyfall`: catch falling fruit, dodge rocks: a game that draws itself
  (pygame, only when given a :class:`~gymloop.Display`);
* :mod:`gymloop.games.suite`: the learning suite's games (``benchmarks/learning_suite.py``).

Each game module registers itself (its loop, description, agents, scripted agent and view) with
:func:`~gymloop.games.registry.register_game`; importing this package imports them, so the
registry (:func:`find_game`, :func:`get_game`, :data:`GAMES`) knows every bundled game.
"""

from __future__ import annotations

from . import duel, skyfall, snake, tactics  # noqa: F401 (each registers itself)
from .board import GameView
from .registry import GAMES, BundledGame, bundled_games, find_game, game_name, get_game, register_game, same_game
from .suite import cycles, dispatch, fires, invaders, junction, keydoor  # noqa: F401 (the learning suite's games)

__all__ = ["GAMES", "BundledGame", "GameView", "bundled_games", "find_game", "game_name", "get_game", "register_game", "same_game"]
