"""Bundled games. Each module documents its Observation, Action, Reward and Termination.

* :mod:`gymloop.games.snake`: the classic snake (entity-gym-rs bevy_snake rules);
* :mod:`gymloop.games.tactics`: a small squad tactics game (several actors, composite and
  select-entity actions, masks, global features);
* :mod:`gymloop.games.duel`: two snakes on one board (multi-agent, lock-step);
* :mod:`gymloop.games.suite`: the learning suite (games written to test what the trainer learns).

Each game module registers itself (its loop, description, agents, scripted agent and view) with
:func:`~gymloop.games.registry.register_game`; importing this package imports them, so the
registry (:func:`find_game`, :func:`get_game`, :data:`GAMES`) knows every bundled game.
"""

from __future__ import annotations

from . import duel, snake, tactics  # noqa: F401 (each registers itself)
from .board import GameView
from .registry import GAMES, BundledGame, bundled_games, find_game, game_name, get_game, register_game
from .suite import fires  # noqa: F401 (registers itself)

__all__ = ["GAMES", "BundledGame", "GameView", "bundled_games", "find_game", "game_name", "get_game", "register_game"]
