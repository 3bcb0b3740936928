"""Entity and action types that several test modules use alike.

A type lives here when more than one test module needs it with the same name and the same fields;
a module that tests something about a type's own fields (another field type, another member list)
keeps its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import gymloop as gl


@dataclass
class Unit:
    """The default actor entity of :func:`support.generic_game.make_game`."""

    x: int
    y: int


class Move(Enum):
    """The default action type of :func:`support.generic_game.make_game`."""

    LEFT = 0
    RIGHT = 1
    STAY = 2


@dataclass
class Enemy:
    hp: int


@dataclass
class Ally:
    hp: int


@dataclass
class Pos:
    x: float
    y: float


class Fire(Enum):
    NO = 0
    YES = 1


#: a select-entity action among the :class:`Enemy` entities
Target = gl.SelectEntity("Target", among=Enemy)
