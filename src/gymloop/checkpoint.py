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

import json
import math
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._version import __version__
from .errors import CheckpointError
from .spaces import Spaces

__all__ = [
    "FORMAT_VERSION", "AgentFile", "SafetensorsFile", "agent_document", "read_agent", "read_safetensors", "write_agent",
    "write_safetensors",
]

#: the network architecture gymloop's own agents are written with
ARCH = "gymloop-entity-transformer"

FORMAT_VERSION = 1
_MAX_HEADER = 100 * 1024 * 1024
_DT: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"), "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_DT_NAME = {v: k for k, v in _DT.items()}


def write_safetensors(path: str | os.PathLike, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (numpy arrays) and string ``metadata`` as a ``.safetensors`` file.

    The file is written to a temporary name and renamed, so a crash never leaves half a file.
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
            a = a.copy(order="C")
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in _DT_NAME:
            raise CheckpointError(f"tensor {name!r} has unsupported dtype {a.dtype}")
        a = a.astype(dt, copy=False)
        b = a.tobytes()
        header[name] = {"dtype": _DT_NAME[dt], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path: str | os.PathLike, mmap: bool = True) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read a ``.safetensors`` file: ``(tensors, metadata)``.

    Tensors are read-only views of a memory map (``mmap=True``) or copies.

    Raises:
        CheckpointError: the file is missing, truncated, or its header is malformed.
    """
    f = SafetensorsFile(path, mmap=mmap)
    return {k: f.tensor(k) for k in f.keys()}, f.metadata


class SafetensorsFile:
    """A ``.safetensors`` file whose header is read and checked at once, and whose tensors are
    read on demand (read-only views of one memory map, or copies with ``mmap=False``).

    Opening a large file with many tensors costs one header parse; :meth:`tensor` touches only the
    bytes of the tensors asked for.

    Raises:
        CheckpointError: the file is missing, truncated, or its header is malformed.
    """

    def __init__(self, path: str | os.PathLike, mmap: bool = True) -> None:
        p = os.fspath(path)
        self.path = p
        self._mmap = mmap
        try:
            size = os.path.getsize(p)
            with open(p, "rb") as f:
                raw = f.read(8)
                if len(raw) < 8:
                    raise CheckpointError(f"{p}: truncated file ({size} bytes); not a safetensors checkpoint")
                (hl,) = struct.unpack("<Q", raw)
                if hl > _MAX_HEADER or hl + 8 > size:
                    raise CheckpointError(f"{p}: header length {hl} does not fit the file ({size} bytes); not a safetensors file or truncated")
                hb = f.read(hl)
        except OSError as e:
            raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
        try:
            header = json.loads(hb.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{p}: the header is not valid JSON ({e}); not a safetensors file") from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{p}: the header is not a JSON object")
        meta = header.pop("__metadata__", {}) or {}
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise CheckpointError(f"{p}: __metadata__ must map strings to strings")
        self.metadata: dict[str, str] = meta
        self._offset = 8 + hl
        self._data_len = data_len = size - 8 - hl
        self._data: np.ndarray | None = None
        entries: dict[str, tuple[np.dtype, tuple[int, ...], int, int]] = {}
        spans = []
        for name, info in header.items():
            try:
                dt = _DT[info["dtype"]]
                shape = tuple(int(s) for s in info["shape"])
                a, b = (int(x) for x in info["data_offsets"])
            except (KeyError, TypeError, ValueError, OverflowError):
                raise CheckpointError(f"{p}: tensor {name!r} has a malformed header entry {info!r}") from None
            if any(s < 0 for s in shape) or not 0 <= a <= b <= data_len:
                raise CheckpointError(f"{p}: tensor {name!r} points outside the file (offsets {a}..{b}, data {data_len} bytes); truncated?")
            n = math.prod(shape) * dt.itemsize  # Python ints: an absurd shape cannot wrap around
            if n != b - a:
                raise CheckpointError(f"{p}: tensor {name!r} of shape {shape} and dtype {info['dtype']} needs {n} bytes, the file gives {b - a}")
            spans.append((a, b, name))
            entries[name] = (dt, shape, a, b)
        spans.sort()
        for (_a1, b1, n1), (a2, _b2, n2) in zip(spans, spans[1:]):
            if a2 < b1:
                raise CheckpointError(f"{p}: tensors {n1!r} and {n2!r} overlap; the file is corrupt")
        self._entries = entries

    def keys(self) -> list[str]:
        """The tensor names, in header order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def tensor(self, name: str) -> np.ndarray:
        """One tensor (read-only view of the memory map, or a copy without mmap)."""
        dt, shape, a, b = self._entries[name]
        if self._data is None:
            if self._mmap and self._data_len > 0:
                self._data = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self._offset, shape=(self._data_len,))
            else:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    self._data = np.frombuffer(f.read(), dtype=np.uint8)
        return self._data[a:b].view(dt).reshape(shape)


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
    """A loaded agent checkpoint: weights and the parsed ``gymloop`` metadata."""

    def __init__(self, path: str, tensors: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        self.path = path
        self.tensors = tensors
        self.info = info
        self._spaces: Spaces | None = None

    @property
    def spaces(self) -> Spaces:
        """The agent's spaces, validated (a :class:`CheckpointError` names the file and the problem)."""
        if self._spaces is None:
            self._spaces = spaces_of(self.info, self.path)
        return self._spaces

    @property
    def obs_space(self) -> dict[str, Any]:
        return self.info["obs_space"]

    @property
    def action_space(self) -> dict[str, Any]:
        return self.info["action_space"]


def check_agent_document(info: Any, where: str, who: str = "the gymloop metadata") -> None:
    """Raise :class:`CheckpointError` unless ``info`` is an agent document of this format version
    with its required entries (its spaces are validated by :func:`spaces_of`)."""
    if not isinstance(info, dict):
        raise CheckpointError(f"{where}: {who} must be a JSON object")
    v = info.get("format_version")
    if v != FORMAT_VERSION:
        raise CheckpointError(f"{where}: unknown checkpoint format version {v!r}; this gymloop reads version {FORMAT_VERSION}")
    for key in ("obs_space", "action_space", "net"):
        if key not in info:
            raise CheckpointError(f"{where}: {who} lacks {key!r}")


def spaces_of(info: Mapping[str, Any], where: str) -> Spaces:
    """The validated :class:`Spaces` of an agent document (``where`` names the file in errors)."""
    for key in ("obs_space", "action_space"):
        if key not in info:
            raise CheckpointError(f"{where}: the gymloop metadata lacks {key!r}")
    return Spaces.from_json(info["obs_space"], info["action_space"], CheckpointError, f"{where}: ")


def write_agent(path: str | os.PathLike, tensors: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> None:
    """Write an agent checkpoint (``info`` becomes the ``gymloop`` metadata document)."""
    doc = dict(info)
    doc["format_version"] = FORMAT_VERSION
    write_safetensors(path, tensors, {"gymloop": json.dumps(doc), "format": "gymloop-agent"})


def read_agent(path: str | os.PathLike) -> AgentFile:
    """Read and validate an agent checkpoint's container and metadata (not yet the network)."""
    tensors, meta = read_safetensors(path)
    p = os.fspath(path)
    if meta.get("format") == "gymloop-library":
        raise CheckpointError(
            f"{p}: an agent library, not a single agent; open it with gl.library({p!r}) and load an agent by name"
        )
    if "gymloop" not in meta:
        raise CheckpointError(f"{p}: a safetensors file, but not a gymloop agent (no 'gymloop' metadata)")
    try:
        info = json.loads(meta["gymloop"])
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{p}: the gymloop metadata is not valid JSON: {e}") from None
    check_agent_document(info, p)
    af = AgentFile(p, tensors, info)
    af.spaces  # validated once, here  # noqa: B018
    return af
