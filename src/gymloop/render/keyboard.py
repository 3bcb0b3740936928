"""Human players: a keyboard agent, and a wrapper that lets a human take over from an agent.

Both are ordinary :class:`~gymloop.Agent` objects, so an unchanged game runs with them. The keyboard
plays any game whose action types are Enums, several in one ``act`` (``agent.act(obs, Move, Fire)``):
its keys come from the labels (:mod:`gymloop.render.keymap`: arrows/WASD for directions, SPACE
for a fire-like label, number keys otherwise, no key for a ``NONE``-like label), and a user's map
overrides them (``keys=``).

Keys are read by :func:`poll_events`: the state of each key at decision time (held keys), plus
the presses since the last decision (a tap between two decisions is not lost). It reads pygame's
global keyboard: key events from the queue of gymloop's own window (or of none), only the key
events when the game draws into its own pygame window (its other events stay in its queue), and
SDL's key state, so keys count even when the game empties the queue itself. Closing gymloop's
window or pressing Escape raises :class:`PlayerQuit`.

* :class:`TakeOver`: SPACE, or any of the game's keys, takes over from the agent; SPACE or Enter
  (those of them that are not the game's keys) hands control back.

Example:
    >>> from gymloop.render import KeyboardAgent, TakeOver
    >>> import gymloop as gl
    >>> kb = KeyboardAgent(keys="wasd", wait=False)
    >>> takeover = TakeOver(gl.RandomAgent(seed=0), kb)
    >>> takeover.human
    False
"""

from __future__ import annotations

import itertools
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from ..agent import pack_result
from ..errors import ConfigError, GymloopError
from ..obs import Obs
from ._deps import pygame_module
from .keymap import KEY_SETS, KeyMap, KeyMapSpec, TypeKeys, build_keymap, direction_of, is_idle, key_code, parse_user_map

__all__ = ["ARROWS", "WASD", "KeyboardAgent", "PlayerQuit", "TakeOver", "poll_events"]

log = logging.getLogger(__name__)

ARROWS: dict[str, str] = {"K_UP": "UP", "K_DOWN": "DOWN", "K_LEFT": "LEFT", "K_RIGHT": "RIGHT"}
WASD: dict[str, str] = {"K_w": "UP", "K_s": "DOWN", "K_a": "LEFT", "K_d": "RIGHT"}
_RAW_KEYS = 64  # key presses a keyboard agent holds unread (an idle agent's oldest are dropped)
_STOPPED = object()  # a keyboard's wait for its first key ended without a move (control handed back)


class PlayerQuit(GymloopError):
    """The player closed the window or pressed Escape: a signal, not a failure.

    :func:`~gymloop.render.play` catches it and returns (``stopped == "quit"``); a script that
    runs a :class:`~gymloop.render.Viewer` window with :func:`gymloop.run` catches it itself.
    """


# every live KeyboardAgent; each has a ``_raw`` deque of pygame key codes not yet read
_listeners: weakref.WeakSet[KeyboardAgent] = weakref.WeakSet()
_down: dict[int, int] = {}  # key code → its press number, for the keys down now
_sdl_down: set[int] = set()  # keys SDL's own key state has shown down (its state, or a KEYUP, releases them)
_watched: set[int] = set()  # the key codes of every key map made (read from SDL's state at each poll)
_press_numbers = itertools.count(1)
_own: list[Any] = [None]  # the display surface gymloop's viewer opened (None: none)


def own_display(surface: Any) -> None:
    """Tell :func:`poll_events` which display surface is gymloop's own window (``None``: none).

    Its whole event queue is read; another window (a game drawing itself) keeps all but its key
    events."""
    _own[0] = surface


def _pressed(code: int) -> None:
    """A key press: every keyboard agent reads it (a key held from before counts for them again)."""
    _down[code] = next(_press_numbers)
    for kb in list(_listeners):
        kb._raw.append(code)
        kb._stale.discard(code)


def _released(code: int) -> None:
    _down.pop(code, None)
    _sdl_down.discard(code)
    for kb in list(_listeners):
        kb._stale.discard(code)


def poll_events() -> None:
    """Read pygame's keyboard once: presses go to every live :class:`KeyboardAgent`, and the keys
    down now are noted (events and SDL's key state).

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
    screen = pg.display.get_surface()
    if screen is not None and screen is not _own[0]:  # the game's own window: leave it its other events
        if pg.event.peek(pg.QUIT):
            raise PlayerQuit("the player quit (window closed)")
        events = pg.event.get((pg.KEYDOWN, pg.KEYUP))
    else:
        events = pg.event.get()
    for ev in events:
        if ev.type == pg.QUIT or (ev.type == pg.KEYDOWN and ev.key == pg.K_ESCAPE):
            raise PlayerQuit("the player quit (window closed or Escape)")
        if ev.type == pg.KEYDOWN:
            _pressed(ev.key)
        elif ev.type == pg.KEYUP:
            _released(ev.key)
    state = pg.key.get_pressed()
    for code in _watched | {pg.K_ESCAPE}:
        try:
            down = bool(state[code])
        except IndexError:
            continue
        if down:
            if code == pg.K_ESCAPE:
                raise PlayerQuit("the player quit (Escape)")
            _sdl_down.add(code)
            if code not in _down:  # a press whose event someone else read (a game emptying its queue)
                _pressed(code)
        elif code in _sdl_down:
            _released(code)  # up for SDL: a posted KEYDOWN (tests) stays down until its KEYUP


def _key_label(name: str) -> str:
    """``'K_SPACE'`` → ``'SPACE'``, ``'K_w'`` → ``'W'`` (for window titles)."""
    return (name[2:] if name.startswith("K_") else name).upper()


class KeyboardAgent:
    """An agent whose moves come from the keyboard, for any game whose action types are Enums.

    Each ``act`` may ask several action types (``agent.act(obs, Move, Fire)``): every one gets its
    keys from its labels (see :mod:`gymloop.render.keymap`): arrows and WASD for direction-like
    labels, SPACE for a fire-like one, number keys for the others, and no key for a ``NONE``-like
    label. Play is real-time. For each action type a decision takes, in order:

    1. the next key pressed since the last decision (up to ``queue`` presses are remembered, so a
       quick LEFT-UP turn or a short tap is not lost);
    2. else the key held down now (the one pressed last, when several are);
    3. else its "no key" label (``NONE``, ``STAY``, ...), when it has one;
    4. else the previous choice again (snake keeps its heading), or at the start of an episode
       (with ``wait`` off) ``default``.

    With several actors every actor gets the same choice. A choice the observation's mask forbids
    gives way to the previous choice when that one is legal, else to the first legal one. Keys
    held when an episode ends (or before the agent was made) count again once pressed anew. The
    keys are shown under the board (:meth:`key_legend`) when a :class:`~gymloop.render.Watch`
    draws the game.

    Args:
        keys: a named key set: ``"both"`` (default: arrows and WASD, SPACE, number keys),
            ``"wasd"`` or ``"arrows"`` (two players sharing the keyboard), or a user's map
            :data:`~gymloop.render.keymap.KeyMapSpec` over the ``"both"`` set, e.g.
            ``{"FIRE": "K_f", "Move.LEFT": ["K_LEFT", "K_j"]}`` (or ``{"K_i": "UP", "K_k": "DOWN"}``):
            the keys it gives a label replace that label's own.
        wait: at the first decision of an episode, wait until one of its keys is pressed (needs
            a pygame display: :func:`~gymloop.render.play` opens one). With ``wait=False`` the
            first choice is the "no key" label or ``default``.
        default: the label played at the start of an episode when no key is down and ``wait``
            is off, for the action type that has it (``None``: each type's first label on a key).
        queue: how many key presses are remembered between decisions, per action type.

    Raises:
        ConfigError: an unknown key set or key name, a user's map that is not a non-empty mapping
            of labels to key names, a ``queue`` below 1, a ``default`` that no key produces; at
            the first decision of some action types: a type that is not an Enum (a
            select-entity or composite action: the message names it), a user's label or
            ``default`` that is no label of the game's types, or two labels of one type on one key.

    Example:
        >>> from enum import Enum
        >>> from dataclasses import dataclass
        >>> import gymloop as gl
        >>> from gymloop.render import KeyboardAgent
        >>> class Move(Enum):
        ...     UP = 0
        ...     LEFT = 1
        >>> class Fire(Enum):
        ...     NONE = 0
        ...     FIRE = 1
        >>> @dataclass
        ... class Me:
        ...     x: int
        >>> kb = KeyboardAgent(wait=False, default="LEFT")
        >>> kb.act(gl.Obs().actor(Me(0)), Move, Fire)          # no key down
        (<Move.LEFT: 1>, <Fire.NONE: 0>)
        >>> kb.key_legend(Move, Fire)
        ['Move: up/w UP, left/a LEFT', 'Fire: space FIRE; no key: NONE']
    """

    def __init__(self, keys: str | KeyMapSpec = "both", wait: bool = True, default: str | None = None,
                 queue: int = 3) -> None:
        pygame_module()
        user_labels: set[str] = set()
        if isinstance(keys, str):
            if keys not in KEY_SETS:
                raise ConfigError(f"KeyboardAgent keys must be one of {sorted(KEY_SETS)} or a mapping of labels to "
                                  f"pygame key names, got {keys!r}; e.g. {{'FIRE': 'K_f', 'LEFT': ['K_LEFT', 'K_j']}}")
            self._key_set, self._user = keys, None
        else:
            for label, _, _ in parse_user_map(keys):
                user_labels |= {label, label.rpartition(".")[2]}
            self._key_set, self._user = "both", dict(keys)
        if isinstance(queue, bool) or not isinstance(queue, int) or queue < 1:
            raise ConfigError(f"KeyboardAgent queue must be an int of at least 1 (key presses remembered), got {queue!r}")
        if default is not None and not (isinstance(default, str) and (
                direction_of(default) is not None or is_idle(default) or default in user_labels)):
            raise ConfigError(f"KeyboardAgent default must be one of the names its keys produce (a direction such as "
                              f"'UP', a no-key label such as 'NONE', or a label of its keys {sorted(user_labels)}) or "
                              f"None, got {default!r}")
        self.wait = wait
        self.default = default
        self._queue_len = queue
        self._raw: deque[int] = deque(maxlen=_RAW_KEYS)
        self._stale: set[int] = set(_down)  # keys down before this agent: they count once pressed anew
        self._queued: dict[str, deque[str]] = {}
        self._last: dict[str, str] = {}
        self._started = False
        self._maps: dict[tuple, KeyMap] = {}
        _listeners.add(self)

    @property
    def directions(self) -> list[str]:
        """The direction names its direction keys produce."""
        return sorted({d for group in KEY_SETS[self._key_set].directions for d in group})

    def keymap(self, *action_types: Any) -> KeyMap:
        """The keys of a decision asking ``action_types`` (made at its first use, then kept).

        Raises:
            ConfigError: as the class says, for these action types.
        """
        km = self._maps.get(action_types)
        if km is None:
            km = build_keymap(action_types, self._key_set, self._user)
            if self.default is not None and not any(self.default in tk.labels for tk in km.types):
                raise ConfigError(
                    f"KeyboardAgent: {[self.default]} are not members of the game's action "
                    f"{', '.join(tk.name for tk in km.types)} (labels: {[list(tk.labels) for tk in km.types]}); map "
                    f"the keys (and default) to those names"
                )
            _watched.update(km.codes)
            self._maps[action_types] = km
        return km

    def key_legend(self, *action_types: Any) -> list[str]:
        """The keys of a decision asking ``action_types``, one line per action type (shown under the board)."""
        return self.keymap(*action_types).legend()

    # ------------------------------------------------------------------ Agent protocol
    def act(self, obs: Obs, *action_types: Any) -> Any:
        """Each action type's label from the keys (pressed since the last decision, or held now)."""
        poll_events()
        km = self.keymap(*action_types)
        self._absorb()
        return self._decide(obs, action_types, km, self._pump)

    def game_over(self, obs: Obs, truncated: bool = False) -> None:
        """Forget the current choices: the next episode starts from a fresh key press."""
        self._stale = set(_down)
        self._clear()
        self._last.clear()
        self._started = False

    # ------------------------------------------------------------------ internals
    def _clear(self) -> None:
        for q in self._queued.values():
            q.clear()

    def _pump(self) -> bool:
        poll_events()
        self._absorb()
        return True

    def _absorb(self) -> None:
        while self._raw:
            self._dispatch(self._raw.popleft())

    def _dispatch(self, key: int) -> bool:
        """Queue the labels a key press plays (in every key map made); ``False`` when it plays none."""
        done: set[str] = set()
        for km in self._maps.values():
            for tk in km.types:
                label = tk.codes.get(key)
                if label is not None and tk.name not in done:
                    done.add(tk.name)
                    q = self._queued.get(tk.name)
                    if q is None:
                        q = self._queued[tk.name] = deque(maxlen=self._queue_len)
                    q.append(label)
        return bool(done)

    def _held(self, tk: TypeKeys) -> str | None:
        """The label of ``tk``'s key held down now (pressed last of those held), else ``None``."""
        best: tuple[int, str] | None = None
        for code, n in _down.items():
            label = tk.codes.get(code)
            if label is not None and code not in self._stale and (best is None or n > best[0]):
                best = (n, label)
        return best[1] if best else None

    def _keyed(self, tk: TypeKeys) -> str | None:
        """The label ``tk``'s keys choose: the next press, else the key held, else ``None``."""
        q = self._queued.get(tk.name)
        if q:
            return q.popleft()
        return self._held(tk)

    def _default(self, tk: TypeKeys) -> str:
        if self.default in tk.labels:
            return self.default
        return next((lab for lab in tk.labels if tk.keys_of(lab)), tk.labels[0])

    def _wait_for_move(self, km: KeyMap, pump: Callable[[], bool]) -> bool:
        """Read keys with ``pump`` until one of ``km``'s is pressed (``False`` when ``pump`` says to stop waiting)."""
        pg = pygame_module()
        if not pg.display.get_init():
            raise ConfigError("KeyboardAgent(wait=True) needs a pygame window to read keys from; play through "
                              "gymloop.render.play / Viewer, or pass wait=False")
        what = "a direction key" if km.directions_only else "a key (see the keys under the board)"
        log.info("waiting for %s", what)
        caption = pg.display.get_caption()[0] if pg.display.get_surface() is not None else None
        if caption is not None:
            pg.display.set_caption(f"{caption}  - press {what} to start")
        try:
            while True:
                if not pump():
                    return False
                if any(self._queued.get(tk.name) or self._held(tk) is not None for tk in km.types):
                    return True
                time.sleep(0.01)
        finally:
            if caption is not None:
                pg.display.set_caption(caption)

    def _decide(self, obs: Obs, action_types: tuple, km: KeyMap, pump: Callable[[], bool]) -> Any:
        """The keyboard's answer; ``_STOPPED`` when ``pump`` ended a wait for the first key."""
        keyed = [self._keyed(tk) for tk in km.types]
        if not self._started and all(k is None for k in keyed) and self.wait:
            if not self._wait_for_move(km, pump):
                return _STOPPED
            keyed = [self._keyed(tk) for tk in km.types]
        per_type = []
        for tk, label in zip(km.types, keyed):
            prev = self._last.get(tk.name)
            if label is None:
                label = tk.idle if tk.idle is not None else prev if prev is not None else self._default(tk)
            t = tk.key
            move = t[label]
            out = []
            for i in range(1 if tk.global_ else len(obs.actor_list)):
                chosen = move
                if obs.has_masks:
                    legal = obs.legal(i, t)
                    if legal and move not in legal:
                        chosen = t[prev] if prev is not None and t[prev] in legal else legal[0]
                out.append(chosen)
            # what was played: a masked-out press does not stick
            self._last[tk.name] = out[0].name if (obs.is_single_actor or tk.global_) and out else label
            per_type.append(out)
        self._started = True
        return pack_result(obs, per_type, action_types)


class TakeOver:
    """An agent that plays for its inner agent until a human takes over, and back again.

    At every decision the keys pressed since the last one are read in order: while the agent
    plays, SPACE or any of the game's keys hands control to ``keyboard`` (a game key is also the
    human's first input; otherwise the human continues the agent's last choices); while the
    human plays, SPACE or Enter (those that are not game keys: with SPACE as a game's fire key,
    Enter) hands control back to the agent, mid-episode (also while the keyboard waits for the
    first key of an episode). Control stays with whoever has it across episodes. A decision the
    keyboard cannot play (a select-entity action) is the agent's, with a warning.

    Args:
        agent: the agent that plays by default (any :class:`~gymloop.Agent`).
        keyboard: the human's keyboard agent (default ``KeyboardAgent()``: arrows and WASD).
        take_keys: pygame key names that take over (the game's keys always do too).
        hand_back_keys: pygame key names that hand control back (the game's own keys left out).

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
        pygame_module()
        if not callable(getattr(agent, "act", None)) or not callable(getattr(agent, "game_over", None)):
            raise ConfigError(f"TakeOver needs an Agent (with act and game_over) to take over from, got {agent!r}")
        self.agent = agent
        self.keyboard = keyboard if keyboard is not None else KeyboardAgent()
        take_keys, hand_back_keys = list(take_keys), list(hand_back_keys)
        if not hand_back_keys:
            raise ConfigError("TakeOver hand_back_keys is empty: the human could never hand control back; "
                              "give at least one pygame key name, e.g. ('K_SPACE',)")
        self._take = {key_code(n): _key_label(n) for n in take_keys}
        self._back = {key_code(n): _key_label(n) for n in hand_back_keys}
        self.human = False
        self._agent_last: Any = None
        self._types: tuple | None = None
        self._km: KeyMap | None = None
        self._no_keyboard = ""  # why the keyboard cannot play the current decision

    def _set_types(self, action_types: tuple) -> None:
        if action_types == self._types:
            return
        self._types = action_types
        try:
            self._km = self.keyboard.keymap(*action_types)
            self._no_keyboard = ""
        except ConfigError as e:
            self._km = None
            self._no_keyboard = str(e)
            log.warning("the agent plays on: %s", e)
            return
        if not self._back_keys():
            raise ConfigError(f"TakeOver: every hand-back key ({', '.join(self._back.values())}) is one of the game's "
                              f"keys; give hand_back_keys= keys the game does not use, e.g. ('K_TAB',)")

    def _back_keys(self) -> dict[int, str]:
        game = self._km.codes if self._km is not None else set()
        return {c: n for c, n in self._back.items() if c not in game}

    @property
    def hint(self) -> str:
        """Who plays, and the keys that change it (the window title shows it)."""
        if self._no_keyboard:
            return "agent plays - the keyboard cannot play this decision"
        if self.human:
            return f"you play - {' or '.join(self._back_keys().values())}: hand back"
        game = "a direction key" if self._km is None or self._km.directions_only else "a game key"
        return f"agent plays - {' or '.join([*self._take.values(), game])}: take over"

    def key_legend(self, *action_types: Any) -> list[str]:
        """The keyboard's keys for ``action_types`` and the take-over keys (shown under the board)."""
        self._set_types(action_types)
        if self._km is None:
            return [f"keyboard: {self._no_keyboard.split(':')[0]} - the agent plays"]
        take = " or ".join([*self._take.values(), "a game key"])
        return [*self._km.legend(), f"take over: {take}; hand back: {' or '.join(self._back_keys().values())}"]

    def _agent_labels(self) -> dict[str, str]:
        """The agent's last choices by action type name (the first actor's where there are several)."""
        if self._km is None or self._agent_last is None:
            return {}
        res = self._agent_last
        vals = [res] if len(self._km.types) == 1 else list(res) if isinstance(res, tuple) else []
        out = {}
        for tk, v in zip(self._km.types, vals):
            if isinstance(v, list) and v:
                v = v[0]
            if isinstance(v, Enum) and v.name in tk.labels:
                out[tk.name] = v.name
        return out

    def _handle_keys(self) -> None:
        kb = self.keyboard
        km = self._km
        game = km.codes if km is not None else set()
        back = self._back_keys()
        while kb._raw:
            key = kb._raw.popleft()
            if km is None:
                continue  # (the keyboard cannot play this decision: its keys mean nothing)
            if self.human:
                if key in back:
                    self.human = False
                    kb._clear()
                    log.info("control handed back to the agent")
                else:
                    kb._dispatch(key)
            elif key in self._take or key in game:
                self.human = True
                kb._clear()
                kb._last = self._agent_labels()
                kb._started = True
                kb._dispatch(key)
                log.info("a human took over")

    def _pump(self) -> bool:
        poll_events()
        self._handle_keys()
        return self.human

    def act(self, obs: Obs, *action_types: Any) -> Any:
        """The human's choices while they have control, else the inner agent's."""
        self._set_types(action_types)
        if self._pump() and self._km is not None:
            res = self.keyboard._decide(obs, action_types, self._km, self._pump)
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
