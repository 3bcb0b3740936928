"""A dependency-free TensorBoard event-file writer (scalars only) and reader.

The format is TFRecord framing (length, masked CRC-32C, payload, masked CRC-32C) around
``Event`` protocol buffers, encoded here by hand.

Example:
    >>> import tempfile
    >>> from gymloop.train.tensorboard import EventWriter, read_scalars
    >>> d = tempfile.mkdtemp()
    >>> w = EventWriter(d)
    >>> w.scalar("score", 1.5, step=10)
    >>> w.close()
    >>> read_scalars(w.path)["score"]
    [(10, 1.5)]
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["EventWriter", "read_folder", "read_scalars"]


def _make_table() -> list[int]:
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(num: int, payload: bytes) -> bytes:
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


#: ``SessionLog.START``: TensorBoard drops the events of earlier files at this event's step and after
_SESSION_START = b"\x08\x01"


def _event(step: int, wall: float, *, file_version: str | None = None, summary: bytes | None = None, session_log: bytes | None = None) -> bytes:
    out = b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step)
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    if summary is not None:
        out += _field_bytes(5, summary)
    if session_log is not None:
        out += _field_bytes(7, session_log)
    return out


class EventWriter:
    """Writes scalar summaries to ``DIR/events.out.tfevents.<time>.<host>.<pid>.<n>``.

    Args:
        logdir: the folder (made if missing).
        purge_step: for a run resumed from a checkpoint of this step: the new file starts with a
            session-start event there, and TensorBoard drops what the earlier files of the folder
            recorded from this step on (written after the checkpoint by the run that stopped), so
            each step is shown once (as ``torch.utils.tensorboard.SummaryWriter(purge_step=...)``).
    """

    _count = 0

    def __init__(self, logdir: str, purge_step: int | None = None) -> None:
        os.makedirs(logdir, exist_ok=True)
        EventWriter._count += 1
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.{EventWriter._count}"
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "ab")
        self._write(_event(0 if purge_step is None else purge_step, time.time(), file_version="brain.Event:2"))
        if purge_step is not None:
            self._write(_event(purge_step, time.time(), session_log=_SESSION_START))
            self._f.flush()

    def _write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._f.write(header + struct.pack("<I", _masked(header)) + data + struct.pack("<I", _masked(data)))

    def scalar(self, tag: str, value: float, step: int) -> None:
        """Record ``value`` under ``tag`` at ``step``."""
        val = _field_bytes(1, tag.encode()) + b"\x15" + struct.pack("<f", float(value))
        self._write(_event(int(step), time.time(), summary=_field_bytes(1, val)))

    def scalars(self, values: dict[str, float], step: int) -> None:
        for k, v in values.items():
            self.scalar(k, v, step)
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def _read_varint(b: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        x = b[i]
        i += 1
        n |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return n, i


def _fields(b: bytes) -> Iterator[tuple[int, Any]]:
    """``(field number, value)`` pairs: the value is an int (varint) or bytes (the other wire types)."""
    i = 0
    while i < len(b):
        key, i = _read_varint(b, i)
        num, wt = key >> 3, key & 7
        v: int | bytes
        if wt == 0:
            v, i = _read_varint(b, i)
        elif wt == 1:
            v = b[i : i + 8]
            i += 8
        elif wt == 5:
            v = b[i : i + 4]
            i += 4
        elif wt == 2:
            n, i = _read_varint(b, i)
            v = b[i : i + n]
            i += n
        else:  # pragma: no cover
            raise ValueError(f"unsupported wire type {wt}")
        yield num, v


def read_scalars(path: str, out: dict[str, list[tuple[int, float]]] | None = None) -> dict[str, list[tuple[int, float]]]:
    """Read back the scalars of an event file, checking every CRC.

    ``out``: scalars read from the earlier files of the folder, which a session-start event in
    this one trims from its step on (as TensorBoard does); see :func:`read_folder`.
    """
    out = {} if out is None else out
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        header = data[i : i + 8]
        (n,) = struct.unpack("<Q", header)
        if struct.unpack("<I", data[i + 8 : i + 12])[0] != _masked(header):
            raise ValueError("corrupt record length")
        payload = data[i + 12 : i + 12 + n]
        if struct.unpack("<I", data[i + 12 + n : i + 16 + n])[0] != _masked(payload):
            raise ValueError("corrupt record payload")
        i += 16 + n
        step = 0
        for num, v in _fields(payload):
            if num == 2:
                step = v
            elif num == 7 and dict(_fields(v)).get(1) == 1:  # SessionLog START: a restart from this step
                for tag in out:
                    out[tag] = [(s, x) for s, x in out[tag] if s < step]
            elif num == 5:
                for _, val in _fields(v):
                    tag, sv = None, None
                    for fn, fv in _fields(val):
                        if fn == 1:
                            tag = fv.decode()
                        elif fn == 2:
                            sv = struct.unpack("<f", fv)[0]
                    if tag is not None and sv is not None:
                        out.setdefault(tag, []).append((step, sv))
    return out


def read_folder(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """The scalars of every event file of ``logdir``, in TensorBoard's order (by file name), with
    the steps a resumed run rewrote shown once (its values)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for name in sorted(n for n in os.listdir(logdir) if "tfevents" in n):
        read_scalars(os.path.join(logdir, name), out)
    return out
