"""Showing a game: a viewer (window or offscreen), the agent wrapper that feeds it, a frame clock.

The render hook is an agent wrapper, so no game changes: :class:`Watch` wraps the agent of the
player whose view is shown; at each ``act`` it hands the observation to its :class:`Viewer`,
which draws it with the game's :class:`~gymloop.render.GameView`, shows it in a window and/or
passes the frame (an RGB numpy array) on, then waits for the frame clock; only then does the
wrapped agent (a human, a trained agent) decide. At ``game_over`` the last frame gets a banner.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.render import Viewer, Watch
    >>> viewer = Viewer("snake", window=False, capture=True)       # offscreen: no window, no display
    >>> r = gl.run(snake, Watch(gl.RandomAgent(seed=0), viewer), seed=0, max_steps=3)
    >>> len(viewer.frames), viewer.frames[0].shape
    (3, (352, 320, 3))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..agent import EpisodeResult
from ..errors import ConfigError
from ..obs import Obs
from ._deps import pygame_module
from .draw import (
    BAR,
    MAX_SIDE,
    Canvas,
    GameView,
    Legend,
    board_size,
    fitting_cell,
    footer_height,
    frame_size,
    observed_types,
    surface_to_array,
    view_for,
    wrap_lines,
)
from .keyboard import own_display, poll_events

__all__ = ["FrameClock", "Viewer", "Watch"]

log = logging.getLogger(__name__)


class FrameClock:
    """Keeps a loop to at most ``fps`` iterations per second (``None`` or 0: no limit).

    Args:
        fps: iterations per second; ``None`` or 0 for no limit.

    Raises:
        ConfigError: ``fps`` is negative, NaN or not a number.

    Example:
        >>> from gymloop.render import FrameClock
        >>> clock = FrameClock(fps=None)
        >>> clock.tick()
        0.0
    """

    def __init__(self, fps: float | None) -> None:
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps >= 0):
            raise ConfigError(f"fps must be a number >= 0 or None (0 or None: as fast as possible), got {fps!r}; "
                              "e.g. --fps 8")
        self.period = 1.0 / fps if fps else 0.0
        self._next: float | None = None

    def tick(self, idle: Callable[[], None] | None = None) -> float:
        """Sleep until the next frame is due; returns the seconds slept.

        Args:
            idle: called about every 20 ms while sleeping (a window's event loop stays responsive).
        """
        if not self.period:
            return 0.0
        now = time.perf_counter()
        if self._next is None:
            self._next = now
        wait = self._next - now
        if wait > 0:
            if idle is None:
                time.sleep(wait)
            else:
                while (left := self._next - time.perf_counter()) > 0:
                    idle()
                    time.sleep(min(left, 0.02))
        else:
            wait = 0.0
            self._next = now  # late (a slow agent): do not try to catch up
        self._next += self.period
        return wait


class Viewer:
    """Draws a game's observations in a window and/or offscreen, one frame per call to :meth:`show`.

    Args:
        game: the game: a bundled name, a game function, or a :class:`GameView`.
        fps: frames per second for watching (``None`` or 0: as fast as possible).
        window: open a pygame window (the first frame opens it). ``False`` draws offscreen only
            and never touches the display, so it needs no video driver.
        capture: keep every frame in :attr:`frames` (RGB arrays, ``(height, width, 3)`` uint8).
        on_frame: called with every frame as an RGB array (a video writer's ``add``).
        cell: pixels per board cell (default: the view's).
        end_seconds: how long a window shows the end-of-episode banner (only when ``fps`` is set).
        max_side: the longest side of a frame in pixels: a larger board (a game in pixel
            coordinates, a view with many cells) is drawn at fewer pixels per cell, and a board
            sized from the first observation zooms out when later positions fall beyond it.

    Attributes:
        canvas: the :class:`Canvas` (``None`` until the first frame).
        frames: the captured frames (with ``capture=True``).
        frame_count: frames drawn so far.
    """

    def __init__(self, game: Any, *, fps: float | None = None, window: bool = True, capture: bool = False,
                 on_frame: Callable[[np.ndarray], None] | None = None, cell: int | None = None,
                 end_seconds: float = 1.0, max_side: int = MAX_SIDE) -> None:
        self.view = game if isinstance(game, GameView) else view_for(game)
        self.clock = FrameClock(fps)
        self.window = window
        self.capture = capture
        self.on_frame = on_frame
        if cell is not None and (isinstance(cell, bool) or not isinstance(cell, int) or cell < 4):
            raise ConfigError(f"cell must be an int of at least 4 pixels per board cell, got {cell!r}; e.g. cell=32")
        self.cell = cell or self.view.cell
        if isinstance(max_side, bool) or not isinstance(max_side, int) or max_side < 64:
            raise ConfigError(f"max_side must be an int of at least 64 pixels (a frame's longest side), got {max_side!r}")
        self.max_side = max_side
        self._footer_lines: list[str] = []
        self.end_seconds = end_seconds if fps else 0.0
        self.canvas: Canvas | None = None
        self.frames: list[np.ndarray] = []
        self.frame_count = 0
        self._screen: Any = None
        self._caption = ""
        self._pg = pygame_module()

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, obs: Obs) -> Canvas:
        pg = self._pg
        vw, vh = self.view.width, self.view.height
        sized = vw is None or vh is None
        w, h = (vw, vh) if vw is not None and vh is not None else board_size(obs)
        legend = None
        panel = (0, 0)
        if self.view.shows_legend:  # colours in the order of the game's types: declared and first observed
            legend = Legend([*self.view.types, *observed_types(obs)])
            panel = legend.size()
        cell = fitting_cell(w, h, self.cell, BAR, panel, 0, self.max_side)
        keys = wrap_lines(self._footer_lines, frame_size(w, h, cell, BAR, panel)[0] - 12)
        footer = footer_height(keys)
        panel = (panel[0], min(panel[1], self.max_side - BAR - footer))  # (the legend says "+N more" below)
        cell = fitting_cell(w, h, cell, BAR, panel, footer, self.max_side)
        if sized:
            log.info("board of %s: %d x %d cells (from the first observation), %.3g px per cell",
                     self.view.name, w, h, cell)
        elif cell != self.cell:
            log.info("board of %s: %d x %d cells, drawn at %.3g px per cell to fit %d px",
                     self.view.name, w, h, cell, self.max_side)
        self.canvas = Canvas.offscreen(w, h, cell, BAR, panel, footer)
        self.canvas.fits = sized and cell != self.cell
        self.canvas.legend = legend
        self.canvas.y_up = self.view.y_up
        self.canvas.footer_lines = keys
        if self.window:
            try:
                pg.display.init()
                self._screen = pg.display.set_mode(self.canvas.pixel_size)
                own_display(self._screen)
            except pg.error as e:
                pg.display.quit()  # set_mode failed after init: leave no half-open display behind
                self.canvas = None
                raise ConfigError(
                    f"cannot open a window to show {self.view.name}: {e}; on a machine without a display, "
                    "record a video instead (gymloop record) or set SDL_VIDEODRIVER=dummy"
                ) from None
            self.set_caption(self._caption)
        return self.canvas

    @property
    def keys(self) -> list[str]:
        """The text lines under the board (:meth:`set_keys`)."""
        return self._footer_lines

    def set_keys(self, lines: list[str]) -> None:
        """Text lines under the board (a keyboard player's keys, wrapped to the frame's width): room
        for them is made when the first frame is drawn, so set them before it; later changes fill
        that room."""
        self._footer_lines = list(lines)
        if self.canvas is not None:
            self.canvas.footer_lines = wrap_lines(self._footer_lines, self.canvas.pixel_size[0] - 12)

    def set_caption(self, text: str) -> None:
        """Window title: ``gymloop: GAME`` and ``text`` (who plays, which keys)."""
        self._caption = text
        if self._screen is not None:
            self._pg.display.set_caption(f"gymloop: {self.view.name}" + (f"  ({text})" if text else ""))

    def show(self, obs: Obs) -> None:
        """Draw one observation as a frame, show/pass it on, then wait for the frame clock."""
        canvas = self.canvas or self._open(obs)
        self.view.draw(obs, canvas)
        self._emit(canvas)
        self.clock.tick(poll_events if self._screen is not None else None)

    def end(self, obs: Obs, truncated: bool = False) -> None:
        """Draw the end-of-episode banner over the last frame (one more frame)."""
        if self.canvas is None:
            return
        self.canvas.banner(self.view.end_text(obs, truncated))
        self._emit(self.canvas)
        if self._screen is not None and self.end_seconds:
            until = time.perf_counter() + self.end_seconds
            while time.perf_counter() < until:
                poll_events()
                time.sleep(0.02)

    def _emit(self, canvas: Canvas) -> None:
        self.frame_count += 1
        surface = canvas.surface
        if self._screen is not None:
            self._screen.blit(surface, (0, 0))
            self._pg.display.flip()
            poll_events()
        if self.capture or self.on_frame is not None:
            frame = surface_to_array(surface)
            if self.capture:
                self.frames.append(frame)
            if self.on_frame is not None:
                self.on_frame(frame)

    def frame(self) -> np.ndarray:
        """The current frame as an RGB array (``(height, width, 3)`` uint8)."""
        if self.canvas is None:
            raise ConfigError("the viewer has drawn no frame yet; call show(obs) first")
        return surface_to_array(self.canvas.surface)

    def close(self) -> None:
        """Close the window, if one was opened (offscreen viewers have nothing to close)."""
        if self._screen is not None:
            self._screen = None
            own_display(None)
            self._pg.display.quit()


class Watch:
    """An :class:`~gymloop.Agent` wrapper that shows each observation before its agent decides.

    Wrap the agent of the player whose view is drawn (the first one in two-player games). It
    also keeps its own tally (:attr:`steps`: decisions its agent returned, :attr:`episodes`) of
    that player.

    Args:
        agent: the agent that decides (keyboard, trained, random, :class:`TakeOver`, ...).
        viewer: the :class:`Viewer` that draws.
        caption: the window title's text (who plays what); a :class:`TakeOver` agent adds who
            has control and the keys that change it.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.duel import duel
        >>> from gymloop.render import Viewer, Watch
        >>> v = Viewer("duel", window=False)
        >>> _ = gl.run(duel, [Watch(gl.RandomAgent(0), v), gl.RandomAgent(1)], seed=0, max_steps=4)
        >>> v.frame_count      # one frame per decision of the first player
        2
    """

    def __init__(self, agent: Any, viewer: Viewer, caption: str = "") -> None:
        self.agent = agent
        self.viewer = viewer
        self.caption = caption
        self.steps = 0
        self.episodes: list[EpisodeResult] = []
        self._ep_len = 0

    def _caption(self) -> str:
        hint = getattr(self.agent, "hint", None)  # a TakeOver: who has control, which keys change it
        parts = [self.caption] if self.caption else []
        if isinstance(hint, str) and hint:
            parts.append(hint)
        return "; ".join(parts)

    def act(self, obs: Obs, *action_types: Any) -> Any:
        """Show ``obs`` (and a keyboard player's keys under it), then ask the wrapped agent."""
        legend = getattr(self.agent, "key_legend", None)  # a KeyboardAgent or TakeOver: its keys
        if callable(legend):
            lines = legend(*action_types)
            if lines != self.viewer.keys:
                self.viewer.set_keys(lines)
        caption = self._caption()
        if caption != self.viewer._caption:
            self.viewer.set_caption(caption)
        self.viewer.show(obs)
        res = self.agent.act(obs, *action_types)
        self.steps += 1
        self._ep_len += 1
        return res

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Tell the wrapped agent, then show the end banner."""
        self.agent.game_over(obs, truncated)
        self.episodes.append(EpisodeResult(0, float(obs.score), self._ep_len, bool(truncated), obs.metrics))
        self._ep_len = 0
        self.viewer.end(obs, truncated)
