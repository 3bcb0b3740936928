"""Agent specs: the strings (and objects) that name the agent of a seat, and :func:`load_agent`, which makes one.

``gymloop run``, ``play``, ``record`` and :func:`gymloop.render.play` / :func:`~gymloop.render.record`
take the same specs: ``random`` (or ``None``), ``scripted`` (a bundled game's scripted agent),
``module:Name`` (your own agent class, factory or object), a checkpoint path, or an agent object;
``human`` is a seat at the keyboard, which only :func:`gymloop.render.play` fills.

Example:
    >>> from gymloop.agent_specs import describe, is_module_spec, load_agent
    >>> from gymloop.games.snake import snake
    >>> type(load_agent("scripted", snake)).__name__, is_module_spec("mygame:MyAgent"), describe(None)
    ('GreedyAgent', True, 'random')
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

from .agent import RandomAgent
from .errors import CheckpointError, ConfigError
from .games import bundled_games, game_name

__all__ = ["HUMAN", "AgentSpec", "describe", "is_module_spec", "load_agent"]


HUMAN = "human"
"""The seat spec of a human at the keyboard (``play`` only)."""

AgentSpec = Any
"""What a seat takes: ``None`` or ``"random"``, ``"human"`` (play only), ``"scripted"`` (a bundled
game's scripted agent), ``"module:Name"`` (your own agent class, factory or object), a checkpoint
path, or an agent object."""


def _scripted(fn: Any, seed: int | None) -> Any:
    """The scripted agent of a bundled game."""
    for entry in bundled_games():
        if entry.loop is fn or entry.name == fn:
            if entry.scripted is not None:
                return entry.scripted(seed=seed)
            break
    scripted = sorted(g.name for g in bundled_games() if g.scripted is not None)
    raise ConfigError(f"no scripted agent for game {game_name(fn)!r}; games with one: {scripted} (or give your own "
                      f"agent class as module:Class, or a checkpoint path)")


def is_module_spec(spec: str) -> bool:
    """Whether ``spec`` spells ``module:Name`` (dotted identifiers on both sides of one colon)."""
    mod, sep, attr = spec.partition(":")
    return bool(sep) and bool(attr) and all(p.isidentifier() for p in mod.split(".") + attr.split("."))


def _imported_agent(spec: str, seed: int | None) -> Any:
    """``module:Name``: an agent class (given ``seed=`` when it takes one), a factory, or an agent object."""
    mod, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise ConfigError(f"agent {spec!r}: cannot import the module {mod!r} ({e}); it must be importable from the current "
                          "folder or the Python path") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"agent {spec!r}: the module {mod!r} has no {attr!r}; name an agent class, e.g. {mod}:MyAgent")
        obj = getattr(obj, part)
    if callable(obj) and not callable(getattr(obj, "act", None)) or isinstance(obj, type):
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        takes_seed = "seed" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        try:
            obj = obj(seed=seed) if takes_seed else obj()
        except TypeError as e:
            raise ConfigError(f"agent {spec!r}: cannot make an agent by calling {attr}({'seed=...' if takes_seed else ''}): "
                              f"{e}; name an agent class whose __init__ takes no arguments or seed=") from e
    if not callable(getattr(obj, "act", None)) or not callable(getattr(obj, "game_over", None)):
        raise ConfigError(f"agent {spec!r} is {obj!r}, not an Agent (an object with act(obs, *action_types) and "
                          "game_over(obs, truncated)); name an agent class, e.g. mygame:MyAgent")
    return obj


def load_agent(source: AgentSpec, game: Any, seed: int | None = 0, *,
               agents_per_game: int | None = None) -> Any:
    """The agent of one seat: a random agent for ``None`` or ``"random"``, a bundled game's scripted agent for
    ``"scripted"``, your own agent for ``"module:Name"`` (a class, called with ``seed=`` when it takes one,
    a factory or an agent object), a trained agent for a checkpoint path (checked against ``game``; see
    :meth:`~gymloop.neural.NeuralAgent.check`), or an agent object as it is.

    Args:
        source: the seat's spec (see above); ``"human"`` is a seat of :func:`play` only.
        game: the game loop the agent will play (a bundled game's name will do for ``"scripted"``).
        seed: the agent's seed.
        agents_per_game: agents the game takes (for checking a checkpoint against a game that does
            not declare it).

    Raises:
        CheckpointError: the path does not exist or is not an agent for ``game``.
        ConfigError: an unknown spec, a module or name that cannot be imported, not an agent.

    Example:
        >>> from gymloop.games.snake import snake
        >>> from gymloop.agent_specs import load_agent
        >>> type(load_agent(None, snake)).__name__, type(load_agent("scripted", snake)).__name__
        ('RandomAgent', 'GreedyAgent')
    """
    if source is None or source == "random":
        return RandomAgent(seed=seed)
    if source == HUMAN:
        raise ConfigError("'human' plays at the keyboard in play (gymloop play); record and other runs need agents: "
                          "'random', 'scripted', module:Class or a checkpoint path")
    if source == "scripted":
        return _scripted(game, seed)
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        if not os.path.exists(p) and is_module_spec(p):
            return _imported_agent(p, seed)
        if not os.path.exists(p):
            raise CheckpointError(
                f"agent checkpoint {p!r} does not exist; expected a .safetensors file written by `gymloop train` "
                f"(e.g. runs/snake/agent.safetensors); check the path, or give 'random', 'scripted' or module:Class"
            )
        from .neural import load

        agent = load(p, seed=seed)  # a training run's folder or an enn-trainer checkpoint folder: gl.load decides
        check = getattr(agent, "check", None)
        if check is not None:
            check(game, agents_per_game=agents_per_game)
        return agent
    if not callable(getattr(source, "act", None)):
        raise ConfigError(f"agent must be a checkpoint path, 'random', 'scripted', module:Class, an Agent (with act and "
                          f"game_over) or None, got {source!r}")
    return source


def describe(spec: AgentSpec) -> str:
    """A seat's agent as a window title names it: ``random``, ``you``, a spec string or a checkpoint's name, a type name."""
    if spec is None or spec == "random":
        return "random"
    if spec == HUMAN:
        return "you"
    if isinstance(spec, (str, os.PathLike)):
        p = os.fspath(spec)
        return p if is_module_spec(p) or p == "scripted" else os.path.basename(os.path.normpath(p)) or p
    return type(spec).__name__
