"""Bundled games. Each module documents its Observation, Action, Reward and Termination.

* :mod:`gymloop.games.snake`: the classic snake (entity-gym-rs bevy_snake rules);
* :mod:`gymloop.games.tactics`: a small squad tactics game (several actors, composite and
  select-entity actions, masks, global features);
* :mod:`gymloop.games.duel`: two snakes on one board (multi-agent, lock-step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["get_game", "GAMES"]

GAMES = {
    "snake": "gymloop.games.snake:snake",
    "tactics": "gymloop.games.tactics:tactics",
    "duel": "gymloop.games.duel:duel",
}


def get_game(name: str) -> Callable[..., Any]:
    """A bundled game by name (``snake``, ``tactics``, ``duel``) or a ``module:function`` path."""
    import importlib

    from ..errors import ConfigError

    target = GAMES.get(name, name)
    if ":" not in target:
        import difflib

        close = difflib.get_close_matches(name, list(GAMES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown game {name!r}{hint}; bundled games are {sorted(GAMES)}, or give module:function")
    mod, _, fn = target.partition(":")
    try:
        m = importlib.import_module(mod)
    except ImportError as e:
        raise ConfigError(
            f"cannot import module {mod!r} for game {name!r}: {e}; the module must be importable from the "
            "current folder or PYTHONPATH (e.g. run from the folder that holds it)"
        ) from e
    try:
        return getattr(m, fn)
    except AttributeError:
        raise ConfigError(f"module {mod!r} has no game function {fn!r}") from None
