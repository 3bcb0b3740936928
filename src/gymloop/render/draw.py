"""Drawing observations: a board canvas, the views of registered games, a generic fallback.

A renderer draws from the :class:`~gymloop.Obs` a game hands to ``agent.act`` and nothing else,
so games stay headless and unchanged: the :class:`~gymloop.render.Watch` wrapper calls the draw
function of the game's :class:`~gymloop.games.board.GameView` at every decision. A bundled game
registers its view in its own module; any other game gets
:func:`draw_entities` (every entity with ``x``/``y``, ``pos.x``/``pos.y`` or a ``pos`` tuple as a
coloured cell), or its own view with :func:`register_view`.

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

import colorsys
import dataclasses
import enum
import functools
import logging
import math
import typing
from collections.abc import Iterable
from typing import Any

from ..actions import action_spec
from ..errors import GymloopError
from ..games import bundled_games, find_game, game_name, get_game
from ..games.board import CELL, Color, GameView, fmt
from ..games.registry import BundledGame
from ..obs import Obs
from ..schema import schema_of
from ..spaces import declared_agents, declared_types
from . import _deps
from ._deps import pygame_module

__all__ = [
    "BACKGROUND",
    "BAR",
    "Canvas",
    "draw_entities",
    "fitting_cell",
    "frame_size",
    "register_view",
    "surface_to_array",
    "view_for",
]

log = logging.getLogger(__name__)

BAR = 32  # pixels of the text bar above the board
MAX_SIDE = 1280
"""The longest side, in pixels, of a frame a viewer makes: a larger board is drawn at fewer pixels per cell."""
MIN_CELL = 8  # below this many pixels per cell: no grid lines, and cells are drawn as markers
MARKER = 12  # pixels of a cell's marker below MIN_CELL pixels per cell
_ROW = 18  # legend (and footer) row height in pixels
_LEGEND_FONT = 16

BACKGROUND: Color = (22, 24, 30)
GRID: Color = (38, 42, 52)
BAR_COLOR: Color = (10, 11, 14)
TEXT: Color = (235, 235, 235)
INK: Color = (12, 13, 16)  # text drawn on a coloured cell
# the bundled games' colours (FOOD, HEAD, BODY, ...) are gymloop.games.board's, re-exported here
TYPE_PALETTE: tuple[Color, ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (160, 80, 220),
    (70, 240, 240), (240, 50, 230), (170, 255, 195), (250, 190, 212), (0, 128, 128), (170, 110, 40),
)
"""Well-separated colours for entity types on the dark board, given out in order (any game's view)."""

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
    w, h = surface.get_size()
    return np.frombuffer(bytearray(pg.image.tobytes(surface, "RGB")), np.uint8).reshape(h, w, 3)


class Canvas:
    """A board of ``width`` × ``height`` cells on a pygame surface, under a one-line text bar.

    Cell ``(x, y)`` is drawn with ``y`` growing upward (:attr:`y_up`; ``False``: downward, as in
    screen coordinates); cells off the board are not drawn. A board
    too large for :data:`MAX_SIDE` pixels is drawn at fewer pixels per cell (``cell`` may be a
    float, even below 1: a game in pixel coordinates): below :data:`MIN_CELL` pixels there are no
    grid lines and each cell is drawn as a marker of :data:`MARKER` pixels around its centre.

    Args:
        surface: the ``pygame.Surface`` to draw on (at least :meth:`pixel_size` large).
        width: board width in cells.
        height: board height in cells.
        cell: pixels per cell.
        bar: pixels of the text bar at the top.
        panel: ``(width, height)`` in pixels of a side panel right of the board (a legend's room).
        footer: pixels of a strip below the board (the keys of a keyboard player).

    Example:
        >>> from gymloop.render import Canvas, FOOD
        >>> c = Canvas.offscreen(width=5, height=5)
        >>> c.clear()
        >>> c.fill(0, 0, FOOD)
        >>> c.pixel_size
        (160, 192)
    """

    def __init__(self, surface: Any, width: int, height: int, cell: float = CELL, bar: int = BAR,
                 panel: tuple[int, int] = (0, 0), footer: int = 0) -> None:
        self.surface = surface
        self.width = width
        self.height = height
        self.cell = cell
        self.bar = bar
        self.panel = panel
        self.footer = footer
        self._size = frame_size(width, height, cell, bar, panel, footer)
        #: whether :meth:`fit` may zoom out to take in positions off the board (a board sized from
        #: the first observation, drawn at fewer pixels per cell than the view's)
        self.fits = False
        #: text lines drawn in the footer (a keyboard player's keys), set by the viewer
        self.footer_lines: list[str] = []
        #: the entity types' colours and legend of :func:`draw_entities` (made at its first frame)
        self.legend: Legend | None = None
        #: whether ``y`` grows upward (row 0 at the bottom); ``False`` for a game in screen coordinates
        self.y_up = True
        self._pg = pygame_module()

    @classmethod
    def offscreen(cls, width: int, height: int, cell: float = CELL, bar: int = BAR, panel: tuple[int, int] = (0, 0),
                  footer: int = 0) -> Canvas:
        """A canvas on a new offscreen surface of exactly its :attr:`pixel_size` (no window)."""
        pg = pygame_module()
        return cls(pg.Surface(frame_size(width, height, cell, bar, panel, footer)), width, height, cell, bar, panel, footer)

    @property
    def pixel_size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels of board, side panel (``panel``: a legend's room), bar and footer."""
        return self._size

    @property
    def board_pixels(self) -> tuple[int, int]:
        """``(width, height)`` in pixels of the board alone."""
        return math.ceil(self.width * self.cell), math.ceil(self.height * self.cell)

    @property
    def panel_left(self) -> int:
        """The pixel column where the side panel starts (right of the board)."""
        return self.board_pixels[0]

    def fit(self, width: int, height: int) -> bool:
        """Zoom out (fewer pixels per cell, same frame) so that a ``width`` × ``height`` board fits;
        only a canvas with :attr:`fits` set does (``False`` otherwise, or when it already fits)."""
        if not self.fits or (width <= self.width and height <= self.height):
            return False
        bw, bh = self.board_pixels
        grow = 1.1  # room to spare: a board that keeps growing zooms out a few times, not at every frame
        self.width = max(self.width, math.ceil(width * grow) if width > self.width else 0)
        self.height = max(self.height, math.ceil(height * grow) if height > self.height else 0)
        self.cell = min(bw / self.width, bh / self.height)
        log.info("board grew to %d x %d cells: drawn at %.3g px per cell", self.width, self.height, self.cell)
        return True

    def on_board(self, x: Any, y: Any) -> bool:
        """Whether cell ``(x, y)`` is on the board."""
        return 0 <= x < self.width and 0 <= y < self.height

    def rect(self, x: float, y: float, inset: int = 0) -> Any:
        """The ``pygame.Rect`` of cell ``(x, y)``, shrunk by ``inset`` pixels on each side (below
        :data:`MIN_CELL` pixels per cell: a marker of :data:`MARKER` pixels around the cell's centre)."""
        c = self.cell
        if c < MIN_CELL:
            cx = math.floor((x + 0.5) * c)
            cy = self.bar + math.floor(((self.height - 0.5 - y) if self.y_up else (y + 0.5)) * c)
            side = max(2, MARKER - 2 * inset)
            return self._pg.Rect(cx - side // 2, cy - side // 2, side, side)
        left = math.floor(x * c + 0.5)
        top = self.bar + math.floor(((self.height - 1 - y) if self.y_up else y) * c + 0.5)
        side = round(c) - 2 * inset
        return self._pg.Rect(left + inset, top + inset, side, side)

    def center(self, x: float, y: float) -> tuple[int, int]:
        """Pixel ``(column, row)`` of the centre of cell ``(x, y)``; index arrays as ``a[row, column]``."""
        r = self.rect(x, y)
        return r.x + r.w // 2, r.y + r.h // 2

    def clear(self) -> None:
        """Paint the background, the grid lines (a border below :data:`MIN_CELL` pixels per cell),
        an empty bar and an empty footer."""
        pg = self._pg
        s = self.surface
        s.fill(BACKGROUND)
        w, full_h = self.pixel_size
        pg.draw.rect(s, BAR_COLOR, pg.Rect(0, 0, w, self.bar))
        bw, bh = self.board_pixels
        if self.cell < MIN_CELL:
            pg.draw.rect(s, GRID, pg.Rect(0, self.bar, bw, bh), 1)
        else:
            c = self.cell
            for i in range(self.width + 1):
                x = round(i * c)
                pg.draw.line(s, GRID, (x, self.bar), (x, self.bar + bh - 1))
            for j in range(self.height + 1):
                y = self.bar + round(j * c)
                pg.draw.line(s, GRID, (0, y), (bw - 1, y))
        if self.footer:
            pg.draw.rect(s, BAR_COLOR, pg.Rect(0, full_h - self.footer, w, self.footer))
            f = _font(_LEGEND_FONT)
            y = full_h - self.footer + 4
            for line in self.footer_lines:
                if y + _ROW > full_h:
                    break
                s.blit(f.render(line, True, TEXT), (6, y))
                y += _ROW

    def fill(self, x: Any, y: Any, color: Color, inset: int = 2) -> None:
        """A filled square in cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.rect(self.surface, color, self.rect(x, y, inset))

    def disc(self, x: Any, y: Any, color: Color) -> None:
        """A filled circle in cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.circle(self.surface, color, self.center(x, y), max(2, int(self.cell) // 2 - 5))

    def ring(self, x: Any, y: Any, color: Color, width: int = 2) -> None:
        """A square outline around cell ``(x, y)``."""
        if self.on_board(x, y):
            self._pg.draw.rect(self.surface, color, self.rect(x, y, 1), width)

    def label(self, x: Any, y: Any, text: str, color: Color = TEXT, corner: bool = False) -> None:
        """Small text in cell ``(x, y)``: centred, or in its top-left corner with ``corner=True``."""
        if not self.on_board(x, y):
            return
        img = _font(max(12, int(self.cell) // 2 + 2)).render(text, True, color)
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
            self.surface.blit(img, img.get_rect(midright=(self.board_pixels[0] - 6, y)))

    def banner(self, text: str) -> None:
        """Darken the board and write ``text`` across its middle (the end of an episode)."""
        pg = self._pg
        w, h = self.pixel_size
        shade = pg.Surface((w, h - self.bar - self.footer), pg.SRCALPHA)
        shade.fill((0, 0, 0, 150))
        self.surface.blit(shade, (0, self.bar))
        img = _font(max(18, min(int(self.cell), 48))).render(text, True, TEXT)
        board_w, board_h = self.board_pixels
        self.surface.blit(img, img.get_rect(center=(board_w // 2, self.bar + board_h // 2)))


def frame_size(width: int, height: int, cell: float, bar: int = BAR, panel: tuple[int, int] = (0, 0),
               footer: int = 0) -> tuple[int, int]:
    """``(width, height)`` in pixels of a :class:`Canvas`: the board, a side panel, the bar and a footer.

    Example:
        >>> from gymloop.render.draw import frame_size
        >>> frame_size(10, 10, 32), frame_size(640, 480, 2.0, panel=(120, 60))
        ((320, 352), (1400, 992))
    """
    return math.ceil(width * cell) + panel[0], max(math.ceil(height * cell), panel[1]) + bar + footer


def footer_height(lines: list[str]) -> int:
    """Pixels of a :class:`Canvas` footer for ``lines`` of text (0 for none)."""
    return len(lines) * _ROW + 8 if lines else 0


def wrap_lines(lines: list[str], width: int) -> list[str]:
    """``lines`` of footer text broken at spaces (or ``,``/``;``) to fit ``width`` pixels."""
    f = _font(_LEGEND_FONT)
    out: list[str] = []
    for line in lines:
        words = line.split(" ")
        cur = ""
        for w in words:
            trial = f"{cur} {w}" if cur else w
            if cur and f.size(trial)[0] > width:
                out.append(cur)
                cur = "    " + w
            else:
                cur = trial
        out.append(cur)
    return out


def fitting_cell(width: int, height: int, cell: float, bar: int = BAR, panel: tuple[int, int] = (0, 0),
                 footer: int = 0, max_side: int = MAX_SIDE) -> float:
    """``cell``, or fewer pixels per cell so that the whole frame (:func:`frame_size`) is at most
    ``max_side`` pixels on each side.

    Example:
        >>> from gymloop.render.draw import fitting_cell, frame_size
        >>> fitting_cell(10, 10, 32), fitting_cell(640, 480, 32)
        (32, 2.0)
        >>> max(frame_size(640, 480, fitting_cell(640, 480, 32, panel=(120, 60)), panel=(120, 60)))
        1280
    """
    w, h = frame_size(width, height, cell, bar, panel, footer)
    if max(w, h) <= max_side:
        return cell
    room_w, room_h = max(1, max_side - panel[0]), max(1, max_side - bar - footer)
    return math.floor(min(room_w / max(1, width), room_h / max(1, height)) * 1000) / 1000  # (down: ceil stays within)


def type_color(i: int) -> Color:
    """The colour of the ``i``-th entity type: :data:`TYPE_PALETTE` in order, then hues a golden angle apart.

    Example:
        >>> from gymloop.render.draw import TYPE_PALETTE, type_color
        >>> type_color(0) == TYPE_PALETTE[0], len({type_color(i) for i in range(12)})
        (True, 12)
    """
    if i < len(TYPE_PALETTE):
        return TYPE_PALETTE[i]
    h = (i - len(TYPE_PALETTE)) * 0.381966 % 1.0
    r, g, b = colorsys.hsv_to_rgb(h, 0.45 + 0.2 * (i % 2), 0.95)
    return round(r * 255), round(g * 255), round(b * 255)


def type_name(cls: type) -> str:
    """The entity type name of a class (``@gl.entity(name=...)`` or the class name)."""
    try:
        return schema_of(cls).name
    except GymloopError:
        return cls.__name__


def _enum_fields(cls: type) -> list[tuple[str, type[enum.Enum]]]:
    """The dataclass fields of ``cls`` whose type is an Enum (its kinds), in field order."""
    if not dataclasses.is_dataclass(cls):
        return []
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: no kinds shown
        return []
    out = []
    for f in dataclasses.fields(cls):
        t = hints.get(f.name)
        if isinstance(t, type) and issubclass(t, enum.Enum):
            out.append((f.name, t))
    return out


def _abbreviations(e: type[enum.Enum]) -> dict[Any, str]:
    """Each member of ``e`` → the shortest prefix of its name (up to 3 letters) no other member shares."""
    names = [m.name for m in e]
    out = {}
    for i, m in enumerate(e):
        prefixes = (m.name[:k] for k in (1, 2, 3))
        out[m] = next((p for p in prefixes if sum(n.startswith(p) for n in names) == 1), str(i))
    return out



class Legend:
    """The colours of a game's entity types and the legend that names them (any game's view).

    Types get :func:`type_color` in the order of the game's spaces (entity type names sorted, as
    :class:`~gymloop.Spaces` orders them): the ones given here (declared and first observed) first,
    any met later after them, so a type's colour never changes during a run. An entity's Enum
    fields (its kinds) are drawn in its cell as a short label (the shortest unique prefix of the
    member's name), which the legend spells out.

    Args:
        classes: the entity classes known up front.

    Example:
        >>> from dataclasses import dataclass
        >>> from gymloop.render.draw import Legend, TYPE_PALETTE
        >>> @dataclass
        ... class Wolf:
        ...     x: int
        >>> @dataclass
        ... class Bear:
        ...     x: int
        >>> legend = Legend([Wolf, Bear])
        >>> [name for name, _ in legend.entries], legend.color(Bear) == TYPE_PALETTE[0]
        (['Bear', 'Wolf'], True)
    """

    def __init__(self, classes: Iterable[type] = ()) -> None:
        self._colors: dict[str, Color] = {}
        self._classes: dict[str, type] = {}
        self._kinds: dict[type, list[tuple[str, dict[Any, str]]]] = {}
        self.add(classes)

    def add(self, classes: Iterable[type]) -> None:
        """Give colours to the classes not seen yet, in entity type name order."""
        new: dict[str, type] = {}
        for c in classes:
            n = type_name(c)
            if n not in self._colors:
                new.setdefault(n, c)
        for n in sorted(new):
            self._colors[n] = type_color(len(self._colors))
            self._classes[n] = new[n]

    def color(self, cls: type) -> Color:
        """The colour of an entity class (a new one gets the next colour)."""
        n = type_name(cls)
        c = self._colors.get(n)
        if c is None:
            self.add([cls])
            c = self._colors[n]
        return c

    def kinds(self, cls: type) -> list[tuple[str, dict[Any, str]]]:
        """``(field, {member: label})`` per Enum field of ``cls``."""
        k = self._kinds.get(cls)
        if k is None:
            k = self._kinds[cls] = [(f, _abbreviations(e)) for f, e in _enum_fields(cls)]
        return k

    def label(self, obj: Any) -> str:
        """The cell label of an entity: its first Enum field's member, abbreviated (``""`` without one)."""
        for f, abbr in self.kinds(type(obj)):
            v = getattr(obj, f, None)
            if v in abbr:
                return abbr[v]
        return ""

    @property
    def entries(self) -> list[tuple[str, Color]]:
        """``(entity type name, colour)`` in colour order."""
        return list(self._colors.items())

    def lines(self) -> list[tuple[str, Color | None, int]]:
        """The legend's rows: ``(text, swatch colour or None, indent level)``."""
        rows: list[tuple[str, Color | None, int]] = []
        for n, c in self._colors.items():
            rows.append((n, c, 0))
            for f, abbr in self.kinds(self._classes[n])[:1]:
                rows.append((f"{f}:", None, 1))
                rows += [(f"{a} = {m.name}", None, 2) for m, a in abbr.items()]
        rows.append(("actor (ringed)", TEXT, 0))
        return rows

    def size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels the legend needs beside the board."""
        f = _font(_LEGEND_FONT)
        w = max((f.size(t)[0] + 30 + 10 * ind for t, _, ind in self.lines()), default=0)
        return min(max(w + 12, 110), 260), len(self.lines()) * _ROW + 12

    def draw(self, canvas: Canvas) -> None:
        """Draw the legend in the canvas's side panel (rows that do not fit are left out, said so)."""
        pg = canvas._pg
        f = _font(_LEGEND_FONT)
        x0 = canvas.panel_left + 8
        y = canvas.bar + 6
        bottom = canvas.pixel_size[1] - 4
        rows = self.lines()
        for i, (text, color, ind) in enumerate(rows):
            if y + _ROW > bottom and i < len(rows) - 1:
                canvas.surface.blit(f.render(f"+{len(rows) - i} more", True, TEXT), (x0, y))
                return
            x = x0 + 10 * ind
            if color is not None and text == "actor (ringed)":
                pg.draw.rect(canvas.surface, color, pg.Rect(x, y + 2, 14, 14), 2)
            elif color is not None:
                pg.draw.rect(canvas.surface, color, pg.Rect(x, y + 2, 14, 14))
            canvas.surface.blit(f.render(text, True, TEXT), (x + (20 if ind == 0 else 0), y + 2))
            y += _ROW


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


def draw_entities(obs: Obs, canvas: Canvas) -> None:
    """Any game: each entity with a position as a square in its type's colour (distinct colours in
    the order of the game's types, see :class:`Legend`), its kind (an Enum field) as a short label
    in it, actors ringed; a legend of types, kinds and colours beside the board when the canvas has
    room for it (a :class:`~gymloop.render.Viewer` makes it).

    Positions are rounded to cells; entities without a position are not drawn. A board sized from
    the first observation (:attr:`Canvas.fits`) zooms out to take in positions beyond it. The bar
    shows the score.
    """
    legend = canvas.legend
    if legend is None:  # a canvas made without a viewer: colours in the order of this observation's types
        legend = canvas.legend = Legend(observed_types(obs))
    if canvas.fits:
        canvas.fit(*board_size(obs))
    canvas.clear()
    actors = {id(a) for a in obs.actor_list}
    labels = canvas.cell >= 2 * MIN_CELL  # room for a kind's label in a cell
    for o in obs.entity_list():
        p = position(o)
        if p is None:
            continue
        x, y = math.floor(p[0] + 0.5), math.floor(p[1] + 0.5)
        canvas.fill(x, y, legend.color(type(o)))
        label = legend.label(o) if labels else ""
        if label:
            canvas.label(x, y, label, INK)
        if id(o) in actors:
            canvas.ring(x, y, TEXT)
    canvas.bar_text(f"score {fmt(obs.score)}")
    if canvas.panel[0]:
        legend.draw(canvas)


def observed_types(obs: Obs) -> list[type]:
    """The entity classes of an observation (actors and entities)."""
    return list({type(o): None for o in obs.entity_list()})


def board_size(obs: Obs, minimum: int = 5) -> tuple[int, int]:
    """A board that holds every position in ``obs`` (for views without a fixed size)."""
    w = h = minimum
    for o in obs.entity_list():
        p = position(o)
        if p is not None:
            w = max(w, math.floor(p[0] + 0.5) + 1)
            h = max(h, math.floor(p[1] + 0.5) + 1)
    return w, h


draw_entities.draws_legend = True  # type: ignore[attr-defined]  # (GameView.shows_legend)

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


def _bundled_view(entry: BundledGame) -> GameView:
    """The view a registered game declared, else a generic one."""
    if entry.view is not None:
        return entry.view
    return GameView(draw_entities, players=entry.agents, name=entry.name, types=tuple(_declared_classes(entry.loop)))


def view_for(game: Any) -> GameView:
    """The view of a game: a registered game's name or function (:mod:`gymloop.games.registry`), a
    game given a view with :func:`register_view`, else a generic view.

    Raises:
        ConfigError: ``game`` is a name that is neither bundled nor ``module:function``.

    Example:
        >>> from gymloop.render import view_for
        >>> view_for("duel").players
        2
    """
    if isinstance(game, str):
        entry = find_game(game)
        if entry is not None:
            return _bundled_view(entry)
        game = get_game(game)
    base = game
    while isinstance(base, functools.partial):  # a game with options bound (--game-arg) draws as the game
        base = base.func
    view = _registered.get(base)
    if view is not None:
        return view
    for entry in bundled_games():
        if entry.loop is base:
            return _bundled_view(entry)
    return GameView(draw_entities, players=declared_agents(game) or 1, name=game_name(game),
                    types=tuple(_declared_classes(game)))


def _declared_classes(game: Any) -> list[type]:
    """The entity classes a game declares with ``@gl.game`` (select-entity candidates too)."""
    decl = declared_types(game)
    if decl is None:
        return []
    classes = list(decl[0])
    for a in decl[2]:
        try:
            spec = action_spec(a)
        except GymloopError:
            continue
        classes += [c for c in spec.among if c not in classes]
    return classes
