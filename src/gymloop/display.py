"""Rendered or headless from one code path: how a game that draws itself learns whether to draw.

A game that has its own graphics (pygame, say) takes a ``display`` argument and leaves the
default, :data:`HEADLESS`, for training: ``check``, ``train``, ``eval`` and every vectorized
environment call ``game(agent, seed)`` and so never draw or wait. ``gymloop play`` passes a
:meth:`Display.window` and ``gymloop record`` a :meth:`Display.recording`: the same loop then draws
into a window at the requested frame rate, or into an offscreen surface whose frames go to a
video. ::

    def my_game(agent: gl.Agent, seed: int, display: gl.Display = gl.HEADLESS) -> None:
        screen = display.screen((640, 480), "My game")   # None when headless
        while True:
            ...                                         # the rules, and agent.act(obs, Move)
            if screen is not None:
                draw(screen)                            # only when someone looks
            display.tick()                              # show, pace, record; nothing headless

Example:
    >>> import gymloop as gl
    >>> gl.HEADLESS.rendered, gl.HEADLESS.screen((640, 480)) is None
    (False, True)
    >>> gl.HEADLESS.tick()   # returns at once
"""

from __future__ import annotations

import functools
import inspect
import os
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np

from .errors import ConfigError, DisplayClosed

__all__ = ["Display", "HEADLESS", "DisplayClosed", "takes_display", "with_display", "watch_windows"]

Mode = Literal["headless", "window", "recording"]


#: :meth:`Display.tick` looks at pygame's event queue every this many frames, and when more than
#: :data:`EVENT_BACKLOG` events wait (a game that reads none of them: mouse motion, window events...),
#: drops all but the quits and keys (SDL's queue holds 65,535 events; once full, a window's close is lost)
_EVENT_CHECK_EVERY = 32
EVENT_BACKLOG = 4096


def _bound_event_queue(pg: Any) -> None:
    events = pg.event.get(pump=False)
    if len(events) > EVENT_BACKLOG:
        keep = (pg.QUIT, pg.KEYDOWN, pg.KEYUP)
        events = [e for e in events if e.type in keep]
    for e in events:  # (the rest go back in their order, for the game and the keyboard to read)
        pg.event.post(e)


class Display:
    """Whether a game is drawn, and where: headless, in a window, or into recorded frames.

    Make one with :data:`HEADLESS`, :meth:`window` or :meth:`recording`; a game only calls
    :meth:`screen` and :meth:`tick` (and may read :attr:`rendered`).

    Attributes:
        mode: ``"headless"``, ``"window"`` or ``"recording"``.
        fps: the frame rate :meth:`tick` keeps in a window (``None``: as fast as it can).
    """

    def __init__(self, mode: Mode = "headless", fps: float | None = None,
                 frames: Callable[[np.ndarray], None] | None = None) -> None:
        if mode not in ("headless", "window", "recording"):
            raise ConfigError(f"Display mode must be 'headless', 'window' or 'recording', got {mode!r}")
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps <= 1000):
            raise ConfigError(f"Display fps must be a number in (0, 1000] or None, got {fps!r}")
        if mode == "recording" and frames is None:
            raise ConfigError("a recording Display needs frames=..., a function that takes each (height, width, 3) uint8 frame")
        self.mode: Mode = mode
        self.fps = None if fps is None else float(fps)
        self._frames = frames
        self._surface: Any = None
        self._clock: Any = None
        self._pg: Any = None
        self._ticks = 0

    @classmethod
    def window(cls, fps: float | None = 30.0) -> Display:
        """Draw in a window, ``fps`` frames a second (``gymloop play``)."""
        return cls("window", fps)

    @classmethod
    def recording(cls, frames: Callable[[np.ndarray], None]) -> Display:
        """Draw offscreen (SDL's dummy video driver when no window is open) and pass every frame to
        ``frames`` as a ``(height, width, 3)`` uint8 array (``gymloop record``); never waits."""
        return cls("recording", None, frames)

    @property
    def rendered(self) -> bool:
        """True when the game is drawn (a window or a recording): draw only then."""
        return self.mode != "headless"

    def screen(self, size: tuple[int, int], caption: str = "") -> Any:
        """The pygame surface to draw on, ``size`` pixels: the window, the recording's offscreen
        surface, or ``None`` headless. Calling it again returns the same surface (resized if
        ``size`` changed).

        Raises:
            ConfigError: pygame (pygame-ce) is not installed, or no window can open (no display):
                the message says how to record instead.
        """
        if self.mode == "headless":
            return None
        try:
            w, h = (int(v) for v in size)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"Display.screen size must be (width, height), two positive ints, got {size!r}") from None
        if w <= 0 or h <= 0:
            raise ConfigError(f"Display.screen size must be (width, height), two positive ints, got {size!r}")
        if self._surface is not None and self._surface.get_size() == (w, h):
            return self._surface
        pg = self._pg = _pygame()
        # a recording never opens a window: SDL's dummy driver for this display only (the variable is read when
        # the display starts, and put back at once, so a window opened later in the process is a real one)
        offscreen = self.mode == "recording" and not pg.display.get_init() and "SDL_VIDEODRIVER" not in os.environ
        if offscreen:
            os.environ["SDL_VIDEODRIVER"] = "dummy"
        try:
            pg.display.init()
            self._surface = pg.display.set_mode((w, h))
        except pg.error as e:
            pg.display.quit()
            raise ConfigError(f"cannot open a {w}x{h} window: {e}; on a machine without a display, record the game "
                              "instead (gymloop record GAME --out game.gif) or set SDL_VIDEODRIVER=dummy") from None
        finally:
            if offscreen:
                del os.environ["SDL_VIDEODRIVER"]
        if caption:
            pg.display.set_caption(caption)
        self._clock = pg.time.Clock()
        return self._surface

    def tick(self) -> None:
        """End a frame. Headless: nothing. In a window: show the frame, handle the window's events
        (closing it raises :class:`DisplayClosed`) and wait to keep :attr:`fps`. Recording: pass
        the frame on.

        Raises:
            DisplayClosed: the player closed the window.
        """
        if self._surface is None:
            return
        pg = self._pg
        if self._frames is not None:  # recording
            self._frames(np.ascontiguousarray(pg.surfarray.array3d(self._surface).transpose(1, 0, 2)))
            return
        pg.display.flip()
        if pg.event.peek(pg.QUIT):
            raise DisplayClosed("the game's window was closed")
        pg.event.pump()
        self._ticks += 1
        if self._ticks % _EVENT_CHECK_EVERY == 0:
            _bound_event_queue(pg)
        if self.fps is not None:
            self._clock.tick(self.fps)

    def close(self) -> None:
        """Close the window (if any); the display can open again with :meth:`screen`."""
        if self._surface is not None and self._pg is not None:
            self._pg.display.quit()
        self._surface = None

    def __repr__(self) -> str:
        return f"Display({self.mode!r}" + (f", fps={self.fps:g})" if self.fps else ")")


def _pygame() -> Any:
    """pygame (pygame-ce), imported at the first drawn frame, with its fonts ready (games draw text)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no banner on stdout
    try:
        import pygame
        import pygame.surfarray
    except ImportError as e:
        raise ConfigError(f"a game drawn on a Display needs pygame-ce, which cannot be imported ({e}); install it with "
                          "pip install 'gymloop[render]'") from None
    if not pygame.font.get_init():
        pygame.font.init()
    return pygame


#: The display of every training, checking and evaluating run: nothing is drawn, nothing waits.
HEADLESS = Display()


@functools.lru_cache(maxsize=256)
def _display_parameter(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("display")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def takes_display(game: Any) -> bool:
    """True when the game loop has a ``display`` parameter (it draws itself when given one)."""
    fn = game
    while isinstance(fn, functools.partial):
        if "display" in fn.keywords:
            return False  # already bound
        fn = fn.func
    try:
        return _display_parameter(fn)
    except TypeError:  # unhashable callable
        return False


def with_display(game: Any, display: Display) -> Any:
    """The game loop bound to ``display`` (``functools.partial``), or the game itself when it has
    no ``display`` parameter (gymloop then draws it from its observations)."""
    return functools.partial(game, display=display) if takes_display(game) else game


@contextmanager
def watch_windows(found: list[str]) -> Iterator[None]:
    """While inside, a pygame window opened by anything (``pygame.display.set_mode``) appends the
    call site, ``file:line in function``, to ``found`` (the window still opens). Does nothing when
    pygame was not imported. ``gl.check`` uses it: a headless game must not open a window."""
    import sys

    pg = sys.modules.get("pygame")
    disp: Any = getattr(pg, "display", None)
    original = getattr(disp, "set_mode", None)
    if original is None:
        yield
        return

    def set_mode(*args: Any, **kwargs: Any) -> Any:
        here = os.path.dirname(os.path.abspath(__file__))
        for frame in reversed(traceback.extract_stack()[:-1]):
            if not os.path.abspath(frame.filename).startswith(here):
                found.append(f"{frame.filename}:{frame.lineno} in {frame.name}")
                break
        return original(*args, **kwargs)

    disp.set_mode = set_mode
    try:
        yield
    finally:
        disp.set_mode = original

