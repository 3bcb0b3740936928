"""The range of each configuration field, in one place: what ``check()`` enforces and what the reference shows.

A config dataclass's module declares one :class:`Range` per field (``SPECS``); its ``RANGES`` dict
(the text :mod:`gymloop.train.reference` puts in ``docs/config.md``) is :func:`describe` of those, and
its ``check()`` calls :func:`check_fields`, so the documented range and the enforced one cannot drift.
Relationships between fields ("minibatch must divide the rollout") stay in each ``check()``, and the
range text says them in its ``note``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = ["Range", "check_fields", "describe"]


@dataclass(frozen=True)
class Range:
    """The values a field accepts.

    Attributes:
        kind: ``"int"``, ``"float"`` (a finite real; ints accepted), ``"bool"``, ``"choice"``
            (one of ``choices``), ``"str"``, ``"str_list"`` or ``"any"`` (checked by the class itself:
            a nested config, a union).
        lo, hi: bounds of ``int`` and ``float`` fields (``None``: unbounded on that side).
        lo_open, hi_open: whether the bound itself is excluded.
        none: ``None`` is accepted and means this (e.g. ``"automatic"``, ``"no limit"``); ``""``: not accepted.
        choices: the values of a ``choice`` field.
        note: said after the range (relationships with other fields, usual values).
        text: the whole range text, for ``any`` fields whose class checks them.
    """

    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    none: str = ""
    choices: tuple[Any, ...] = ()
    note: str = ""
    text: str = ""

    def describe(self) -> str:
        """The range as ``docs/config.md`` shows it (e.g. ``> 0, or None (automatic)``)."""
        if self.text:
            return self.text
        if self.kind in ("int", "float"):
            if self.lo is not None and self.hi is not None:
                base = f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"
            elif self.lo is not None:
                base = f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
            elif self.hi is not None:
                base = f"{'<' if self.hi_open else '<='} {_num(self.hi)}"
            else:
                base = "any " + ("int" if self.kind == "int" else "finite number")
            if self.kind == "float" and (self.lo is None or self.hi is None):
                base += ", finite"
        elif self.kind == "bool":
            base = "True, False"
        elif self.kind == "choice":
            base = ", ".join(_show(c) for c in self.choices)
        elif self.kind == "str":
            base = "a string"
        elif self.kind == "str_list":
            base = "a list of strings"
        else:
            base = "see the class"
        if self.none:
            base += f", or None ({self.none})"
        return base + self.note

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is out of this range (``None``: it is in range)."""
        if self.kind == "any":  # the class checks it
            return None
        if value is None:
            return None if self.none else "is not accepted (no automatic value)"
        k = self.kind
        if k == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                return f"is a {type(value).__name__}, not an int"
            return self._bounds(value)
        if k == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"is a {type(value).__name__}, not a number"
            if isinstance(value, float) and not math.isfinite(value):
                return "is not finite"
            return self._bounds(value)
        if k == "bool":
            return None if isinstance(value, bool) else f"is a {type(value).__name__}, not True or False"
        if k == "choice":
            return None if any(value == c and type(value) is type(c) for c in self.choices) else "is not one of the choices"
        if k == "str":
            return None if isinstance(value, str) else f"is a {type(value).__name__}, not a string"
        if k == "str_list":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return "is not a list of strings"
        return None

    def _bounds(self, v: float) -> str | None:
        try:
            low = self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo)
            high = self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi)
        except OverflowError:  # an int too large to compare with a float bound
            return "is out of range"
        return "is out of range" if low or high else None


def describe(specs: Mapping[str, Range]) -> dict[str, str]:
    """``{field: range text}`` of a class's specs (a module's ``RANGES`` entry)."""
    return {name: spec.describe() for name, spec in specs.items()}


def check_fields(obj: Any, specs: Mapping[str, Range], prefix: str = "") -> None:
    """Raise :class:`ConfigError` naming the field, its value, its range and the fix for the first
    field of dataclass ``obj`` outside its range (``prefix`` is the field's section, e.g. ``ppo.``)."""
    defaults = {f.name: f.default for f in dataclasses.fields(obj)}
    for name, spec in specs.items():
        value = getattr(obj, name)
        why = spec.problem(value)
        if why is None:
            continue
        default = defaults.get(name, dataclasses.MISSING)
        if default is dataclasses.MISSING:
            example = ""
        elif default is None and spec.none:
            example = f", e.g. None (the default: {spec.none})"
        else:
            example = f", e.g. {_show(default)} (the default)"
        key = prefix + name
        fix = "to one of them" if spec.kind == "choice" else "within that range"
        raise ConfigError(f"{key}={_short(value)} {why}: expected {spec.describe()}; set {key} {fix}{example}")


def _num(x: float) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    if isinstance(x, int) and abs(x) >= 2**32:
        exp = x.bit_length() - 1
        return f"2**{exp}" if x == 2**exp else f"2**{exp + 1} - 1" if x == 2 ** (exp + 1) - 1 else str(x)
    return str(x)


def _show(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(v)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
