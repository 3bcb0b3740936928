"""enn-trainer / rogue-net checkpoints as gymloop agents (numpy inference, no torch, no enn-trainer).

An enn-trainer checkpoint is a folder holding ``config.ron`` (the ``TrainConfig``), ``state.ron``
(training step, observation and action spaces) and ``state.agent.msgpack`` (the ``RogueNet``
weights), or a ``.roguenet`` tar archive of those three files. ``gl.load`` hands both to this module,
which converts them into the tensors and metadata of a
:class:`~gymloop.nn.numpy_policy.NumpyPolicy` and returns an ordinary
:class:`~gymloop.neural.NeuralAgent`::

    agent = gl.load("ckpt/latest-step000000016384")         # the checkpoint folder
    agent = gl.load("multisnake.roguenet", greedy=True)     # or its archive
    enn.convert("multisnake.roguenet", "multisnake.safetensors")  # a gymloop checkpoint of it

A game then names its entity types, features and labels as the checkpoint does
(``@gl.entity(name="SnakeHead")``, an Enum with members ``up``, ``down``, ... whose class is named as
the action); :func:`forward` runs observations given in entity-gym's batched layout instead.

**How rogue-net maps onto gymloop's network.** gymloop's entity transformer was modelled on
rogue-net, so a checkpoint converts weight by weight: ``readout=False`` (every block over every
entity, value from the mean of the final embeddings), ``mlp_ratio=4``, ``norm_clip=5``, the input
normalisers' frozen statistics (rogue-net in ``eval()`` mode), the shared relative-position tables,
categorical heads and select-entity query/key projections. Global features are appended to every
entity's features, as in rogue-net. With a global categorical action, rogue-net adds one
``__global__`` token (embedded from the global features) after all entities, and that token is the
action's actor; here it is an entity type named ``__global__`` with no features of its own (the
global features are appended to it like to every type). A game observes it with
:class:`GlobalToken`::

    obs = gl.Obs().globals(Flags(negate=1)).entities(inputs).actor(enn.GlobalToken())
    choice = agent.act(obs, Output)

Keep it in every observation of such a network (as an actor or with ``obs.entities``): rogue-net
always sees it.

**Select-entity actions.** An enn-trainer action space does not record which entity types an
action selects among (rogue-net scores whatever candidates the environment offers). By default the
game decides: the candidates are the entities of the types its ``gl.SelectEntity(..., among=...)``
names; ``load(..., game=g)`` fixes them from the game's declared actions, and ``among=`` sets them
explicitly.

**What is refused.** Only rogue-net's attention transformer with grid relative positions is
supported: ``pooling``, ``translation``, and the relative-position options ``scale != 1``,
``per_entity_values``, ``exclude_entities``, key/value relpos projections, ``radial``,
``distance``, rotations and ``interpolate`` raise :class:`~gymloop.errors.CheckpointError` naming the
option, as do unknown config versions, unknown fields of the network config or of the observation
and action spaces (the training settings of ``config.ron`` are not read), unknown action-space
kinds, a truncated or corrupt file, a file that is not an enn-trainer checkpoint, and weights whose
names or shapes disagree with the config. A checkpoint trained with a separate value network
(``vf_net``) loads with a logged warning: that network is not imported, so the agent acts as
trained but its value head is untrained.

**Nothing from the files is executed, and reading them is bounded.** The RON text is read by
:mod:`gymloop.ron`'s strict parser (at most 4 MiB, 64 levels of nesting); the weights by ``msgpack``
(``pip install 'gymloop[enn]'``) entry by entry, refusing extension types, non-string map keys,
duplicate keys and any nesting beyond a tensor's fields, into numpy arrays of a fixed set of numeric
dtypes. An archive is never extracted: its headers are read with each record bounded, and the three
members' bytes are read in memory; links, devices, sparse files, absolute or ``..`` member names,
more than 1024 members and over-large members are refused.

Example:
    >>> from gymloop import enn
    >>> enn.parse_ron('Entity(features: ["x", "y"])')
    Entity(features: ['x', 'y'])
    >>> enn.parse_ron('{"up": Some(1), "down": None}')
    {'up': 1, 'down': None}
"""

from __future__ import annotations

import io
import logging
import math
import os
import tarfile
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np

from ._version import __version__
from .actions import CATEGORICAL, SELECT_ENTITY, action_spec
from .errors import CheckpointError, ConfigError, InvalidObservationError
from .nn.config import NetConfig, RelposConfig
from .nn.inputs import Packed
from .nn.numpy_policy import NumpyPolicy
from .ron import MAX_RON as _MAX_RON
from .ron import RonStruct, RonTuple, parse_ron  # noqa: F401 (part of this module's API too)
from .schema import entity, schema_of

if TYPE_CHECKING:
    from .neural import NeuralAgent

__all__ = [
    "CONFIG_VERSIONS",
    "GLOBAL_ENTITY",
    "EnnObservation",
    "EnnOutput",
    "GlobalToken",
    "RonStruct",
    "RonTuple",
    "convert",
    "forward",
    "is_enn_checkpoint",
    "load",
    "load_policy",
    "pack",
    "parse_ron",
    "read_checkpoint",
]

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


@entity(name=GLOBAL_ENTITY)
@dataclass(frozen=True)
class GlobalToken:
    """rogue-net's ``__global__`` token: the actor of an imported global categorical action.

    It has no features of its own; the network embeds it from the observation's global features.

    Example:
        >>> import gymloop as gl
        >>> gl.schema_of(GlobalToken).name, gl.schema_of(GlobalToken).features
        ('__global__', ())
    """


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
            with open(fp, "rb") as f:
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
    if os.path.exists(p) and not os.path.isfile(p):  # a fifo or device would block or never end
        raise CheckpointError(f"{p}: not a regular file; {_ARCHIVE}")
    try:
        f = open(p, "rb")
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
            what = a.name if isinstance(a, RonStruct) else _show(a, 40)
            raise CheckpointError(
                f"{where}: action {name!r} has unknown action space {what}; supported: {', '.join(_ACTION_KINDS)}"
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


# ---------------------------------------------------------------------- weights
def _convert(
    weights: dict[str, np.ndarray], net: _Net, ents: dict[str, list[str]], glob: list[str],
    acts: dict[str, tuple[str, list[str]]], where: str,
) -> dict[str, np.ndarray]:
    """rogue-net's ``state_dict`` renamed to gymloop's (every name and shape checked)."""
    d, dh, ng = net.d_model, net.d_model // net.n_head, len(glob)
    types = dict(ents)
    if any(k == "global" for k, _ in acts.values()):
        types[GLOBAL_ENTITY] = []
    ctx = f"(config: d_model={d}, n_layer={net.n_layer}, n_head={net.n_head}, d_qk={net.d_qk}; spaces from state.ron)"
    out: dict[str, np.ndarray] = {}
    used: set[str] = set()

    def take(enn: str, shape: tuple[int, ...], ours: str | None) -> np.ndarray:
        t = weights.get(enn)
        if t is None:
            raise CheckpointError(f"{where}: the weights lack {enn!r}, which the config and spaces imply {ctx}")
        if tuple(t.shape) != shape:
            raise CheckpointError(f"{where}: tensor {enn!r} has shape {tuple(t.shape)} but the config and spaces imply {shape} {ctx}")
        if t.dtype.kind == "b":
            raise CheckpointError(f"{where}: tensor {enn!r} holds booleans; expected numbers")
        used.add(enn)
        a = np.asarray(t, dtype=_F32)
        if ours is not None:
            out[ours] = a
        return a

    for name, feats in types.items():
        nf = (len(feats) + ng) if name != GLOBAL_ENTITY else ng
        pre = f"embedding.embeddings.{name}"
        if nf:
            take(f"{pre}.0.count", (), f"norms.{name}.count")
            take(f"{pre}.0.mean", (nf,), f"norms.{name}.mean")
            take(f"{pre}.0.squares_sum", (nf,), f"norms.{name}.squares_sum")
            take(f"{pre}.1.weight", (d, nf), f"embeds.{name}.0.weight")
            take(f"{pre}.1.bias", (d,), f"embeds.{name}.0.bias")
            take(f"{pre}.3.weight", (d,), f"embeds.{name}.2.weight")
            take(f"{pre}.3.bias", (d,), f"embeds.{name}.2.bias")
        else:
            take(f"{pre}.embedding", (1, d), f"featureless.{name}")
    rel: dict[str, np.ndarray] = {}
    rp = net.relpos
    if rp is not None:
        P = len(rp.extent)
        npos = math.prod(2 * e + 1 for e in rp.extent)
        strides = np.cumprod([1] + [2 * e + 1 for e in rp.extent[:-1]]).astype(_F32)
        spec = {
            "strides": ((1, P), "strides"), "extent_tensor": ((1, 1, 1, P), "extent_t"), "keys.weight": ((npos, dh), "keys.weight"),
            "values.weight": ((npos, dh), "values.weight"), "distance_values.weight": ((len(types), dh), None),
        }
        if rp.value_gate is not None:
            spec["value_gate_proj.weight"] = ((dh, d), "value_gate.weight")
            spec["value_gate_proj.bias"] = ((dh,), "value_gate.bias")
        for k, (shape, ours) in spec.items():
            a = take(f"backbone.relpos_encoding.{k}", shape, None)
            for i in range(net.n_layer):  # the module is shared: every block's copy must be the same
                b = take(f"backbone.blocks.{i}.attn.relpos_encoding.{k}", shape, None)
                if not np.array_equal(a, b):
                    raise CheckpointError(
                        f"{where}: tensor 'backbone.blocks.{i}.attn.relpos_encoding.{k}' differs from "
                        f"'backbone.relpos_encoding.{k}' (one shared module in rogue-net); corrupt weights"
                    )
            if ours is not None:
                rel[ours] = a.reshape(-1) if k in ("strides", "extent_tensor") else a
        if not np.array_equal(rel["strides"], strides) or not np.array_equal(rel["extent_t"], np.array(rp.extent, dtype=_F32)):
            raise CheckpointError(
                f"{where}: the relpos strides/extent tensors ({rel['strides'].tolist()}, {rel['extent_t'].tolist()}) "
                f"disagree with config extent {rp.extent}"
            )
        out.update({f"relpos.{k}": v for k, v in rel.items()})
    for i in range(net.n_layer):
        pre = f"backbone.blocks.{i}"
        for ln in ("ln1", "ln2"):
            take(f"{pre}.{ln}.weight", (d,), f"blocks.{i}.{ln}.weight")
            take(f"{pre}.{ln}.bias", (d,), f"blocks.{i}.{ln}.bias")
        for lin in ("key", "query", "value", "proj"):
            take(f"{pre}.attn.{lin}.weight", (d, d), f"blocks.{i}.{lin}.weight")
            take(f"{pre}.attn.{lin}.bias", (d,), f"blocks.{i}.{lin}.bias")
        take(f"{pre}.mlp.0.weight", (4 * d, d), f"blocks.{i}.mlp.0.weight")
        take(f"{pre}.mlp.0.bias", (4 * d,), f"blocks.{i}.mlp.0.bias")
        take(f"{pre}.mlp.2.weight", (d, 4 * d), f"blocks.{i}.mlp.2.weight")
        take(f"{pre}.mlp.2.bias", (d,), f"blocks.{i}.mlp.2.bias")
        out.update({f"blocks.{i}.relpos.{k}": v for k, v in rel.items()})
    for name, (kind, labels) in acts.items():
        pre = f"action_heads.{name}"
        if kind == "select":
            take(f"{pre}.query_proj.weight", (net.d_qk, d), f"qproj.{name}.weight")
            take(f"{pre}.query_proj.bias", (net.d_qk,), f"qproj.{name}.bias")
            take(f"{pre}.key_proj.weight", (net.d_qk, d), f"kproj.{name}.weight")
            take(f"{pre}.key_proj.bias", (net.d_qk,), f"kproj.{name}.bias")
        else:
            take(f"{pre}.proj.weight", (len(labels), d), f"heads.{name}.weight")
            take(f"{pre}.proj.bias", (len(labels),), f"heads.{name}.bias")
    take("auxiliary_heads.value.weight", (1, d), "value_head.weight")
    take("auxiliary_heads.value.bias", (1,), "value_head.bias")
    unexpected = sorted(set(weights) - used)
    if unexpected:
        raise CheckpointError(
            f"{where}: unexpected tensors {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''} that the config and "
            f"spaces do not imply {ctx}"
        )
    return out


def _apply_among(
    info: dict[str, Any], among: Mapping[str, Sequence[str]] | None, strict: bool, where: str
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Set the candidate types of select-entity actions in ``info``; returns them (a cache key)."""
    acts = info["action_space"]
    real = [n for n in info["obs_space"]["entities"] if n != GLOBAL_ENTITY]
    if among:
        for name, types in among.items():
            a = acts.get(name)
            if a is None or a["kind"] != SELECT_ENTITY:
                if strict:
                    raise ConfigError(f"among: {where} has no select-entity action {name!r} (its select-entity actions: "
                                      f"{[k for k, v in acts.items() if v['kind'] == SELECT_ENTITY]})")
                continue
            if isinstance(types, str):
                types = [types]
            unknown = [t for t in types if t not in real]
            if unknown and strict:
                raise ConfigError(f"among: entity types {unknown} of action {name!r} are not in {where} (it has {real})")
            keep = [t for t in real if t in types]
            if keep:
                a["among"] = keep
                a.pop("among_any", None)
    return tuple((k, tuple(v["among"])) for k, v in acts.items() if v["kind"] == SELECT_ENTITY)


def read_checkpoint(path: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read an enn-trainer checkpoint as the tensors and metadata of a gymloop policy.

    Args:
        path: a checkpoint folder (``config.ron``, ``state.ron``, ``state.agent.msgpack``) or a
            ``.roguenet`` tar archive of those files.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Returns:
        ``(tensors, info)`` as :class:`~gymloop.nn.numpy_policy.NumpyPolicy` and
        :func:`gymloop.checkpoint.write_agent` take them. ``info["enn"]`` records the source: the
        config version, the environment id, the global categorical actions, and
        ``separate_value_network`` (trained with ``vf_net``: the value head is untrained, and a
        warning is logged).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> tensors, info = read_checkpoint("xor.roguenet")  # doctest: +SKIP
        >>> info["obs_space"], info["enn"]["global_actions"]  # doctest: +SKIP
        ({'entities': {'Input': ['is_set'], '__global__': []}, 'globals': ['negate']}, ['output'])
    """
    p = os.fspath(path)
    src = _read_sources(p)
    (cw, ctext), (sw, stext), (ww, wdata) = (src[f] for f in _FILES)
    net, version, env, separate_vf = _read_config(parse_ron(ctext, cw), cw)
    ents, glob, acts, step = _read_state(parse_ron(stext, sw), sw)
    if net.relpos is not None:
        types = dict(ents)
        if any(k == "global" for k, _ in acts.values()):
            types[GLOBAL_ENTITY] = []
        lacking = {t: [f for f in net.relpos.position_features if f not in fs] for t, fs in types.items()}
        lacking = {t: m for t, m in lacking.items() if m}
        if lacking:
            raise CheckpointError(
                f"{cw}: relative positions need the position features {net.relpos.position_features} in every entity type's "
                f"own features; lacking: {lacking} (positions from global features are not supported)"
            )
    weights = _read_weights(wdata, ww)
    tensors = _convert(weights, net, ents, glob, acts, ww)
    entities = {k: list(v) for k, v in ents.items()}
    global_actions = [k for k, (kind, _) in acts.items() if kind == "global"]
    if global_actions:
        entities[GLOBAL_ENTITY] = []
    real = [n for n in ents]
    action_space = {
        # enn-trainer does not record the candidate types: any type the game offers (among_any)
        k: {"kind": SELECT_ENTITY, "labels": [], "among": list(real), "among_any": True} if kind == "select"
        else {"kind": CATEGORICAL, "labels": list(labels), "among": []}
        for k, (kind, labels) in acts.items()
    }
    if any(a["kind"] == SELECT_ENTITY for a in action_space.values()) and not real:
        raise CheckpointError(f"{sw}: a select-entity action needs entity types to select among")
    cfg = NetConfig(d_model=net.d_model, n_layer=net.n_layer, n_head=net.n_head, d_qk=net.d_qk, relpos=net.relpos,
                    norm_clip=5.0, mlp_ratio=4, readout=False)
    info: dict[str, Any] = {
        "obs_space": {"entities": entities, "globals": list(glob)},
        "action_space": action_space,
        "net": cfg.to_dict(),
        "arch": "rogue-net",
        "step": step,
        "library_version": __version__,
        "enn": {
            "source": p, "config_version": version, "env": env, "global_actions": global_actions,
            "separate_value_network": separate_vf,
        },
    }
    _apply_among(info, among, True, p)
    return tensors, info


_policies: weakref.WeakValueDictionary[tuple, NumpyPolicy] = weakref.WeakValueDictionary()


def _file_key(p: str) -> tuple:
    try:
        if os.path.isdir(p):
            sts = [os.stat(os.path.join(p, f)) for f in _FILES if os.path.exists(os.path.join(p, f))]
        else:
            sts = [os.stat(p)]
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {p}: {e}") from None
    return (os.path.realpath(p), tuple((s.st_mtime_ns, s.st_size) for s in sts))


def _load_policy(p: str, among: Mapping[str, Sequence[str]] | None, strict: bool) -> NumpyPolicy:
    want = None if among is None else tuple(sorted((str(k), (v,) if isinstance(v, str) else tuple(v)) for k, v in among.items()))
    key = (_file_key(p), want, strict)
    pol = _policies.get(key)
    if pol is None:
        tensors, info = read_checkpoint(p)
        _apply_among(info, among, strict, p)
        pol = NumpyPolicy(tensors, info, p)
        _policies[key] = pol
    return pol


def load_policy(path: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> NumpyPolicy:
    """The numpy policy of an enn-trainer checkpoint (shared between calls for an unchanged file).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> policy = load_policy("cherrypick.roguenet", among={"Pick Cherry": ["Cherry"]})  # doctest: +SKIP
        >>> policy.entity_names, policy.action_space["Pick Cherry"]["among"]  # doctest: +SKIP
        (['Cherry', 'Player'], ('Cherry',))
    """
    return _load_policy(os.fspath(path), among, True)


def _among_of_game(game: Any) -> dict[str, list[str]] | None:
    from .spaces import declared_types

    decl = declared_types(game)
    if decl is None:
        return None
    out = {}
    for a in decl[2]:
        spec = action_spec(a)
        if spec.kind == SELECT_ENTITY:
            out[spec.name] = [schema_of(c).name for c in spec.among]
    return out or None


def load(
    path: str | os.PathLike,
    seed: int | None = None,
    greedy: bool = False,
    game: Any = None,
    among: Mapping[str, Sequence[str]] | None = None,
) -> NeuralAgent:
    """Load an enn-trainer checkpoint as a :class:`~gymloop.neural.NeuralAgent` (``gl.load`` calls this).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        seed: seed of the agent's sampling generator.
        greedy: always take the most probable choice.
        game: a game declared with ``@gl.game(...)``: its select-entity actions give the candidate
            entity types (unless ``among`` is given), and the game is checked against the agent.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays; enn-trainer records none).

    Raises:
        CheckpointError: see the module docstring; or the game lacks what the agent needs.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> import gymloop as gl  # doctest: +SKIP
        >>> agent = gl.load("ckpt/latest-step000000016384", seed=0)  # doctest: +SKIP
    """
    from .neural import NeuralAgent  # (at call time: neural imports this module)

    p = os.fspath(path)
    if among is None and game is not None:
        policy = _load_policy(p, _among_of_game(game), False)
    else:
        policy = _load_policy(p, among, True)
    agent = NeuralAgent(policy, seed=seed, greedy=greedy)
    if game is not None:
        agent.check(game)
    return agent


def convert(path: str | os.PathLike, out: str | os.PathLike, among: Mapping[str, Sequence[str]] | None = None) -> None:
    """Write an enn-trainer checkpoint as a gymloop agent checkpoint (``.safetensors``).

    The result loads with ``gl.load(out)`` and, for training on, with torch
    (:func:`gymloop.nn.torch_policy.policy_from_file`); its metadata keeps ``info["enn"]`` (see
    :func:`read_checkpoint`).

    Args:
        path: a checkpoint folder or ``.roguenet`` archive.
        out: the gymloop checkpoint to write.
        among: per select-entity action, the entity types it selects among (default: the types
            the game's ``gl.SelectEntity`` names when the agent plays).

    Raises:
        CheckpointError: see the module docstring.
        ConfigError: ``among`` names an action or entity type the checkpoint does not have.

    Example:
        >>> convert("multisnake.roguenet", "multisnake.safetensors")  # doctest: +SKIP
        >>> gl.load("multisnake.safetensors").policy.info["enn"]["env"]["id"]  # doctest: +SKIP
        'MultiSnake'
    """
    from .checkpoint import write_agent

    tensors, info = read_checkpoint(path, among)
    NumpyPolicy(tensors, info, os.fspath(path))  # validate before writing
    write_agent(out, tensors, info)


# ---------------------------------------------------------------------- entity-gym style inputs
@dataclass
class EnnObservation:
    """One observation laid out as entity-gym's ``batch_obs`` gives it to rogue-net.

    Entities are indexed through all types in the checkpoint's observation-space order (rows in
    order); the ``__global__`` token, when the network has one, comes last. entity-gym's
    ``visible`` masks are not supported: leave entities the policy must not see out.

    Attributes:
        entities: per entity type, ``(n, n_features)`` raw features (columns in the checkpoint's
            feature order); a missing type has no entities.
        global_features: the global features, in the checkpoint's order.
        actors: per action, the entity indices of its actors (missing: no actors).
        actees: per select-entity action, the entity indices of the selectable entities.
        masks: per categorical action, ``(n_actors, n_choices)`` bool or ``None`` (all allowed).

    Example:
        >>> o = EnnObservation({"Input": [[1.0], [0.0]]}, global_features=[1.0], actors={"output": [2]})
        >>> len(o.entities["Input"]), o.actors["output"]  # the __global__ token is entity 2
        (2, [2])
    """

    entities: Mapping[str, Any]
    global_features: Sequence[float] = ()
    actors: Mapping[str, Sequence[int]] = field(default_factory=dict)
    actees: Mapping[str, Sequence[int]] = field(default_factory=dict)
    masks: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class EnnOutput:
    """rogue-net's outputs for one observation.

    Attributes:
        logprobs: per action, ``(n_actors, n_choices)`` log-probabilities (select-entity:
            ``(n_actors, n_actees)`` in ``actees`` order); masked choices ``-inf``.
        value: the value head's output.
    """

    logprobs: dict[str, np.ndarray]
    value: float


def _obs_floats(x: Any, what: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=_F32)
    except (TypeError, ValueError) as e:
        raise InvalidObservationError(f"{what} must be numbers in a rectangular array, got {_show(x, 60)} ({e})") from None
    if not np.isfinite(a).all():
        raise InvalidObservationError(f"{what} must be finite, got {_show(a[~np.isfinite(a)][:3].tolist(), 60)}")
    return a


def _obs_indices(x: Any, n: int, what: str) -> np.ndarray:
    """Entity indices ``x`` of an observation with ``n`` entities, as an int64 array."""
    try:
        a = np.asarray(x if x is not None else ())
    except (TypeError, ValueError):
        a = np.asarray([None])  # refused below, with the value shown
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise InvalidObservationError(f"{what} must be a list of entity indices (integers), got {_show(x, 60)}")
    bad = a[(a < 0) | (a >= n)]
    if bad.size:
        raise InvalidObservationError(
            f"{what} out of range: {int(bad[0])}; the observation has {n} entities (indices 0 to {n - 1}, all types in "
            "the checkpoint's order, the global token last)"
        )
    return a.astype(np.int64)


def pack(policy: NumpyPolicy, observations: Sequence[EnnObservation]) -> Packed:
    """The network inputs of entity-gym style observations (slot ``s`` = observation ``s``).

    Usable with :meth:`NumpyPolicy.forward` and, for a converted checkpoint, the torch policy.

    Args:
        policy: the policy of an imported (or converted) checkpoint.
        observations: one :class:`EnnObservation` per batch slot.

    Raises:
        InvalidObservationError: features of the wrong shape or not finite, unknown entity types or
            actions, indices out of range, masks of the wrong shape or allowing no choice.
    """
    names = policy.entity_names
    ng = len(policy.global_features)
    S = len(observations)
    acts = policy.action_space
    rows: list[list[np.ndarray]] = []
    globs = []
    for s, o in enumerate(observations):
        unknown = [k for k in o.entities if k not in policy.entity_features or k == GLOBAL_ENTITY]
        if unknown:
            raise InvalidObservationError(f"observation {s}: unknown entity types {unknown}; the network has {names}")
        for what, given, kinds, desc in (
            ("actors", o.actors, (CATEGORICAL, SELECT_ENTITY), "actions"),
            ("actees", o.actees, (SELECT_ENTITY,), "select-entity actions"),
            ("masks", {k: v for k, v in o.masks.items() if v is not None}, (CATEGORICAL,), "categorical actions"),
        ):
            unknown = [k for k in given if k not in acts or acts[k]["kind"] not in kinds]
            if unknown:
                have = [k for k, v in acts.items() if v["kind"] in kinds]
                raise InvalidObservationError(f"observation {s}: {what} given for {unknown}, which are not among the network's {desc} {have}")
        g = _obs_floats(o.global_features, f"observation {s}: global features").reshape(-1)
        if g.shape != (ng,):
            raise InvalidObservationError(f"observation {s}: {g.size} global features, the network has {ng} {list(policy.global_features)}")
        globs.append(g)
        per = []
        for n in names:
            nf = len(policy.entity_features[n])
            if n == GLOBAL_ENTITY:
                per.append(np.zeros((1, 0), dtype=_F32))
                continue
            x = o.entities.get(n)
            a = np.zeros((0, nf), dtype=_F32) if x is None else _obs_floats(x, f"observation {s}: features of entity type {n!r}")
            if a.shape == (0,):  # [] : no entity of this type
                a = np.zeros((0, nf), dtype=_F32)
            if a.ndim != 2 or a.shape[1] != nf:
                raise InvalidObservationError(f"observation {s}: entity type {n!r} needs (n, {nf}) features, got shape {a.shape}")
            per.append(a)
        rows.append(per)
    T = len(names)
    counts = np.array([[r[t].shape[0] for t in range(T)] for r in rows], dtype=np.int64).reshape(S, T)
    totals = counts.sum(1)
    L = int(max(1, totals.max(initial=0)))
    starts = np.cumsum(counts, axis=1) - counts
    feats, dest = {}, {}
    pidx = policy.position_idx
    positions = np.zeros((S * L, len(next(iter(pidx.values())))), dtype=_F32) if pidx else None
    for t, n in enumerate(names):
        parts = [np.concatenate([rows[s][t], np.broadcast_to(globs[s], (counts[s, t], ng))], axis=1) for s in range(S)]
        feats[n] = np.concatenate(parts) if parts else np.zeros((0, len(policy.entity_features[n]) + ng), _F32)
        slot = np.repeat(np.arange(S), counts[:, t])
        rank = np.concatenate([np.arange(c) for c in counts[:, t]]) if S else np.zeros(0, np.int64)
        dest[n] = (slot * L + starts[slot, t] + rank).astype(np.int64)
        if positions is not None and dest[n].size:
            positions[dest[n]] = feats[n][:, pidx[n]]
    p = Packed(S=S, L=L, feats=feats, dest=dest, valid=np.arange(L)[None, :] < totals[:, None], lengths=totals,
               positions=None if positions is None else positions.reshape(S, L, -1))
    for name, a in policy.action_space.items():
        actors, masks, cand, ncand = [], [], [], []
        for s, o in enumerate(observations):
            act = _obs_indices(o.actors.get(name), int(totals[s]), f"observation {s}: actor index for action {name!r}")
            actors.append(act + s * L)
            if a["kind"] == CATEGORICAL:
                m = o.masks.get(name)
                k = len(a["labels"])
                if m is None:
                    m = np.ones((act.size, k), dtype=bool)
                else:
                    m = np.asarray(m, dtype=bool)
                    if m.size != act.size * k:
                        raise InvalidObservationError(
                            f"observation {s}: the mask of action {name!r} has shape {m.shape}; expected ({act.size}, {k}): "
                            "one row per actor, one column per choice"
                        )
                    m = m.reshape(act.size, k)
                    if not m.any(axis=1).all():
                        raise InvalidObservationError(
                            f"observation {s}: the mask of action {name!r} allows no choice to actor "
                            f"{int(act[~m.any(axis=1)][0])}; give it at least one, or leave it out of the actors"
                        )
                masks.append(m)
            else:
                ae = _obs_indices(o.actees.get(name), int(totals[s]), f"observation {s}: actee index for action {name!r}")
                if act.size and ae.size == 0:
                    raise InvalidObservationError(f"observation {s}: select-entity action {name!r} has actors but no actees")
                cand.append(np.tile(ae + s * L, act.size))
                ncand += [ae.size] * act.size
                masks.append(np.ones(act.size * ae.size, dtype=bool))
        p.actors[name] = np.concatenate(actors) if actors else np.zeros(0, np.int64)
        if a["kind"] == CATEGORICAL:
            p.masks[name] = np.concatenate(masks) if masks else np.zeros((0, len(a["labels"])), bool)
        else:
            nc = np.array(ncand, dtype=np.int64)
            p.masks[name] = np.concatenate(masks) if masks else np.zeros(0, bool)
            p.n_cand[name] = nc
            p.cand_seg[name] = np.repeat(np.arange(nc.size), nc)
            p.cand[name] = np.concatenate(cand) if cand else np.zeros(0, np.int64)
    return p


def forward(policy: NumpyPolicy, observations: Sequence[EnnObservation]) -> list[EnnOutput]:
    """rogue-net's outputs for entity-gym style observations (one ragged batch, one forward pass).

    What ``RogueNet.get_action_and_auxiliary`` computes in ``eval()`` mode: per action the
    normalised log-probabilities, and the value head.

    Args:
        policy: the policy of an imported (or converted) checkpoint (:func:`load_policy`).
        observations: the observations, run as one batch.

    Returns:
        One :class:`EnnOutput` per observation, in order.

    Raises:
        InvalidObservationError: as :func:`pack` says.

    Example:
        >>> policy = load_policy("xor/checkpoint")  # doctest: +SKIP
        >>> obs = EnnObservation({"Input": [[1.0], [0.0]]}, global_features=[0.0], actors={"output": [2]})
        >>> forward(policy, [obs])[0].logprobs["output"].shape  # doctest: +SKIP
        (1, 2)
    """
    obs = list(observations)
    if not obs:
        return []
    p = pack(policy, obs)
    res = policy.forward(p, value=True)
    outs = [EnnOutput({}, float(v)) for v in res.value]
    for name, a in policy.action_space.items():
        lp = res.logp[name]
        slot = p.actors[name] // p.L
        n = np.bincount(slot, minlength=len(obs))  # actors per observation
        width = n if a["kind"] == CATEGORICAL else np.bincount(slot, weights=p.n_cand[name], minlength=len(obs)).astype(np.int64)
        end = np.cumsum(width)
        for s in range(len(obs)):
            part = lp[end[s] - width[s] : end[s]]
            outs[s].logprobs[name] = part if a["kind"] == CATEGORICAL else part.reshape(n[s], -1 if n[s] else 0)
    return outs
