"""Reading enn-trainer / rogue-net checkpoint sources: folders, ``.roguenet`` tar archives, msgpack
weights and the RON config and state, every read bounded and every field checked.

Nothing here builds a gymloop policy: :mod:`gymloop.enn.conversion` turns what is read into one. See
:mod:`gymloop.enn` for what is read and what is refused.
"""

from __future__ import annotations

import io
import logging
import math
import os
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from ..errors import CheckpointError, InputPathError
from ..files import open_input
from ..nn.config import RelposConfig
from ..ron import MAX_RON as _MAX_RON
from ..ron import RonStruct

__all__ = ["CONFIG_VERSIONS", "GLOBAL_ENTITY", "is_enn_checkpoint"]

logger = logging.getLogger(__name__)

CONFIG_VERSIONS = (0, 1, 2, 3, 4)
"""``TrainConfig`` format versions understood (enn-trainer up to 0.1.16 writes version 4)."""
GLOBAL_ENTITY = "__global__"
"""rogue-net's name of the global token (present with global categorical actions)."""
_FILES = ("config.ron", "state.ron", "state.agent.msgpack")
# Bounds on what a file may make the reader do (each refused with a CheckpointError naming it).
_MAX_MSGPACK = 4 * 1024 * 1024 * 1024  # bytes of state.agent.msgpack
_MAX_TENSORS = 1 << 16  # entries of the weights table
_MAX_NAME = 1 << 16  # bytes of a tensor name or of a string field of a tensor
_MAX_MEMBERS = 1024  # members of a .roguenet archive
_MAX_TAR_HEADER = 1024 * 1024  # bytes of one tar header record (pax and GNU long-name headers included)
_DTYPES = {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"}
_F32 = np.float32


# ---------------------------------------------------------------------- reading the files
def is_enn_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``gl.load`` treats ``path`` as an enn-trainer checkpoint: a folder, a ``.roguenet``
    file, or a tar archive (by content) that is not a ``.safetensors`` file.

    Only the name, the kind of path and a tar file's header are looked at: whether the checkpoint
    is complete and readable is for :func:`read_checkpoint` to say.

    Example:
        >>> is_enn_checkpoint("multisnake.roguenet"), is_enn_checkpoint("agent.safetensors")
        (True, False)
    """
    p = os.fspath(path)
    if os.path.isdir(p) or p.endswith(".roguenet"):
        return True
    if p.endswith(".safetensors") or not os.path.isfile(p):
        return False
    try:
        with open(p, "rb") as f:
            head = f.read(263)
    except OSError:
        return False
    return len(head) == 263 and head[257:262] == b"ustar"


_LIMITS = {"config.ron": _MAX_RON, "state.ron": _MAX_RON, "state.agent.msgpack": _MAX_MSGPACK}
_ARCHIVE = "a .roguenet archive is an uncompressed tar holding config.ron, state.ron and state.agent.msgpack"


def _read_sources(p: str) -> dict[str, tuple[str, bytes]]:
    """The three files of a checkpoint folder or archive: ``{file name: (where, bytes)}``."""
    return _read_folder(p) if os.path.isdir(p) else _read_archive(p)


def _read_folder(p: str) -> dict[str, tuple[str, bytes]]:
    missing = [f for f in _FILES if not os.path.isfile(os.path.join(p, f))]
    if missing:
        have = ", ".join(sorted(os.listdir(p))[:10]) or "nothing"
        raise CheckpointError(
            f"{p}: not a complete enn-trainer checkpoint folder: it lacks {', '.join(missing)} (it holds {have}); "
            "a checkpoint folder holds config.ron, state.ron and state.agent.msgpack (a folder of gymloop agents "
            "opens with gl.library)"
        )
    out: dict[str, tuple[str, bytes]] = {}
    for fn in _FILES:
        fp = os.path.join(p, fn)
        try:
            with open_input(fp, "checkpoint file") as f:  # (a FIFO or device is refused, never waited on)
                data = f.read(_LIMITS[fn] + 1)  # bounded, whatever the size the file system reports
        except OSError as e:
            raise CheckpointError(f"cannot read {fp}: {e}") from None
        if len(data) > _LIMITS[fn]:
            raise CheckpointError(f"{fp}: larger than {_LIMITS[fn]} bytes; not an enn-trainer checkpoint file")
        out[fn] = (fp, data)
    return out


class _HeaderReader:
    """The archive file as :mod:`tarfile` sees it: a read over ``_MAX_TAR_HEADER`` bytes (which only a
    pax or GNU long-name header's data asks for) is refused, so no header makes it read a file's worth."""

    def __init__(self, f: Any, where: str) -> None:
        self.f = f
        self.where = where

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0 or n > _MAX_TAR_HEADER:
            raise CheckpointError(
                f"{self.where}: a tar header record larger than {_MAX_TAR_HEADER} bytes; not a .roguenet archive ({_ARCHIVE})"
            )
        return self.f.read(n)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos, whence)

    def tell(self) -> int:
        return self.f.tell()

    # the rest of tarfile's file-object protocol, never used in mode "r:"
    def write(self, b: bytes) -> int:
        raise io.UnsupportedOperation("write")

    def close(self) -> None:
        """Nothing: the caller owns (and closes) the file."""


def _check_member(m: tarfile.TarInfo, p: str) -> None:
    """Refuse members no checkpoint archive holds: links, devices, sparse files, unsafe names."""
    parts = PurePosixPath(m.name).parts
    if m.name.startswith("/") or ".." in parts or "\\" in m.name:
        raise CheckpointError(f"{p}: archive member name {m.name!r} is absolute or leaves the archive; not a .roguenet archive")
    if m.isdir():
        return
    if not m.isfile() or m.issparse():
        kind = ("a symbolic link" if m.issym() else "a hard link" if m.islnk() else "a sparse file" if m.issparse()
                else "a device or fifo")
        raise CheckpointError(f"{p}: archive member {m.name!r} is {kind}; {_ARCHIVE} (regular files only)")


def _read_archive(p: str) -> dict[str, tuple[str, bytes]]:
    """Read the three members in memory: nothing is extracted, only their bytes are read."""
    try:
        f = open_input(p, "checkpoint")  # (a FIFO or device is refused, never waited on)
    except InputPathError:
        raise CheckpointError(f"{p}: not a regular file; {_ARCHIVE}") from None
    except FileNotFoundError:
        raise CheckpointError(f"cannot read checkpoint {p}: no such file or folder") from None
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
    with f:
        members: dict[str, tarfile.TarInfo] = {}
        try:
            with tarfile.open(fileobj=_HeaderReader(f, p), mode="r:") as tf:
                for i, m in enumerate(tf):
                    if i >= _MAX_MEMBERS:
                        raise CheckpointError(f"{p}: more than {_MAX_MEMBERS} archive members; not a .roguenet archive ({_ARCHIVE})")
                    _check_member(m, p)
                    base = PurePosixPath(m.name).name
                    if m.isdir() or base not in _FILES:
                        continue
                    if base in members:
                        raise CheckpointError(f"{p}: the archive holds {base} twice ({members[base].name!r} and {m.name!r})")
                    if m.size > _LIMITS[base]:
                        raise CheckpointError(f"{p}: archive member {m.name!r} is larger than {_LIMITS[base]} bytes")
                    members[base] = m
        except CheckpointError:
            raise
        except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as e:
            raise CheckpointError(f"{p}: not a readable .roguenet (tar) archive: corrupt or truncated ({e}); {_ARCHIVE}") from None
        missing = [fn for fn in _FILES if fn not in members]
        if missing:
            raise CheckpointError(f"{p}: the archive lacks {', '.join(missing)}; {_ARCHIVE}")
        out: dict[str, tuple[str, bytes]] = {}
        for fn in _FILES:
            m = members[fn]
            try:
                f.seek(m.offset_data)
                data = f.read(m.size)
            except OSError as e:
                raise CheckpointError(f"cannot read {p}[{fn}]: {e}") from None
            if len(data) != m.size:
                raise CheckpointError(f"{p}: archive member {fn} is truncated ({len(data)} of {m.size} bytes)")
            out[fn] = (f"{p}[{fn}]", data)
    return out


def _msgpack() -> Any:
    try:
        import msgpack
    except ImportError:
        raise CheckpointError(
            "reading enn-trainer checkpoints needs the msgpack package: pip install 'gymloop[enn]'"
        ) from None
    return msgpack


class _Refused(ValueError):
    """What the msgpack hooks raise to stop the unpacker (turned into a CheckpointError)."""


def _read_weights(data: bytes, where: str) -> dict[str, np.ndarray]:
    """The ``state_dict`` of a hyperstate msgpack blob as numpy arrays (never unpickles).

    The document is read entry by entry from its top-level map, each entry's key a string and its
    value a tensor map holding one shape list: any other nesting, an extension type, a non-string
    map key, a duplicate key or an over-long string stops the unpacker at once, so what it builds
    stays within a small multiple of the file's size.
    """
    msgpack = _msgpack()
    budget = [0]  # maps and lists the entry being unpacked may still hold

    def container() -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Refused("nested maps or lists where a weight name or a tensor's fields belong")

    def pairs(items: list) -> dict:
        container()
        d = dict(items)
        if len(d) != len(items):
            raise _Refused("a map with duplicate keys")
        return d

    def array(items: list) -> list:
        container()
        return items

    def ext(code: int, payload: bytes) -> Any:
        raise _Refused(f"msgpack extension type {code}; extension types are not read")

    if not data:
        raise CheckpointError(f"{where}: empty file; not a valid msgpack document: truncated or corrupt")
    if not (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):
        raise CheckpointError(f"{where}: the msgpack document is not a map, not a weights table; not a rogue-net agent")
    u = msgpack.Unpacker(
        io.BytesIO(data), raw=False, strict_map_key=True, use_list=True, object_pairs_hook=pairs, list_hook=array,
        ext_hook=ext, max_buffer_size=len(data), max_str_len=_MAX_NAME, max_bin_len=len(data), max_array_len=8,
        max_map_len=8, max_ext_len=0,
    )
    out: dict[str, np.ndarray] = {}
    try:
        n = u.read_map_header()
        if n > _MAX_TENSORS:
            raise CheckpointError(f"{where}: a weights table of {n} entries (at most {_MAX_TENSORS} are read); not a rogue-net agent")
        for _ in range(n):
            budget[0] = 0
            name = u.unpack()
            if not isinstance(name, str):
                raise CheckpointError(f"{where}: weight name {_show(name)} is not a string; not a rogue-net agent")
            if name in out:
                raise CheckpointError(f"{where}: tensor {name!r} appears twice; corrupt")
            budget[0] = 2  # the tensor's map and its shape list
            out[name] = _tensor(u.unpack(), f"{where}: tensor {name!r}")
        if u.tell() != len(data):
            raise CheckpointError(f"{where}: {len(data) - u.tell()} bytes after the weights table; corrupt")
    except CheckpointError:
        raise
    except msgpack.OutOfData:
        raise CheckpointError(f"{where}: not a valid msgpack document: truncated or corrupt (it ends inside a value)") from None
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as e:
        raise CheckpointError(f"{where}: not a valid msgpack document: truncated or corrupt ({type(e).__name__}: {e})") from None
    return out


def _tensor(t: Any, what: str) -> np.ndarray:
    if not isinstance(t, dict):
        raise CheckpointError(f"{what} is a {type(t).__name__}, not an encoded tensor; not a rogue-net agent")
    d = {k.decode("utf-8", "replace") if isinstance(k, bytes) else k: v for k, v in t.items()}
    if len(d) != len(t) or d.get("__tensor__") not in ("torch", "numpy") or set(d) != {"__tensor__", "dtype", "shape", "data"}:
        raise CheckpointError(f"{what} is not a hyperstate-encoded tensor (fields {sorted(map(str, d))})")
    dt, shape, buf = d["dtype"], d["shape"], d["data"]
    if isinstance(dt, bytes):
        dt = dt.decode("ascii", "replace")
    if not isinstance(dt, str) or dt not in _DTYPES:
        raise CheckpointError(f"{what} has dtype {_show(dt)}; only little-endian numeric dtypes are read")
    if not isinstance(shape, list) or len(shape) > 8 or not all(type(s) is int and 0 <= s < 2**40 for s in shape):
        raise CheckpointError(f"{what} has a malformed shape {_show(shape)}")
    if not isinstance(buf, bytes):
        raise CheckpointError(f"{what} has no byte data")
    dtype = np.dtype(dt)
    n = math.prod(shape)
    if n * dtype.itemsize != len(buf):
        raise CheckpointError(f"{what}: shape {tuple(shape)} needs {n * dtype.itemsize} bytes of {dt}, the file has {len(buf)}; corrupt")
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


# ---------------------------------------------------------------------- config and spaces
def _show(v: Any, n: int = 80) -> str:
    """``repr(v)`` cut to ``n`` characters (values from a file may be long)."""
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."


def _struct(v: Any, where: str, what: str, name: str | None = None) -> RonStruct:
    if not isinstance(v, RonStruct) or (name is not None and v.name not in (None, name)):
        got = f"a {v.name} struct" if isinstance(v, RonStruct) else _show(v)
        raise CheckpointError(f"{where}: {what} must be {'a ' + name if name else 'a struct'}, got {got}")
    return v


def _int(v: Any, where: str, what: str, lo: int = 1) -> int:
    if type(v) is not int or v < lo:
        raise CheckpointError(f"{where}: {what} must be an integer >= {lo}, got {_show(v)}")
    return v


def _names(v: Any, where: str, what: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CheckpointError(f"{where}: {what} must be a list of strings, got {_show(v)}")
    if len(set(v)) != len(v):
        dup = sorted(k for k, c in Counter(v).items() if c > 1)
        raise CheckpointError(f"{where}: {what} has duplicate names: {_show(dup)}")
    return list(v)


def _known_fields(v: RonStruct, known: set[str], where: str, what: str, newer: str = "entity-gym") -> None:
    """Refuse fields this importer does not know (they could change what the network computes)."""
    unknown = sorted(set(v) - known)
    if unknown:
        raise CheckpointError(
            f"{where}: {what} has fields {_show(unknown)} that this importer does not know (it reads "
            f"{', '.join(sorted(known)) or 'none'}); written by a newer {newer}?"
        )


_NET_FIELDS = {"embd_pdrop", "resid_pdrop", "attn_pdrop", "n_layer", "n_head", "d_model", "pooling", "relpos_encoding", "d_qk", "translation"}
_RELPOS_FIELDS = {
    "extent", "position_features", "scale", "per_entity_values", "exclude_entities", "value_relpos_projection",
    "key_relpos_projection", "per_entity_projections", "radial", "distance", "rotation_vec_features",
    "rotation_angle_feature", "interpolate", "value_gate", "enable_negative_distance_weight_bug",
}


@dataclass
class _Net:
    d_model: int
    n_layer: int
    n_head: int
    d_qk: int
    relpos: RelposConfig | None


def _read_config(cfg: Any, where: str) -> tuple[_Net, int, dict[str, Any], bool]:
    """The network settings, format version, env description of a ``TrainConfig`` and whether it
    trained a separate value network."""
    if not isinstance(cfg, RonStruct) or cfg.name not in (None, "TrainConfig"):
        what = f"a {cfg.name} struct" if isinstance(cfg, RonStruct) else type(cfg).__name__
        raise CheckpointError(f"{where}: holds {what}, not an enn-trainer TrainConfig; not an enn-trainer checkpoint")
    if "version" not in cfg:
        raise CheckpointError(f"{where}: the TrainConfig has no format version; not written by enn-trainer")
    version = cfg["version"]
    if type(version) is not int or version not in CONFIG_VERSIONS:
        raise CheckpointError(
            f"{where}: unknown TrainConfig format version {_show(version)}; this gymloop reads versions "
            f"{CONFIG_VERSIONS[0]} to {CONFIG_VERSIONS[-1]} (enn-trainer up to 0.1.16)"
        )
    if "net" not in cfg:
        raise CheckpointError(f"{where}: the TrainConfig has no 'net' (the RogueNetConfig)")
    net = _struct(cfg["net"], where, "net", "RogueNetConfig")
    _known_fields(net, _NET_FIELDS, where, "net", "rogue-net")
    old = version <= 1  # enn-trainer's upgrade rules: n_layer 1 -> 2, d_model 64 -> 32 at version 2
    d_model = _int(net.get("d_model", 64 if old else 32), where, "net.d_model")
    n_layer = _int(net.get("n_layer", 1 if old else 2), where, "net.n_layer", 0)
    n_head = _int(net.get("n_head", 2), where, "net.n_head")
    d_qk = _int(net.get("d_qk", 16), where, "net.d_qk")
    if d_model % n_head:
        raise CheckpointError(f"{where}: net.n_head={n_head} does not divide net.d_model={d_model}")
    if net.get("pooling") is not None:
        raise CheckpointError(f"{where}: net.pooling={_show(net['pooling'])} (pooling instead of attention) is not supported")
    if net.get("translation") is not None:
        raise CheckpointError(f"{where}: net.translation (positions translated to one entity's frame) is not supported")
    rp = net.get("relpos_encoding")
    relpos = None if rp is None else _read_relpos(_struct(rp, where, "net.relpos_encoding", "RelposEncodingConfig"), version, where)
    env = cfg.get("env")
    env_d: dict[str, Any] = {}
    if isinstance(env, RonStruct):
        env_d = {k: env[k] for k in ("id", "kwargs") if isinstance(env.get(k), str)}
    separate_vf = cfg.get("vf_net") is not None
    if separate_vf:
        # enn-trainer then trains the value network (state.value_function.msgpack) and leaves the policy
        # network's value head at its zero initialisation. Acting is unaffected, so this is no error.
        logger.warning(
            "%s: trained with a separate value network (vf_net), which is not imported: the agent acts as trained, "
            "but its value output is the policy network's untrained value head (info['enn']['separate_value_network'])",
            where,
        )
    return _Net(d_model, n_layer, n_head, d_qk, relpos), version, env_d, separate_vf


def _read_relpos(rp: RonStruct, version: int, where: str) -> RelposConfig:
    _known_fields(rp, _RELPOS_FIELDS, where, "net.relpos_encoding", "rogue-net")
    for k in ("extent", "position_features"):
        if k not in rp:
            raise CheckpointError(f"{where}: net.relpos_encoding lacks {k!r}")
    extent = rp["extent"]
    if not isinstance(extent, list) or not extent or not all(type(e) is int and e >= 1 for e in extent):
        raise CheckpointError(f"{where}: net.relpos_encoding.extent must be a list of integers >= 1, got {_show(extent)}")
    npos = 1
    for e in extent:  # stops early: the product of a long list of big extents costs quadratic time
        npos *= 2 * e + 1
        if npos > 2**24:
            raise CheckpointError(
                f"{where}: net.relpos_encoding.extent {_show(extent)} implies more than 2**24 relative positions; corrupt?"
            )
    pf = _names(rp["position_features"], where, "net.relpos_encoding.position_features")
    supported: dict[str, Any] = {
        "scale": 1.0, "per_entity_values": False, "exclude_entities": [], "value_relpos_projection": False,
        "key_relpos_projection": False, "radial": False, "distance": False, "rotation_vec_features": None,
        "rotation_angle_feature": None, "interpolate": False,
    }
    # a field missing from the file takes its default of that config version (True at version 0)
    value = {k: rp.get(k, True if k == "per_entity_values" and version == 0 else ok) for k, ok in supported.items()}
    unsupported = [k for k, ok in supported.items() if value[k] != ok or (type(value[k]) is bool) != (type(ok) is bool)]
    if unsupported:
        shown = ", ".join(f"{k}={_show(value[k])}" for k in unsupported)
        raise CheckpointError(
            f"{where}: relative-position option(s) {shown} not supported; only grid relative positions (scale 1, shared "
            "values, no projections, rotations or interpolation) import"
        )
    gate = rp.get("value_gate", "relu")
    if gate not in (None, "relu", "gelu", "sigmoid", "linear"):
        raise CheckpointError(f"{where}: net.relpos_encoding.value_gate {_show(gate)} is not one of relu, gelu, sigmoid, linear, None")
    if len(extent) != len(pf):
        raise CheckpointError(f"{where}: net.relpos_encoding has {len(extent)} extents for {len(pf)} position features")
    return RelposConfig(position_features=pf, extent=list(extent), value_gate=gate)


_ACTION_KINDS = {"CategoricalActionSpace": "categorical", "GlobalCategoricalActionSpace": "global", "SelectEntityActionSpace": "select"}


def _read_state(st: Any, where: str) -> tuple[dict[str, list[str]], list[str], dict[str, tuple[str, list[str]]], int | None]:
    """Entity types with features, global features, ``{action: (kind, labels)}`` and the step."""
    if not isinstance(st, RonStruct) or st.name not in (None, "State"):
        what = f"a {st.name} struct" if isinstance(st, RonStruct) else type(st).__name__
        raise CheckpointError(f"{where}: holds {what}, not an enn-trainer State; not an enn-trainer checkpoint")
    for k in ("agent", "obs_space", "action_space"):
        if k not in st:
            raise CheckpointError(f"{where}: the State has no {k!r}; not an enn-trainer agent checkpoint")
    if st["agent"] != "<blob:msgpack>":
        raise CheckpointError(f"{where}: the State's agent is {_show(st['agent'])}, not a '<blob:msgpack>' reference")
    obs = _struct(st["obs_space"], where, "obs_space", "ObsSpace")
    _known_fields(obs, {"global_features", "entities"}, where, "obs_space")
    glob = _names(obs.get("global_features", []), where, "obs_space.global_features")
    ents_raw = obs.get("entities", {})
    if not isinstance(ents_raw, dict) or isinstance(ents_raw, RonStruct):
        raise CheckpointError(f"{where}: obs_space.entities must be a map of entity types, got {_show(ents_raw)}")
    ents: dict[str, list[str]] = {}
    for name, e in ents_raw.items():
        if not isinstance(name, str) or not name:
            raise CheckpointError(f"{where}: entity type name {name!r} must be a non-empty string")
        if name == GLOBAL_ENTITY:
            raise CheckpointError(f"{where}: entity type name {GLOBAL_ENTITY!r} is reserved for rogue-net's global token")
        e = _struct(e, where, f"obs_space.entities[{name!r}]", "Entity")
        _known_fields(e, {"features"}, where, f"entity type {name!r}")
        ents[name] = _names(e.get("features", []), where, f"features of entity type {name!r}")
    acts_raw = st["action_space"]
    if not isinstance(acts_raw, dict) or isinstance(acts_raw, RonStruct):
        raise CheckpointError(f"{where}: action_space must be a map of action types, got {_show(acts_raw)}")
    acts: dict[str, tuple[str, list[str]]] = {}
    for name, a in acts_raw.items():
        if not isinstance(name, str) or not name:
            raise CheckpointError(f"{where}: action name {name!r} must be a non-empty string")
        if not isinstance(a, RonStruct) or a.name not in _ACTION_KINDS:
            got = a.name if isinstance(a, RonStruct) else _show(a, 40)
            raise CheckpointError(
                f"{where}: action {name!r} has unknown action space {got}; supported: {', '.join(_ACTION_KINDS)}"
            )
        kind = _ACTION_KINDS[a.name]
        _known_fields(a, set() if kind == "select" else {"index_to_label"}, where, f"action {name!r}")
        labels: list[str] = []
        if kind != "select":
            labels = _names(a.get("index_to_label"), where, f"labels of action {name!r}")
            if not labels:
                raise CheckpointError(f"{where}: categorical action {name!r} has no labels")
        acts[name] = (kind, labels)
    if not ents and not any(k == "global" for k, _ in acts.values()):
        raise CheckpointError(f"{where}: the observation space has no entity types")
    step = st.get("step")
    return ents, glob, acts, step if type(step) is int else None

