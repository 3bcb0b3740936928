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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent import EpisodeResult, RunResult, run
from ..agent_specs import HUMAN, AgentSpec, describe, load_agent
from ..display import Display, takes_display, with_display
from ..errors import ConfigError, DisplayClosed
from ..games.board import GameView
from .draw import view_for
from .keyboard import KeyboardAgent, PlayerQuit, TakeOver
from .keymap import KeyMapSpec
from .video import open_video
from .viewer import Viewer, Watch

__all__ = ["RecordResult", "play", "record", "seat_specs"]

log = logging.getLogger(__name__)


def _resolve(game: Any) -> tuple[Callable[..., Any], GameView]:
    from ..games import get_game

    fn = get_game(game) if isinstance(game, str) else game
    if not callable(fn):
        raise ConfigError(f"game must be a bundled game name, 'module:function' or a game function, got {game!r}")
    return fn, view_for(game)


def seat_specs(game: Any, agent: AgentSpec | Sequence[AgentSpec] = None, *, human_default: bool = False,
               human_vs_agent: bool = False) -> list[AgentSpec]:
    """One agent spec per seat of ``game``, the way :func:`play` and :func:`record` fill them.

    * a list gives the seats in order; seats it leaves out are random (``None``);
    * one spec (not a list) plays every seat;
    * nothing (``None``): with ``human_default`` (:func:`play`) you take the first seat and the
      others are random; else every seat is random;
    * ``human_vs_agent``: you take the first seat, ``agent`` (one spec) every other.

    The number of seats is what the game declares (``gl.game(agents=N)``), else its view's
    ``players`` (a bundled game's), else the length of the list, else 1.

    Raises:
        ConfigError: more specs than the game's seats, or ``human_vs_agent`` with a list or a
            one-player game.

    Example:
        >>> from gymloop.render import seat_specs
        >>> seat_specs("duel", human_default=True), seat_specs("duel", ["scripted"])
        (['human', None], ['scripted', None])
    """
    from ..spaces import declared_agents

    fn, view = _resolve(game)
    n = declared_agents(fn) or (view.players if view.players > 1 else None)
    many = isinstance(agent, (list, tuple))
    if many and n is not None and len(agent) > n:
        raise ConfigError(f"{view.name} takes {n} agent(s), got {len(agent)} seat specs {list(agent)!r}; "
                          f"give at most {n} (--agent once per seat)")
    if n is None:
        n = max(1, len(agent)) if many else 1
    if human_vs_agent:
        if n < 2:
            raise ConfigError(f"--human-vs-agent needs a two-player game such as duel; {view.name} has {n} player(s). "
                              f"Play it yourself without --agent, or watch --agent PATH")
        if many:
            raise ConfigError("human_vs_agent takes one agent spec (or none) for the other seats; for seat by seat, give "
                              "a list such as ['human', 'random'] (on the command line: --agent human --agent random)")
        return [HUMAN] + [agent] * (n - 1)
    if many and agent:
        return list(agent) + [None] * (n - len(agent))
    if agent is None or many:
        return ([HUMAN] if human_default else [None]) + [None] * (n - 1)
    return [agent] * n


@dataclass
class _Tally:
    """Counts one seat's decisions and episode ends into a shared :class:`RunResult` (the result
    :func:`play` returns when the player quits, which ends :func:`run` without its own)."""

    agent: Any
    index: int
    tally: RunResult
    _ep_len: int = 0

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


def _keyboards(specs: list[AgentSpec], wait: bool, keys: KeyMapSpec | None) -> dict[int, tuple[KeyboardAgent, str]]:
    """A keyboard agent per human seat: one human gets arrows and WASD (and ``keys``), two share the keyboard."""
    humans = [i for i, s in enumerate(specs) if s == HUMAN]
    if len(humans) > 2:
        raise ConfigError(f"at most two humans can share the keyboard (WASD and arrows), got {len(humans)} 'human' seats "
                          f"({[f'seat {i}' for i in humans]}); give the other seats agents")
    if len(humans) == 1:
        return {humans[0]: (KeyboardAgent(keys or "both", wait=wait), "arrows or WASD")}
    if keys:
        raise ConfigError("keys= (--keys) maps the keys of one human; two humans share the keyboard as WASD (with "
                          "SPACE and the number row) and arrows (with Enter and the keypad): leave keys out")
    return {i: (KeyboardAgent(ks, wait=wait), label) for i, ks, label in zip(humans, ("wasd", "arrows"), ("WASD", "arrows"))}


def _check_seat(seat: int | None, n: int) -> None:
    if seat is not None and (isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < n):
        raise ConfigError(f"seat must be the index of a player, 0 to {n - 1}, or None, got {seat!r}")


def _players(agents: list[Any]) -> Any:
    return agents[0] if len(agents) == 1 else agents


def play(
    game: Any = "snake",
    agent: AgentSpec | Sequence[AgentSpec] = None,
    *,
    seed: int = 0,
    fps: float | None = 8.0,
    human_vs_agent: bool = False,
    max_steps: int | None = None,
    max_episodes: int | None = None,
    wait_for_key: bool = True,
    trace: str | os.PathLike | None = None,
    seat: int | None = None,
    keys: KeyMapSpec | None = None,
) -> RunResult:
    """Play a game in a window with the keyboard, or watch agents (and take over from one), for
    any number of players.

    Each seat (player) takes an agent spec (see :func:`load_agent`): ``"human"``, ``"random"`` (or
    ``None``), ``"scripted"``, ``"module:Class"``, a checkpoint path or an agent object. ``agent`` is
    a list with one spec per seat (seats it leaves out are random), or one spec for every seat
    (see :func:`seat_specs`):

    * no ``agent``: you take the first seat, every other seat is random;
    * ``agent`` a checkpoint or agent: it plays every seat; SPACE or a game key takes over the
      first one, SPACE or Enter hands back (:class:`TakeOver`);
    * ``["human", "runs/duel/agent.safetensors"]``: you against the agent; ``["human", "human"]``:
      two humans, WASD against arrows;
    * ``human_vs_agent=True``: you take the first seat, ``agent`` (default: random) the others.

    The keyboard plays any game whose action types are Enums, several in one ``act`` (move and
    fire): arrows/WASD for direction labels, SPACE for a fire-like one, number keys for the others,
    no key for a ``NONE``-like label (:class:`KeyboardAgent`); the keys are listed under the
    board. The drawn view is the first human's (else ``seat``'s, default the first). A game that
    draws itself (a ``display`` parameter: :class:`gymloop.Display`) gets a window at ``fps``
    instead and draws its own frames; the keyboard reads that window's keys. Escape or
    closing the window ends the game. The window title says who plays each seat and, when you can
    take over, the keys.

    Args:
        game: a bundled game name, ``module:function``, or a game function.
        agent: one agent spec, a list of one per seat, or ``None``.
        seed: the game's seed (seat ``i``'s agent gets ``seed + i``).
        fps: decisions per second (``None`` or 0: as fast as possible).
        human_vs_agent: you take the first seat of a game of two or more players, ``agent`` the others.
        max_steps: stop after this many decisions (all players together).
        max_episodes: stop after this many finished episodes (every player's ``game_over`` counts).
        wait_for_key: a human's episode starts at their first key press.
        trace: also record the play as a trace file (``*.trace.safetensors``; see
            :mod:`gymloop.trace`): human play becomes demonstrations for ``gymloop train --demos``.
            It is written when play ends, also when the player quits (not when no decision was
            taken: then a warning is logged).
        seat: the seat whose view is drawn when no human plays (default: the first).
        keys: your own keys over the derived ones (:data:`~gymloop.render.keymap.KeyMapSpec`:
            ``{label: key or keys}``, e.g. ``{"FIRE": "K_f", "Move.LEFT": ["K_LEFT", "j"]}``), for
            the human seat or for taking over; ``--keys FIRE=f`` on the command line.

    Returns:
        The :class:`~gymloop.RunResult`; ``stopped == "quit"`` when the player quit (it then
        counts the decisions all players completed and the finished episodes, as :func:`run` does).

    Raises:
        ConfigError: an unknown game, ``human_vs_agent`` for a one-player game, more seat specs than
            players, more than two humans, keyboard play of a game whose view says ``keyboard=False`` or
            (at its first decision) of an action type that is not an Enum, a bad ``keys`` map, a bad
            ``fps``/``max_steps``/``max_episodes``/``seat``, no display to open a window on, or
            pygame missing.
        CheckpointError: an agent file does not exist or does not fit the game.

    Example:
        >>> import os
        >>> import gymloop as gl
        >>> from gymloop.render import play
        >>> _ = os.environ.setdefault("SDL_VIDEODRIVER", "dummy")   # a window without a screen (CI)
        >>> r = play("snake", gl.RandomAgent(seed=0), fps=0, max_steps=3)   # watch; keys take over
        >>> r.steps, r.stopped
        (3, 'max_steps')
        >>> play("duel", ["random", gl.RandomAgent(seed=5)], fps=0, max_steps=4).steps   # seat by seat
        4
    """
    fn, view = _resolve(game)
    specs = seat_specs(game, agent, human_default=True, human_vs_agent=human_vs_agent)
    n = len(specs)
    _check_seat(seat, n)
    if HUMAN in specs and not view.keyboard:
        raise ConfigError(f"{view.name} cannot be played from the keyboard (its view says keyboard=False: it asks for "
                          f"actions keys cannot give, such as a select-entity target); watch an agent instead: "
                          f"gymloop play {view.name} --agent PATH")
    for name, v in (("max_steps", max_steps), ("max_episodes", max_episodes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ConfigError(f"play {name} must be an int >= 0 or None (no limit), got {v!r}")
    display = Display.window(fps or None) if takes_display(fn) else None  # a game that draws itself, in its window
    keyboards = _keyboards(specs, wait_for_key and display is None, keys)
    seats = [keyboards[i][0] if i in keyboards else load_agent(s, fn, seed + i, agents_per_game=n)
             for i, s in enumerate(specs)]
    shown = min(keyboards) if keyboards else (seat or 0)
    if not keyboards and view.keyboard:  # watching agents: the shown seat's can be taken over
        seats[shown] = TakeOver(seats[shown], KeyboardAgent(keys or "both", wait=wait_for_key))
    if n == 1:
        caption = f"you play - {keyboards[0][1]}" if keyboards else ""
    else:
        who = [f"you ({keyboards[i][1]})" if i in keyboards else describe(s) for i, s in enumerate(specs)]
        caption = " vs ".join(f"P{i + 1}: {w}" for i, w in enumerate(who)) + (f"; view of P{shown + 1}" if shown else "")
    if trace is not None:
        from ..files import check_output

        check_output(trace)  # (a folder or a device as --trace is refused before the window opens, not after the game)
    viewer = None
    if display is not None:
        fn = with_display(fn, display)
    else:
        viewer = Viewer(view, fps=fps, window=True)
        seats[shown] = Watch(seats[shown], viewer, caption=caption)
    tally = RunResult()
    seats = [_Tally(a, i, tally) for i, a in enumerate(seats)]
    players: Any = _players(seats)
    rec = None
    if trace is not None:
        from ..trace import Recorder

        rec = Recorder(players, fn, seed=seed)
        players = rec.agents
    failed = True
    try:
        try:
            result = run(fn, players, seed=seed, max_steps=max_steps, max_episodes=max_episodes)
        except (PlayerQuit, DisplayClosed):
            log.info("the player quit")
            result = RunResult(steps=tally.steps, episodes=list(tally.episodes), stopped="quit")
        failed = False
    finally:
        if viewer is not None:
            viewer.close()
        if display is not None:
            display.close()
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
    agent: AgentSpec | Sequence[AgentSpec] = None,
    *,
    seed: int = 0,
    max_steps: int | None = 1000,
    max_episodes: int | None = 1,
    fps: float = 10.0,
    seat: int = 0,
) -> RecordResult:
    """Record a game offscreen to a ``.gif`` or ``.mp4`` file (no window, no display needed).

    Seats are filled as in :func:`play`, without a human: ``agent`` is one spec for every seat or
    a list of one per seat (seats it leaves out, and all of them for ``None``, are random); a spec is
    ``"random"``, ``"scripted"``, ``"module:Class"``, a checkpoint path or an agent object (see
    :func:`load_agent`). ``seat``'s view is drawn, one frame per decision of that seat plus a banner
    frame per episode end; a game that draws itself (a ``display`` parameter) records its own
    frames instead, one per ``display.tick()``, offscreen.

    Args:
        game: a bundled game name, ``module:function``, or a game function.
        out: the video file; its extension picks the format.
        agent: one agent spec, a list of one per seat, or ``None`` for random agents.
        seed: the game's seed (seat ``i``'s agent gets ``seed + i``).
        max_steps: stop after this many decisions (all players together).
        max_episodes: stop after this many finished episodes (default: one game).
        fps: the video's frame rate.
        seat: the seat whose view is drawn.

    Raises:
        ConfigError: an unknown game, an extension other than .gif/.mp4, no limit at all, a bad
            ``fps`` or ``seat``, an ``out`` that is a folder, a ``"human"`` seat, more seat specs
            than players, or a missing package of the ``render`` extra.
        CheckpointError: an agent file does not exist or does not fit the game.

    Example:
        >>> import os, tempfile
        >>> from gymloop.render import record
        >>> r = record("duel", os.path.join(tempfile.mkdtemp(), "duel.mp4"), max_steps=6, max_episodes=None)
        >>> r.frames, r.run.steps       # a frame per decision of the first player
        (3, 6)
    """
    if max_steps is None and max_episodes is None:
        raise ConfigError("record needs max_steps or max_episodes (a game loop runs forever); e.g. --max-steps 500")
    fn, view = _resolve(game)
    specs = seat_specs(game, agent)
    n = len(specs)
    _check_seat(seat, n)
    humans = [i for i, s in enumerate(specs) if s == HUMAN]
    if humans:
        raise ConfigError(f"record draws offscreen without a keyboard: seat(s) {humans} cannot be 'human'; give them "
                          "'random', 'scripted', module:Class or a checkpoint path (gymloop play is for humans)")
    writer = open_video(out, fps)
    seats = [load_agent(s, fn, seed + i, agents_per_game=n) for i, s in enumerate(specs)]
    display = None
    if takes_display(fn):  # a game that draws itself: its own frames, offscreen
        display = Display.recording(writer.add)
        fn = with_display(fn, display)
    else:
        seats[seat] = Watch(seats[seat], Viewer(view, window=False, on_frame=writer.add))
    try:
        result = run(fn, _players(seats), seed=seed, max_steps=max_steps, max_episodes=max_episodes)
    except BaseException:
        writer.abort()
        raise
    finally:
        if display is not None:
            display.close()
    writer.close()
    return RecordResult(writer.path, writer.frames, writer.size or (0, 0), writer.fps, result)
