"""Rendering, human play and video recording (the ``render`` extra: pygame-ce, Pillow, imageio-ffmpeg).

Games stay headless: nothing here changes a game, and pygame is imported only when something is
drawn (importing :mod:`gymloop` or this package does not import it). The render hook is an agent
wrapper, :class:`Watch`: at each ``act`` it hands the observation to a :class:`Viewer`, which draws
it with the game's :class:`GameView` (a ``draw(obs, canvas)`` function: one per bundled game, a
generic one for any game whose entities have ``x``/``y`` positions, or your own through
:func:`register_view`).

* :func:`play` / ``gymloop play GAME``: keyboard play of any game of Enum action types
  (:class:`KeyboardAgent`: held keys, several action types in one ``act``, keys derived from the
  labels or your own :data:`KeyMapSpec`, listed under the board), watching agents with take-over
  (:class:`TakeOver`), for any number of players: each seat takes ``"human"``,
  ``"random"``, ``"scripted"``, ``"module:Class"``, a checkpoint path or an agent
  (:func:`seat_specs`, :func:`load_agent`; ``--agent SPEC`` once per seat on the command line);
* :func:`record` / ``gymloop record GAME --out run.gif``: an offscreen video (GIF or MP4), seats
  filled the same way (without a human), frames of at most :data:`MAX_SIDE` pixels;
* :class:`FrameClock`, :func:`surface_to_array`, :func:`write_video`: the parts.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.render import Viewer, Watch
    >>> viewer = Viewer("snake", window=False, capture=True)
    >>> _ = gl.run(snake, Watch(gl.RandomAgent(seed=0), viewer), seed=0, max_steps=2)
    >>> viewer.frames[1].shape      # (height, width, RGB)
    (352, 320, 3)
"""

from __future__ import annotations

from ..agent_specs import HUMAN, load_agent
from ..games.board import BODY, CELL, ENEMY, FOOD, HEAD, OPPONENT_BODY, OPPONENT_HEAD, UNIT, WALL, GameView
from ..games.duel import draw_duel
from ..games.snake import draw_snake
from ..games.tactics import draw_tactics
from .draw import BACKGROUND, BAR, MAX_SIDE, Canvas, draw_entities, register_view, surface_to_array, view_for
from .keyboard import ARROWS, WASD, KeyboardAgent, PlayerQuit, TakeOver, poll_events
from .keymap import KeyMapSpec
from .session import RecordResult, play, record, seat_specs
from .video import VIDEO_FORMATS, GifWriter, Mp4Writer, open_video, write_video
from .viewer import FrameClock, Viewer, Watch

__all__ = [
    "ARROWS",
    "BACKGROUND",
    "BAR",
    "BODY",
    "CELL",
    "ENEMY",
    "FOOD",
    "HEAD",
    "HUMAN",
    "MAX_SIDE",
    "OPPONENT_BODY",
    "OPPONENT_HEAD",
    "UNIT",
    "VIDEO_FORMATS",
    "WALL",
    "WASD",
    "Canvas",
    "FrameClock",
    "GameView",
    "GifWriter",
    "KeyMapSpec",
    "KeyboardAgent",
    "Mp4Writer",
    "PlayerQuit",
    "RecordResult",
    "TakeOver",
    "Viewer",
    "Watch",
    "draw_duel",
    "draw_entities",
    "draw_snake",
    "draw_tactics",
    "load_agent",
    "open_video",
    "play",
    "poll_events",
    "record",
    "register_view",
    "seat_specs",
    "surface_to_array",
    "view_for",
    "write_video",
]
