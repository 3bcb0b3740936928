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

from ..agent import EpisodeResult, RandomAgent, RunResult, run
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
        if os.path.isdir(p):  # a training run's folder or an enn-trainer checkpoint folder: gl.load decides
            from ..neural import load

            return load(p, seed=seed, game=game)
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


class _Tally:
    """Counts one seat's decisions and episode ends into a shared :class:`RunResult` (the result
    :func:`play` returns when the player quits, which ends :func:`run` without its own)."""

    def __init__(self, agent: Any, index: int, tally: RunResult) -> None:
        self.agent = agent
        self.index = index
        self.tally = tally
        self._ep_len = 0

    def act(self, obs: Any, *action_types: Any) -> Any:
        res = self.agent.act(obs, *action_types)
        self.tally.steps += 1
        self._ep_len += 1
        return res

    def game_over(self, obs: Any, truncated: bool = False) -> None:
        self.agent.game_over(obs, truncated)
        self.tally.episodes.append(EpisodeResult(self.index, float(obs.score), self._ep_len, bool(truncated), obs.metrics))
        self._ep_len = 0


def _save_trace(rec: Any, path: str | os.PathLike, decisions: int, failed: bool) -> None:
    """Write the play's trace; after a failure, never raise over the failure's own exception."""
    if decisions == 0:
        log.warning("no trace written to %s: no decision was taken", os.fspath(path))
        return
    try:
        trace = rec.trace()
        saved = trace.save(path)
    except Exception:
        if not failed:
            raise
        log.warning("could not write the trace %s after play failed", os.fspath(path), exc_info=True)
        return
    log.info("play recorded as the trace %s (%d decisions)", saved, trace.num_decisions)


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

    Escape or closing the window ends the game. The first player's view is drawn; the window
    title says who plays which colour and, when you can take over, the keys.

    Args:
        game: a bundled game name, ``module:function``, or a game function.
        agent: a checkpoint path, an agent object, or ``None``.
        seed: the game's seed (agents get ``seed``, ``seed + 1``).
        fps: decisions per second (``None`` or 0: as fast as possible).
        human_vs_agent: two-player games only: a human against ``agent``.
        max_steps: stop after this many decisions (all players together).
        max_episodes: stop after this many finished episodes (every player's ``game_over`` counts).
        wait_for_key: a human's episode starts at their first key press.
        trace: also record the play as a trace file (``*.trace.safetensors``; see
            :mod:`gymloop.trace`): human play becomes demonstrations for ``gymloop train --demos``.
            It is written when play ends, also when the player quits (not when no decision was
            taken: then a warning is logged).

    Returns:
        The :class:`~gymloop.RunResult`; ``stopped == "quit"`` when the player quit (it then
        counts the decisions all players completed and the finished episodes, as :func:`run` does).

    Raises:
        ConfigError: an unknown game, ``human_vs_agent`` for a one-player game, keyboard play of
            a game without direction actions, a bad ``fps``/``max_steps``/``max_episodes``, no
            display to open a window on, or pygame missing.
        CheckpointError: the agent file does not exist or does not fit the game.

    Example:
        >>> import os
        >>> import gymloop as gl
        >>> from gymloop.render import play
        >>> _ = os.environ.setdefault("SDL_VIDEODRIVER", "dummy")   # a window without a screen (CI)
        >>> r = play("snake", gl.RandomAgent(seed=0), fps=0, max_steps=3)   # watch; keys take over
        >>> r.steps, r.stopped
        (3, 'max_steps')
    """
    fn, view = _resolve(game)
    if human_vs_agent and view.players != 2:
        raise ConfigError(f"--human-vs-agent needs a two-player game such as duel; {view.name} has "
                          f"{view.players} player(s). Play it yourself without --agent, or watch --agent PATH")
    if (agent is None or human_vs_agent) and not view.keyboard:
        raise ConfigError(f"{view.name} cannot be played from the keyboard (its actions are not one Enum of "
                          f"directions); watch an agent instead: gymloop play {view.name} --agent PATH")
    for name, v in (("max_steps", max_steps), ("max_episodes", max_episodes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ConfigError(f"play {name} must be an int >= 0 or None (no limit), got {v!r}")
    duel = view.players == 2
    if view.players == 1:
        seats = [KeyboardAgent(wait=wait_for_key) if agent is None else load_agent(agent, fn, seed)]
        caption = "you play - arrows or WASD" if agent is None else ""
    elif human_vs_agent:
        seats = [KeyboardAgent(wait=wait_for_key)] + [load_agent(agent, fn, seed + i) for i in range(1, view.players)]
        caption = "you: green (arrows or WASD) vs agent: blue"
    elif agent is None:
        if not duel:
            raise ConfigError(f"keyboard play is for one or two players; {view.name} has {view.players}; "
                              f"watch an agent instead: gymloop play {view.name} --agent PATH")
        seats = [KeyboardAgent("wasd", wait=wait_for_key), KeyboardAgent("arrows", wait=wait_for_key)]
        caption = "green: WASD vs blue: arrows"
    else:
        seats = _seats(view, fn, agent, seed)
        caption = "green: agent vs blue: agent" if duel else ""
    if agent is not None and not human_vs_agent and view.keyboard:
        seats[0] = TakeOver(seats[0], KeyboardAgent(wait=wait_for_key))
    viewer = Viewer(view, fps=fps, window=True)
    seats[0] = Watch(seats[0], viewer, caption=caption)
    tally = RunResult()
    seats = [_Tally(a, i, tally) for i, a in enumerate(seats)]
    players: Any = seats[0] if view.players == 1 else seats
    rec = None
    if trace is not None:
        from ..trace import Recorder

        rec = Recorder(players, fn, seed=seed)
        players = rec.agents
    failed = True
    try:
        try:
            result = run(fn, players, seed=seed, max_steps=max_steps, max_episodes=max_episodes)
        except PlayerQuit:
            log.info("the player quit")
            result = RunResult(steps=tally.steps, episodes=list(tally.episodes), stopped="quit")
        failed = False
    finally:
        viewer.close()
        if rec is not None and trace is not None:  # (rec is made only with a trace path)
            _save_trace(rec, trace, tally.steps, failed)
    return result


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
            ``fps``, an ``out`` that is a folder, or a missing package of the ``render`` extra.
        CheckpointError: the agent file does not exist or does not fit the game.

    Example:
        >>> import os, tempfile
        >>> from gymloop.render import record
        >>> r = record("duel", os.path.join(tempfile.mkdtemp(), "duel.mp4"), max_steps=6, max_episodes=None)
        >>> r.frames, r.run.steps       # a frame per decision of the first player
        (3, 6)
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
