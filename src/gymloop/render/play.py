"""``play`` and ``record``: what ``gymloop play`` and ``gymloop record`` call.

Example:
    >>> import os, tempfile
    >>> from gymloop.render import record
    >>> out = os.path.join(tempfile.mkdtemp(), "snake.gif")
    >>> r = record("snake", out, seed=0, max_steps=5)       # a random agent, offscreen
    >>> r.frames, r.size
    (5, (320, 352))
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..agent import RandomAgent, RunResult, run
from ..errors import CheckpointError, ConfigError
from .draw import GameView, view_for
from .keyboard import KeyboardAgent, PlayerQuit, TakeOver
from .video import open_video
from .viewer import Viewer, Watch

__all__ = ["RecordResult", "load_agent", "play", "record"]

log = logging.getLogger(__name__)


def _resolve(game: Any) -> tuple[Callable[..., Any], GameView]:
    from ..games import get_game

    fn = get_game(game) if isinstance(game, str) else game
    if not callable(fn):
        raise ConfigError(f"game must be a bundled game name, 'module:function' or a game function, got {game!r}")
    return fn, view_for(game)


def load_agent(source: Any, game: Callable[..., Any], seed: int | None = 0) -> Any:
    """An agent from a checkpoint path, an agent object as it is, or a random agent for ``None``.

    Raises:
        CheckpointError: the path does not exist or is not an agent for ``game``.

    Example:
        >>> from gymloop.games.snake import snake
        >>> from gymloop.render import load_agent
        >>> type(load_agent(None, snake)).__name__
        'RandomAgent'
    """
    if source is None:
        return RandomAgent(seed=seed)
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        if os.path.isdir(p):
            raise CheckpointError(f"agent checkpoint {p!r} is a folder; expected a .safetensors file in it, "
                                  f"e.g. {os.path.join(p, 'agent.safetensors')}")
        if not os.path.isfile(p):
            raise CheckpointError(
                f"agent checkpoint {p!r} does not exist; expected a .safetensors file written by `gymloop train` "
                f"(e.g. runs/snake/agent.safetensors); check the path, or leave out --agent"
            )
        from ..neural import load

        return load(p, seed=seed, game=game)
    if not callable(getattr(source, "act", None)):
        raise ConfigError(f"agent must be a checkpoint path, an Agent (with act and game_over) or None, got {source!r}")
    return source


def _seats(view: GameView, fn: Callable[..., Any], agent: Any, seed: int) -> list[Any]:
    if view.players == 1:
        return [load_agent(agent, fn, seed)]
    return [load_agent(agent, fn, seed + i) for i in range(view.players)]


def play(
    game: Any = "snake",
    agent: Any = None,
    *,
    seed: int = 0,
    fps: float | None = 8.0,
    human_vs_agent: bool = False,
    max_steps: int | None = None,
    max_episodes: int | None = None,
    wait_for_key: bool = True,
    trace: str | os.PathLike | None = None,
) -> RunResult:
    """Play a game in a window with the keyboard, or watch an agent (and take over from it).

    * one-player game, no ``agent``: you play (arrows or WASD);
    * one-player game with ``agent``: the agent plays; SPACE or a direction key takes over,
      SPACE or Enter hands back (:class:`TakeOver`);
    * two-player game (duel), no ``agent``: two humans, WASD (green) against arrows (blue);
    * two-player game with ``agent``: the agent plays both sides (you can take over green);
    * ``human_vs_agent=True``: you (green, arrows or WASD) against ``agent`` (default: random).

    Escape or closing the window ends the game. The first player's view is drawn.

    Args:
        game: a bundled game name, ``module:function``, or a game function.
        agent: a checkpoint path, an agent object, or ``None``.
        seed: the game's seed (agents get ``seed``, ``seed + 1``).
        fps: decisions per second (``None`` or 0: as fast as possible).
        human_vs_agent: two-player games only: a human against ``agent``.
        max_steps: stop after this many decisions (all players together).
        max_episodes: stop after this many finished episodes.
        wait_for_key: a human's episode starts at their first key press.
        trace: also record the play as a trace file (``*.trace.safetensors``; see
            :mod:`gymloop.trace`): human play becomes demonstrations for ``gymloop train --demos``.
            It is written when play ends, also when the player quits.

    Returns:
        The :class:`~gymloop.RunResult`; ``stopped == "quit"`` when the player quit (then it
        counts the first player's decisions and episodes).

    Raises:
        ConfigError: an unknown game, ``human_vs_agent`` for a one-player game, keyboard play of
            a game without direction actions, or pygame missing.
        CheckpointError: the agent file does not exist or does not fit the game.
    """
    fn, view = _resolve(game)
    if human_vs_agent and view.players != 2:
        raise ConfigError(f"--human-vs-agent needs a two-player game such as duel; {view.name} has "
                          f"{view.players} player(s). Play it yourself without --agent, or watch --agent PATH")
    if (agent is None or human_vs_agent) and not view.keyboard:
        raise ConfigError(f"{view.name} cannot be played from the keyboard (its actions are not one Enum of "
                          f"directions); watch an agent instead: gymloop play {view.name} --agent PATH")
    if view.players == 1:
        seats = [KeyboardAgent(wait=wait_for_key) if agent is None else load_agent(agent, fn, seed)]
    elif human_vs_agent:
        seats = [KeyboardAgent(wait=wait_for_key)] + [load_agent(agent, fn, seed + i) for i in range(1, view.players)]
    elif agent is None:
        if view.players != 2:
            raise ConfigError(f"keyboard play is for one or two players; {view.name} has {view.players}")
        seats = [KeyboardAgent("wasd", wait=wait_for_key), KeyboardAgent("arrows", wait=wait_for_key)]
    else:
        seats = _seats(view, fn, agent, seed)
    if agent is not None and not human_vs_agent and view.keyboard:
        seats[0] = TakeOver(seats[0], KeyboardAgent(wait=wait_for_key))
    viewer = Viewer(view, fps=fps, window=True)
    watch = Watch(seats[0], viewer)
    seats[0] = watch
    players: Any = seats[0] if view.players == 1 else seats
    rec = None
    if trace is not None:
        from ..trace import Recorder

        rec = Recorder(players, fn, seed=seed)
        players = rec.agents
    try:
        return run(fn, players, seed=seed, max_steps=max_steps, max_episodes=max_episodes)
    except PlayerQuit:
        log.info("the player quit")
        return RunResult(steps=watch.steps, episodes=list(watch.episodes), stopped="quit")
    finally:
        viewer.close()
        if rec is not None:
            path = rec.trace().save(trace)
            log.info("play recorded as the trace %s", path)


@dataclass
class RecordResult:
    """What :func:`record` wrote.

    Attributes:
        path: the video file.
        frames: frames written (one per decision of the first player, plus one per episode end).
        size: ``(width, height)`` in pixels.
        fps: frames per second.
        run: the :class:`~gymloop.RunResult` of the game.
    """

    path: str
    frames: int
    size: tuple[int, int]
    fps: float
    run: RunResult


def record(
    game: Any,
    out: str | os.PathLike,
    agent: Any = None,
    *,
    seed: int = 0,
    max_steps: int | None = 1000,
    max_episodes: int | None = 1,
    fps: float = 10.0,
) -> RecordResult:
    """Record a game offscreen to a ``.gif`` or ``.mp4`` file (no window, no display needed).

    Every player is ``agent`` (a checkpoint path or an agent object; ``None``: random agents);
    the first player's view is drawn, one frame per decision plus a banner frame per episode end.

    Args:
        game: a bundled game name, ``module:function``, or a game function.
        out: the video file; its extension picks the format.
        agent: a checkpoint path, an agent object, or ``None`` for a random agent.
        seed: the game's seed (agents get ``seed``, ``seed + 1``).
        max_steps: stop after this many decisions (all players together).
        max_episodes: stop after this many finished episodes (default: one game).
        fps: the video's frame rate.

    Raises:
        ConfigError: an unknown game, an extension other than .gif/.mp4, no limit at all, a bad
            ``fps``, or a missing package of the ``render`` extra.
        CheckpointError: the agent file does not exist or does not fit the game.
    """
    if max_steps is None and max_episodes is None:
        raise ConfigError("record needs max_steps or max_episodes (a game loop runs forever); e.g. --max-steps 500")
    writer = open_video(out, fps)
    fn, view = _resolve(game)
    seats = _seats(view, fn, agent, seed)
    viewer = Viewer(view, window=False, on_frame=writer.add)
    seats[0] = Watch(seats[0], viewer)
    try:
        result = run(fn, seats[0] if view.players == 1 else seats, seed=seed, max_steps=max_steps,
                     max_episodes=max_episodes)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return RecordResult(writer.path, writer.frames, writer.size or (0, 0), writer.fps, result)
