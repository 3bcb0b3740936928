"""Drawing observations: a board canvas, one draw function per bundled game, a generic fallback.

A renderer draws from the :class:`~gymloop.Obs` a game hands to ``agent.act`` and nothing else,
so games stay headless and unchanged: the :class:`~gymloop.render.Watch` wrapper calls the draw
function of the game's :class:`GameView` at every decision. Bundled games have their views here;
any other game gets :func:`draw_entities` (every entity with ``x``/``y``, ``pos.x``/``pos.y`` or a
``pos`` tuple as a coloured cell), or its own view with :func:`register_view`.

The board's ``y`` grows upward, as in the games (``Move.UP`` is ``y + 1``).

Example:
    >>> from gymloop.games.snake import Food, Head
    >>> import gymloop as gl
    >>> from gymloop.render import Canvas, HEAD, draw_snake, surface_to_array
    >>> canvas = Canvas.offscreen(width=10, height=10)
    >>> draw_snake(gl.Obs(score=1).entities([Food(0, 0)]).actor(Head(3, 4)), canvas)
    >>> px, py = canvas.center(3, 4)
    >>> tuple(surface_to_array(canvas.surface)[py, px]) == HEAD
    True
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..obs import Obs
from . import _deps
from ._deps import pygame_module

__all__ = [
    "BACKGROUND",
    "BAR",
    "BODY",
    "CELL",
    "ENEMY",
    "FOOD",
    "HEAD",
    "OPPONENT_BODY",
    "OPPONENT_HEAD",
    "UNIT",
    "WALL",
    "Canvas",
    "GameView",
    "draw_duel",
    "draw_entities",
    "draw_snake",
    "draw_tactics",
    "register_view",
    "surface_to_array",
    "view_for",
]

log = logging.getLogger(__name__)

Color = tuple[int, int, int]

CELL = 32  # pixels per board cell
BAR = 32  # pixels of the text bar above the board

BACKGROUND: Color = (22, 24, 30)
GRID: Color = (38, 42, 52)
BAR_COLOR: Color = (10, 11, 14)
TEXT: Color = (235, 235, 235)
FOOD: Color = (235, 72, 72)
HEAD: Color = (250, 214, 64)  # the snake's head; the first duel player's head
BODY: Color = (78, 190, 90)
OPPONENT_HEAD: Color = (120, 210, 255)  # the second duel player
OPPONENT_BODY: Color = (50, 120, 220)
WALL: Color = (120, 124, 136)
UNIT: Color = (70, 150, 245)
ENEMY: Color = (225, 80, 80)
_PALETTE: tuple[Color, ...] = (
    (250, 214, 64), (78, 190, 90), (235, 72, 72), (70, 150, 245), (200, 120, 240),
    (240, 150, 60), (120, 210, 255), (180, 180, 180),
)

_fonts: dict[tuple[int, int], Any] = {}  # (font generation, size) -> pygame Font


def _font(size: int) -> Any:
    pg = pygame_module()  # re-initializes the font module after a pygame.quit()
    key = (_deps.font_generation, size)
    f = _fonts.get(key)
    if f is None:
        for k in [k for k in _fonts if k[0] != key[0]]:
            del _fonts[k]  # fonts of an earlier pygame session cannot render any more
        f = _fonts[key] = pg.font.Font(None, size)
    return f


def surface_to_array(surface: Any) -> Any:
    """A ``pygame.Surface`` as a fresh ``(height, width, 3)`` uint8 RGB numpy array.

    Example:
        >>> from gymloop.render import Canvas, surface_to_array
        >>> surface_to_array(Canvas.offscreen(5, 3).surface).shape
        (128, 160, 3)
    """
    import numpy as np

    pg = pygame_module()
    return np.ascontiguousarray(pg.surfarray.array3d(surface).transpose(1, 0, 2))


class Canvas:
    """A board of ``width`` × ``height`` cells on a pygame surface, under a one-line text bar.

    Cell ``(x, y)`` is drawn with ``y`` growing upward; cells off the board are not drawn.

    Args:
        surface: the ``pygame.Surface`` to draw on (at least :meth:`pixel_size` large).
        width: board width in cells.
        height: board height in cells.
        cell: pixels per cell.
        bar: pixels of the text bar at the top.

    Example:
        >>> from gymloop.render import Canvas, FOOD
        >>> c = Canvas.offscreen(width=5, height=5)
        >>> c.clear()
        >>> c.fill(0, 0, FOOD)
        >>> c.pixel_size
        (160, 192)
    """

    def __init__(self, surface: Any, width: int, height: int, cell: int = CELL, bar: int = BAR) -> None:
        self.surface = surface
        self.width = width
        self.height = height
        self.cell = cell
        self.bar = bar
        self._pg = pygame_module()

    @classmethod
    def offscreen(cls, width: int, height: int, cell: int = CELL, bar: int = BAR) -> Canvas:
        """A canvas on a new offscreen surface of exactly the board's size (no window)."""
        pg = pygame_module()
        surface = pg.Surface((width * cell, height * cell + bar))
        return cls(surface, width, height, cell, bar)

    @property
    def pixel_size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels of board and bar."""
        return self.width * self.cell, self.height * self.cell + self.bar

    def on_board(self, x: Any, y: Any) -> bool:
        """Whether cell ``(x, y)`` is on the board."""
        return 0 <= x < self.width and 0 <= y < self.height

    def rect(self, x: float, y: float, inset: int = 0) -> Any:
        """The ``pygame.Rect`` of cell ``(x, y)``, shrunk by ``inset`` pixels on each side."""
        c = self.cell
        left = math.floor(x * c + 0.5)
        top = self.bar + math.floor((self.height - 1 - y) * c + 0.5)
        return self._pg.Rect(left + inset, top + inset, c - 2 * inset, c - 2 * inset)

    def center(self, x: float, y: float) -> tuple[int, int]:
        """Pixel ``(column, row)`` of the centre of cell ``(x, y)``; index arrays as ``a[row, column]``."""
        r = self.rect(x, y)
        return r.x + self.cell // 2, r.y + self.cell // 2

    def clear(self) -> None:
        """Paint the background, the grid lines and an empty bar."""
        pg = self._pg
        s = self.surface
        s.fill(BACKGROUND)
        pg.draw.rect(s, BAR_COLOR, pg.Rect(0, 0, self.width * self.cell, self.bar))
        w, h = self.pixel_size
        for i in range(self.width + 1):
            pg.draw.line(s, GRID, (i * self.cell, self.bar), (i * self.cell, h - 1))
        for j in range(self.height + 1):
            y = self.bar + j * self.cell
            pg.draw.line(s, GRID, (0, y), (w - 1, y))

    def fill(self, x: Any, y: Any, color: Color, inset: int = 2) -> None:
        """A filled square in cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.rect(self.surface, color, self.rect(x, y, inset))

    def disc(self, x: Any, y: Any, color: Color) -> None:
        """A filled circle in cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.circle(self.surface, color, self.center(x, y), self.cell // 2 - 5)

    def ring(self, x: Any, y: Any, color: Color, width: int = 2) -> None:
        """A square outline around cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.rect(self.surface, color, self.rect(x, y, 1), width)

    def label(self, x: Any, y: Any, text: str, color: Color = TEXT, corner: bool = False) -> None:
        """Small text in cell ``(x, y)``: centred, or in its top-left corner with ``corner=True``."""
        if not self.on_board(x, y):
            return
        img = _font(max(12, self.cell // 2 + 2)).render(text, True, color)
        r = self.rect(x, y, 3)
        if corner:
            self.surface.blit(img, r.topleft)
        else:
            self.surface.blit(img, img.get_rect(center=r.center))

    def pips(self, x: Any, y: Any, n: int, color: Color) -> None:
        """``n`` small dots along the bottom of cell ``(x, y)`` (ammo, lives)."""
        if not self.on_board(x, y):
            return
        r = self.rect(x, y, 3)
        for i in range(n):
            self._pg.draw.circle(self.surface, color, (r.left + 3 + 6 * i, r.bottom - 3), 2)

    def bar_text(self, left: str, right: str = "") -> None:
        """Text in the bar: ``left`` aligned left, ``right`` aligned right."""
        f = _font(max(14, self.bar * 2 // 3))
        y = self.bar // 2
        if left:
            img = f.render(left, True, TEXT)
            self.surface.blit(img, img.get_rect(midleft=(6, y)))
        if right:
            img = f.render(right, True, TEXT)
            self.surface.blit(img, img.get_rect(midright=(self.width * self.cell - 6, y)))

    def banner(self, text: str) -> None:
        """Darken the board and write ``text`` across its middle (the end of an episode)."""
        pg = self._pg
        w, h = self.pixel_size
        shade = pg.Surface((w, h - self.bar), pg.SRCALPHA)
        shade.fill((0, 0, 0, 150))
        self.surface.blit(shade, (0, self.bar))
        img = _font(max(18, self.cell)).render(text, True, TEXT)
        self.surface.blit(img, img.get_rect(center=(w // 2, self.bar + (h - self.bar) // 2)))


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def default_end_text(obs: Obs, truncated: bool) -> str:
    """``time up`` or ``game over``, with the final score."""
    return f"{'time up' if truncated else 'game over'}: score {_fmt(obs.score)}"


@dataclass(frozen=True)
class GameView:
    """How to draw one game.

    Attributes:
        draw: ``draw(obs, canvas)`` paints a whole frame (board and bar) from one observation.
        width: board width in cells (``None``: from the first observation's positions).
        height: board height in cells (``None``: likewise).
        players: agents per game (2 for ``duel``); the first player's observations are drawn.
        end_text: ``end_text(obs, truncated)``, the banner over the last frame of an episode.
        keyboard: whether a :class:`~gymloop.render.KeyboardAgent` can play it (its action is
            one Enum with direction members ``UP``/``DOWN``/``LEFT``/``RIGHT``).
        name: shown in the window title.
        cell: pixels per board cell.

    Example:
        >>> from gymloop.render import GameView, draw_entities
        >>> GameView(draw_entities, width=6, height=4, name="mine").players
        1
    """

    draw: Callable[[Obs, Canvas], None]
    width: int | None = None
    height: int | None = None
    players: int = 1
    end_text: Callable[[Obs, bool], str] = default_end_text
    keyboard: bool = True
    name: str = "game"
    cell: int = CELL


# ---------------------------------------------------------------------- bundled games
def draw_snake(obs: Obs, canvas: Canvas) -> None:
    """Snake: food as red discs, the body green, the head yellow; the length in the bar."""
    from ..games.snake import Body, Food, Head

    canvas.clear()
    for f in obs.entities_of(Food):
        canvas.disc(f.x, f.y, FOOD)
    for b in obs.entities_of(Body):
        canvas.fill(b.x, b.y, BODY)
    for h in obs.entities_of(Head):
        canvas.fill(h.x, h.y, HEAD, inset=1)
    canvas.bar_text(f"length {_fmt(obs.score)}")


def _snake_end(obs: Obs, truncated: bool) -> str:
    return f"{'time up' if truncated else 'game over'}: length {_fmt(obs.score)}"


def draw_duel(obs: Obs, canvas: Canvas) -> None:
    """Duel, from the first player's observation: it is yellow/green, its opponent cyan/blue."""
    from ..games.duel import Body, Food, Head, OpponentBody, OpponentHead

    canvas.clear()
    for f in obs.entities_of(Food):
        canvas.disc(f.x, f.y, FOOD)
    for b in obs.entities_of(OpponentBody):
        canvas.fill(b.x, b.y, OPPONENT_BODY)
    for b in obs.entities_of(Body):
        canvas.fill(b.x, b.y, BODY)
    for h in obs.entities_of(OpponentHead):
        canvas.fill(h.x, h.y, OPPONENT_HEAD, inset=1)
    for h in obs.entities_of(Head):
        canvas.fill(h.x, h.y, HEAD, inset=1)
    g = obs.global_features
    if g is not None:
        canvas.bar_text(f"green {g.length}   blue {g.opponent_length}", f"{g.steps_left} steps left")


def _duel_end(obs: Obs, truncated: bool) -> str:
    m = obs.metrics
    if m.get("won"):
        return "green wins"
    if m.get("draw") or truncated:
        return "draw"
    return "blue wins"


_KIND_LETTER = {"GRUNT": "G", "HEAVY": "H", "SNIPER": "S"}


def draw_tactics(obs: Obs, canvas: Canvas) -> None:
    """Tactics: walls grey; units blue (hp, and ammo in the corner; a ring when guarding);
    enemies red with their kind's letter and hp; turn and score in the bar."""
    from ..games.tactics import MAX_TURNS, Enemy, Unit, Wall

    canvas.clear()
    for w in obs.entities_of(Wall):
        canvas.fill(w.x, w.y, WALL, inset=0)
    for e in obs.entities_of(Enemy):
        x, y = e.pos
        canvas.fill(x, y, ENEMY)
        canvas.label(x, y, f"{_KIND_LETTER.get(e.kind.name, '?')}{e.hp}")
    for u in obs.entities_of(Unit):
        x, y = u.pos.x, u.pos.y
        canvas.fill(x, y, UNIT)
        canvas.label(x, y, str(u.hp))
        canvas.pips(x, y, u.ammo, TEXT)
        if u.guarding:
            canvas.ring(x, y, TEXT)
    g = obs.global_features
    if g is not None:
        canvas.bar_text(f"turn {g.turn + 1}/{MAX_TURNS}   score {_fmt(obs.score)}",
                        f"enemies {g.enemies_left}  units {g.units_left}")
    else:
        canvas.bar_text(f"score {_fmt(obs.score)}")


def _tactics_end(obs: Obs, truncated: bool) -> str:
    m = obs.metrics
    if truncated:
        return f"time up: score {_fmt(obs.score)}"
    return f"{'won' if m.get('won') else 'lost'}: score {_fmt(obs.score)}"


def _builtin_view(name: str) -> GameView:
    if name == "snake":
        from ..games.snake import SIZE

        return GameView(draw_snake, SIZE, SIZE, end_text=_snake_end, name="snake")
    if name == "duel":
        from ..games.duel import SIZE

        return GameView(draw_duel, SIZE, SIZE, players=2, end_text=_duel_end, name="duel")
    from ..games.tactics import SIZE

    return GameView(draw_tactics, SIZE, SIZE, end_text=_tactics_end, keyboard=False, name="tactics", cell=40)


# ---------------------------------------------------------------------- any game
def position(obj: Any) -> tuple[Any, Any] | None:
    """An entity's board cell: fields ``x``/``y``, ``pos.x``/``pos.y`` or a ``pos`` pair; else ``None``."""
    x = getattr(obj, "x", None)
    y = getattr(obj, "y", None)
    if x is None or y is None:
        p = getattr(obj, "pos", None)
        if p is None:
            return None
        if isinstance(p, (tuple, list)) and len(p) >= 2:
            x, y = p[0], p[1]
        else:
            x, y = getattr(p, "x", None), getattr(p, "y", None)
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return x, y
    return None


def _type_color(name: str) -> Color:
    return _PALETTE[zlib.crc32(name.encode()) % len(_PALETTE)]


def draw_entities(obs: Obs, canvas: Canvas) -> None:
    """Any game: each entity with a position as a square coloured by its type, actors ringed.

    Positions are rounded to cells; entities without a position are not drawn. The bar shows the
    score.
    """
    canvas.clear()
    actors = {id(a) for a in obs.actor_list}
    for o in obs.entity_list():
        p = position(o)
        if p is None:
            continue
        x, y = math.floor(p[0] + 0.5), math.floor(p[1] + 0.5)
        canvas.fill(x, y, _type_color(type(o).__name__))
        if id(o) in actors:
            canvas.ring(x, y, TEXT)
    canvas.bar_text(f"score {_fmt(obs.score)}")


def board_size(obs: Obs, minimum: int = 5) -> tuple[int, int]:
    """A board that holds every position in ``obs`` (for views without a fixed size)."""
    w = h = minimum
    for o in obs.entity_list():
        p = position(o)
        if p is not None:
            w = max(w, math.floor(p[0] + 0.5) + 1)
            h = max(h, math.floor(p[1] + 0.5) + 1)
    return w, h


_registered: dict[Any, GameView] = {}


def register_view(game: Any, view: GameView) -> None:
    """Use ``view`` to draw ``game`` (a game loop function) in ``play``, ``record`` and :class:`Viewer`.

    Example:
        >>> from gymloop.render import GameView, draw_entities, register_view, view_for
        >>> def my_game(agent, seed): ...
        >>> register_view(my_game, GameView(draw_entities, width=8, height=8, name="mine"))
        >>> view_for(my_game).name
        'mine'
    """
    _registered[game] = view


def view_for(game: Any) -> GameView:
    """The view of a game: a bundled game's name or function, a registered game, else a generic view.

    Raises:
        ConfigError: ``game`` is a name that is neither bundled nor ``module:function``.

    Example:
        >>> from gymloop.render import view_for
        >>> view_for("duel").players
        2
    """
    from ..games import GAMES, get_game

    if isinstance(game, str):
        if game in GAMES:
            return _builtin_view(game)
        game = get_game(game)
    view = _registered.get(game)
    if view is not None:
        return view
    for name in GAMES:
        if get_game(name) is game:
            return _builtin_view(name)
    return GameView(draw_entities, name=getattr(game, "__name__", "game"))
