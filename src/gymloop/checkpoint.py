"""Self-describing, single-file, safe checkpoints: safetensors weights with JSON metadata.

The file is a standard ``.safetensors`` file (8-byte little-endian header length, a JSON header,
raw little-endian tensor data), read and written here with numpy alone. Its ``__metadata__``
holds one entry, ``"gymloop"``: a JSON document with the format version, the library version, the
observation space (entity and feature names), the action space (names, kinds, labels), the network
configuration and the training step. Normalization statistics are tensors of the file. Loading
never unpickles and never executes anything from the file.

Example:
    >>> import numpy as np, tempfile, os
    >>> from gymloop.checkpoint import write_safetensors, read_safetensors
    >>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
    >>> write_safetensors(path, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, {"k": "v"})
    >>> tensors, meta = read_safetensors(path)
    >>> tensors["w"].shape, meta["k"]
    ((2, 3), 'v')
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ._version import __version__
from .errors import CheckpointError, InputPathError
from .files import open_input, write_atomic
from .nn.migrate import FORMAT_VERSION, READABLE_VERSIONS
from .nn.shapes import NetSpec, check_net_sizes, resolve
from .spaces import Spaces

__all__ = [
    "CHECKSUM_ALGO", "CHECKSUM_KEY", "FORMAT_VERSION", "AgentFile", "SafetensorsFile", "agent_document", "check_arch_and_dtypes",
    "check_net_sizes",
    "read_agent", "read_safetensors", "tensors_checksum", "write_agent", "write_safetensors",
]

_log = logging.getLogger(__name__)

#: the network architecture gymloop's own agents are written with
ARCH = "gymloop-entity-transformer"
#: the architectures an agent file may name: gymloop's own, and rogue-net's (enn-trainer checkpoints converted)
ARCHS = (ARCH, "rogue-net")
#: the last name part of a normalizer's statistics (``norms.Food.mean``), which may be float64
_NORM_STATS = ("count", "mean", "squares_sum")

#: the ``__metadata__`` entry that holds the checksum of everything else in the file
CHECKSUM_KEY = "gymloop_checksum"
#: the checksum algorithm (``hashlib`` name); a checksum reads ``"sha256:<hex digest>"``
CHECKSUM_ALGO = "sha256"
_CHECKSUM_TAG = b"gymloop-checksum-1\n"
# Bounds checked before a header is parsed, so a forged header costs little time and memory.
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit
_HEADER_FLOOR = 4 * 1024 * 1024  # any header up to 4 MiB; beyond that,
_HEADER_PER_DATA_BYTE = 8  # at most 8 header bytes per byte of tensor data
_OBJECTS_FLOOR = 4096  # JSON objects (one per tensor) in a header: 4096, plus
_DATA_BYTES_PER_OBJECT = 64  # one per 64 bytes of tensor data
_MAX_NDIM = 64
_DT: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"), "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_DT_NAME = {v: k for k, v in _DT.items()}
_Item = tuple[str, str, tuple[int, ...], memoryview]  # name, dtype name, shape, the data (bytes)


# ---------------------------------------------------------------------- checksums
def _digest(meta: Mapping[str, str], items: Iterable[_Item]) -> str:
    """The checksum of string metadata and tensors (``items`` in name order): ``"sha256:<hex>"``.

    It covers the metadata, every tensor's name, dtype and shape, and its bytes, so a changed byte
    anywhere that matters changes it; the byte layout of the file (offsets, header spacing) does not.
    """
    items = list(items)
    table = [[name, dtn, list(shape), raw.nbytes] for name, dtn, shape, raw in items]
    h = hashlib.new(CHECKSUM_ALGO, _CHECKSUM_TAG)
    h.update(json.dumps({"metadata": dict(meta), "tensors": table}, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    for *_, raw in items:
        h.update(raw)
    return f"{CHECKSUM_ALGO}:{h.hexdigest()}"


def _items(tensors: Mapping[str, Any]) -> list[_Item]:
    """``tensors`` as checksum/write items, in name order (C-contiguous, little-endian)."""
    out = []
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
            a = a.copy(order="C")
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in _DT_NAME:
            raise CheckpointError(f"tensor {name!r} has unsupported dtype {a.dtype}; use one of {sorted(_DT)} (numpy: float32, int64, bool, ...)")
        a = a.astype(dt, copy=False)
        out.append((str(name), _DT_NAME[dt], tuple(int(s) for s in a.shape), a.reshape(-1).view(np.uint8).data))
    return out


def tensors_checksum(meta: Mapping[str, str], tensors: Mapping[str, Any]) -> str:
    """The checksum of string metadata and named tensors, as files and agent libraries store it.

    Example:
        >>> import numpy as np
        >>> a = tensors_checksum({"k": "v"}, {"w": np.ones(3, np.float32)})
        >>> a.startswith("sha256:"), a == tensors_checksum({"k": "v"}, {"w": np.ones(3, np.float32)})
        (True, True)
        >>> a == tensors_checksum({"k": "v"}, {"w": np.array([1, 1, 2], np.float32)})
        False
    """
    return _digest(meta, _items(tensors))


# ---------------------------------------------------------------------- writing
def write_safetensors(
    path: str | os.PathLike, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None, checksum: bool = True,
    inputs: Iterable[str | os.PathLike] = (),
) -> None:
    """Write ``tensors`` (numpy arrays) and string ``metadata`` as a ``.safetensors`` file, durably.

    It is written through :func:`gymloop.files.write_atomic`: a ``path`` that is a folder, FIFO,
    device or socket, or one of ``inputs`` (the files the caller read to make this one), is refused
    before anything is written; the data go to a temporary file beside ``path`` that is ``fsync``-ed
    and renamed over it, so a crash or a kill at any moment leaves the old file or the new one, never
    half a file.

    With ``checksum`` (the default) the metadata gains :data:`CHECKSUM_KEY`, a SHA-256 of the
    metadata, the tensors' names, dtypes and shapes and their data, which every reader verifies
    (:meth:`SafetensorsFile.verify`); a :data:`CHECKSUM_KEY` entry of ``metadata`` (e.g. copied from
    a file read before) is replaced by the new checksum.

    Raises:
        CheckpointError: a tensor of a dtype safetensors cannot hold, or a tensor named ``__metadata__``.
        OutputPathError: the path is refused, or the file cannot be written (no such folder, no
            permission, disk full); an ``OSError`` too.
    """
    p = os.fspath(path)
    items = _items(tensors)
    if "__metadata__" in tensors:
        raise CheckpointError(f"{p}: a tensor cannot be named '__metadata__' (safetensors keeps the metadata under that name)")
    meta = {str(k): str(v) for k, v in (metadata or {}).items() if k != CHECKSUM_KEY}
    if checksum:
        meta[CHECKSUM_KEY] = _digest(meta, items)
    header: dict[str, Any] = {}
    if meta:
        header["__metadata__"] = meta
    off = 0
    for name, dtn, shape, raw in items:
        header[name] = {"dtype": dtn, "shape": list(shape), "data_offsets": [off, off + raw.nbytes]}
        off += raw.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    write_atomic(p, [struct.pack("<Q", len(hb)), hb, *(raw for *_, raw in items)], inputs)


# ---------------------------------------------------------------------- reading
def read_safetensors(path: str | os.PathLike, mmap: bool = True, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read a ``.safetensors`` file: ``(tensors, metadata)``.

    Tensors are read-only views of a memory map (``mmap=True``) or copies. With ``verify`` (the
    default) the file's checksum is checked first (files without one, written before gymloop wrote
    checksums or by other tools, are read unchecked). The checksum entry is not part of ``metadata``.

    Raises:
        CheckpointError: the file is missing, truncated, corrupt (its checksum does not match), or
            its header is malformed.
    """
    f = SafetensorsFile(path, mmap=mmap)
    if verify:
        f.verify()
    return {k: f.tensor(k) for k in f.keys()}, f.metadata


class _TooManyObjects(Exception):
    """Raised inside the JSON parser when a header holds more objects than its file can need."""


class SafetensorsFile:
    """A ``.safetensors`` file whose header is read and checked at once, and whose tensors are
    read on demand (read-only views of one memory map, or copies with ``mmap=False``).

    Opening a large file with many tensors costs one header parse; :meth:`tensor` touches only the
    bytes of the tensors asked for, and :meth:`verify` checks the checksum (reading every byte).

    The header is bounded before it is parsed (its length against the file size; the number of its
    entries against the bytes of tensor data), and each tensor's dtype and shape must match its byte
    range, the ranges must lie inside the file, not overlap, and cover the data exactly.

    Attributes:
        path: the file. ``metadata``: its string metadata (without the checksum).
        checksum: the stored checksum (``"sha256:<hex>"``), or ``None`` in a file written without one.

    Raises:
        CheckpointError: the file is missing, truncated, or its header is malformed or forged.
    """

    def __init__(self, path: str | os.PathLike, mmap: bool = True) -> None:
        p = os.fspath(path)
        self.path = p
        self._mmap = mmap
        try:
            with open_input(p, "checkpoint") as f:
                size = os.fstat(f.fileno()).st_size
                raw = f.read(8)
                if len(raw) < 8:
                    raise CheckpointError(f"{p}: truncated file ({size} bytes); not a safetensors checkpoint")
                (hl,) = struct.unpack("<Q", raw)
                if hl + 8 > size:
                    raise CheckpointError(f"{p}: header length {hl} does not fit the file ({size} bytes); not a safetensors file or truncated")
                data_len = size - 8 - hl
                limit = min(_MAX_HEADER, _HEADER_FLOOR + _HEADER_PER_DATA_BYTE * data_len)
                if hl > limit:
                    raise CheckpointError(
                        f"{p}: the header claims {hl} bytes, more than a file with {data_len} bytes of tensor data can need "
                        f"(at most {limit}); the file is corrupt or forged"
                    )
                hb = f.read(hl)
                if len(hb) != hl:
                    raise CheckpointError(f"{p}: truncated while reading its header; was it being written?")
        except InputPathError as e:
            raise CheckpointError(str(e)) from None
        except OSError as e:
            raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
        max_objects = _OBJECTS_FLOOR + data_len // _DATA_BYTES_PER_OBJECT
        count = 0

        def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            nonlocal count
            count += 1
            if count > max_objects:
                raise _TooManyObjects
            return dict(pairs)

        try:
            text = hb.decode("utf-8")
            del hb
            header = json.loads(text, object_pairs_hook=hook)
        except _TooManyObjects:
            raise CheckpointError(
                f"{p}: the header lists more than {max_objects} entries, more than {data_len} bytes of tensor data can hold; "
                "the file is corrupt or forged"
            ) from None
        except (ValueError, RecursionError) as e:  # (UnicodeDecodeError, JSONDecodeError, int digit limits)
            raise CheckpointError(f"{p}: the header is not valid JSON ({e}); not a safetensors file") from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{p}: the header is not a JSON object")
        meta = header.pop("__metadata__", {}) or {}
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise CheckpointError(f"{p}: __metadata__ must map strings to strings")
        self.checksum: str | None = meta.pop(CHECKSUM_KEY, None)
        self.metadata: dict[str, str] = meta
        self._offset = 8 + hl
        self._data_len = data_len
        self._data: np.ndarray | None = None
        entries: dict[str, tuple[np.dtype, tuple[int, ...], int, int, str]] = {}
        spans = []
        for name, info in header.items():
            dtn = info.get("dtype") if isinstance(info, dict) else None
            shape = info.get("shape") if isinstance(info, dict) else None
            offs = info.get("data_offsets") if isinstance(info, dict) else None
            if (
                not isinstance(dtn, str) or dtn not in _DT
                or not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(type(s) is int and s >= 0 for s in shape)
                or not isinstance(offs, list) or len(offs) != 2 or not all(type(x) is int for x in offs)
            ):
                raise CheckpointError(
                    f"{p}: tensor {name!r} has a malformed header entry {_short(info)} (expected dtype one of {sorted(_DT)}, "
                    f"shape a list of at most {_MAX_NDIM} sizes >= 0, data_offsets [begin, end])"
                )
            a, b = offs
            if not 0 <= a <= b <= data_len:
                raise CheckpointError(f"{p}: tensor {name!r} points outside the file (offsets {a}..{b}, data {data_len} bytes); truncated?")
            dt = _DT[dtn]
            n = dt.itemsize if 0 not in shape else 0
            for s in shape:  # Python ints, stopping as soon as the product passes the range: no overflow, no huge numbers
                n *= s
                if n > b - a:
                    break
            if n != b - a:
                raise CheckpointError(f"{p}: tensor {name!r} of shape {_short(shape)} and dtype {dtn} needs {'more than ' if n > b - a else ''}"
                                      f"{n} bytes, the file gives {b - a}; the file is corrupt")
            spans.append((a, b, name))
            entries[name] = (dt, tuple(shape), a, b, dtn)
        spans.sort()
        pos, prev = 0, None
        for a, b, name in spans:
            if a < pos:
                raise CheckpointError(f"{p}: tensors {prev!r} and {name!r} overlap; the file is corrupt")
            if a > pos:
                raise CheckpointError(f"{p}: data bytes {pos}..{a} belong to no tensor (safetensors data is covered exactly); the file is corrupt")
            pos, prev = b, name
        if pos != data_len:
            raise CheckpointError(
                f"{p}: the last {data_len - pos} bytes of the file belong to no tensor (safetensors data is covered exactly); "
                "the file is corrupt or something was appended"
            )
        self._entries = entries

    def keys(self) -> list[str]:
        """The tensor names, in header order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, by name (from the header: reads no data)."""
        return {k: e[1] for k, e in self._entries.items()}

    def dtypes(self) -> dict[str, np.dtype]:
        """Every tensor's dtype, by name (from the header: reads no data)."""
        return {k: np.dtype(e[0]) for k, e in self._entries.items()}

    def _bytes(self) -> np.ndarray:
        if self._data is None:
            if self._mmap and self._data_len > 0:
                self._data = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self._offset, shape=(self._data_len,))
            else:
                try:
                    with open_input(self.path, "checkpoint") as f:
                        f.seek(self._offset)
                        data = np.frombuffer(f.read(), dtype=np.uint8)
                except OSError as e:
                    raise CheckpointError(f"cannot read checkpoint {self.path}: {e}") from None
                if data.size != self._data_len:
                    raise CheckpointError(f"{self.path}: the file changed size while being read; was it being written?")
                self._data = data
        return self._data

    def tensor(self, name: str) -> np.ndarray:
        """One tensor (read-only view of the memory map, or a copy without mmap)."""
        dt, shape, a, b, _ = self._entries[name]
        return self._bytes()[a:b].view(dt).reshape(shape)

    def verify(self) -> bool:
        """Check the stored checksum against the file's contents (reads every byte of data).

        Returns:
            ``True`` when the checksum matched; ``False`` for a file without one (written before
            gymloop wrote checksums, or by another tool), which is logged at debug level.

        Raises:
            CheckpointError: the checksum does not match (the file is corrupt), or is of an unknown kind.
        """
        if self.checksum is None:
            _log.debug("%s: no checksum (written before gymloop wrote checksums, or by another tool); not verified", self.path)
            return False
        algo = self.checksum.partition(":")[0]
        if algo != CHECKSUM_ALGO:
            raise CheckpointError(
                f"{self.path}: its checksum is of kind {algo!r}; this gymloop verifies {CHECKSUM_ALGO!r} checksums (a newer gymloop "
                "wrote it? upgrade gymloop) or the file is corrupt"
            )
        data = self._bytes().data  # (slices of a memoryview are cheap, those of a memmap are not)
        got = _digest(self.metadata, ((k, e[4], e[1], data[e[2]:e[3]]) for k, e in sorted(self._entries.items())))
        if got != self.checksum:
            raise CheckpointError(
                f"{self.path}: the file is corrupt: its contents do not match the checksum written with it (a byte changed on "
                "disk or in transfer, or the file was edited); restore it from a copy, or write it again"
            )
        return True


def _short(x: Any, n: int = 120) -> str:
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def agent_document(spaces: Spaces, net: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The ``gymloop`` metadata document of an agent: the one place it is written.

    Args:
        spaces: the agent's observation and action spaces.
        net: the network configuration (``NetConfig.to_dict()``).
        extra: further entries (``game``, ``step``, ``arch`` for imported networks, ...).

    Example:
        >>> from gymloop.spaces import Spaces
        >>> sp = Spaces.from_json({"entities": {"Head": ["x"]}}, {"Move": {"kind": "categorical", "labels": ["L", "R"]}})
        >>> doc = agent_document(sp, {"d_model": 32}, game="snake")
        >>> doc["action_space"]["Move"]["kind"], doc["game"], doc["arch"]
        ('categorical', 'snake', 'gymloop-entity-transformer')
    """
    obs, acts = spaces.to_json()
    doc: dict[str, Any] = {"obs_space": obs, "action_space": acts, "net": dict(net), "library_version": __version__, "arch": ARCH}
    doc.update(extra)
    return doc


class AgentFile:
    """A loaded agent checkpoint: weights and the ``gymloop`` metadata (see :func:`read_agent`).

    Attributes:
        path: the file.
        tensors: the weights by name (memory-mapped).
        net: the metadata resolved (:class:`~gymloop.nn.shapes.NetSpec`): spaces, network
            configuration, tensor shapes.
        info: the metadata document in the current format version (``net.info``).
    """

    def __init__(self, path: str, tensors: dict[str, np.ndarray], net: NetSpec) -> None:
        self.path = path
        self.tensors = tensors
        self.net = net
        self.info = net.info

    @property
    def spaces(self) -> Spaces:
        """The agent's spaces, validated when the file was read."""
        return self.net.spaces

    @property
    def obs_space(self) -> dict[str, Any]:
        return self.info["obs_space"]

    @property
    def action_space(self) -> dict[str, Any]:
        return self.info["action_space"]


def check_agent_document(info: Any, where: str, who: str = "the gymloop metadata") -> None:
    """Raise :class:`CheckpointError` unless ``info`` is an agent document of this format version
    with its required entries (the rest is validated by :func:`~gymloop.nn.shapes.resolve`)."""
    if not isinstance(info, dict):
        raise CheckpointError(f"{where}: {who} must be a JSON object")
    v = info.get("format_version")
    if v not in READABLE_VERSIONS or type(v) is not int:
        raise CheckpointError(f"{where}: unknown checkpoint format version {v!r}; this gymloop reads version {FORMAT_VERSION}")
    for key in ("obs_space", "action_space", "net"):
        if key not in info:
            raise CheckpointError(f"{where}: {who} lacks {key!r}")


def write_agent(path: str | os.PathLike, tensors: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> None:
    """Write an agent checkpoint (``info`` becomes the ``gymloop`` metadata document).

    Written durably and with a checksum (see :func:`write_safetensors`); the document records
    ``"checksum": "sha256"`` so that a reader knows the file must carry one.
    """
    doc = dict(info)
    doc["format_version"] = FORMAT_VERSION
    doc["checksum"] = CHECKSUM_ALGO
    write_safetensors(path, tensors, {"gymloop": json.dumps(doc), "format": "gymloop-agent"})


def parse_agent_document(text: str, where: str, who: str = "the gymloop metadata") -> dict[str, Any]:
    """The agent document of a checkpoint's metadata string, parsed and checked (:func:`check_agent_document`)."""
    try:
        info = json.loads(text)
    except (ValueError, RecursionError) as e:  # (JSONDecodeError, int digit limits, deep nesting)
        raise CheckpointError(f"{where}: {who} is not valid JSON: {_short(str(e))}") from None
    check_agent_document(info, where, who)
    return info


def check_arch_and_dtypes(where: str, info: Mapping[str, Any], dtypes: Mapping[str, np.dtype]) -> None:
    """Refuse an agent of an architecture not in :data:`ARCHS`, or whose tensors are not float32
    (float32 or float64 for the normalization statistics: ``*.count``, ``*.mean``, ``*.squares_sum``).

    Raises:
        CheckpointError: naming ``where``, the architecture or the first tensor of a wrong dtype.
    """
    arch = info.get("arch", ARCH)
    if arch not in ARCHS:
        raise CheckpointError(
            f"{where}: the network architecture {arch!r} is not one this gymloop runs ({list(ARCHS)}); load it with the "
            "tool that wrote it"
        )
    for k, dt in dtypes.items():
        stats = k.rpartition(".")[2] in _NORM_STATS
        if dt != np.float32 and not (stats and dt == np.float64):
            want = "float32 or float64" if stats else "float32"
            raise CheckpointError(f"{where}: tensor {k!r} is {dt}, expected {want}; the file is corrupt or was not written by gymloop")


def read_agent(path: str | os.PathLike) -> AgentFile:
    """Read and validate an agent checkpoint: its container, checksum, metadata, network sizes, and
    that its tensors are exactly those its metadata implies, with those shapes (the values are
    checked when the network is built).

    Raises:
        CheckpointError: the file is missing, truncated, corrupt (checksum), not a gymloop agent, of
            an unknown format version or architecture, or its metadata is malformed, forged or
            disagrees with its tensors (their names, shapes or dtypes).
    """
    f = SafetensorsFile(path)
    p = f.path
    meta = f.metadata
    if meta.get("format") == "gymloop-library":
        raise CheckpointError(
            f"{p}: an agent library, not a single agent; open it with gl.library({p!r}) and load an agent by name"
        )
    if "gymloop" not in meta:
        raise CheckpointError(f"{p}: a safetensors file, but not a gymloop agent (no 'gymloop' metadata)")
    verified = f.verify()
    info = parse_agent_document(meta["gymloop"], p)
    if not verified and info.get("checksum") is not None:
        raise CheckpointError(
            f"{p}: the file is corrupt: its metadata says it carries a {str(info['checksum'])[:40]} checksum, but it has none; restore it "
            "from a copy, or write it again"
        )
    check_arch_and_dtypes(p, info, f.dtypes())
    net = resolve(info, p, f.shapes())  # the current document, sizes, spaces, configuration, tensor shapes
    return AgentFile(p, {k: f.tensor(k) for k in f.keys()}, net)
