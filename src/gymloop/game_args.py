"""A game's options from the command line: ``--game-arg key=value``, typed from the game's signature.

A game loop's parameters after ``agent`` and ``seed`` are its options (``display`` excepted: the
drivers pass it). :func:`bind_game_args` reads ``key=value`` pairs, converts each value to the
parameter's annotated type (``int``, ``float``, ``bool``, ``str``, an ``Enum`` by member name, a
``Literal``, or ``X | None``) and returns the game with them bound (``functools.partial``), so every
command trains, checks and plays the same configured game.

Example:
    >>> from gymloop.game_args import bind_game_args
    >>> def race(agent, seed, laps: int = 3, wet: bool = False): ...
    >>> bind_game_args(race, ["laps=5", "wet=yes"]).keywords
    {'laps': 5, 'wet': True}
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
import types
import typing
from collections.abc import Sequence
from typing import Any

from .errors import ConfigError

__all__ = ["bind_game_args", "game_options"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_DRIVEN = ("display",)  # parameters the drivers pass, never options


def _function(game: Any) -> Any:
    """The function under any ``functools.partial`` layers."""
    while isinstance(game, functools.partial):
        game = game.func
    return game


def game_options(game: Any) -> dict[str, inspect.Parameter]:
    """The options a game loop takes: its parameters after ``agent`` and ``seed``, but ``display``."""
    fn = game
    bound: set[str] = set()
    while isinstance(fn, functools.partial):
        bound.update(fn.keywords)
        fn = fn.func
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {p.name: p for p in params[2:] if p.name not in _DRIVEN and p.name not in bound
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _signature_text(game: Any) -> str:
    fn = _function(game)
    try:
        return f"{getattr(fn, '__name__', 'game')}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return repr(fn)


def _hints(game: Any) -> dict[str, Any]:
    """The game loop's annotations as types; with ``from __future__ import annotations`` one that
    cannot be resolved (a name imported only for type checkers) leaves the others resolved."""
    fn = _function(game)
    try:
        return typing.get_type_hints(fn)
    except Exception:  # (some annotation names something not importable at run time: resolve them one by one)
        pass
    out = {}
    namespace = getattr(fn, "__globals__", {})
    for name, ann in dict(getattr(fn, "__annotations__", {})).items():
        if isinstance(ann, str):
            try:
                ann = eval(ann, namespace, {})  # (what typing.get_type_hints does, one annotation at a time)
            except Exception:
                ann = _BUILTIN_TYPES.get(ann, ann)
        out[name] = ann
    return out


_BUILTIN_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def _convert(name: str, text: str, tp: Any, sig: str) -> Any:
    """``text`` as a value of type ``tp`` for option ``name``."""
    def wrong(expected: str) -> ConfigError:
        return ConfigError(f"--game-arg {name}={text}: option {name!r} of {sig} takes {expected}, got {text!r}")

    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if type(None) in args and text.lower() == "none":
            return None
        rest = [a for a in args if a is not type(None)]
        for a in rest:
            try:
                return _convert(name, text, a, sig)
            except ConfigError:
                continue
        raise wrong(" or ".join(getattr(a, "__name__", str(a)) for a in args))
    if origin is typing.Literal:
        for v in typing.get_args(tp):
            if str(v) == text:
                return v
        raise wrong("one of " + ", ".join(repr(v) for v in typing.get_args(tp)))
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise wrong("a bool (true/false, yes/no, 1/0)")
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            raise wrong("an int") from None
    if tp is float:
        try:
            v = float(text)
        except ValueError:
            raise wrong("a number") from None
        if not math.isfinite(v):
            raise wrong("a finite number")
        return v
    if tp is str:
        return text
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for m in tp:
            if m.name.lower() == text.lower():
                return m
        raise wrong(f"a {tp.__name__} member ({', '.join(m.name for m in tp)})")
    raise ConfigError(f"--game-arg {name}={text}: option {name!r} of {sig} is annotated {tp!r}, which the command line "
                      "cannot build (int, float, bool, str, an Enum, a Literal or X | None); bind it in Python with "
                      "functools.partial instead")


def bind_game_args(game: Any, pairs: Sequence[str] | None) -> Any:
    """``game`` with the options ``pairs`` (``"key=value"`` each) bound, or ``game`` itself when there are none.

    Raises:
        ConfigError: a pair without ``=``, an option the signature does not take (or takes twice),
            or a value that is not of the option's type; the message names the option and the signature.
    """
    if not pairs:
        return game
    options = game_options(game)
    sig = _signature_text(game)
    hints = _hints(game)
    try:
        takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(_function(game)).parameters.values())
    except (TypeError, ValueError):
        takes_any = False
    values: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"--game-arg takes key=value, got {pair!r}; e.g. --game-arg size=12")
        if key in values:
            raise ConfigError(f"--game-arg {key} is given twice; give each option once")
        p = options.get(key)
        if p is None:
            if takes_any and key not in ("agent", "agents", "seed", *_DRIVEN):
                values[key] = text
                continue
            known = ", ".join(options) or "none"
            raise ConfigError(f"--game-arg {pair}: {sig} has no option {key!r} (its options: {known})")
        tp = hints.get(key, p.annotation)
        if tp is inspect.Parameter.empty:
            tp = type(p.default) if p.default is not inspect.Parameter.empty and p.default is not None else str
        values[key] = _convert(key, text, tp, sig)
    return functools.partial(game, **values)
