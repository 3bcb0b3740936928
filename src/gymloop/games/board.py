"""What the bundled games' board views share: their colours and the score format (no pygame here).

Each game's draw function paints with the methods of the :class:`~gymloop.render.Canvas` it is
given; :mod:`gymloop.render` re-exports these colours (``gymloop.render.FOOD``, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = ["BODY", "ENEMY", "FOOD", "HEAD", "MARK", "OPPONENT_BODY", "OPPONENT_HEAD", "UNIT", "WALL", "Color", "fmt"]

Color = tuple[int, int, int]

FOOD: Color = (235, 72, 72)
HEAD: Color = (250, 214, 64)  # the snake's head; the first duel player's head
BODY: Color = (78, 190, 90)
OPPONENT_HEAD: Color = (120, 210, 255)  # the second duel player
OPPONENT_BODY: Color = (50, 120, 220)
WALL: Color = (120, 124, 136)
UNIT: Color = (70, 150, 245)
ENEMY: Color = (225, 80, 80)
MARK: Color = (235, 235, 235)  # light marks on a cell (ammo pips, a guard's ring)


def fmt(v: Any) -> str:
    """A score or count as shown: floats without trailing zeros (``3.0`` -> ``3``).

    Example:
        >>> fmt(3.0), fmt(2.5), fmt(7)
        ('3', '2.5', '7')
    """
    return f"{v:g}" if isinstance(v, float) else str(v)
