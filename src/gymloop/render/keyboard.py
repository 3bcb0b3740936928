"""Human players: a keyboard agent, and a wrapper that lets a human take over from an agent.

Both are ordinary :class:`~gymloop.Agent` objects, so an unchanged game runs with them. Keys are
read from pygame's event queue by :func:`poll_events`, which hands every key press to each live
keyboard agent (two players on one keyboard each get their own copy) and raises
:class:`PlayerQuit` when the window is closed or Escape is pressed.

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
from collections.abc import Iterable, Mapping
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


class PlayerQuit(Exception):
    """The player closed the window or pressed Escape (:func:`~gymloop.render.play` returns)."""


# every live KeyboardAgent; each has a ``_raw`` deque of pygame key codes not yet read
_listeners: weakref.WeakSet[KeyboardAgent] = weakref.WeakSet()


def poll_events() -> None:
    """Read pygame's event queue once: key presses go to every live :class:`KeyboardAgent`.

    Does nothing while no pygame display is initialized (offscreen recording).

    Raises:
        PlayerQuit: the window was closed or Escape was pressed.
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


def _type_name(t: Any) -> str:
    try:
        return action_spec(t).name
    except GymloopError:
        return getattr(t, "__name__", repr(t))


class KeyboardAgent:
    """An agent whose moves come from the keyboard: direction keys → the game's direction Enum.

    It plays games whose decision is one Enum action type with members named ``UP``, ``DOWN``,
    ``LEFT`` and/or ``RIGHT`` (snake's and duel's ``Move``). Play is real-time: each decision
    takes the next key pressed since the last one (up to ``queue`` presses are remembered, so a
    quick LEFT-UP turn is not lost), or repeats the previous move when no key was pressed.
    With several actors every actor gets the same move. A move the observation's mask forbids
    is replaced by the first legal one.

    Args:
        keys: ``"arrows"``, ``"wasd"``, ``"both"`` (default), or a mapping of pygame key names to
            member names, e.g. ``{"K_i": "UP", "K_k": "DOWN"}``.
        wait: at the first decision of an episode, wait until a direction key is pressed (needs
            a pygame display: :func:`~gymloop.render.play` opens one). With ``wait=False`` the
            first move is ``default``.
        default: member name used when no key has been pressed yet and ``wait`` is off
            (``None``: the Enum's first direction member).
        queue: how many key presses are remembered between decisions.

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
        else:
            mapping = dict(keys)
        self._keys: dict[int, str] = {}
        for name, member in mapping.items():
            (code,) = _key_codes(pg, [name])
            self._keys[code] = member
        if queue < 1:
            raise ConfigError(f"KeyboardAgent queue must be at least 1, got {queue!r}")
        self.wait = wait
        self.default = default
        self._raw: deque[int] = deque()
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
        return self._decide(obs, action_types)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Forget the current direction: the next episode starts from a fresh key press."""
        self._last = None
        self._moves.clear()

    # ------------------------------------------------------------------ internals
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
        names = [n for n in ("UP", "DOWN", "LEFT", "RIGHT") if ok and n in t.__members__ and n in self.directions]
        if not names:
            got = ", ".join(_type_name(a) for a in action_types) or "nothing"
            raise ConfigError(
                f"KeyboardAgent plays games whose decision is one Enum with members {self.directions} "
                f"(like snake's Move); this game asks for {got}. Watch an agent instead "
                f"(gymloop play GAME --agent PATH), or write an Agent for these actions"
            )
        self._checked[t] = names
        return names

    def _next_move(self, names: list[str]) -> str | None:
        while self._moves:
            n = self._moves.popleft()
            if n in names:
                return n
        return None

    def _wait_for_move(self, names: list[str]) -> str:
        pg = pygame_module()
        if not pg.display.get_init():
            raise ConfigError("KeyboardAgent(wait=True) needs a pygame window to read keys from; play through "
                              "gymloop.render.play / Viewer, or pass wait=False")
        log.info("waiting for a direction key (%s)", ", ".join(names))
        while True:
            poll_events()
            self._absorb()
            n = self._next_move(names)
            if n is not None:
                return n
            time.sleep(0.01)

    def _decide(self, obs: Obs, action_types: tuple) -> Any:
        names = self._members(action_types)
        t = action_types[0]
        name = self._next_move(names) or self._last
        if name is None:
            if self.wait:
                name = self._wait_for_move(names)
            else:
                name = self.default if self.default in names else names[0]
        self._last = name
        move = t[name]
        n = len(obs.actor_list)
        out = []
        for i in range(n):
            chosen = move
            if obs._masks is not None:
                legal = obs.legal(i, t)
                if legal and move not in legal:
                    chosen = legal[0]
            out.append(chosen)
        return out[0] if obs.is_single_actor else out


class TakeOver:
    """An agent that plays for its inner agent until a human takes over, and back again.

    At every decision the keys pressed since the last one are read in order: while the agent
    plays, SPACE or a direction key hands control to ``keyboard`` (a direction key is also the
    human's first move; otherwise the human continues the agent's last move); while the human
    plays, SPACE or Enter hands control back to the agent, mid-episode. Control stays with
    whoever has it across episodes.

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
    """

    def __init__(self, agent: Any, keyboard: KeyboardAgent | None = None,
                 take_keys: Iterable[str] = ("K_SPACE",), hand_back_keys: Iterable[str] = ("K_SPACE", "K_RETURN")) -> None:
        pg = pygame_module()
        self.agent = agent
        self.keyboard = keyboard if keyboard is not None else KeyboardAgent()
        self._take = _key_codes(pg, take_keys)
        self._back = _key_codes(pg, hand_back_keys)
        self.human = False
        self._agent_last: Any = None

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
                kb._last = last.name if isinstance(last, Enum) else None
                kb._feed(key)
                log.info("a human took over")

    def act(self, obs: Obs, *action_types: Any) -> Any:
        """The human's move while they have control, else the inner agent's."""
        poll_events()
        self._handle_keys()
        if self.human:
            return self.keyboard._decide(obs, action_types)
        res = self.agent.act(obs, *action_types)
        self._agent_last = res
        return res

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Both the inner agent and the keyboard see the end of the episode."""
        self.agent.game_over(obs, truncated)
        self.keyboard.game_over(obs, truncated)
        self._agent_last = None
