"""A strict, bounded reader of RON (Rusty Object Notation), the text format of enn-trainer's
``config.ron`` and ``state.ron`` (written by hyperstate with serde's RON).

:func:`parse_ron` turns a document into Python values (structs as :class:`RonStruct`, named tuple
structs as :class:`RonTuple`, lists, maps, tuples, numbers, strings, ``None``). It is strict
(duplicate fields or keys, extensions and trailing text are errors with line and column) and its
work is bounded (text size, nesting depth, number length), so a hostile file cannot exhaust
memory or time. Nothing in a document is ever executed.

Example:
    >>> from gymloop.ron import parse_ron
    >>> v = parse_ron('Config(n_layer: 2, relpos: Some((extent: [10, 10])), pooling: None)')
    >>> v.name, v["n_layer"], v["relpos"]["extent"], v["pooling"]
    ('Config', 2, [10, 10], None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import CheckpointError

__all__ = ["MAX_RON", "RonStruct", "RonTuple", "parse_ron"]

_MAX_RON = 4 * 1024 * 1024  # characters of one RON file (enn-trainer's are a few KiB)
_MAX_DEPTH = 64  # nesting of RON values
_MAX_NUMBER = 256  # characters of one RON number literal
MAX_RON = _MAX_RON


class RonStruct(dict):
    """A RON struct: a ``dict`` of its fields (file order) with the struct's type ``name``
    (``None`` for an anonymous ``(a: 1)`` struct).

    Example:
        >>> v = RonStruct("Entity", {"features": ["x"]})
        >>> v.name, v["features"], v
        ('Entity', ['x'], Entity(features: ['x']))
    """

    def __init__(self, name: str | None, fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self.name = name

    def __repr__(self) -> str:
        return f"{self.name or ''}({', '.join(f'{k}: {v!r}' for k, v in self.items())})"


class RonTuple(tuple):
    """A named RON tuple struct ``Name(a, b)``: a ``tuple`` with the type ``name``."""

    name: str = ""

    def __repr__(self) -> str:
        return f"{self.name}{tuple.__repr__(self)}"


def _ron_tuple(name: str, items: Sequence[Any]) -> RonTuple:
    t = RonTuple(items)
    t.name = name
    return t


_IDENT = re.compile(r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(
    r"[+-]?(?:(?P<radix>0x[0-9A-Fa-f][0-9A-Fa-f_]*|0o[0-7][0-7_]*|0b[01][01_]*)|(?P<special>inf|NaN)"
    r"|(?P<dec>(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9][0-9_]*)?))"
)
_RAW_STRING = re.compile(r'r(#*)"')
_ESCAPES = {'"': '"', "\\": "\\", "'": "'", "n": "\n", "r": "\r", "t": "\t", "0": "\0", "b": "\b", "f": "\f", "/": "/"}


class _Ron:
    """A strict recursive-descent parser for RON (the subset of serde's RON that data uses)."""

    def __init__(self, text: str, where: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.where = where
        self.depth = 0

    def error(self, msg: str, at: int | None = None) -> CheckpointError:
        i = self.i if at is None else at
        line = self.s.count("\n", 0, i) + 1
        col = i - (self.s.rfind("\n", 0, i) + 1) + 1
        return CheckpointError(f"{self.where}: invalid RON at line {line}, column {col}: {msg}")

    def ws(self) -> None:
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif s.startswith("//", self.i):
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif s.startswith("/*", self.i):
                depth, j = 0, self.i
                while True:
                    if j >= n:
                        raise self.error("unterminated block comment")
                    if s.startswith("/*", j):
                        depth += 1
                        j += 2
                    elif s.startswith("*/", j):
                        depth -= 1
                        j += 2
                        if depth == 0:
                            break
                    else:
                        j += 1
                self.i = j
            else:
                return

    def peek(self) -> str:
        self.ws()
        if self.i >= self.n:
            raise self.error("unexpected end of text (truncated file?)")
        return self.s[self.i]

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.error(f"expected {c!r}, found {self.s[self.i]!r}")
        self.i += 1

    def document(self) -> Any:
        self.ws()
        if self.s.startswith("#!", self.i):
            raise self.error("RON extensions (#![enable(...)]) are not supported")
        v = self.value()
        self.ws()
        if self.i != self.n:
            raise self.error(f"unexpected {self.s[self.i]!r} after the value")
        return v

    def value(self) -> Any:
        c = self.peek()
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"nested deeper than {_MAX_DEPTH} levels")
        try:
            if c == '"':
                return self.string()
            if c == "'":
                return self.char()
            if c == "[":
                return self.seq()
            if c == "{":
                return self.map()
            if c == "(":
                return self.paren(None)
            if c in "+-.0123456789":
                return self.number()
            if c == "r" and _RAW_STRING.match(self.s, self.i):
                return self.raw_string()
            m = _IDENT.match(self.s, self.i)
            if m is None:
                raise self.error(f"unexpected {c!r}")
            self.i = m.end()
            word = m.group()
            if word in ("true", "false"):
                return word == "true"
            if word == "inf":
                return math.inf
            if word == "NaN":
                return math.nan
            if word == "None":
                return None
            name = word.removeprefix("r#")
            if self.i < self.n and self.s[self.i] == "(":
                if word == "Some":
                    self.i += 1
                    v = self.value()
                    if self.peek() == ",":
                        self.i += 1
                    self.expect(")")
                    return v
                return self.paren(name)
            if word == "Some":
                raise self.error("Some needs its value in parentheses: Some(x)", self.i - 4)
            return RonStruct(name, {})  # a unit struct or unit enum variant
        finally:
            self.depth -= 1

    def _is_field(self) -> bool:
        """Whether the text at the cursor is ``ident :`` (a struct field), without consuming it."""
        m = _IDENT.match(self.s, self.i)
        if m is None:
            return False
        save = self.i
        self.i = m.end()
        self.ws()
        ok = self.i < self.n and self.s[self.i] == ":"
        self.i = save
        return ok

    def paren(self, name: str | None) -> Any:
        self.i += 1  # "("
        if self.peek() == ")":
            self.i += 1
            return RonStruct(name, {}) if name else ()
        if self._is_field():
            return RonStruct(name, self.entries(")", self.field_name, "field"))
        items = []
        while True:
            items.append(self.value())
            if self.sep(")"):
                return _ron_tuple(name, items) if name else tuple(items)

    def sep(self, close: str) -> bool:
        """After an element: ``,`` (then maybe ``close``) or ``close``; True when closed."""
        c = self.peek()
        if c == close:
            self.i += 1
            return True
        if c != ",":
            raise self.error(f"expected ',' or {close!r}, found {c!r}")
        self.i += 1
        if self.peek() == close:
            self.i += 1
            return True
        return False

    def seq(self) -> list:
        self.i += 1  # "["
        out: list[Any] = []
        if self.peek() == "]":
            self.i += 1
            return out
        while True:
            out.append(self.value())
            if self.sep("]"):
                return out

    def map(self) -> dict:
        self.i += 1  # "{"
        if self.peek() == "}":
            self.i += 1
            return {}
        return self.entries("}", self.map_key, "map key")

    def map_key(self) -> Any:
        at = self.i
        k = self.value()
        try:
            hash(k)
        except TypeError:  # a list, map or struct, or a tuple holding one
            raise self.error("map keys must be strings, numbers or tuples of them", at) from None
        return k

    def field_name(self) -> str:
        m = _IDENT.match(self.s, self.i)
        if m is None:
            raise self.error("expected a field name")
        self.i = m.end()
        return m.group().removeprefix("r#")

    def entries(self, close: str, key: Callable[[], Any], what: str) -> dict[Any, Any]:
        """``key: value`` pairs up to ``close`` (at least one); a key given twice is an error."""
        out: dict[Any, Any] = {}
        while True:
            at = self.i
            k = key()
            self.expect(":")
            v = self.value()
            if k in out:
                raise self.error(f"duplicate {what} {k!r}", at)
            out[k] = v
            if self.sep(close):
                return out

    def number(self) -> int | float:
        m = _NUMBER.match(self.s, self.i)
        if m is None or not m.group() or m.group() in "+-." or (m.end() < self.n and (self.s[m.end()].isalnum() or self.s[m.end()] == "_")):
            raise self.error("malformed number")
        if m.end() - m.start() > _MAX_NUMBER:
            raise self.error(f"a number literal of {m.end() - m.start()} characters (at most {_MAX_NUMBER} are read)")
        self.i = m.end()
        text = m.group().replace("_", "")
        try:
            if m.group("radix"):
                return int(text, 0)
            if m.group("special"):
                return float(text.replace("NaN", "nan"))
            if any(c in text for c in ".eE"):
                return float(text)
            return int(text)
        except ValueError:  # pragma: no cover - the pattern admits only what int() and float() read
            raise self.error("malformed number", m.start()) from None

    def _escape(self, j: int) -> tuple[str, int]:
        """The escape sequence at ``s[j] == '\\'``: its character and the index after it."""
        s = self.s
        if j + 1 >= self.n:
            raise self.error("unterminated escape", j)
        e = s[j + 1]
        if e in _ESCAPES:
            return _ESCAPES[e], j + 2
        if e == "x":
            h = s[j + 2 : j + 4]
            if len(h) != 2 or not all(c in "0123456789abcdefABCDEF" for c in h) or int(h, 16) > 0x7F:
                raise self.error("bad \\x escape (two hex digits up to 7F)", j)
            return chr(int(h, 16)), j + 4
        if e == "u":
            if s.startswith("{", j + 2):
                k = s.find("}", j + 3)
                h, end = (s[j + 3 : k], k + 1) if k > 0 else ("", j)
            else:
                h, end = s[j + 2 : j + 6], j + 6
                if len(h) != 4:
                    h = ""
            if not (1 <= len(h) <= 6) or not all(c in "0123456789abcdefABCDEF" for c in h):
                raise self.error("bad \\u escape", j)
            cp = int(h, 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise self.error(f"\\u escape {h} is not a Unicode scalar value", j)
            return chr(cp), end
        raise self.error(f"unknown escape \\{e}", j)

    def string(self) -> str:
        s, n = self.s, self.n
        start = self.i
        i = start + 1
        out = []
        while True:
            j = i
            while j < n and s[j] != '"' and s[j] != "\\":
                j += 1
            out.append(s[i:j])
            if j >= n:
                raise self.error("unterminated string", start)
            if s[j] == '"':
                self.i = j + 1
                return "".join(out)
            ch, i = self._escape(j)
            out.append(ch)

    def raw_string(self) -> str:
        m = _RAW_STRING.match(self.s, self.i)
        assert m is not None
        close = '"' + m.group(1)
        end = self.s.find(close, m.end())
        if end < 0:
            raise self.error("unterminated raw string")
        self.i = end + len(close)
        return self.s[m.end() : end]

    def char(self) -> str:
        s = self.s
        j = self.i + 1
        if j >= self.n:
            raise self.error("unterminated character")
        if s[j] == "\\":
            ch, j = self._escape(j)
        else:
            ch, j = s[j], j + 1
        if j >= self.n or s[j] != "'":
            raise self.error("a character literal holds one character")
        self.i = j + 1
        return ch


def parse_ron(text: str | bytes, where: str = "<RON>") -> Any:
    """Parse a RON document (Rusty Object Notation, as hyperstate writes it) into Python values.

    Structs become :class:`RonStruct` (a ``dict`` with a ``name``), named tuple structs
    :class:`RonTuple`, ``None``/``Some(x)`` ``None``/``x``, unit structs and enum variants empty
    :class:`RonStruct` of that name, lists ``list``, maps ``dict``, tuples ``tuple``. Comments and
    trailing commas are allowed; duplicate fields or keys, extensions and trailing text are not.

    The work is bounded: at most 4 MiB of text, 64 levels of nesting and 256-character numbers.

    Args:
        text: the RON document (``bytes`` are decoded as UTF-8).
        where: how error messages name the text (a file name).

    Raises:
        CheckpointError: the text is not valid RON (the message gives line and column), or exceeds
            a bound above.

    Example:
        >>> parse_ron("State(step: 8192, agent: \\"<blob:msgpack>\\", vf: None)")["step"]
        8192
    """
    if len(text) > _MAX_RON:
        raise CheckpointError(
            f"{where}: {len(text)} {'bytes' if isinstance(text, (bytes, bytearray)) else 'characters'} of RON, more "
            f"than the {_MAX_RON} this reader accepts (enn-trainer's config.ron and state.ron are a few KiB); "
            "not an enn-trainer file"
        )
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{where}: not UTF-8 text ({e}); not a RON file") from None
    text = text.removeprefix("\ufeff")
    try:
        return _Ron(text, where).document()
    except RecursionError:
        raise CheckpointError(f"{where}: invalid RON: nested too deeply") from None
