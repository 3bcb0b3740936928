"""Human players: a keyboard agent, and a wrapper that lets a human take over from an agent.

Both are ordinary :class:`~gymloop.Agent` objects, so an unchanged game runs with them. Keys are
read from pygame's event queue by :func:`poll_events`, which hands every key press to each live
keyboard agent (two players on one keyboard each get their own copy; an agent keeps at most its
64 latest unread presses) and raises :class:`PlayerQuit` when the window is closed or Escape is
pressed.

Keys (pygame key names → direction members of the game's action Enum):

* arrows: ``K_UP``/``K_DOWN``/``K_LEFT``/``K_RIGHT`` → ``UP``/``DOWN``/``LEFT``/``RIGHT``;
* WASD: ``K_w``/``K_s``/``K_a``/``K_d`` → ``UP``/``DOWN``/``LEFT``/``RIGHT``;
* :class:`TakeOver`: SPACE, or any direction key, takes over from the agent; SPACE or Enter
  hands control back.

Example:
    >>> from gymloop.render import KeyboardAgent, TakeOver
    >>> import gymloop as gl
    >>> kb = KeyboardAgent(keys="wasd", wait=False)
    >>> takeover = TakeOver(gl.RandomAgent(seed=0), kb)
    >>> takeover.human
    False
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any

from ..actions import action_spec
from ..errors import ConfigError, GymloopError
from ..obs import Obs
from ._deps import pygame_module

__all__ = ["ARROWS", "WASD", "KeyboardAgent", "PlayerQuit", "TakeOver", "poll_events"]

log = logging.getLogger(__name__)

ARROWS: dict[str, str] = {"K_UP": "UP", "K_DOWN": "DOWN", "K_LEFT": "LEFT", "K_RIGHT": "RIGHT"}
WASD: dict[str, str] = {"K_w": "UP", "K_s": "DOWN", "K_a": "LEFT", "K_d": "RIGHT"}
_KEY_SETS: dict[str, dict[str, str]] = {"arrows": ARROWS, "wasd": WASD, "both": {**ARROWS, **WASD}}
_RAW_KEYS = 64  # key presses a keyboard agent holds unread (an idle agent's oldest are dropped)
_STOPPED = object()  # a keyboard's wait for its first key ended without a move (control handed back)


class PlayerQuit(GymloopError):
    """The player closed the window or pressed Escape: a signal, not a failure.

    :func:`~gymloop.render.play` catches it and returns (``stopped == "quit"``); a script that
    runs a :class:`~gymloop.render.Viewer` window with :func:`gymloop.run` catches it itself.
    """


# every live KeyboardAgent; each has a ``_raw`` deque of pygame key codes not yet read
_listeners: weakref.WeakSet[KeyboardAgent] = weakref.WeakSet()


def poll_events() -> None:
    """Read pygame's event queue once: key presses go to every live :class:`KeyboardAgent`.

    Does nothing while no pygame display is initialized (offscreen recording).

    Raises:
        PlayerQuit: the window was closed or Escape was pressed.

    Example:
        >>> from gymloop.render import poll_events
        >>> poll_events()      # no window open: nothing to read
    """
    pg = pygame_module()
    if not pg.display.get_init():
        return
    for ev in pg.event.get():
        if ev.type == pg.QUIT or (ev.type == pg.KEYDOWN and ev.key == pg.K_ESCAPE):
            raise PlayerQuit("the player quit (window closed or Escape)")
        if ev.type == pg.KEYDOWN:
            for kb in list(_listeners):
                kb._raw.append(ev.key)


def _key_codes(pg: Any, names: Iterable[str]) -> set[int]:
    out = set()
    for n in names:
        code = getattr(pg, n, None)
        if not isinstance(code, int):
            raise ConfigError(f"unknown pygame key name {n!r}; use names such as 'K_UP', 'K_w' or 'K_SPACE'")
        out.add(code)
    return out


def _key_label(name: str) -> str:
    """``'K_SPACE'`` → ``'SPACE'``, ``'K_w'`` → ``'W'`` (for window titles)."""
    return (name[2:] if name.startswith("K_") else name).upper()


def _type_name(t: Any) -> str:
    try:
        return action_spec(t).name
    except GymloopError:
        return getattr(t, "__name__", repr(t))


class KeyboardAgent:
    """An agent whose moves come from the keyboard: direction keys → the game's direction Enum.

    It plays games whose decision is one Enum action type with members named ``UP``, ``DOWN``,
    ``LEFT`` and/or ``RIGHT`` (snake's and duel's ``Move``), or the members a custom ``keys``
    mapping names. Play is real-time: each decision takes the next key pressed since the last
    one (up to ``queue`` presses are remembered, so a quick LEFT-UP turn is not lost), or
    repeats the previous move when no key was pressed. With several actors every actor gets the
    same move. A move the observation's mask forbids gives way to the previous move when that
    one is legal, else to the first legal one.

    Args:
        keys: ``"arrows"``, ``"wasd"``, ``"both"`` (default), or a mapping of pygame key names to
            member names, e.g. ``{"K_i": "UP", "K_k": "DOWN", "K_SPACE": "NOOP"}`` (every name
            must then be a member of the game's Enum).
        wait: at the first decision of an episode, wait until one of its keys is pressed (needs
            a pygame display: :func:`~gymloop.render.play` opens one). With ``wait=False`` the
            first move is ``default``.
        default: member name used when no key has been pressed yet and ``wait`` is off
            (``None``: the Enum's first member that a key maps to).
        queue: how many key presses are remembered between decisions.

    Raises:
        ConfigError: an unknown key set or pygame key name, a ``queue`` below 1; at the first
            decision, a game whose actions are not one such Enum, a mapped name or ``default``
            that is not one of its members.

    Example:
        >>> from enum import Enum
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> from gymloop.render import KeyboardAgent
        >>> class Move(Enum):
        ...     UP = 0
        ...     LEFT = 1
        >>> @dataclass
        ... class Me:
        ...     x: int
        >>> KeyboardAgent(wait=False, default="LEFT").act(gl.Obs().actor(Me(0)), Move)
        <Move.LEFT: 1>
    """

    def __init__(self, keys: str | Mapping[str, str] = "both", wait: bool = True, default: str | None = None,
                 queue: int = 3) -> None:
        pg = pygame_module()
        if isinstance(keys, str):
            mapping = _KEY_SETS.get(keys)
            if mapping is None:
                raise ConfigError(f"KeyboardAgent keys must be one of {sorted(_KEY_SETS)} or a mapping of pygame key "
                                  f"names to move names, got {keys!r}")
        elif isinstance(keys, Mapping) and keys:
            mapping = dict(keys)
        else:
            raise ConfigError(f"KeyboardAgent keys must be one of {sorted(_KEY_SETS)} or a non-empty mapping of pygame "
                              f"key names to move names, got {keys!r}; e.g. {{'K_i': 'UP', 'K_k': 'DOWN'}}")
        self._custom = not isinstance(keys, str)
        self._keys: dict[int, str] = {}
        for name, member in mapping.items():
            if not isinstance(member, str):
                raise ConfigError(f"KeyboardAgent keys: key {name!r} must map to a member name (a str such as 'UP'), "
                                  f"got {member!r}")
            (code,) = _key_codes(pg, [name])
            self._keys[code] = member
        if isinstance(queue, bool) or not isinstance(queue, int) or queue < 1:
            raise ConfigError(f"KeyboardAgent queue must be an int of at least 1 (key presses remembered), got {queue!r}")
        if default is not None and default not in self._keys.values():
            raise ConfigError(f"KeyboardAgent default must be one of the names its keys produce "
                              f"{sorted(set(self._keys.values()))} or None, got {default!r}")
        self.wait = wait
        self.default = default
        self._raw: deque[int] = deque(maxlen=_RAW_KEYS)
        self._moves: deque[str] = deque(maxlen=queue)
        self._last: str | None = None
        self._checked: dict[Any, list[str]] = {}
        _listeners.add(self)

    @property
    def directions(self) -> list[str]:
        """The member names this agent's keys produce."""
        return sorted(set(self._keys.values()))

    # ------------------------------------------------------------------ Agent protocol
    def act(self, obs: Obs, *action_types: Any) -> Any:
        """The next pressed direction (or the previous one) for every actor of ``obs``."""
        poll_events()
        self._absorb()
        return self._decide(obs, action_types, self._pump)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Forget the current direction: the next episode starts from a fresh key press."""
        self._last = None
        self._moves.clear()

    # ------------------------------------------------------------------ internals
    def _pump(self) -> bool:
        poll_events()
        self._absorb()
        return True

    def _absorb(self) -> None:
        while self._raw:
            self._feed(self._raw.popleft())

    def _feed(self, key: int) -> bool:
        """Queue the move of a key press; ``False`` when the key is not one of ours."""
        name = self._keys.get(key)
        if name is None:
            return False
        self._moves.append(name)
        return True

    def _members(self, action_types: tuple) -> list[str]:
        t = action_types[0] if len(action_types) == 1 else None
        names = self._checked.get(t) if t is not None else None
        if names is not None:
            return names
        ok = isinstance(t, type) and issubclass(t, Enum)
        mine = set(self._keys.values())
        names = [n for n in t.__members__ if n in mine] if ok else []  # type: ignore[union-attr]
        if not names:
            got = ", ".join(_type_name(a) for a in action_types) or "nothing"
            raise ConfigError(
                f"KeyboardAgent plays games whose decision is one Enum with members {self.directions} "
                f"(like snake's Move); this game asks for {got}. Watch an agent instead "
                f"(gymloop play GAME --agent PATH), or write an Agent for these actions"
            )
        missing = sorted(mine - set(names)) if self._custom else []
        if self.default is not None and self.default not in names:
            missing = sorted({*missing, self.default})
        if missing:
            raise ConfigError(
                f"KeyboardAgent: {missing} are not members of the game's action {t.__name__} "  # type: ignore[union-attr]
                f"(members: {list(t.__members__)}); map the keys (and default) to those names"  # type: ignore[union-attr]
            )
        self._checked[t] = names
        return names

    def _next_move(self, names: list[str]) -> str | None:
        while self._moves:
            n = self._moves.popleft()
            if n in names:
                return n
        return None

    def _wait_for_move(self, names: list[str], pump: Callable[[], bool]) -> str | None:
        """Read keys with ``pump`` until a move comes (``None`` when ``pump`` says to stop waiting)."""
        pg = pygame_module()
        if not pg.display.get_init():
            raise ConfigError("KeyboardAgent(wait=True) needs a pygame window to read keys from; play through "
                              "gymloop.render.play / Viewer, or pass wait=False")
        log.info("waiting for a key (%s)", ", ".join(names))
        caption = pg.display.get_caption()[0] if pg.display.get_surface() is not None else None
        if caption is not None:
            pg.display.set_caption(f"{caption}  - press a direction key to start")
        try:
            return self._wait_loop(names, pump)
        finally:
            if caption is not None:
                pg.display.set_caption(caption)

    def _wait_loop(self, names: list[str], pump: Callable[[], bool]) -> str | None:
        while True:
            if not pump():
                return None
            n = self._next_move(names)
            if n is not None:
                return n
            time.sleep(0.01)

    def _decide(self, obs: Obs, action_types: tuple, pump: Callable[[], bool]) -> Any:
        """The keyboard's answer; ``_STOPPED`` when ``pump`` ended a wait for the first key."""
        names = self._members(action_types)
        t = action_types[0]
        prev = self._last if self._last in names else None
        name = self._next_move(names) or prev
        if name is None:
            if self.wait:
                name = self._wait_for_move(names, pump)
                if name is None:
                    return _STOPPED
            else:
                name = self.default if self.default is not None else names[0]
        move = t[name]
        out = []
        for i in range(len(obs.actor_list)):
            chosen = move
            if obs.has_masks:
                legal = obs.legal(i, t)
                if legal and move not in legal:
                    chosen = t[prev] if prev is not None and t[prev] in legal else legal[0]
            out.append(chosen)
        if obs.is_single_actor:
            self._last = out[0].name  # what was played: a masked-out press does not stick
            return out[0]
        self._last = name
        return out


class TakeOver:
    """An agent that plays for its inner agent until a human takes over, and back again.

    At every decision the keys pressed since the last one are read in order: while the agent
    plays, SPACE or a direction key hands control to ``keyboard`` (a direction key is also the
    human's first move; otherwise the human continues the agent's last move); while the human
    plays, SPACE or Enter hands control back to the agent, mid-episode (also while the keyboard
    waits for the first key of an episode). Control stays with whoever has it across episodes.

    Args:
        agent: the agent that plays by default (any :class:`~gymloop.Agent`).
        keyboard: the human's keyboard agent (default ``KeyboardAgent()``: arrows and WASD).
        take_keys: pygame key names that take over (direction keys always do too).
        hand_back_keys: pygame key names that hand control back.

    Attributes:
        human: ``True`` while the human plays.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> from gymloop.render import KeyboardAgent, TakeOver
        >>> agent = TakeOver(gl.RandomAgent(seed=0), KeyboardAgent(wait=False))
        >>> gl.run(snake, agent, seed=0, max_steps=5).steps   # no key pressed: the agent plays
        5
        >>> agent.hint
        'agent plays - SPACE or a direction key: take over'
    """

    def __init__(self, agent: Any, keyboard: KeyboardAgent | None = None,
                 take_keys: Iterable[str] = ("K_SPACE",), hand_back_keys: Iterable[str] = ("K_SPACE", "K_RETURN")) -> None:
        pg = pygame_module()
        if not callable(getattr(agent, "act", None)) or not callable(getattr(agent, "game_over", None)):
            raise ConfigError(f"TakeOver needs an Agent (with act and game_over) to take over from, got {agent!r}")
        self.agent = agent
        self.keyboard = keyboard if keyboard is not None else KeyboardAgent()
        take_keys, hand_back_keys = list(take_keys), list(hand_back_keys)
        if not hand_back_keys:
            raise ConfigError("TakeOver hand_back_keys is empty: the human could never hand control back; "
                              "give at least one pygame key name, e.g. ('K_SPACE',)")
        self._take = _key_codes(pg, take_keys)
        self._back = _key_codes(pg, hand_back_keys)
        self._take_names = [_key_label(n) for n in take_keys]
        self._back_names = [_key_label(n) for n in hand_back_keys]
        self.human = False
        self._agent_last: Any = None

    @property
    def hint(self) -> str:
        """Who plays, and the keys that change it (the window title shows it)."""
        if self.human:
            return f"you play - {' or '.join(self._back_names)}: hand back"
        return f"agent plays - {' or '.join([*self._take_names, 'a direction key'])}: take over"

    def _handle_keys(self) -> None:
        kb = self.keyboard
        while kb._raw:
            key = kb._raw.popleft()
            if self.human:
                if key in self._back:
                    self.human = False
                    kb._moves.clear()
                    log.info("control handed back to the agent")
                else:
                    kb._feed(key)
            elif key in self._take or key in kb._keys:
                self.human = True
                kb._moves.clear()
                last = self._agent_last
                if isinstance(last, list) and last:
                    last = last[0]  # several actors: continue the first one's move
                kb._last = last.name if isinstance(last, Enum) and last.name in kb._keys.values() else None
                kb._feed(key)
                log.info("a human took over")

    def _pump(self) -> bool:
        poll_events()
        self._handle_keys()
        return self.human

    def act(self, obs: Obs, *action_types: Any) -> Any:
        """The human's move while they have control, else the inner agent's."""
        if self._pump():
            res = self.keyboard._decide(obs, action_types, self._pump)
            if res is not _STOPPED:
                return res
        res = self.agent.act(obs, *action_types)
        self._agent_last = res
        return res

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Both the inner agent and the keyboard see the end of the episode."""
        self.agent.game_over(obs, truncated)
        self.keyboard.game_over(obs, truncated)
        self._agent_last = None
