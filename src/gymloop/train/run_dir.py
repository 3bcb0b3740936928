"""A training run's folder: its file names, the checkpoint (save and resume), ``metrics.csv``, the
learning curve, the random agent's level and the progress line.

A run's folder holds :data:`AGENT_FILE` and :data:`OPTIM_FILE` (one checkpoint, saved together:
:meth:`RunDir.save`), :data:`METRICS_FILE` (one row per update: :class:`MetricsFile`),
:data:`CURVE_FILE` (:func:`plot_curve`), the TensorBoard folder :data:`TB_DIR`, with ``gymloop
train --demos`` the cloned agent :data:`BC_FILE`, and when the random agent was scored before the
run :data:`RANDOM_LEVEL_FILE` (:meth:`RunDir.write_random_level`).
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..checkpoint import read_agent, read_safetensors, write_agent, write_safetensors
from ..errors import CheckpointError
from ..files import atomic_output, check_output, make_folder
from ..nn.torch_policy import Policy, policy_from_file, policy_info, policy_tensors
from .config import TrainConfig
from .normalize import RewardScaler
from .tensorboard import EventWriter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .guards import TrainState

__all__ = ["AGENT_FILE", "BC_FILE", "CURVE_FILE", "METRICS_FILE", "OPTIM_FILE", "RANDOM_LEVEL_FILE", "TB_DIR", "MetricsFile",
           "Resumed", "RunDir", "check_same_game", "episode_metric_names", "plot_curve", "recorded_shape"]

log = logging.getLogger("gymloop.train")

AGENT_FILE = "agent.safetensors"
OPTIM_FILE = "optimizer.safetensors"
METRICS_FILE = "metrics.csv"
CURVE_FILE = "curve.png"
TB_DIR = "tb"
#: the agent cloned from demonstrations (``gymloop train --demos``) before PPO goes on from it
BC_FILE = "bc.safetensors"
#: the random agent's level measured before a run (``--eval-episodes``), kept for ``--resume``'s curve and summary
RANDOM_LEVEL_FILE = "random_agent.json"


@dataclass(frozen=True)
class Resumed:
    """What :meth:`RunDir.load` read for the parts of the state made after it: the reward scalers'
    and the advantage normalizer's statistics, the learning rate's factor (``None`` where the optimizer file has none)."""

    reward_scaler: dict[str, Any] | None = None
    adv_norm: dict[str, Any] | None = None
    step_size: dict[str, Any] | None = None

    def load_scalers(self, scalers: list[RewardScaler | None]) -> None:
        """Load each group's saved statistics into ``scalers`` (one per environment group); saved for
        another number of groups, each gets the first group's."""
        saved = self.reward_scaler
        if saved is None:
            return
        groups = saved.get("groups")
        for i, scaler in enumerate(scalers):
            if scaler is not None:
                scaler.load(groups[i] if isinstance(groups, list) and len(groups) == len(scalers) else saved)


class RunDir:
    """The folder ``path`` of a training run: where each of its files is, and what reads and writes them."""

    def __init__(self, path: str) -> None:
        self.path = path

    def make(self) -> None:
        """Create the run folder (and its parents) if needed.

        Raises:
            OutputPathError: the path names a file, FIFO or device, not a folder, or cannot be created.
        """
        make_folder(self.path, "the run folder (--out)")

    def file(self, name: str) -> str:
        """The path of the run's file ``name`` (one of this module's ``*_FILE``)."""
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ the checkpoint
    def save(self, t: TrainState, game_name: str, cfg: TrainConfig) -> str:
        """Write the agent and optimizer state as one unit; returns the agent's path.

        The optimizer file is written first and records the agent's step, update and a digest of its
        weights; the agent file second. A run killed between the two writes leaves an optimizer
        state that does not match the agent, which ``--resume`` refuses (see :func:`_check_pair`).
        Each file is written to a temporary name and renamed (:func:`~gymloop.checkpoint.write_safetensors`).
        """
        self.make()
        path = self.file(AGENT_FILE)
        info = policy_info(t.policy, step=t.step, update=t.update, game=game_name, train_config=cfg.to_dict(), device=str(t.policy.device))
        agent_tensors = policy_tensors(t.policy)
        sd = t.optim.state_dict()
        tensors = {}
        state_meta: dict[str, dict] = {}
        for i, st in sd["state"].items():
            state_meta[str(i)] = {}
            for name, v in st.items():
                tensors[f"state.{i}.{name}"] = v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
        tensors["torch_rng"] = t.gen.get_state().numpy()  # (a CPU tensor whatever the generator's device)
        meta = {
            "torch_rng_device": t.gen.device.type,
            "optimizer": json.dumps({"state": state_meta, "param_groups": sd["param_groups"]}),
            "numpy_rng": json.dumps(t.rng.bit_generator.state),
            "agent": json.dumps({"step": t.step, "update": t.update, "weights_digest": _tensors_digest(agent_tensors)}),
        }
        scalers = [sc for sc in t.reward_scalers if sc is not None]
        if scalers:  # the first group's statistics, and each group's
            meta["reward_scaler"] = json.dumps({**scalers[0].state(), "groups": [sc.state() for sc in scalers]})
        meta["adv_norm"] = json.dumps(t.adv_norm.state())
        meta["step_size"] = json.dumps(t.step_size.state())
        write_safetensors(self.file(OPTIM_FILE), tensors, meta)  # first: see the docstring
        write_agent(path, agent_tensors, info)
        return path

    def load(self, t: TrainState) -> Resumed:
        """Resume the checkpoint into ``t``: its weights, step and update, and from the optimizer file
        (when there is one) the optimizer state and the generators; returns the normalizers' statistics.

        Raises:
            CheckpointError: no agent file, one of another game, an optimizer file not saved with it
                or unreadable.
        """
        path = self.file(AGENT_FILE)
        if not os.path.exists(path):
            raise CheckpointError(f"--resume: no checkpoint at {path}; train without --resume first")
        af = read_agent(path)
        old = policy_from_file(af)
        check_same_game(t.policy, old, path)
        t.policy.load_state_dict(old.state_dict())
        t.step = int(af.info.get("step", 0))
        t.update = int(af.info.get("update", 0))
        opath = self.file(OPTIM_FILE)
        if not os.path.exists(opath):
            log.warning("--resume: no %s beside %s; the optimizer state starts afresh", opath, path)
            log.info("resumed from %s at step %d", path, t.step)
            return Resumed()
        tensors, meta = read_safetensors(opath, mmap=False)
        _check_pair(path, af.info, af.tensors, opath, meta)
        try:
            sd = json.loads(meta["optimizer"])
            for k, v in tensors.items():
                if k.startswith("state."):
                    _, i, name = k.split(".", 2)
                    sd["state"].setdefault(i, {})[name] = torch.from_numpy(np.array(v))
            sd["state"] = {int(i): s for i, s in sd["state"].items()}
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise CheckpointError(f"--resume: {opath} is not a gymloop optimizer state ({type(e).__name__}: {e}); delete it to "
                                  f"resume {path} with a fresh optimizer state") from None
        try:
            t.optim.load_state_dict(sd)
        except (KeyError, ValueError, TypeError) as e:
            raise CheckpointError(f"--resume: {opath} does not fit the network of {path} ({e}); delete it to resume with a "
                                  "fresh optimizer state") from None
        if "torch_rng" in tensors:
            _load_generator(t.gen, np.array(tensors["torch_rng"], dtype=np.uint8), meta.get("torch_rng_device", "cpu"))
        if "numpy_rng" in meta:
            t.rng.bit_generator.state = json.loads(meta["numpy_rng"])
        log.info("resumed from %s at step %d", path, t.step)
        return Resumed(json.loads(meta["reward_scaler"]) if "reward_scaler" in meta else None,
                       json.loads(meta["adv_norm"]) if "adv_norm" in meta else None,
                       json.loads(meta["step_size"]) if "step_size" in meta else None)

    # ------------------------------------------------------------------ the records
    def metrics_file(self, resume_step: int | None) -> MetricsFile:
        """``metrics.csv`` opened for a new run (``None``) or one resumed at ``resume_step``."""
        return MetricsFile(self.file(METRICS_FILE), resume_step)

    def tensorboard(self, resume_step: int | None) -> EventWriter:
        """The TensorBoard writer: a new run (``None``) replaces the earlier one's curves in the folder
        (not mixed with them); a resumed one drops what the stopped run logged after ``resume_step``."""
        self.make()
        tb_dir = self.file(TB_DIR)
        if resume_step is None and os.path.isdir(tb_dir):
            for name in os.listdir(tb_dir):
                if name.startswith("events.out.tfevents."):
                    os.remove(os.path.join(tb_dir, name))
        return EventWriter(tb_dir, purge_step=None if resume_step is None else resume_step + 1)

    def draw_curve(self, random_level: Mapping[str, float] | None = None) -> None:
        """Draw ``curve.png`` from ``metrics.csv`` (:func:`plot_curve`); a failure is logged, never raised
        (a missing plotting library must not lose the trained agent)."""
        try:
            plot_curve(self.file(METRICS_FILE), self.file(CURVE_FILE), random_level=random_level)
        except Exception as e:
            log.warning("could not draw the learning curve: %s", e)

    # ------------------------------------------------------------------ the random agent's level
    def write_random_level(self, level: Mapping[str, float]) -> None:
        """Keep the random agent's level (per metric) for a resumed run's curve and summary."""
        self.make()
        with atomic_output(self.file(RANDOM_LEVEL_FILE)) as tmp, open(tmp, "w") as f:
            json.dump(dict(level), f)

    def read_random_level(self) -> dict[str, float] | None:
        """The level :meth:`write_random_level` kept (``None`` if none, or unreadable: logged)."""
        path = self.file(RANDOM_LEVEL_FILE)
        if not os.path.exists(path):
            return None
        try:
            with open(path) as f:
                return {k: float(v) for k, v in json.load(f).items()}
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("could not read the random agent's level from %s: %s", path, e)
            return None

    def remove_random_level(self) -> None:
        """Remove an earlier run's random level (a new run that does not measure one)."""
        if os.path.exists(self.file(RANDOM_LEVEL_FILE)):
            os.remove(self.file(RANDOM_LEVEL_FILE))


def check_same_game(policy: Policy, other: Policy, path: str) -> None:
    """Raise :class:`CheckpointError` naming the mismatches unless ``other`` (loaded from ``path``) has
    ``policy``'s entity, action and global types."""
    mine = policy.spaces.to_json()
    theirs = other.spaces.to_json()
    if mine != theirs:
        diffs = []
        for what, a, b in (("entity types", mine[0]["entities"], theirs[0]["entities"]), ("action types", mine[1], theirs[1])):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    diffs.append(f"{what[:-1]} {k!r}: game has {a.get(k)!r}, checkpoint has {b.get(k)!r}")
        if mine[0]["globals"] != theirs[0]["globals"]:
            diffs.append(f"globals: game has {mine[0]['globals']}, checkpoint has {theirs[0]['globals']}")
        raise CheckpointError(f"{path} was trained on a different game; mismatches: " + "; ".join(diffs))


def recorded_shape(cfg: TrainConfig, path: str) -> TrainConfig:
    """``cfg`` with its automatic fields taken from the run being resumed (``path``'s checkpoint).

    A resumed run keeps the rollout shape and learning rate it was trained with, even when the new
    ``steps`` would resolve to others; fields the user set stay as given. Nothing changes when the
    checkpoint is missing (:meth:`RunDir.load` reports that) or records no such field.
    """
    if not os.path.exists(path):
        return cfg
    try:
        recorded = read_agent(path).info.get("train_config") or {}
    except CheckpointError:
        return cfg  # RunDir.load reports the bad file
    out = copy.deepcopy(cfg)
    if out.num_envs is None and isinstance(recorded.get("num_envs"), int):
        out.num_envs = recorded["num_envs"]
    ppo = recorded.get("ppo") or {}
    for name, kind in (("epochs", int), ("minibatch_size", int), ("lr", float)):
        v = ppo.get(name)
        if getattr(out.ppo, name) is None and isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(out.ppo, name, kind(v))
    return out


def _load_generator(gen: torch.Generator, state: np.ndarray, saved_on: str) -> None:
    """Put a saved sampling generator's state into ``gen``: as it was when saved on the same kind of device;
    else (a run resumed on another kind of device, whose generator is another algorithm) ``gen`` is seeded
    from a digest of the saved state, so the resumed run is still determined by its checkpoint."""
    if gen.device.type == saved_on:
        gen.set_state(torch.from_numpy(state))
        return
    seed = int.from_bytes(hashlib.blake2b(state.tobytes(), digest_size=8).digest(), "little") >> 1
    log.info("--resume: the sampling generator was saved on %s and resumes on %s: seeded from the saved state", saved_on, gen.device)
    gen.manual_seed(seed)


def _tensors_digest(tensors: Mapping[str, np.ndarray]) -> str:
    """A digest of named tensors (names, dtypes, shapes and bytes): the identity of an agent file's weights."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class MetricsFile:
    """``metrics.csv``: one row per completed update, flushed at once.

    A new run starts an empty file; a resumed one keeps the rows up to the checkpoint's step and
    drops later ones (written after that checkpoint by a run that was then stopped), so every step
    appears once. When a new column appears the file is rewritten with it; every rewrite goes to a
    temporary file renamed over the old one, so a kill never leaves half a file.
    """

    def __init__(self, path: str, resume_step: int | None) -> None:
        self.path = check_output(path)
        self.fields: list[str] = []
        rows: list[dict[str, str]] = []
        if resume_step is not None and os.path.exists(path):
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                self.fields = list(reader.fieldnames or [])
            kept = [r for r in rows if _row_step(r) <= resume_step]
            if len(kept) < len(rows):
                log.info("%s: dropped %d rows after step %d, the step of the checkpoint resumed", path, len(rows) - len(kept), resume_step)
            rows = kept
        self._rewrite(rows)
        self.f = open(path, "a", newline="")

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        with atomic_output(self.path) as tmp, open(tmp, "w", newline="") as f:
            if self.fields:
                w = csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)

    def write(self, info: Mapping[str, float]) -> None:
        """Append an update's row (a new column rewrites the file with it)."""
        new = [k for k in info if k not in self.fields]
        if new:
            self.f.close()
            with open(self.path, newline="") as f:
                rows = list(csv.DictReader(f))
            self.fields += new
            self._rewrite(rows)
            self.f = open(self.path, "a", newline="")
        csv.DictWriter(self.f, fieldnames=self.fields).writerow({k: info.get(k, "") for k in self.fields})
        self.f.flush()

    def close(self) -> None:
        """Close the file (its rows are already flushed)."""
        self.f.close()


def _row_step(row: Mapping[str, str]) -> float:
    try:
        return float(row.get("step") or "nan")
    except ValueError:
        return float("nan")  # an unreadable step counts as after the checkpoint: the row is dropped (and logged)


def _check_pair(agent_path: str, agent_info: Mapping[str, Any], agent_tensors: Mapping[str, np.ndarray], optim_path: str,
                optim_meta: Mapping[str, str]) -> None:
    """Raise :class:`CheckpointError` unless the optimizer file was saved together with the agent file.

    The optimizer file records the step, update and weights digest of the agent saved with it
    (:meth:`RunDir.save`); an optimizer file that records no agent is accepted (there is nothing to compare).
    """
    rec = optim_meta.get("agent")
    if rec is None:
        return
    try:
        mine = json.loads(rec)
        want = {"step": int(mine["step"]), "update": int(mine["update"]), "weights": str(mine["weights_digest"])}
    except (ValueError, KeyError, TypeError):
        raise CheckpointError(f"--resume: {optim_path} records its agent unreadably ({rec[:100]!r}); delete it to resume "
                              f"{agent_path} with a fresh optimizer state") from None
    have = {"step": agent_info.get("step"), "update": agent_info.get("update"), "weights": _tensors_digest(agent_tensors)}
    diffs = [f"{k} {want[k]} vs {have[k]}" for k in ("update", "step", "weights") if want[k] != have[k]]
    if diffs:
        raise CheckpointError(
            f"--resume: {agent_path} and {optim_path} are not one checkpoint: the optimizer state was saved with another agent "
            f"({'; '.join(diffs)}, optimizer file vs agent file); the run was probably stopped between writing the two, or one "
            f"was copied from another run. Fix: delete {optim_path} to resume the agent with a fresh optimizer state, or train "
            "anew without --resume"
        )


def episode_metric_names(columns: Iterable[str]) -> list[str]:
    """The episode metrics among ``metrics.csv`` columns (or a history row's keys): ``episode_return``,
    ``episode_length``, then the game's own, each one that has ``<name>_mean`` and ``<name>_count``."""
    cols = list(columns)
    names = [c[: -len("_mean")] for c in cols if c.endswith("_mean") and c[: -len("_mean")] + "_count" in cols]
    first = [n for n in ("episode_return", "episode_length") if n in names]
    return first + [n for n in names if n not in first]


_PANEL_LABELS = {"episode_return": "mean episode return (sum of rewards)", "episode_length": "mean episode length (decisions)",
                 "league_rating": "learner's league rating (openskill mu)"}


def _short_steps(x: float, _pos: Any = None) -> str:
    """A step count for an axis: ``950``, ``50K``, ``1.5M``.

    Example:
        >>> [_short_steps(x) for x in (0, 950, 50_000, 400_000, 1_500_000, 3e6)]
        ['0', '950', '50K', '400K', '1.5M', '3M']
    """
    for div, unit in ((1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.1f}".removesuffix(".0") + unit
    return f"{x:.0f}"


def plot_curve(csv_path: str, png_path: str, random_level: Mapping[str, float] | None = None) -> Figure:
    """Draw every episode metric of ``metrics.csv`` against steps, one panel each, into ``png_path``.

    The panels: the mean episode return, the mean episode length, then each metric the game reports
    itself (every ``<name>_mean`` column with a ``<name>_count``). ``random_level`` (e.g. what
    :func:`evaluate` gives for the random agent) draws, on each panel whose metric it has, that
    level as a dashed line. Returns the figure (already saved; it holds no window).
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        names = episode_metric_names(reader.fieldnames or [])
    if not names:
        names = ["episode_return", "episode_length"]  # no episode ended yet: empty panels say so
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = Figure(figsize=(5 * ncols, 3.6 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).reshape(-1)
    for k in range(len(names), axes.size):
        fig.delaxes(axes[k])
    for n, (name, ax) in enumerate(zip(names, axes)):
        col = f"{name}_mean"
        pts = [(float(r["step"]), float(r[col])) for r in rows if r.get(col)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=f"C{n}", label="agent in training")
        if random_level is not None and name in random_level:
            ax.axhline(random_level[name], color="gray", linestyle="--", label="random agent")
            ax.legend(loc="best", fontsize="small")
        ax.set_xlabel("steps")
        # at most 6 step ticks, written short (400K, 1.5M): full numbers run into each other on a narrow panel
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.xaxis.set_major_formatter(FuncFormatter(_short_steps))
        ax.set_ylabel(_PANEL_LABELS.get(name, f"mean {name} (game metric)"))
    fig.tight_layout()
    with atomic_output(png_path) as tmp:
        fig.savefig(tmp, dpi=80, format="png")
    return fig
