"""The registry of bundled games: each game module registers itself with one :func:`register_game` call.

An entry holds what the command line and the renderer need to know about a game without naming
it: its loop, a short description, its number of agents, its scripted agent (if it has one) and
how to draw it (a :class:`~gymloop.games.board.GameView`, if it has one). The ``gymloop`` command
(``gymloop run snake``) and :func:`gymloop.render.view_for` look games up here, and :func:`game_name`
names any game the same way everywhere.

Nothing here imports a renderer: a view's draw function receives the canvas it paints
(a :class:`~gymloop.render.Canvas`), so registering a game imports no pygame.

Example:
    >>> from gymloop.games import find_game
    >>> g = find_game("duel")
    >>> g.agents, g.loop.__name__, g.view.width
    (2, 'duel', 10)
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..spaces import declared_agents
from .board import GameView

__all__ = ["GAMES", "BundledGame", "bundled_games", "find_game", "game_name", "get_game", "register_game", "same_game"]


@dataclass(frozen=True)
class BundledGame:
    """One registered game.

    Attributes:
        name: the name the command line knows it by (``gymloop run NAME``).
        loop: the game loop function.
        description: one line saying what the game is.
        agents: agents per game (2 for a two-player game).
        scripted: ``scripted(seed=...)`` makes the game's scripted agent (``--agent scripted``), or ``None``.
        view: how to draw it (``players`` and ``name`` are the entry's), or ``None`` (the renderer's generic view).
    """

    name: str
    loop: Callable[..., Any]
    description: str
    agents: int = 1
    scripted: Callable[..., Any] | None = None
    view: GameView | None = None

    @property
    def target(self) -> str:
        """The loop as ``module:function``."""
        return _qualified(self.loop)


_REGISTRY: dict[str, BundledGame] = {}


def register_game(
    name: str,
    loop: Callable[..., Any],
    description: str,
    *,
    agents: int | None = None,
    scripted: Callable[..., Any] | None = None,
    view: GameView | None = None,
) -> BundledGame:
    """Register a game under ``name`` (call it once, at the end of the game's module).

    Args:
        name: the command-line name; must not contain ``:`` (that spells ``module:function``).
        loop: the game loop.
        description: one line.
        agents: agents per game (default: what the loop declares with ``gl.game(agents=N)``, else 1).
        scripted: the scripted agent's class or factory, called as ``scripted(seed=seed)``.
        view: how to draw it (its ``players`` and ``name`` become the game's).

    Raises:
        ConfigError: a bad name, ``agents`` disagreeing with the loop's declaration, or ``name``
            already registered for another loop.

    Example:
        >>> from gymloop.games.registry import register_game, find_game, _REGISTRY
        >>> def coin(agent, seed): ...
        >>> _ = register_game("coin", coin, "a coin flip")
        >>> find_game("coin").agents
        1
        >>> del _REGISTRY["coin"]
    """
    if not name or ":" in name:
        raise ConfigError(f"register_game: game name {name!r} must be non-empty and without ':'")
    declared = declared_agents(loop)
    n = agents if agents is not None else (declared or 1)
    if n < 1:
        raise ConfigError(f"register_game({name!r}): agents must be at least 1, got {n}")
    if declared is not None and n != declared:
        raise ConfigError(f"register_game({name!r}): agents={agents} but the loop declares gl.game(agents={declared})")
    old = _REGISTRY.get(name)
    if view is not None:
        view = dataclasses.replace(view, players=n, name=name)
    entry = BundledGame(name, loop, description, n, scripted, view)
    if old is not None and old.target != entry.target:
        raise ConfigError(f"register_game: {name!r} is already the game {old.target}, cannot also be {entry.target}")
    _REGISTRY[name] = entry
    return entry


def bundled_games() -> list[BundledGame]:
    """Every registered game, in registration order."""
    return list(_REGISTRY.values())


def find_game(name: str) -> BundledGame | None:
    """The registered game ``name``, or ``None``."""
    return _REGISTRY.get(name)


def game_name(game: Any, *, qualified: bool = False) -> str:
    """The name of a game, the same in every message, title, checkpoint and trace.

    A string (a registered name or ``module:function``) is its own name; a registered game's loop
    goes by its registered name (``snake``); any other game by its ``__name__`` (that of the
    function under any ``functools.partial`` layers, else its type's), or with ``qualified`` by
    ``module:qualname``, the form :func:`get_game` loads.

    Example:
        >>> import functools
        >>> from gymloop.games import game_name
        >>> from gymloop.games.snake import snake
        >>> def coin(agent, seed): ...
        >>> game_name(snake), game_name("duel"), game_name(functools.partial(coin)), game_name(snake, qualified=True)
        ('snake', 'duel', 'coin', 'snake')
    """
    if isinstance(game, str):
        return game
    qual = _qualified(game)
    for entry in _REGISTRY.values():
        if entry.target == qual:
            return entry.name
    if qualified:
        return qual
    inner = game
    while not hasattr(inner, "__name__") and isinstance(inner, functools.partial):
        inner = inner.func
    return str(getattr(inner, "__name__", type(inner).__name__))


def _qualified(game: Any) -> str:
    """``module:qualname`` of a game loop (or class)."""
    return f"{getattr(game, '__module__', '?')}:{getattr(game, '__qualname__', getattr(game, '__name__', '?'))}"


def get_game(name: str) -> Callable[..., Any]:
    """A registered game's loop by name (``snake``, ``tactics``, ``duel``) or a ``module:function`` path.

    ``module:Class`` may also name an ``entity_gym.env.Environment`` subclass
    (``entity_gym.examples:Xor``): it comes back wrapped for gymloop
    (:func:`gymloop.adapters.entity_gym.from_entity_gym`).

    Raises:
        ConfigError: an unknown name (with the closest registered name, if any), a module that
            cannot be imported, a module without that function, or a name of something not callable.
    """
    entry = _REGISTRY.get(name)
    if entry is not None:
        return entry.loop
    if ":" not in name:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown game {name!r}{hint}; bundled games are {sorted(_REGISTRY)}, or give module:function")
    mod, _, fn = name.partition(":")
    try:
        m = importlib.import_module(mod)
    except ImportError as e:
        raise ConfigError(
            f"cannot import module {mod!r} for game {name!r}: {e}; the module must be importable from the "
            "current folder or PYTHONPATH (e.g. run from the folder that holds it)"
        ) from e
    try:
        obj = getattr(m, fn)
    except AttributeError:
        raise ConfigError(f"module {mod!r} has no game function {fn!r}") from None
    if _is_entity_gym_class(obj):
        from ..adapters.entity_gym import from_entity_gym

        return from_entity_gym(obj)
    if not callable(obj):
        raise ConfigError(
            f"{name!r} is a {type(obj).__name__}, not a game: give module:function of a game loop game(agent, seed) "
            "(or a gl.Environment class)"
        )
    return obj


def _is_entity_gym_class(obj: Any) -> bool:
    """An ``entity_gym.env.Environment`` subclass, told by its bases' names (entity-gym is imported only if it is one)."""
    return isinstance(obj, type) and any(
        c.__name__ == "Environment" and c.__module__.split(".")[0] == "entity_gym" for c in obj.__mro__[1:]
    )


class _Games(Mapping[str, str]):
    """``{name: "module:function"}`` of the registered games, always current."""

    def __getitem__(self, name: str) -> str:
        return _REGISTRY[name].target

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


GAMES: Mapping[str, str] = _Games()
"""The registered games as ``{name: "module:function"}`` (a live, read-only view of the registry)."""


def same_game(a: str, b: str) -> bool:
    """Whether two game names (as :func:`game_name` writes them) may name one game.

    Names agree when they are equal or name a function of the same name in different modules or
    scopes (a game recorded from a script, ``__main__:coin``, is the ``coin`` of ``mygame:coin``), so
    a file made by one program is accepted by another; a function of another name is another game.

    Example:
        >>> same_game("snake", "snake"), same_game("__main__:coin", "mygame:coin"), same_game("os:system", "snake")
        (True, True, False)
    """
    return a == b or a.rpartition(":")[2].rpartition(".")[2] == b.rpartition(":")[2].rpartition(".")[2]
