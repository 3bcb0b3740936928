"""How a game is drawn, without pygame: :class:`GameView`, the bundled games' colours and the score format.

A view's draw function paints with the methods of the :class:`~gymloop.render.Canvas` it is
given, so describing a view imports no renderer; :mod:`gymloop.render` re-exports these names
(``gymloop.render.GameView``, ``gymloop.render.FOOD``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..obs import Obs

__all__ = [
    "BODY", "CELL", "ENEMY", "FOOD", "HEAD", "MARK", "OPPONENT_BODY", "OPPONENT_HEAD", "UNIT", "WALL", "Color", "GameView",
    "default_end_text", "fmt",
]

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

CELL = 32  # pixels per board cell


def fmt(v: Any) -> str:
    """A score or count as shown: floats without trailing zeros (``3.0`` -> ``3``).

    Example:
        >>> fmt(3.0), fmt(2.5), fmt(7)
        ('3', '2.5', '7')
    """
    return f"{v:g}" if isinstance(v, float) else str(v)


def default_end_text(obs: Obs, truncated: bool) -> str:
    """``time up`` or ``game over``, with the final score."""
    return f"{'time up' if truncated else 'game over'}: score {fmt(obs.score)}"


@dataclass(frozen=True)
class GameView:
    """How to draw one game: what a bundled game registers (:func:`~gymloop.games.registry.register_game`
    fills in ``players`` and ``name``), what :func:`gymloop.render.register_view` takes, and what
    :func:`gymloop.render.view_for` returns.

    Attributes:
        draw: ``draw(obs, canvas)`` paints a whole frame (board and bar) from one observation.
        width: board width in cells (``None``: from the first observation's positions).
        height: board height in cells (``None``: likewise).
        players: agents per game (2 for a two-player game); the first player's observations are drawn.
        end_text: ``end_text(obs, truncated)``, the banner over the last frame of an episode.
        keyboard: whether a :class:`~gymloop.render.KeyboardAgent` can play it (every action
            type it asks is an Enum; ``False`` for a game that asks for a select-entity target).
        name: shown in the window title.
        cell: pixels per board cell.
        legend: draw a legend of the entity types beside the board (``None``: when ``draw`` draws
            one, as :func:`~gymloop.render.draw_entities` does).
        types: entity classes known before the first observation (the game's declared ones):
            their colours in :func:`~gymloop.render.draw_entities` follow the game's spaces.
        y_up: ``y`` grows upward (row 0 at the bottom, as in the bundled grid games); ``False``
            for a game in screen coordinates (``y`` grows downward, as in pygame).

    Example:
        >>> from gymloop.render import GameView, draw_entities
        >>> GameView(draw_entities, width=6, height=4, name="mine").players
        1
    """

    draw: Callable[[Obs, Any], None]
    width: int | None = None
    height: int | None = None
    players: int = 1
    end_text: Callable[[Obs, bool], str] = default_end_text
    keyboard: bool = True
    name: str = "game"
    cell: int = CELL
    legend: bool | None = None
    types: tuple[type, ...] = ()
    y_up: bool = True

    @property
    def shows_legend(self) -> bool:
        """Whether a viewer makes room for a legend beside the board."""
        return bool(getattr(self.draw, "draws_legend", False)) if self.legend is None else self.legend
