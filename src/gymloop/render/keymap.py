"""Key maps: which keyboard keys play which labels of a game's action types.

A :class:`~gymloop.render.KeyboardAgent` derives the map from the labels of the action types a
game asks for in one ``act`` (:func:`build_keymap`), so any game with Enum action types can be
played without configuration:

* direction-like labels (``UP``/``DOWN``/``LEFT``/``RIGHT``, ``NORTH``/``SOUTH``/``WEST``/``EAST``,
  ``N``/``S``/``W``/``E``, optionally after ``MOVE_``, ``GO_``, ``TURN_``, ...) get the arrows and WASD
  (when a type has at least two of them; with two such types, the first gets the arrows and the
  second WASD);
* a fire-like label (``FIRE``, ``SHOOT``, ``JUMP``, ``ATTACK``, ``USE``, ...; or ``YES``/``ON`` in a
  type named like one, e.g. ``Fire``) gets SPACE;
* a "no key" label (``NONE``, ``NOOP``, ``STAY``, ``IDLE``, ``WAIT``, ``STOP``, ``NO``, ...) gets no key:
  it is played while none of its type's keys is down;
* every other label gets a number key (``1`` ... ``9``, ``0``, then letters; a label left over when
  they run out is on no key, as the legend says).

A user's map (:data:`KeyMapSpec`, the ``keys`` argument) overrides it label by label: the keys it
gives a label replace the derived ones, and are taken from any other label.

Example:
    >>> from enum import Enum
    >>> from gymloop.render.keymap import build_keymap
    >>> class Steer(Enum):
    ...     NONE = 0
    ...     LEFT = 1
    ...     RIGHT = 2
    >>> class Fire(Enum):
    ...     HOLD = 0
    ...     SHOOT = 1
    >>> km = build_keymap((Steer, Fire))
    >>> km.legend()
    ['Steer: left/a LEFT, right/d RIGHT; no key: NONE', 'Fire: space SHOOT; no key: HOLD']
    >>> build_keymap((Steer,), user={"LEFT": "K_j"}).legend()
    ['Steer: j LEFT, right/d RIGHT; no key: NONE']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..actions import action_spec
from ..errors import ConfigError, GymloopError
from ._deps import pygame_module

__all__ = ["KEY_SETS", "KeyMap", "KeyMapSpec", "TypeKeys", "build_keymap", "key_code", "parse_keys", "parse_user_map"]

KeyMapSpec = Mapping[str, str | Sequence[str]]
"""A user's key map: ``{label: key or list of keys}``, e.g. ``{"FIRE": "K_f", "Steer.LEFT": ["K_LEFT", "j"]}``.

A label is a member name of one of the game's action types, qualified as ``"Type.LABEL"`` where
two types share it. A key is a pygame key name (``"K_SPACE"``, ``"K_f"``) or the same without ``K_``
(``"space"``, ``"f"``, ``"left"``). The older form ``{pygame key name: label}``
(``{"K_i": "UP", "K_k": "DOWN"}``) is read too, when every key of the mapping starts with ``K_``.
"""

# direction words → the direction (the arrow) they are played with
_DIRECTION_WORDS = {
    "UP": "UP", "NORTH": "UP", "N": "UP", "FORWARD": "UP", "FORWARDS": "UP",
    "DOWN": "DOWN", "SOUTH": "DOWN", "S": "DOWN", "BACK": "DOWN", "BACKWARD": "DOWN", "BACKWARDS": "DOWN",
    "LEFT": "LEFT", "WEST": "LEFT", "W": "LEFT",
    "RIGHT": "RIGHT", "EAST": "RIGHT", "E": "RIGHT",
}
_VERBS = {"MOVE", "GO", "STEP", "TURN", "WALK", "RUN", "ROTATE", "STEER", "DIR", "TO"}
_FIRE_WORDS = {"FIRE", "SHOOT", "SHOT", "JUMP", "ATTACK", "USE", "STRIKE", "HIT", "THRUST", "BOOST", "TRIGGER", "BOMB",
               "ACTION", "ACT", "ACTIVATE", "PRESS", "KICK", "PUNCH", "THROW"}
_YES_WORDS = {"YES", "ON", "TRUE", "DO"}
_IDLE_LABELS = {"NONE", "NOOP", "NO_OP", "STAY", "IDLE", "WAIT", "PASS", "NOTHING", "REST", "STOP", "HOLD", "NO", "OFF",
                "FALSE", "NEUTRAL", "STILL", "SKIP"}

_ARROWS = {"UP": "K_UP", "DOWN": "K_DOWN", "LEFT": "K_LEFT", "RIGHT": "K_RIGHT"}
_WASD = {"UP": "K_w", "DOWN": "K_s", "LEFT": "K_a", "RIGHT": "K_d"}
_DIGITS = tuple(f"K_{d}" for d in "1234567890")
_LETTERS = tuple(f"K_{c}" for c in "qerfzxcvgtbyhnujmikolp")


@dataclass(frozen=True)
class KeySet:
    """The keys one player uses: direction key groups, a fire key and keys for numbered labels."""

    directions: tuple[dict[str, str], ...]
    fire: str
    more: tuple[str, ...]


KEY_SETS: dict[str, KeySet] = {
    "both": KeySet((_ARROWS, _WASD), "K_SPACE", _DIGITS + _LETTERS),
    "wasd": KeySet((_WASD,), "K_SPACE", _DIGITS + tuple(k for k in _LETTERS if k[2] in "qerfzxcvgtb")),
    "arrows": KeySet((_ARROWS,), "K_RETURN", tuple(f"K_KP{d}" for d in "1234567890")),
}
"""The named key sets: ``"both"`` (one player: arrows and WASD, SPACE), ``"wasd"`` and ``"arrows"``
(two players sharing the keyboard: WASD, SPACE and the number row; arrows, Enter and the keypad)."""


def key_code(name: str) -> int:
    """The pygame key code of a key name: ``"K_SPACE"``, or without the prefix (``"space"``, ``"f"``, ``"LEFT"``).

    Raises:
        ConfigError: pygame has no such key.

    Example:
        >>> from gymloop.render.keymap import key_code
        >>> key_code("K_SPACE") == key_code("space") == 32
        True
    """
    pg = pygame_module()
    if isinstance(name, str) and name:
        tries = [name] if name.startswith("K_") else [f"K_{name}", f"K_{name.lower()}", f"K_{name.upper()}"]
        for t in tries:
            code = getattr(pg, t, None)
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    raise ConfigError(f"unknown pygame key name {name!r}; use names such as 'K_UP', 'K_w' or 'K_SPACE' "
                      f"(or 'up', 'w', 'space')")


def parse_keys(items: Sequence[str] | None) -> dict[str, list[str]] | None:
    """``gymloop play --keys`` values (``LABEL=KEY[,KEY]``) as a :data:`KeyMapSpec` (``None`` for none).

    Raises:
        ConfigError: an item without ``=``, or with an empty label or key.

    Example:
        >>> from gymloop.render.keymap import parse_keys
        >>> parse_keys(["FIRE=f", "Move.LEFT=j,left"])
        {'FIRE': ['f'], 'Move.LEFT': ['j', 'left']}
    """
    if not items:
        return None
    out: dict[str, list[str]] = {}
    for item in items:
        label, eq, keys = item.partition("=")
        names = [k.strip() for k in keys.split(",")]
        if not eq or not label.strip() or not all(names):
            raise ConfigError(f"--keys takes LABEL=KEY or LABEL=KEY,KEY (e.g. FIRE=f or Move.LEFT=j,left), got {item!r}")
        out.setdefault(label.strip(), []).extend(names)
    return out


def key_name(code: int) -> str:
    """How a key is shown in the legend (pygame's name: ``left``, ``a``, ``space``, ``[1]``)."""
    pg = pygame_module()
    return str(pg.key.name(code)) or f"key {code}"


def _words(label: str) -> list[str]:
    return [w for w in re.split(r"[_\-\s.]+", label.upper()) if w]


def direction_of(label: str) -> str | None:
    """The arrow a label is played with (``"LEFT"`` for ``WEST`` or ``MOVE_LEFT``), else ``None``."""
    words = [w for w in _words(label) if w not in _VERBS]
    return _DIRECTION_WORDS.get(words[0]) if len(words) == 1 else None


def is_fire(label: str, type_name: str) -> bool:
    """Whether a label is fire-like (SPACE): ``FIRE``, ``SHOOT``, ... or ``YES``/``ON`` in a type named like one."""
    words = set(_words(label))
    if words & _FIRE_WORDS:
        return True
    return bool(words & _YES_WORDS) and bool(set(_words(re.sub(r"(?<=[a-z])(?=[A-Z])", "_", type_name))) & _FIRE_WORDS)


def is_idle(label: str) -> bool:
    """Whether a label means "no key" (``NONE``, ``NOOP``, ``STAY``, ``IDLE``, ...)."""
    return label.upper().replace("-", "_") in _IDLE_LABELS


@dataclass
class TypeKeys:
    """The keys of one action type.

    Attributes:
        key: the action type (an Enum class).
        name: its name.
        labels: its labels in order.
        codes: pygame key code → the label it plays.
        idle: the label played while none of its keys is down (``None``: the previous one is kept).
        directions_only: every mapped label is a direction (the title then says "a direction key").
        global_: one choice per observation rather than per actor.
    """

    key: Any
    name: str
    labels: tuple[str, ...]
    codes: dict[int, str] = field(default_factory=dict)
    idle: str | None = None
    directions_only: bool = False
    global_: bool = False

    def keys_of(self, label: str) -> list[int]:
        """The key codes that play ``label``, in map order."""
        return [c for c, lab in self.codes.items() if lab == label]

    def legend(self) -> str:
        """One line: ``Steer: left/a LEFT, right/d RIGHT; no key: NONE``."""
        parts = [f"{'/'.join(key_name(c) for c in self.keys_of(lab))} {lab}" for lab in self.labels if self.keys_of(lab)]
        unmapped = [lab for lab in self.labels if not self.keys_of(lab) and lab != self.idle]
        text = f"{self.name}: {', '.join(parts) or 'no keys'}"
        if self.idle is not None:
            text += f"; no key: {self.idle}"
        if unmapped:
            text += f"; not on a key: {', '.join(unmapped)}"
        return text


@dataclass
class KeyMap:
    """The keys of one decision: a :class:`TypeKeys` per action type, in the order ``act`` asked them."""

    types: list[TypeKeys]
    _legend: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def codes(self) -> set[int]:
        """Every key code of the map."""
        return {c for t in self.types for c in t.codes}

    @property
    def directions_only(self) -> bool:
        """Every mapped label of every type is a direction."""
        return all(t.directions_only for t in self.types)

    def legend(self) -> list[str]:
        """One line per action type (:meth:`TypeKeys.legend`)."""
        if self._legend is None:
            self._legend = [t.legend() for t in self.types]
        return list(self._legend)


def parse_user_map(keys: KeyMapSpec) -> list[tuple[str, list[int], list[str]]]:
    """A user's key map as ``(label, key codes, key names)`` entries, keys checked (labels are
    checked against the game's action types by :func:`build_keymap`).

    Raises:
        ConfigError: not a non-empty mapping, an unknown key name, a label that is not a str, a
            label without keys, or the two forms mixed.
    """
    example = "e.g. {'FIRE': 'K_f', 'LEFT': ['K_LEFT', 'K_j']}"
    if not isinstance(keys, Mapping) or not keys:
        raise ConfigError(f"KeyboardAgent keys must be one of {sorted(KEY_SETS)} or a non-empty mapping of labels to "
                          f"pygame key names, got {keys!r}; {example}")
    by_key = all(isinstance(k, str) and k.startswith("K_") for k in keys)
    entries: dict[str, tuple[list[int], list[str]]] = {}
    for k, v in keys.items():
        if by_key:  # {key name: label}
            if not isinstance(v, str):
                raise ConfigError(f"KeyboardAgent keys: key {k!r} must map to a member name (a str such as 'UP'), got {v!r}")
            label, names = v, [k]
        else:  # {label: key name or key names}
            if not isinstance(k, str) or not k:
                raise ConfigError(f"KeyboardAgent keys: a label must be a str such as 'FIRE' or 'Move.LEFT', got {k!r}")
            label = k
            names = [v] if isinstance(v, str) else list(v) if isinstance(v, Sequence) else [v]
            if not names or not all(isinstance(n, str) for n in names):
                raise ConfigError(f"KeyboardAgent keys: label {k!r} must map to a pygame key name or a list of them "
                                  f"(such as 'K_f' or ['K_LEFT', 'j']), got {v!r}")
        codes, shown = entries.setdefault(label, ([], []))
        for n in names:
            codes.append(key_code(n))
            shown.append(n)
    return [(label, codes, shown) for label, (codes, shown) in entries.items()]


def _type_keys(t: Any) -> TypeKeys:
    """An empty :class:`TypeKeys` for an Enum action type; a clear error for any other kind."""
    try:
        spec = action_spec(t)
    except GymloopError:
        raise ConfigError(f"KeyboardAgent plays Enum action types; the game asks for {t!r}, which is not an action "
                          f"type") from None
    if spec.kind.selects_entities or spec.fields or not (isinstance(t, type) and issubclass(t, Enum)):
        what = ("a select-entity action (it picks one of the observed entities)" if spec.kind.selects_entities
                else "a composite action (a dataclass of Enums)" if spec.fields else f"a {spec.kind.tag} action")
        raise ConfigError(
            f"KeyboardAgent cannot play action type {spec.name!r}: it is {what}. The keyboard plays Enum action "
            f"types (any number in one act: direction labels on the arrows/WASD, a fire-like label on SPACE, others "
            f"on number keys). Watch an agent instead (gymloop play GAME --agent PATH), or write an Agent for it"
        )
    return TypeKeys(t, spec.name, spec.labels, global_=not spec.kind.actor_bound)


def build_keymap(action_types: Sequence[Any], key_set: str = "both", user: KeyMapSpec | None = None) -> KeyMap:
    """The keys of one decision: derived from the labels (module docstring), then the user's map.

    Args:
        action_types: the action types of one ``act``, in order.
        key_set: a name of :data:`KEY_SETS`.
        user: the user's map (:data:`KeyMapSpec`), applied over the derived one.

    Raises:
        ConfigError: an action type that is not an Enum (a select-entity or composite action),
            a user label no type has (or that two types share, unqualified),
            two labels of one type on one key, an unknown key set or key name.
    """
    if key_set not in KEY_SETS:
        raise ConfigError(f"KeyboardAgent keys must be one of {sorted(KEY_SETS)} or a mapping of labels to keys, "
                          f"got {key_set!r}")
    ks = KEY_SETS[key_set]
    types = [_type_keys(t) for t in action_types]
    used: set[int] = set()

    def take(tk: TypeKeys, label: str, names: Sequence[str]) -> bool:
        free = [c for c in map(key_code, names) if c not in used]
        for c in free:
            tk.codes[c] = label
            used.add(c)
        return bool(free)

    dirs = {id(tk): {lab: d for lab in tk.labels if (d := direction_of(lab)) is not None} for tk in types}
    dir_types = [tk for tk in types if len(dirs[id(tk)]) >= 2]
    for i, tk in enumerate(dir_types):
        groups = ks.directions if len(dir_types) == 1 else ks.directions[i:i + 1]
        for lab, d in dirs[id(tk)].items():
            take(tk, lab, [g[d] for g in groups])
    for tk in types:
        tk.idle = next((lab for lab in tk.labels if is_idle(lab)), None)
        fire = next((lab for lab in tk.labels if not tk.keys_of(lab) and is_fire(lab, tk.name)), None)
        if fire is not None:
            take(tk, fire, [ks.fire])
    more = iter(ks.more)
    for tk in types:
        for lab in tk.labels:
            if tk.keys_of(lab) or lab == tk.idle:
                continue
            for name in more:
                if take(tk, lab, [name]):
                    break
    if user:
        _apply_user(types, parse_user_map(user))
    for tk in types:
        mapped = {lab for lab in tk.codes.values()}
        tk.directions_only = bool(mapped) and all(direction_of(lab) is not None for lab in mapped)
    return KeyMap(types)


def _apply_user(types: list[TypeKeys], entries: list[tuple[str, list[int], list[str]]]) -> None:
    """The user's keys replace the derived keys of the labels they name (and are taken from other labels)."""
    targets: list[tuple[TypeKeys, str, list[int], list[str]]] = []
    missing = []
    for label, codes, names in entries:
        owners = _owners(types, label)
        if not owners:
            missing.append(label)
            continue
        tk, lab = owners[0]
        targets.append((tk, lab, codes, names))
    if missing:
        all_labels = {tk.name: list(tk.labels) for tk in types}
        raise ConfigError(f"KeyboardAgent: {missing} are not members of the game's action "
                          f"{', '.join(tk.name for tk in types)} (labels: {all_labels}); map the keys (and default) "
                          f"to those names, as 'LABEL' or 'Type.LABEL'")
    mine = {c for _, _, codes, _ in targets for c in codes}
    for tk in types:
        for c in [c for c in tk.codes if c in mine]:
            del tk.codes[c]
    for tk, lab, _, _ in targets:
        for c in tk.keys_of(lab):
            del tk.codes[c]
    for tk, lab, codes, names in targets:
        for c, n in zip(codes, names):
            other = tk.codes.get(c)
            if other is not None and other != lab:
                raise ConfigError(f"KeyboardAgent keys: {n!r} is mapped to both {other} and {lab} of action type "
                                  f"{tk.name}; a key plays one label of an action type")
            tk.codes[c] = lab


def _owners(types: list[TypeKeys], label: str) -> list[tuple[TypeKeys, str]]:
    """The (type, label) a user's label names: ``LABEL`` in exactly one type, or ``Type.LABEL``.

    Raises:
        ConfigError: an unqualified label that several types share.
    """
    if "." in label:
        tname, _, lab = label.partition(".")
        return [(tk, lab) for tk in types if tk.name == tname and lab in tk.labels]
    owners = [(tk, label) for tk in types if label in tk.labels]
    if len(owners) > 1:
        raise ConfigError(f"KeyboardAgent keys: label {label!r} belongs to several action types "
                          f"({', '.join(tk.name for tk, _ in owners)}); qualify it, e.g. '{owners[0][0].name}.{label}'")
    return owners
