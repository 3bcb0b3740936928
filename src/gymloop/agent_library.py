"""Agent libraries: many trained agents in one folder or one archive file, loaded by name.

A game may ship hundreds of agents (difficulty levels, personalities, one per NPC kind).
:func:`library` opens either

* a **folder**: every agent checkpoint under it (``*.safetensors``, recursively) is an agent named
  by its path relative to the folder, without the suffix (``bots/easy.safetensors`` → ``bots/easy``);
  enn-trainer checkpoints (``*.roguenet`` files and folders holding ``state.agent.msgpack``) are
  listed too when their importer is available; or
* an **archive**: one ``.safetensors`` file written by :func:`pack_library`, holding every agent's
  weights and metadata. Opening it reads only its header; an agent's weights are read-only views of
  one memory map, touched only when that agent is loaded.

**Integrity.** Every agent of an archive carries its own checksum (SHA-256 over its name, metadata
and weights), verified the first time that agent is loaded, so opening a large archive stays cheap
and a corrupt agent fails with :class:`~gymloop.errors.CheckpointError` naming the archive and the
agent. :meth:`AgentLibrary.info` reads metadata without verifying it. Agents of a folder are
verified as :func:`gymloop.load` verifies any checkpoint.

Loading is lazy and shared: the first :meth:`AgentLibrary.load` of a name builds its numpy policy
(:class:`~gymloop.nn.numpy_policy.NumpyPolicy`); later loads of that name share it, so
``gl.act_all`` serves all agents of one name with one forward pass. Nothing imports torch.

Example:
    >>> import os, tempfile
    >>> import gymloop as gl
    >>> from gymloop.games.snake import snake
    >>> from gymloop.neural import random_checkpoint
    >>> d = tempfile.mkdtemp()
    >>> for name in ("easy", "hard"):
    ...     random_checkpoint(os.path.join(d, f"{name}.safetensors"), snake, seed=len(name))
    >>> gl.library(d).names()
    ['easy', 'hard']
    >>> archive = os.path.join(tempfile.mkdtemp(), "snakes.safetensors")
    >>> gl.pack_library(archive, d)
    >>> lib = gl.library(archive)
    >>> len(lib), "hard" in lib
    (2, True)
    >>> gl.run(snake, lib.load("hard", seed=0), seed=0, max_steps=10).steps
    10
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import numbers
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .checkpoint import (
    CHECKSUM_ALGO,
    CHECKSUM_KEY,
    FORMAT_VERSION,
    SafetensorsFile,
    check_agent_document,
    check_arch_and_dtypes,
    read_agent,
    tensors_checksum,
    write_safetensors,
)
from .errors import CheckpointError, ConfigError, GymloopError
from .files import check_output, open_input, write_atomic
from .neural import NeuralAgent, load
from .nn.migrate import current_document
from .nn.numpy_policy import NumpyPolicy
from .rating import RATINGS_FORMAT, Rating

__all__ = ["LIBRARY_FORMAT_VERSION", "LEVELS", "AgentLibrary", "library", "pack_library", "write_ratings"]

LIBRARY_FORMAT_VERSION = 1
#: the named levels of :meth:`AgentLibrary.pick`: quantiles of the library's ratings (0: the weakest)
LEVELS = {"easy": 0.1, "medium": 0.5, "hard": 0.9}
#: a folder library's ratings (``gymloop rate --into``)
RATINGS_FILE = "ratings.json"
_SUFFIX = ".safetensors"
_MAX_LISTED = 40
_log = logging.getLogger(__name__)


class AgentLibrary:
    """Named agents in a folder or an archive (see the module docstring); open with :func:`library`.

    Attributes:
        path: the folder or archive file.
        kind: ``"folder"`` or ``"archive"``.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        p = os.fspath(path)
        self.path = p
        self._lock = threading.Lock()
        self._policies: dict[str, NumpyPolicy] = {}
        if os.path.isdir(p):
            self.kind = "folder"
            self._files = _scan_folder(p)
            self._archive: SafetensorsFile | None = None
            self._infos: dict[str, dict[str, Any]] = {}
        elif os.path.isfile(p):
            self.kind = "archive"
            self._archive = f = SafetensorsFile(p)
            self._infos, ids, self._sums, self._ratings = _parse_archive(f)
            by_id: dict[str, list[str]] = {}
            for k in f.keys():
                aid, sep, _ = k.partition("/")
                if sep:
                    by_id.setdefault(aid, []).append(k)
            self._keys = {name: by_id.get(aid, []) for name, aid in ids.items()}
            self._files = {}
        else:
            raise CheckpointError(f"agent library {p}: no such folder or file")

    # ------------------------------------------------------------------ listing
    def names(self) -> list[str]:
        """Every agent name, sorted."""
        return sorted(self._files if self.kind == "folder" else self._infos)

    def __len__(self) -> int:
        return len(self._files if self.kind == "folder" else self._infos)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in (self._files if self.kind == "folder" else self._infos)

    def __repr__(self) -> str:
        return f"AgentLibrary({self.path!r}, {self.kind}, {len(self)} agents)"

    def info(self, name: str) -> dict[str, Any]:
        """An agent's metadata (spaces, network, training step, game) without building its network."""
        self._check_name(name)
        if self.kind == "archive":
            return current_document(self._infos[name])
        path = self._files[name]
        if path.endswith(_SUFFIX):
            return read_agent(path).info
        return self.policy(name).info

    # ------------------------------------------------------------------ loading
    def policy(self, name: str) -> NumpyPolicy:
        """The shared numpy policy of agent ``name`` (built on first use)."""
        self._check_name(name)
        pol = self._policies.get(name)
        if pol is not None:
            return pol
        with self._lock:
            pol = self._policies.get(name)
            if pol is None:
                if self.kind == "folder":
                    pol = load(self._files[name]).policy
                else:
                    pol = self._archive_policy(name)
                self._policies[name] = pol
        return pol

    def load(self, name: str, seed: int | None = None, greedy: bool = False, game: Any = None) -> NeuralAgent:
        """An agent playing as ``name`` (see :func:`gymloop.load` for the arguments).

        Raises:
            CheckpointError: no agent of that name (the message lists the names that exist), or
                its weights are unreadable or do not fit its metadata.
        """
        agent = NeuralAgent(self.policy(name), seed=seed, greedy=greedy)
        if game is not None:
            agent.check(game)
        return agent

    def _archive_policy(self, name: str) -> NumpyPolicy:
        f = self._archive
        assert f is not None
        tensors = {k.partition("/")[2]: f.tensor(k) for k in self._keys[name]}
        where = f"{self.path}[{name}]"
        info = self._infos[name]
        want = self._sums.get(name)
        if want is not None:
            if _agent_checksum(name, info, tensors) != want:
                raise CheckpointError(
                    f"agent library {self.path}: agent {name!r} is corrupt: its metadata and weights do not match the checksum "
                    "written with them (a byte changed on disk or in transfer, or the file was edited); pack the library again"
                )
        elif info.get("checksum") is not None:
            raise CheckpointError(
                f"agent library {self.path}: agent {name!r} is corrupt: its metadata says it carries a checksum, but the "
                "library holds none for it; pack the library again"
            )
        check_arch_and_dtypes(where, info, {k: v.dtype for k, v in tensors.items()})
        return NumpyPolicy(tensors, info, where)

    # ------------------------------------------------------------------ ratings
    def ratings(self) -> dict[str, Rating]:
        """Each rated agent's :class:`~gymloop.rating.Rating` (``gymloop rate --into``), read without
        loading any weights; empty when the library was never rated."""
        doc = self._ratings_doc()
        out = {}
        for name, d in (doc or {}).get("agents", {}).items():
            if name in self:
                out[name] = Rating.from_json(d, f"agent library {self.path}: the rating of {name!r}")
        return out

    def pick(self, level: str | float | None = None, rating: float | None = None) -> str:
        """The name of the agent nearest a skill: a ``level`` (``"easy"``, ``"medium"``, ``"hard"``,
        a level the game's author named when rating, or a quantile in ``[0, 1]`` of the library's
        ratings, 0 the weakest) or a ``rating`` (the agent whose ``mu`` is nearest, e.g. a player's
        running rating: :class:`~gymloop.rating.PlayerRating`).

        Raises:
            ConfigError: neither or both given, an unknown level, or a library without ratings (the
                message says how to rate it).

        Example:
            >>> lib.pick(level="hard"), lib.pick(rating=0.0)   # doctest: +SKIP
            ('league/u40', 'league/u2')
        """
        if (level is None) == (rating is None):
            raise ConfigError(f"pick takes a level or a rating (one of them), got level={level!r}, rating={rating!r}")
        r = self.ratings()
        if not r:
            raise ConfigError(f"agent library {self.path} has no ratings; rate its agents first: gymloop rate GAME "
                              f"--library {self.path} --into {self.path}")
        by_skill = sorted(r, key=lambda n: (r[n].mu, n))
        if rating is not None:
            if isinstance(rating, bool) or not isinstance(rating, (int, float)) or not math.isfinite(rating):
                raise ConfigError(f"pick rating must be a finite number (a mu on openskill's scale, 25 for a new player), got {rating!r}")
            return min(by_skill, key=lambda n: abs(r[n].mu - float(rating)))
        named = (self._ratings_doc() or {}).get("levels", {})
        if isinstance(level, str) and level in named:  # (a named level's agent is rated: checked when read)
            return str(named[level])
        q = LEVELS.get(level) if isinstance(level, str) else level
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0.0 <= float(q) <= 1.0:
            known = sorted({*LEVELS, *named})
            raise ConfigError(f"pick level must be one of {known} or a quantile in [0, 1], got {level!r}")
        return by_skill[int(round(float(q) * (len(by_skill) - 1)))]

    def _ratings_doc(self) -> dict[str, Any] | None:
        if self.kind == "archive":  # (checked when read: a library with bad ratings still opens, to be rated again)
            return None if self._ratings is None else _checked_ratings(self._ratings, f"{self.path}: its ratings", CheckpointError)
        path = os.path.join(self.path, RATINGS_FILE)
        if not os.path.isfile(path):
            return None
        with open_input(path, "ratings file") as fh:
            return _parse_ratings(fh.read().decode("utf-8", "replace"), path)

    def _check_name(self, name: str) -> None:
        if name in self:
            return
        names = self.names()
        close = difflib.get_close_matches(str(name), names, n=3)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        shown = names if len(names) <= _MAX_LISTED else names[:_MAX_LISTED] + [f"... {len(names) - _MAX_LISTED} more"]
        raise CheckpointError(
            f"agent library {self.path} has no agent {name!r}{hint}; it has {len(names)}: {', '.join(shown) or '(none)'}"
        )


def library(path: str | os.PathLike) -> AgentLibrary:
    """Open an agent library: a folder of checkpoints or an archive from :func:`pack_library`.

    Raises:
        CheckpointError: the path does not exist, or the archive is not a valid agent library.

    Example:
        >>> import tempfile
        >>> import gymloop as gl
        >>> from gymloop.games.snake import snake
        >>> from gymloop.neural import random_checkpoint
        >>> d = tempfile.mkdtemp()
        >>> random_checkpoint(d + "/rookie.safetensors", snake)
        >>> lib = gl.library(d)
        >>> lib.names(), type(lib.load("rookie", seed=0)).__name__
        (['rookie'], 'NeuralAgent')
    """
    return AgentLibrary(path)


def pack_library(out: str | os.PathLike, agents: str | os.PathLike | Mapping[str, str | os.PathLike]) -> None:
    """Write many agent checkpoints into one archive file.

    Args:
        out: the archive to write (a ``.safetensors`` file; written atomically).
        agents: a folder of checkpoints (named as :func:`library` names them), or a mapping from
            agent name to checkpoint path.

    enn-trainer checkpoints (folders or ``.roguenet`` files) are converted on the way, as
    :func:`gymloop.load` converts them.

    Raises:
        CheckpointError: a checkpoint is unreadable or is not an agent, a name is not a valid library
            name (see below), or a folder holds two checkpoints of one name.
        OutputPathError: ``out`` is a folder, FIFO or device, one of the checkpoints, or cannot be
            written.

    Agent names are ``part/part/...`` of printable characters, without empty, ``.`` or ``..`` parts
    or backslashes (``"easy"``, ``"league/v3"``).
    """
    if isinstance(agents, (str, os.PathLike)):
        src = os.fspath(agents)
        if not os.path.isdir(src):
            what = "a file" if os.path.isfile(src) else "no such folder"
            raise CheckpointError(
                f"pack_library: {src!r} is {what}; expected a folder of agent checkpoints (or a mapping from agent "
                "name to checkpoint path)"
            )
        files = _scan_folder(src)
        if not files:
            raise CheckpointError(f"pack_library: the folder {src!r} holds no agent checkpoints (*.safetensors agents, enn-trainer checkpoints)")
    else:
        files = {}
        for agent_name, agent_path in agents.items():
            if not isinstance(agent_name, str):
                raise CheckpointError(
                    f"pack_library: agent names must be strings, got {agent_name!r} of type {type(agent_name).__name__}"
                )
            if not isinstance(agent_path, (str, os.PathLike)):
                raise CheckpointError(
                    f"pack_library: agent {agent_name!r}: a checkpoint path must be a str or os.PathLike, got {agent_path!r}"
                )
            files[agent_name] = os.fspath(agent_path)
    check_output(out, files.values())  # (before reading: the archive may not replace a folder, a device or an input)
    tensors: dict[str, np.ndarray] = {}
    infos: dict[str, Any] = {}
    if not files:
        raise CheckpointError("pack_library: no agents given; pass a folder of checkpoints or {name: checkpoint path}")
    for i, name in enumerate(sorted(files)):
        _check_agent_name(name)
        path = files[name]
        try:
            net = None
            if path.endswith(_SUFFIX):
                af = read_agent(path)
                weights, info, net = af.tensors, af.info, af.net
            else:  # an enn-trainer checkpoint
                from .enn import is_enn_checkpoint, read_checkpoint

                if not is_enn_checkpoint(path):
                    raise CheckpointError(f"{path}: not an agent checkpoint (a .safetensors agent or an enn-trainer checkpoint)")
                weights, info = read_checkpoint(path)
                info = {**info, "format_version": FORMAT_VERSION}
            NumpyPolicy(weights, info, path, net)  # refuse a checkpoint whose weights do not fit its metadata
        except CheckpointError as e:
            raise CheckpointError(f"pack_library: agent {name!r}: {e}") from None
        aid = f"a{i}"
        info = json.loads(json.dumps(info))  # (as a reader will see it: JSON types, string keys)
        info["checksum"] = CHECKSUM_ALGO
        infos[name] = {"id": aid, "info": info, "checksum": _agent_checksum(name, info, weights)}
        for k, v in weights.items():
            tensors[f"{aid}/{k}"] = v
    doc: dict[str, Any] = {"format_version": LIBRARY_FORMAT_VERSION, "agents": infos}
    if isinstance(agents, (str, os.PathLike)) and os.path.isfile(os.path.join(os.fspath(agents), RATINGS_FILE)):
        rpath = os.path.join(os.fspath(agents), RATINGS_FILE)
        with open_input(rpath, "ratings file") as fh:  # the folder's ratings travel along
            rdoc = _parse_ratings(fh.read().decode("utf-8", "replace"), rpath)
        rdoc["agents"] = {n: v for n, v in rdoc.get("agents", {}).items() if n in infos}
        doc["ratings"] = rdoc
    write_safetensors(out, tensors, {"format": "gymloop-library", "gymloop_library": json.dumps(doc)}, inputs=files.values())


# ---------------------------------------------------------------------- helpers
_NAME_PART = re.compile(r"[^\x00-\x1f\x7f/\\]+")


def _check_agent_name(name: str) -> None:
    """Refuse a library name that is not ``part/part/...`` of printable characters (no ``.``/``..``
    parts, no leading or trailing slash, no backslash): names are looked up as they are written."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") or not _NAME_PART.fullmatch(p) for p in parts):
        raise CheckpointError(
            f"pack_library: agent name {name!r} is not a valid library name; use names like 'easy' or 'league/v3': "
            "printable characters in parts separated by '/', no empty, '.' or '..' part, no backslash"
        )


def _scan_folder(root: str) -> dict[str, str]:
    """A library folder's agents by name (a checkpoint's path relative to ``root``, without suffix).

    Files that are not regular files (a FIFO, a device) are skipped with a warning, never read; two
    checkpoints with one name (``x.safetensors`` and ``x.roguenet``) are refused.
    """
    out: dict[str, str] = {}

    def add(name: str, path: str) -> None:
        if name in out:
            raise CheckpointError(
                f"agent library {root}: two checkpoints are named {name!r} ({out[name]} and {path}); rename one of them "
                "(a library keeps one agent per name)"
            )
        out[name] = path

    for d, dirs, files in os.walk(root):
        dirs.sort()
        rel_d = os.path.relpath(d, root)
        if "state.agent.msgpack" in files and "config.ron" in files:  # an enn-trainer checkpoint folder
            add(rel_d.replace(os.sep, "/"), d)
            dirs[:] = []
            continue
        for fn in sorted(files):
            if not (fn.endswith(_SUFFIX) or fn.endswith(".roguenet")):
                continue
            path = os.path.join(d, fn)
            if not os.path.isfile(path):
                _log.warning("agent library %s: skipped %s, which is not a regular file", root, path)
                continue
            if fn.endswith(_SUFFIX) and not _is_agent_file(path):
                continue  # e.g. the trainer's optimizer.safetensors beside agent.safetensors
            stem = fn[: -len(_SUFFIX)] if fn.endswith(_SUFFIX) else fn[: -len(".roguenet")]
            add(stem if rel_d == "." else f"{rel_d}/{stem}".replace(os.sep, "/"), path)
    return out


def _is_agent_file(path: str) -> bool:
    try:
        return SafetensorsFile(path).metadata.get("format") == "gymloop-agent"
    except CheckpointError:
        return False


def _agent_checksum(name: str, info: Mapping[str, Any], weights: Mapping[str, np.ndarray]) -> str:
    """The checksum of one agent of an archive: its name, metadata and weights (names without the id prefix)."""
    return tensors_checksum({"agent": name, "info": json.dumps(info, sort_keys=True, separators=(",", ":"))}, weights)


def _parse_ratings(text: str, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{where}: the ratings are not valid JSON: {e}") from None
    return _checked_ratings(doc, where, CheckpointError)


def _checked_ratings(doc: Any, where: str, error: type[GymloopError]) -> dict[str, Any]:
    """``doc`` as a ratings document (:meth:`RatingTable.document() <gymloop.rating.RatingTable.document>`):
    its format, every agent's rating, and levels that name rated agents; anything else is ``error``."""
    fix = "rate the library again with gymloop rate GAME --library LIB --into LIB"
    if not isinstance(doc, Mapping) or doc.get("format") != RATINGS_FORMAT or not isinstance(doc.get("agents", {}), Mapping):
        raise error(f"{where}: not a gymloop ratings document (a mapping with format {RATINGS_FORMAT!r} and its agents' "
                    f"ratings, as RatingTable.document() gives), got {type(doc).__name__}; {fix}")
    agents = dict(doc.get("agents", {}))
    for name, r in agents.items():
        try:
            Rating.from_json(r, f"{where}: the rating of {name!r}")
        except ConfigError as e:
            raise error(f"{e}; {fix}") from None
    levels = doc.get("levels", {})
    if not isinstance(levels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in levels.items()):
        raise error(f"{where}: levels must map level names to agent names (e.g. {{'easy': 'u00040'}}), got {levels!r}; {fix}")
    for lv, name in levels.items():
        if name not in agents:
            raise error(f"{where}: level {lv!r} names {name!r}, which has no rating here (rated: {sorted(agents)}); {fix}")
    return {**doc, "agents": agents, "levels": dict(levels)} if levels else {**doc, "agents": agents}


def write_ratings(path: str | os.PathLike, ratings: Mapping[str, Any], levels: Mapping[str, str] | None = None) -> int:
    """Store ratings (a :meth:`RatingTable.document() <gymloop.rating.RatingTable.document>`) in the
    agent library at ``path``: a folder gets ``ratings.json``, an archive is written again with them
    in its metadata (atomically; the agents' weights and checksums are unchanged). Ratings of names
    the library does not hold are dropped; ``levels`` names agents for levels (``{"easy": "v1"}``).
    Returns the number of ratings written.

    Raises:
        CheckpointError: ``path`` is not an agent library, or a level names an agent it does not hold.
        ConfigError: ``ratings`` is not a ratings document, a rating is not finite (or its sigma not
            positive), or a level names an agent without a rating.
    """
    if not isinstance(ratings, Mapping):
        hint = " (pass table.document())" if hasattr(ratings, "document") else ""
        raise ConfigError(f"write_ratings: expected a ratings document (a mapping, as RatingTable.document() gives), "
                          f"got {type(ratings).__name__}{hint}")
    lib = library(path)
    doc = dict(ratings)
    agents = doc.get("agents", {})
    if isinstance(agents, Mapping):
        doc["agents"] = {n: v for n, v in agents.items() if n in lib}
    if levels:
        for lv, name in levels.items():
            if name not in lib:
                raise CheckpointError(f"write_ratings: level {lv!r} names {name!r}, which agent library {lib.path} does not hold")
        doc["levels"] = dict(levels)
    doc = _checked_ratings(doc, "write_ratings", ConfigError)
    text = json.dumps(doc, indent=1)
    if lib.kind == "folder":
        write_atomic(os.path.join(lib.path, RATINGS_FILE), [text.encode()])
        return len(doc["agents"])
    f = lib._archive
    assert f is not None
    lib_doc = json.loads(f.metadata["gymloop_library"])
    lib_doc["ratings"] = doc
    meta = {k: v for k, v in f.metadata.items() if k not in (CHECKSUM_KEY,)}
    meta["gymloop_library"] = json.dumps(lib_doc)
    write_safetensors(lib.path, {k: f.tensor(k) for k in f.keys()}, meta)
    return len(doc["agents"])


def _parse_archive(f: SafetensorsFile) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str], dict[str, Any] | None]:
    p = f.path
    if f.metadata.get("format") != "gymloop-library":
        if f.metadata.get("format") == "gymloop-agent":
            raise CheckpointError(f"{p}: a single agent checkpoint, not a library; load it with gl.load({p!r})")
        raise CheckpointError(f"{p}: a safetensors file, but not a gymloop agent library")
    try:
        doc = json.loads(f.metadata.get("gymloop_library", ""))
    except (ValueError, RecursionError) as e:  # (JSONDecodeError, int digit limits, deep nesting)
        raise CheckpointError(f"{p}: the library metadata is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{p}: the library metadata must be a JSON object")
    v = doc.get("format_version")
    if v != LIBRARY_FORMAT_VERSION:
        raise CheckpointError(f"{p}: unknown agent library format version {v!r}; this gymloop reads version {LIBRARY_FORMAT_VERSION}")
    agents = doc.get("agents")
    if not isinstance(agents, dict):
        raise CheckpointError(f"{p}: the library metadata lacks its 'agents' table")
    infos: dict[str, dict[str, Any]] = {}
    ids: dict[str, str] = {}
    sums: dict[str, str] = {}
    for name, ent in agents.items():
        if (not isinstance(ent, dict) or not isinstance(ent.get("id"), str) or not isinstance(ent.get("info"), dict)
                or not isinstance(ent.get("checksum", ""), str)):
            raise CheckpointError(f"{p}: the library entry of agent {name!r} is malformed")
        info = ent["info"]
        check_agent_document(info, f"{p}: agent {name!r}", "its metadata")
        infos[name] = info
        ids[name] = ent["id"]
        if "checksum" in ent:
            sums[name] = ent["checksum"]
    return infos, ids, sums, doc.get("ratings")
