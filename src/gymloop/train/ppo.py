"""Proximal Policy Optimization over ragged entity batches.

Rollouts come from a :class:`~gymloop.VecEnv`; advantages use GAE, bootstrapping through
truncations (with the value of the episode's final observation when the game passes one to
``game_over``, as ``batch.final``; else with the value of its last decision's observation) and
not through terminations. Each actor's
probability ratio is clipped and weighted by its slot's advantage.
"""

from __future__ import annotations

import copy
import csv
import functools
import hashlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._gc import tuned_collector
from ..batch import Batch, stack, take
from ..checkpoint import read_agent, read_safetensors, write_agent, write_safetensors
from ..errors import CheckpointError, ConfigError, GymloopError, TrainingError
from ..evaluation import evaluate_episodes
from ..nn.torch_policy import Policy, policy_from_file, policy_info, policy_tensors
from ..runtime.backend import default_backend
from ..vector import VecEnv
from .config import ADV_NORMS, TrainConfig
from .optim import make_adam
from .tensorboard import EventWriter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Trainer", "train", "TrainResult", "Rollout"]

log = logging.getLogger("gymloop.train")

AGENT_FILE = "agent.safetensors"
OPTIM_FILE = "optimizer.safetensors"
METRICS_FILE = "metrics.csv"
CURVE_FILE = "curve.png"


@dataclass
class TrainResult:
    """Outcome of a training run."""

    steps: int
    updates: int
    seconds: float
    interrupted: bool
    out_dir: str | None
    history: list[dict[str, float]] = field(default_factory=list)  # one row per update (the repr gives their number)
    first_step: int = 0  # the step this run started from (> 0 when resumed)
    stop_signal: int | None = None  # the signal that interrupted the run (SIGINT for Ctrl-C, SIGTERM), if one did

    def __repr__(self) -> str:
        return (f"TrainResult(steps={self.steps}, updates={self.updates}, seconds={self.seconds:.1f}, interrupted={self.interrupted}, "
                f"out_dir={self.out_dir!r}, history=[{len(self.history)} rows], first_step={self.first_step}, "
                f"stop_signal={self.stop_signal}, final_score={self.final_score:.4g})")

    @property
    def final_score(self) -> float:
        """Mean episode score (return) over the last few updates that finished episodes."""
        vals = [h["episode_return_mean"] for h in self.history if "episode_return_mean" in h]
        return float(np.mean(vals[-5:])) if vals else float("nan")


@dataclass(frozen=True)
class Rollout:
    """What :meth:`Trainer._collect` gathers: ``T`` (``cfg.rollout_steps``) steps of the learner's slots.

    ``S`` is the number of learner slots: every slot of the :class:`~gymloop.VecEnv`, or with
    frozen opponents only the learning agent's (``Trainer.learner_slots``). Per-step arrays are
    indexed ``[t, s]``; ``t`` is the step, ``s`` the learner slot.
    """

    observations: list[Batch]
    """Per step, the learner's ``S`` slots' observations the actions were chosen at (``T`` batches)."""
    actions: list[dict[str, np.ndarray]]
    """Per step, per action type, the learner's actions: int64 ``(actors of that type at that step,)``,
    in the order of that step's ``observations[t].actor_slot[type]`` (a choice index for a
    categorical action, a candidate index for a select-entity one)."""
    logprobs: list[dict[str, np.ndarray]]
    """Per step, per action type, the log-probability of each action in ``actions`` under the
    policy that chose it: float32, the same shapes as ``actions``."""
    values: np.ndarray
    """The value estimate of each step's observation: float32 ``(T, S)``."""
    rewards: np.ndarray
    """The reward each slot received after its step's action: float32 ``(T, S)``."""
    terminated: np.ndarray
    """Whether the slot's episode terminated after the step (no bootstrap): bool ``(T, S)``."""
    truncated: np.ndarray
    """Whether the slot's episode was truncated after the step (bootstrapped): bool ``(T, S)``."""
    last_values: np.ndarray
    """The value estimate of the observation after the rollout's last step (the bootstrap of the
    last step's unfinished episodes): float32 ``(S,)``."""
    episode_metrics: dict[str, list[float]]
    """Per metric name (``episode_return``, ``episode_length``, the game's own), its value at every
    learner episode that ended during the rollout, in order of ending."""
    final_values: np.ndarray | None = None
    """The value of each truncated episode's final observation (the one the game gave to
    ``game_over``): float32 ``(T, S)``, NaN where the step truncated no episode or the game gave
    none. ``None`` means NaN everywhere: truncations bootstrap from their last decision's value."""


class _RolloutParts:
    """The per-step lists of one VecEnv's :class:`Rollout` while it is being collected.

    :meth:`acted` records the learner's side of a step's actions (what :meth:`Trainer._act` gave) and
    returns every actor's actions for the VecEnv; :meth:`stepped` records the batch that came back.
    """

    def __init__(self, learner: np.ndarray | slice, reward_scaler: RewardScaler | None) -> None:
        self.learner = learner
        self.reward_scaler = reward_scaler
        self.observations: list[Batch] = []
        self.actions: list[dict[str, np.ndarray]] = []
        self.logprobs: list[dict[str, np.ndarray]] = []
        self.values: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.terminated: list[np.ndarray] = []
        self.truncated: list[np.ndarray] = []
        self.final_values: list[np.ndarray] = []
        self.episode_metrics: dict[str, list[float]] = {}

    def acted(self, acted: tuple[dict[str, np.ndarray], Batch, Any, np.ndarray]) -> dict[str, np.ndarray]:
        all_actions, learner_obs, out, value = acted
        self.observations.append(learner_obs)
        self.actions.append({k: out.actions[k].numpy() for k in out.actions})
        self.logprobs.append({k: out.logprob[k].numpy() for k in out.logprob})
        self.values.append(value)
        return all_actions

    def stepped(self, b: Batch, final_values: Callable[[Batch], np.ndarray]) -> None:
        learner = self.learner
        self.rewards.append(b.reward[learner])
        self.terminated.append(b.terminated[learner])
        self.truncated.append(b.truncated[learner])
        if self.reward_scaler is not None:
            self.reward_scaler.update(self.rewards[-1], self.terminated[-1] | self.truncated[-1])
        self.final_values.append(final_values(b))
        for name, arr in b.metrics.items():
            ended = arr[learner]
            ended = ended[~np.isnan(ended)]
            if ended.size:
                self.episode_metrics.setdefault(name, []).extend(ended.tolist())

    def rollout(self, last_values: Callable[[], np.ndarray]) -> Rollout:
        return Rollout(
            observations=self.observations,
            actions=self.actions,
            logprobs=self.logprobs,
            values=np.stack(self.values),
            rewards=np.stack(self.rewards).astype(np.float32),
            terminated=np.stack(self.terminated),
            truncated=np.stack(self.truncated),
            last_values=last_values(),
            episode_metrics=self.episode_metrics,
            final_values=np.stack(self.final_values),
        )


@dataclass
class _Group:
    """With ``cfg.overlap``: one half of the game copies, its own VecEnv, batch and reward scaler."""

    env: VecEnv
    batch: Batch
    reward_scaler: RewardScaler | None = None


def _join(parts: list[tuple[Rollout, np.ndarray, np.ndarray]]) -> tuple[Rollout, np.ndarray, np.ndarray]:
    """The rollouts of the overlap groups (``T`` steps of ``S / 2`` slots each) with their advantages and
    returns, joined along the time axis: ``2T`` steps of ``S / 2`` slots, as :meth:`Trainer._update`
    takes them (it needs no temporal structure after GAE). ``last_values`` is the groups' concatenated
    (it is not a GAE input any more)."""
    rs = [r for r, _, _ in parts]
    metrics: dict[str, list[float]] = {}
    for r in rs:
        for name, vals in r.episode_metrics.items():
            metrics.setdefault(name, []).extend(vals)
    joined = Rollout(
        observations=[o for r in rs for o in r.observations],
        actions=[a for r in rs for a in r.actions],
        logprobs=[lp for r in rs for lp in r.logprobs],
        values=np.concatenate([r.values for r in rs]),
        rewards=np.concatenate([r.rewards for r in rs]),
        terminated=np.concatenate([r.terminated for r in rs]),
        truncated=np.concatenate([r.truncated for r in rs]),
        last_values=np.concatenate([r.last_values for r in rs]),
        episode_metrics=metrics,
        final_values=np.concatenate([r.final_values for r in rs]),  # (every group's rollout has them)
    )
    return joined, np.concatenate([a for _, a, _ in parts]), np.concatenate([g for _, _, g in parts])


def overlap_seed(seed: int) -> int:
    """The root seed of the second half of the game copies with ``TrainConfig.overlap`` (the first half's
    is ``seed``): derived from ``seed`` alone, so the same seed gives the same run."""
    return int(np.random.SeedSequence(entropy=seed, spawn_key=(0x6F766C,)).generate_state(1, np.uint64)[0]) >> 1


class _Progress:
    """A one-line progress display on a terminal; periodic log lines elsewhere.

    It shows, over the episodes that ended in the last rollout, the mean ``return`` (the sum of
    rewards, not the game's score), the mean episode length ``ep.len`` in decisions, and after
    ``game:`` the means of up to three metrics the game reports itself (snake: ``length=``).
    """

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.last = 0.0
        self.width = 0  # of the longest line so far: a shorter one is padded to overwrite it

    def update(self, steps: int, info: dict[str, float]) -> None:
        if not self.enabled:
            return
        now = time.time()
        frac = min(1.0, steps / self.total)
        bar = "#" * int(frac * 24)
        ret = info.get("episode_return_mean", float("nan"))
        length = info.get("episode_length_mean", float("nan"))
        own = [n for n in episode_metric_names(info) if n not in ("episode_return", "episode_length")][:3]
        line = (
            f"[{bar:<24}] {steps:>9}/{self.total} steps  {info.get('steps_per_second', 0):7.0f} steps/s  "
            f"return {ret:6.2f}  ep.len {length:6.1f}"
        )
        if own:
            line += "  game: " + " ".join(f"{n}={info[n + '_mean']:.2f}" for n in own)
        if self.tty:
            self.width = max(self.width, len(line))
            sys.stderr.write("\r" + line.ljust(self.width))
            sys.stderr.flush()
        elif now - self.last > 10 or steps >= self.total:
            sys.stderr.write(line + "\n")
            self.last = now

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _recorded_shape(cfg: TrainConfig, path: str) -> TrainConfig:
    """``cfg`` with its automatic fields taken from the run being resumed (``path``'s checkpoint).

    A resumed run keeps the rollout shape and learning rate it was trained with, even when the new
    ``steps`` would resolve to others; fields the user set stay as given. Nothing changes when the
    checkpoint is missing (``_load_resume`` reports that) or records no such field.
    """
    if not os.path.exists(path):
        return cfg
    try:
        recorded = read_agent(path).info.get("train_config") or {}
    except CheckpointError:
        return cfg  # _load_resume reports the bad file
    out = copy.deepcopy(cfg)
    if out.num_envs is None and isinstance(recorded.get("num_envs"), int):
        out.num_envs = recorded["num_envs"]
    ppo = recorded.get("ppo") or {}
    for name, kind in (("epochs", int), ("minibatch_size", int), ("lr", float)):
        v = ppo.get(name)
        if getattr(out.ppo, name) is None and isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(out.ppo, name, kind(v))
    return out


class RewardScaler:
    """Running standard deviation of each slot's discounted return, to scale rewards by.

    The return is accumulated per slot as the agent sees it (``ret = ret * gamma + reward``,
    reset at episode ends); its second moment over every slot and step so far (Welford's
    parallel update) gives the scale. Scaled rewards are clipped to ``[-clip, clip]`` so the
    first rewards of a game that was silent until then cannot explode.
    """

    def __init__(self, num_slots: int, gamma: float, clip: float = 10.0) -> None:
        self.gamma, self.clip = gamma, clip
        self.ret = np.zeros(num_slots, dtype=np.float64)
        self.count, self.mean, self.var = 0.0, 0.0, 0.0

    def update(self, rewards: np.ndarray, done: np.ndarray) -> None:
        """Fold one step of rewards (and which slots' episodes ended) into the statistics."""
        self.ret = self.ret * self.gamma + rewards
        n = float(self.ret.size)
        if n:
            m, v = float(self.ret.mean()), float(self.ret.var())
            total = self.count + n
            delta = m - self.mean
            self.mean += delta * n / total
            self.var = (self.var * self.count + v * n + delta**2 * self.count * n / total) / total
            self.count = total
        self.ret[done] = 0.0

    @property
    def scale(self) -> float:
        """The divisor: the return's standard deviation (1 until it has seen a non-zero reward)."""
        sd = math.sqrt(self.var)
        return sd if sd > 1e-8 else 1.0

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return np.clip(rewards / self.scale, -self.clip, self.clip).astype(np.float32)

    def state(self) -> dict[str, Any]:
        return {"ret": self.ret.tolist(), "count": self.count, "mean": self.mean, "var": self.var}

    def load(self, d: dict[str, Any]) -> None:
        ret = np.asarray(d["ret"], dtype=np.float64)
        if ret.shape == self.ret.shape:
            self.ret = ret
        self.count, self.mean, self.var = float(d["count"]), float(d["mean"]), float(d["var"])


class AdvantageNormalizer:
    """Advantage normalization of one run (``PPOConfig.adv_norm``; see its docstring for the modes).

    :meth:`observe` takes each rollout's advantages once, before its update (the whole rollout's
    mean and variance; the running variance, an exponential average with bias correction);
    calling the normalizer on a minibatch's advantages returns them normalized (a new array).
    """

    def __init__(self, mode: str, decay: float = 0.9) -> None:
        self.mode, self.decay = mode, decay
        self.rollout_mean, self.rollout_std = 0.0, 1.0
        self.var_ema, self.weight = 0.0, 0.0  # the running variance is var_ema / weight

    def observe(self, adv: np.ndarray) -> None:
        """Fold one rollout's advantages (any shape) into the statistics."""
        if adv.size == 0:
            return
        a = adv.astype(np.float64, copy=False)
        mean, var = float(a.mean()), float(a.var())
        self.rollout_mean, self.rollout_std = mean, math.sqrt(var)
        self.var_ema = self.decay * self.var_ema + (1 - self.decay) * var
        self.weight = self.decay * self.weight + (1 - self.decay)

    @property
    def running_std(self) -> float:
        """The running standard deviation of the advantages (0 before the first rollout)."""
        return math.sqrt(self.var_ema / self.weight) if self.weight > 0 else 0.0

    def __call__(self, adv: np.ndarray) -> np.ndarray:
        mode = self.mode
        if mode == "none":
            return adv
        if mode == "rollout":
            return ((adv - self.rollout_mean) / (self.rollout_std + 1e-8)).astype(adv.dtype, copy=False)
        if adv.size <= 1:  # one slot-step: nothing to centre on
            return adv
        if mode == "minibatch":  # written as it always was: its runs are bit for bit those of earlier versions
            return (adv - adv.mean()) / (adv.std() + 1e-8)
        centred = adv - adv.mean()
        if mode == "running":
            scale = self.running_std
        elif mode == "max":
            scale = max(float(adv.std()), self.running_std)
        else:
            raise ConfigError(f"ppo.adv_norm={mode!r} is not one of the choices: {', '.join(map(repr, ADV_NORMS))}")
        return (centred / (scale + 1e-8)).astype(adv.dtype, copy=False)

    def state(self) -> dict[str, Any]:
        return {"var_ema": self.var_ema, "weight": self.weight}

    def load(self, d: dict[str, Any]) -> None:
        self.var_ema, self.weight = float(d["var_ema"]), float(d["weight"])


class _Diverged(TrainingError):
    """Raised inside an update or a rollout when the numbers stop being finite (or PyTorch fails on
    them); :meth:`Trainer.train` restores the last completed update, saves it and raises a
    :class:`TrainingError` naming the update and the fix."""


def _torch_errors(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn an error PyTorch raises inside the decorated method (a ``RuntimeError`` or ``ValueError``
    that is no :class:`GymloopError`: NaN logits, overflowing weights, ...) into :class:`_Diverged`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except (RuntimeError, ValueError) as e:
                if isinstance(e, GymloopError):
                    raise
                raise _Diverged(f"PyTorch failed while {what}: {type(e).__name__}: {e}") from e

        return inner

    return wrap


def _all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite: one fused max-norm pass, one sync."""
    floats = [t.detach() for t in tensors if t.is_floating_point()]
    if not floats:
        return True
    return bool(torch.isfinite(torch.stack(torch._foreach_norm(floats, float("inf")))).all())


def _tensors_digest(tensors: Mapping[str, np.ndarray]) -> str:
    """A digest of named tensors (names, dtypes, shapes and bytes): the identity of an agent file's weights."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _StopSignals:
    """While training: SIGTERM stops the run like Ctrl-C (the last completed update is saved); while
    saving on the way out, SIGINT and SIGTERM wait for the files to be written.

    Handlers can only be installed from the main thread; elsewhere SIGTERM keeps its own handler.
    The previous handlers are restored on exit.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.saving = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        self._install(signal.SIGTERM)
        return self

    def _install(self, sig: int) -> None:
        if threading.current_thread() is not threading.main_thread() or sig in self._old:
            return
        old = signal.getsignal(sig)
        if old is None:  # a handler not installed from Python: it cannot be restored, so leave it
            return
        try:
            signal.signal(sig, self._handler)
        except (ValueError, OSError):  # pragma: no cover  (an embedding interpreter without signals)
            return
        self._old[sig] = old

    def _handler(self, signum: int, frame: Any) -> None:
        if self.saving:
            log.warning("%s: saving the checkpoint first; the run stops when it is written", signal.Signals(signum).name)
            return
        self.received = signum
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    def start_saving(self) -> None:
        """From now on, signals wait for the save (a second Ctrl-C cannot cut the files short)."""
        self.saving = True
        self._install(signal.SIGINT)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


class _Snapshot:
    """The trainer's state after its last completed update: weights and normalization statistics,
    optimizer state, random generators, reward scaler, step and update.

    :meth:`take` copies into buffers allocated once (a memory copy of the model and the optimizer
    moments per update); :meth:`restore` puts the state back into the trainer, which is then saved
    whatever stopped it mid-rollout or mid-update.
    """

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.param_groups: list[dict[str, Any]] = []
        self.gen_state: torch.Tensor | None = None
        self.rng_state: dict[str, Any] = {}
        self.scalers: list[dict[str, Any] | None] = []  # per VecEnv (two with cfg.overlap)
        self.adv_norm: dict[str, Any] = {}  # the running advantage statistics
        self.step = 0
        self.update = 0

    @staticmethod
    def _live(t: Trainer) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
        live = {f"p.{k}": v for k, v in t.policy.state_dict().items()}
        sd = t.optim.state_dict()
        for i, st in sd["state"].items():
            for name, v in st.items():
                live[f"o.{i}.{name}"] = v if torch.is_tensor(v) else torch.tensor(v)
        return live, sd["param_groups"]

    def take(self, t: Trainer) -> None:
        live, groups = self._live(t)
        with torch.no_grad():
            for k, v in live.items():
                buf = self.tensors.get(k)
                if buf is None or buf.shape != v.shape or buf.dtype != v.dtype:
                    self.tensors[k] = v.detach().clone()
                else:
                    buf.copy_(v)
        for k in [k for k in self.tensors if k not in live]:
            del self.tensors[k]
        self.param_groups = copy.deepcopy(groups)
        self.gen_state = t.gen.get_state()
        self.rng_state = copy.deepcopy(dict(t.rng.bit_generator.state))
        self.scalers = [None if sc is None else sc.state() for sc in t._reward_scalers()]
        self.adv_norm = t.adv_norm.state()
        self.step, self.update = t.step, t.update

    def restore(self, t: Trainer) -> None:
        t.policy.load_state_dict({k[2:]: v.clone() for k, v in self.tensors.items() if k.startswith("p.")})
        state: dict[int, dict[str, torch.Tensor]] = {}
        for k, v in self.tensors.items():
            if k.startswith("o."):
                _, i, name = k.split(".", 2)
                state.setdefault(int(i), {})[name] = v.clone()
        t.optim.load_state_dict({"state": state, "param_groups": copy.deepcopy(self.param_groups)})
        if self.gen_state is not None:
            t.gen.set_state(self.gen_state)
        t.rng.bit_generator.state = copy.deepcopy(self.rng_state)
        for sc, saved in zip(t._reward_scalers(), self.scalers):
            if sc is not None and saved is not None:
                sc.load(saved)
        if self.adv_norm:
            t.adv_norm.load(self.adv_norm)
        t.step, t.update = self.step, self.update


class _MetricsFile:
    """``metrics.csv``: one row per completed update, flushed at once.

    A new run starts an empty file; a resumed one keeps the rows up to the checkpoint's step and
    drops later ones (written after that checkpoint by a run that was then stopped), so every step
    appears once. When a new column appears the file is rewritten with it; every rewrite goes to a
    temporary file renamed over the old one, so a kill never leaves half a file.
    """

    def __init__(self, path: str, resume_step: int | None) -> None:
        self.path = path
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
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", newline="") as f:
                if self.fields:
                    w = csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore")
                    w.writeheader()
                    w.writerows(rows)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def write(self, info: Mapping[str, float]) -> None:
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
        self.f.close()


def _row_step(row: Mapping[str, str]) -> float:
    try:
        return float(row.get("step") or "nan")
    except ValueError:
        return float("nan")  # an unreadable step counts as after the checkpoint: the row is dropped (and logged)


class Trainer:
    """Trains one policy for a game.

    Args:
        game: a game loop function (or ``gl.Environment`` class).
        cfg: the configuration (checked at construction).
        out_dir: where ``agent.safetensors``, ``optimizer.safetensors``, ``metrics.csv``,
            ``curve.png`` and TensorBoard files go (``None``: nothing is written).
        game_name: recorded in the checkpoint (``snake`` or ``module:function``).
        resume: continue from ``out_dir``'s checkpoint and optimizer state.
        progress: show a progress line on stderr.

    Whatever ends :meth:`train` (the budget, Ctrl-C, SIGTERM, a game's error, a worker's death, a
    timeout, a diverging update, any exception) it saves the state after the last completed update
    (the weights, the optimizer, the generators) with ``metrics.csv`` and ``curve.png`` first; see
    :meth:`train`.
    """

    def __init__(
        self,
        game: Callable[..., Any],
        cfg: TrainConfig,
        out_dir: str | None = None,
        game_name: str = "",
        resume: bool = False,
        progress: bool = False,
    ) -> None:
        cfg.check()
        self.game = game
        if resume and out_dir:
            cfg = _recorded_shape(cfg, os.path.join(out_dir, AGENT_FILE))
        self.cfg = cfg.resolved()  # automatic fields chosen from the budget; the checkpoint records these
        if resume:  # fields recorded by the resumed run must still fit the ones given now
            try:
                self.cfg.check()
            except ConfigError as e:
                raise ConfigError(f"{e} (with the rollout shape recorded by the run being resumed in {out_dir})") from None
        self.num_envs, self.epochs, self.minibatch_size = self.cfg.shape()
        if self.cfg.ppo.lr is None:  # resolved() chooses it
            raise ConfigError("ppo.lr was not resolved")
        self.lr: float = self.cfg.ppo.lr
        self.out_dir = out_dir
        self.game_name = game_name or getattr(game, "__name__", "game")
        self.resume = resume
        self.progress = progress
        if resume and not out_dir:
            raise ConfigError("resume needs out_dir: the folder holding agent.safetensors")
        self.reward_scaler: RewardScaler | None = None  # made by _setup when ppo.scale_rewards
        self._resumed_scaler: dict[str, Any] | None = None  # its state in the resumed run's optimizer file
        self._resumed_adv_norm: dict[str, Any] | None = None  # the running advantage statistics there

    # ------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        cfg = self.cfg
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.step = 0
        self.update = 0
        #: every VecEnv of the run: one, or with cfg.overlap the two halves of the game copies (closed at the end)
        self.envs: list[VecEnv] = []
        self._groups: list[_Group] = []
        halves, n, backend = [(cfg.seed, cfg.workers)], self.num_envs, cfg.backend
        if cfg.overlap:  # two halves, each with half the workers; the backend the whole run would get
            halves = [(cfg.seed, cfg.workers // 2), (overlap_seed(cfg.seed), cfg.workers // 2)]
            n, backend = self.num_envs // 2, cfg.backend or default_backend(cfg.workers)
        try:
            for seed, workers in halves:
                self.envs.append(VecEnv(
                    self.game, num_envs=n, workers=workers, seed=seed, agents_per_game=cfg.agents_per_game,
                    step_timeout=cfg.step_timeout, on_game_error=cfg.on_game_error,
                    restart_workers=cfg.on_game_error == "restart", backend=backend,
                    backend_options={**cfg.backend_options, **({"address": cfg.address} if cfg.address is not None else {})}
                    or None))
            self.env = self.envs[0]
            self._setup_learner()
        except BaseException:
            for env in self.envs:
                env.close()  # a failed start (a bad checkpoint to resume, ...) leaves no worker behind
            raise

    def _setup_learner(self) -> None:
        cfg = self.cfg
        batches = [env.reset() for env in self.envs]
        self.batch = batches[0]
        if cfg.init_from and not self.resume:
            from .warmstart import warm_start

            self.policy, self.warm_start_report = warm_start(read_agent(cfg.init_from), self.env.obs_space, self.env.action_space, self.batch)
            cfg.net = self.policy.cfg
        else:
            self.policy = Policy(self.env.obs_space, self.env.action_space, cfg.net)
        self.optim = make_adam(self.policy.parameters(), self.lr)
        if self.resume:
            self._load_resume()
        elif not cfg.init_from:
            self.policy.update_norms(self.policy.pack(self.batch if len(batches) == 1 else stack(batches)))
        S = self.env.num_slots
        apg = cfg.agents_per_game
        self.learner = np.ones(S, dtype=bool)
        self.opponents: list[Policy] = []
        if cfg.opponents:
            self.learner[:] = False
            self.learner[0::apg] = True  # agent 0 of each game learns; the others are frozen opponents
            for path in cfg.opponents:
                opp = policy_from_file(read_agent(path))
                self._check_compatible(opp, path)
                opp.eval()
                self.opponents.append(opp)
        self.learner_slots = np.flatnonzero(self.learner)  # of each VecEnv (the halves are alike with cfg.overlap)
        scalers = [RewardScaler(self.learner_slots.size, cfg.ppo.gamma) if cfg.ppo.scale_rewards else None for _ in self.envs]
        for i, scaler in enumerate(scalers):
            if scaler is not None and self._resumed_scaler is not None:
                # the resumed run's state of this half, else (another layout) its one scaler's statistics
                groups = self._resumed_scaler.get("groups")
                scaler.load(groups[i] if isinstance(groups, list) and len(groups) == len(scalers) else self._resumed_scaler)
        self.reward_scaler = scalers[0]
        self.adv_norm = AdvantageNormalizer(cfg.ppo.adv_mode(), cfg.ppo.adv_decay)
        if self._resumed_adv_norm is not None:
            self.adv_norm.load(self._resumed_adv_norm)
        if cfg.overlap:
            self._groups = [_Group(env, b, scaler) for env, b, scaler in zip(self.envs, batches, scalers)]
        self.tb: EventWriter | None = None
        if self.out_dir:
            os.makedirs(self.out_dir, exist_ok=True)
            tb_dir = os.path.join(self.out_dir, "tb")
            if not self.resume and os.path.isdir(tb_dir):  # a new run replaces the earlier one's curves too, not mixed with them
                for name in os.listdir(tb_dir):
                    if name.startswith("events.out.tfevents."):
                        os.remove(os.path.join(tb_dir, name))
            # a resumed run: TensorBoard drops what the stopped run logged after the checkpoint's step
            self.tb = EventWriter(tb_dir, purge_step=self.step + 1 if self.resume else None)

    def _reward_scalers(self) -> list[RewardScaler | None]:
        """The reward scaler of each VecEnv (two with ``cfg.overlap``; ``None`` without ``ppo.scale_rewards``)."""
        return [g.reward_scaler for g in self._groups] if self._groups else [self.reward_scaler]

    def _check_compatible(self, other: Policy, path: str) -> None:
        mine = self.policy.spaces.to_json()
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

    def _load_resume(self) -> None:
        out_dir = self.out_dir
        if not out_dir:  # refused by __init__ too; out_dir is a public attribute
            raise ConfigError("resume needs out_dir: the folder holding agent.safetensors")
        path = os.path.join(out_dir, AGENT_FILE)
        if not os.path.exists(path):
            raise CheckpointError(f"--resume: no checkpoint at {path}; train without --resume first")
        af = read_agent(path)
        old = policy_from_file(af)
        self._check_compatible(old, path)
        self.policy.load_state_dict(old.state_dict())
        self.step = int(af.info.get("step", 0))
        self.update = int(af.info.get("update", 0))
        opath = os.path.join(out_dir, OPTIM_FILE)
        if not os.path.exists(opath):
            log.warning("--resume: no %s beside %s; the optimizer state starts afresh", opath, path)
        else:
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
                self.optim.load_state_dict(sd)
            except (KeyError, ValueError, TypeError) as e:
                raise CheckpointError(f"--resume: {opath} does not fit the network of {path} ({e}); delete it to resume with a "
                                      "fresh optimizer state") from None
            if "torch_rng" in tensors:
                self.gen.set_state(torch.from_numpy(np.array(tensors["torch_rng"], dtype=np.uint8)))
            if "numpy_rng" in meta:
                self.rng.bit_generator.state = json.loads(meta["numpy_rng"])
            if "reward_scaler" in meta:
                self._resumed_scaler = json.loads(meta["reward_scaler"])
            if "adv_norm" in meta:
                self._resumed_adv_norm = json.loads(meta["adv_norm"])
        log.info("resumed from %s at step %d", path, self.step)

    # ------------------------------------------------------------------ checkpoints
    def save(self, out_dir: str | None = None) -> str | None:
        """Write the agent and optimizer state as one unit; returns the agent's path.

        The optimizer file is written first and records the agent's step, update and a digest of its
        weights; the agent file second. A run killed between the two writes leaves an optimizer
        state that does not match the agent, which ``--resume`` refuses (see :func:`_check_pair`).
        Each file is written to a temporary name and renamed (:func:`~gymloop.checkpoint.write_safetensors`).
        """
        d = out_dir or self.out_dir
        if not d:
            return None
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, AGENT_FILE)
        info = policy_info(self.policy, step=self.step, update=self.update, game=self.game_name, train_config=self.cfg.to_dict())
        agent_tensors = policy_tensors(self.policy)
        sd = self.optim.state_dict()
        tensors = {}
        state_meta: dict[str, dict] = {}
        for i, st in sd["state"].items():
            state_meta[str(i)] = {}
            for name, v in st.items():
                tensors[f"state.{i}.{name}"] = v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
        tensors["torch_rng"] = self.gen.get_state().numpy()
        meta = {
            "optimizer": json.dumps({"state": state_meta, "param_groups": sd["param_groups"]}),
            "numpy_rng": json.dumps(self.rng.bit_generator.state),
            "agent": json.dumps({"step": self.step, "update": self.update, "weights_digest": _tensors_digest(agent_tensors)}),
        }
        if self.reward_scaler is not None:
            state = self.reward_scaler.state()
            if self._groups:  # each half's own state too
                state["groups"] = [g.reward_scaler.state() for g in self._groups if g.reward_scaler is not None]
            meta["reward_scaler"] = json.dumps(state)
        meta["adv_norm"] = json.dumps(self.adv_norm.state())
        write_safetensors(os.path.join(d, OPTIM_FILE), tensors, meta)  # first: see the docstring
        write_agent(path, agent_tensors, info)
        self._last_save = time.monotonic()
        return path

    # ------------------------------------------------------------------ rollout
    @_torch_errors("choosing actions")
    def _act(self, b: Batch) -> tuple[dict[str, np.ndarray], Batch, Any, np.ndarray]:
        """Actions for every actor of ``b``; the learner's sub-batch, its outputs and values."""
        if not self.opponents:
            p = self.policy.pack(b)
            with torch.inference_mode():
                out = self.policy(p, generator=self.gen)
            return {k: v.numpy() for k, v in out.actions.items()}, b, out, out.value.numpy()
        learner_obs, learner_sel = take(b, self.learner_slots)
        opp_obs, opp_sel = take(b, np.flatnonzero(~self.learner))
        opp = self.opponents[self.update % len(self.opponents)]
        with torch.inference_mode():
            out = self.policy(self.policy.pack(learner_obs), generator=self.gen)
            opp_out = opp(opp.pack(opp_obs), generator=self.gen)
        actions = {}
        for k in b.actor_slot:
            a = np.zeros(b.actor_slot[k].shape[0], dtype=np.int64)
            a[learner_sel[k]] = out.actions[k].numpy()
            a[opp_sel[k]] = opp_out.actions[k].numpy()
            actions[k] = a
        return actions, learner_obs, out, out.value.numpy()

    @_torch_errors("computing values")
    def _values(self, b: Batch) -> np.ndarray:
        sub = b if not self.opponents else take(b, self.learner_slots)[0]
        with torch.inference_mode():
            return self.policy(self.policy.pack(sub), generator=self.gen).value.numpy()

    def _collect(self) -> Rollout:
        """Step the games ``cfg.rollout_steps`` times from ``self.batch``; the learner's side of it."""
        parts = _RolloutParts(self.learner_slots if self.opponents else slice(None), self.reward_scaler)
        b = self.batch
        for _ in range(self.cfg.rollout_steps):
            b = self.env.step(parts.acted(self._act(b)))
            parts.stepped(b, self._final_values)
        self.batch = b
        return parts.rollout(lambda: self._values(b))

    def _collect_overlapped(self) -> tuple[Rollout, np.ndarray, np.ndarray]:
        """With ``cfg.overlap``: step both halves ``cfg.rollout_steps`` times, each one's games stepping
        while the policy acts on the other's batch; the joined rollout with its advantages and returns.

        Per step ``t``: act on B, ``B.step_async`` (B's games step while ...) ``A.step_wait``, record it,
        act on A for ``t + 1``, ``A.step_async`` (... and A's while) ``B.step_wait``, record it.
        GAE runs per half (each has its own time axis and reward scaler), then :func:`_join`.
        """
        a, b = self._groups
        learner = self.learner_slots if self.opponents else slice(None)
        pa, pb = _RolloutParts(learner, a.reward_scaler), _RolloutParts(learner, b.reward_scaler)
        ba, bb = a.batch, b.batch
        T = self.cfg.rollout_steps
        last_a = np.zeros(0, dtype=np.float32)
        a.env.step_async(pa.acted(self._act(ba)))
        for t in range(T):
            b.env.step_async(pb.acted(self._act(bb)))
            ba = a.env.step_wait()
            pa.stepped(ba, self._final_values)
            if t + 1 < T:
                a.env.step_async(pa.acted(self._act(ba)))
            else:
                last_a = self._values(ba)  # while B's last step runs
            bb = b.env.step_wait()
            pb.stepped(bb, self._final_values)
        a.batch, b.batch = ba, bb
        self.batch = ba
        ra, rb = pa.rollout(lambda: last_a), pb.rollout(lambda: self._values(bb))
        return _join([(ra, *self._gae(ra, a)), (rb, *self._gae(rb, b))])

    @_torch_errors("computing values")
    def _final_values(self, b: Batch) -> np.ndarray:
        """Value of each truncated episode's final observation (NaN where the game gave none)."""
        values = np.full(self.learner_slots.size, np.nan, dtype=np.float32)
        final = b.final
        if final is None:
            return values
        if self.opponents:
            final, _ = take(final, self.learner_slots)
            truncated = b.truncated[self.learner_slots]
        else:
            truncated = b.truncated
        slots = np.flatnonzero(final.active & truncated)
        if slots.size:
            sub, _ = take(final, slots)
            with torch.inference_mode():
                values[slots] = self.policy(self.policy.pack(sub), generator=self.gen).value.numpy()
        return values

    def _gae(self, r: Rollout, group: _Group | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Advantages and returns (``advantages + values``) of a rollout: float32 ``(T, S)`` each.

        ``group``: with ``cfg.overlap``, the half of the games it comes from (its reward scaler scales the rewards)."""
        p = self.cfg.ppo
        values = r.values
        T, S = values.shape
        scaler = self.reward_scaler if group is None else group.reward_scaler
        rewards = r.rewards if scaler is None else scaler(r.rewards)
        advantages = np.zeros((T, S), dtype=np.float32)
        running = np.zeros(S, dtype=np.float32)  # the advantage of step t + 1, discounted along its episode
        no_final = np.full(S, np.nan, dtype=np.float32)
        for t in reversed(range(T)):
            next_value = r.last_values if t == T - 1 else values[t + 1]
            # truncation: bootstrap with the value of the episode's final observation when the game
            # gave one to game_over, else with the value of its last decision's observation
            final = r.final_values[t] if r.final_values is not None else no_final
            truncated_value = np.where(np.isnan(final), values[t], final)
            bootstrap = np.where(r.terminated[t], 0.0, np.where(r.truncated[t], truncated_value, next_value))
            done = r.terminated[t] | r.truncated[t]
            delta = rewards[t] + p.gamma * bootstrap - values[t]
            running = delta + p.gamma * p.gae_lambda * (~done) * running
            advantages[t] = running
        return advantages, advantages + values

    # ------------------------------------------------------------------ update
    @_torch_errors("updating the network")
    def _update(self, r: Rollout, adv: np.ndarray, ret: np.ndarray, ent_coef: float) -> dict[str, float]:
        """PPO epochs over a rollout with its advantages and returns (``(T, S)`` each); the mean losses."""
        p = self.cfg.ppo
        # the rollout's T steps of S slots as one batch of T * S slots, step-major (slot t * S + s)
        obs = stack(r.observations)
        names = list(obs.actor_slot)
        actions = {k: np.concatenate([step[k] for step in r.actions]) for k in names}
        old_logprobs = {k: np.concatenate([step[k] for step in r.logprobs]) for k in names}
        flat_adv, flat_ret, flat_old_value = adv.reshape(-1), ret.reshape(-1), r.values.reshape(-1)
        self.adv_norm.observe(flat_adv)
        num_slots = obs.num_slots
        mb_size = self.minibatch_size
        stats: dict[str, list[float]] = {"loss/policy": [], "loss/value": [], "loss/entropy": [], "loss/approx_kl": [], "loss/clipfrac": []}
        self.policy.train()
        for _ in range(self.epochs):
            perm = self.rng.permutation(num_slots)
            for i in range(0, num_slots, mb_size):
                slots = np.sort(perm[i : i + mb_size])
                mb, mb_sel = take(obs, slots)
                mb_adv = self.adv_norm(flat_adv[slots])
                # per actor (all chunks' actors, per action type): new and old log-probabilities,
                # its slot's advantage and the policy's entropy; per slot: new and old values, returns
                new_lp_parts, old_lp_parts, adv_parts, entropy_parts = [], [], [], []
                value_parts, ret_parts, old_value_parts = [], [], []
                for part, chunk, chunk_sel, out in self._forward_chunks(mb, {k: actions[k][mb_sel[k]] for k in names}):
                    for k in names:
                        if out.logprob[k].numel() == 0:
                            continue
                        new_lp_parts.append(out.logprob[k])
                        old_lp_parts.append(torch.from_numpy(old_logprobs[k][mb_sel[k]][chunk_sel[k]]))
                        adv_parts.append(torch.from_numpy(mb_adv[part[chunk.actor_slot[k]]]))
                        entropy_parts.append(out.entropy[k])
                    value_parts.append(out.value)
                    ret_parts.append(torch.from_numpy(flat_ret[slots[part]]))
                    old_value_parts.append(torch.from_numpy(flat_old_value[slots[part]]))
                if new_lp_parts:
                    new_lp, old_lp = _cat(new_lp_parts), _cat(old_lp_parts)
                    actor_adv, actor_entropy = _cat(adv_parts).float(), _cat(entropy_parts)
                    logratio = new_lp - old_lp
                    ratio = logratio.exp()
                    pg_loss = torch.max(-actor_adv * ratio, -actor_adv * ratio.clamp(1 - p.clip_coef, 1 + p.clip_coef)).mean()
                    entropy = actor_entropy.mean()
                    with torch.no_grad():
                        stats["loss/approx_kl"].append(((ratio - 1) - logratio).mean().item())
                        stats["loss/clipfrac"].append(((ratio - 1).abs() > p.clip_coef).float().mean().item())
                else:
                    pg_loss = entropy = torch.zeros(())
                value, returns, old_value = _cat(value_parts), _cat(ret_parts), _cat(old_value_parts)
                if p.clip_vloss:
                    value_clipped = old_value + (value - old_value).clamp(-p.clip_coef, p.clip_coef)
                    v_loss = 0.5 * torch.max((value - returns) ** 2, (value_clipped - returns) ** 2).mean()
                else:
                    v_loss = 0.5 * ((value - returns) ** 2).mean()
                loss = pg_loss - ent_coef * entropy + p.vf_coef * v_loss
                if not torch.isfinite(loss):
                    raise _Diverged(f"the loss became {loss.item()}")
                self.optim.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = self.optim.step(max_grad_norm=p.max_grad_norm)  # (clipped; no update when not finite)
                if grad_norm is not None and not torch.isfinite(grad_norm):
                    raise _Diverged(f"the gradients became non-finite (norm {grad_norm.item()})")
                stats["loss/policy"].append(pg_loss.item())
                stats["loss/value"].append(v_loss.item())
                stats["loss/entropy"].append(entropy.item())
        self.policy.eval()
        # fold this rollout's observations into the input normalization for the next rollout
        self.policy.update_norms(self.policy.pack(obs))
        if not _all_finite(list(self.policy.state_dict().values())):
            raise _Diverged("the weights or normalization statistics became non-finite")
        result = {k: float(np.mean(v)) for k, v in stats.items() if v}
        var = np.var(flat_ret)
        result["explained_variance"] = float("nan") if var == 0 else float(1 - np.var(flat_ret - flat_old_value) / var)
        return result

    def _forward_chunks(self, b: Batch, actions: dict[str, np.ndarray]) -> list[tuple]:
        """Forward a minibatch in chunks of slots of similar entity counts (little padding).

        Returns ``(part, chunk_batch, chunk_selection, output)`` per chunk, where ``part`` are the
        chunk's slot positions within ``b``.
        """
        S = b.num_slots
        chunk = self.cfg.ppo.chunk_size
        if S <= chunk:
            out = self.policy(self.policy.pack(b), actions=actions)
            return [(np.arange(S), b, {k: np.ones(v.shape[0], dtype=bool) for k, v in b.actor_slot.items()}, out)]
        entities = sum(b.counts.values())  # per slot
        order = np.argsort(entities, kind="stable")
        chunks = []
        for part in np.array_split(order, -(-S // chunk)):
            part = np.sort(part)
            chunk_batch, chunk_sel = take(b, part)
            out = self.policy(self.policy.pack(chunk_batch), actions={k: actions[k][chunk_sel[k]] for k in actions})
            chunks.append((part, chunk_batch, chunk_sel, out))
        return chunks

    # ------------------------------------------------------------------ main loop
    def train(self) -> TrainResult:
        """Run training to ``cfg.steps``; returns when done or interrupted.

        Whatever ends the run, the state after the last *completed* update (a partial rollout or
        update is discarded) is saved to ``out_dir`` with ``metrics.csv`` and ``curve.png`` before
        this returns or raises:

        - the budget reached: saved, returned;
        - Ctrl-C (SIGINT) or SIGTERM (while this runs in the main thread, SIGTERM is turned into
          the same clean stop): saved, returned with ``interrupted=True`` and ``stop_signal``;
        - a diverging update (a non-finite loss, gradient or weight, or PyTorch failing on them):
          the last finite state is saved and a :class:`TrainingError` naming the update raised;
        - anything else (a :class:`~gymloop.errors.GameError`, a
          :class:`~gymloop.errors.WorkerError`, a timeout, an exception in the trainer): saved,
          then the exception is raised again as it came.

        Checkpoints are also saved every ``cfg.checkpoint_minutes`` minutes and every
        ``cfg.checkpoint_every`` updates. While it runs, Python's garbage collector is tuned for
        it (``cfg.tune_gc``, :mod:`gymloop._gc`).
        """
        self._setup()
        cfg, p = self.cfg, self.cfg.ppo
        per_update = self.num_envs * cfg.agents_per_game * cfg.rollout_steps
        n_updates = max(1, math.ceil(cfg.steps / per_update))
        history: list[dict[str, float]] = []
        prog = _Progress(n_updates * per_update, self.progress)  # (whole rollouts: the steps the run will make)
        t_start = time.time()
        first_step = self.step
        interrupted = False
        error: BaseException | None = None
        snapshot = _Snapshot()
        metrics: _MetricsFile | None = None
        lr = self.lr
        self._last_save = time.monotonic()
        with _StopSignals() as stops, tuned_collector(cfg.tune_gc):  # (the collector: see gymloop._gc)
            try:
                metrics = _MetricsFile(os.path.join(self.out_dir, METRICS_FILE), self.step if self.resume else None) if self.out_dir else None
                snapshot.take(self)
                while self.update < n_updates:
                    frac = 1.0 - self.update / n_updates
                    lr = self.lr * frac if p.anneal_lr else self.lr
                    for g in self.optim.param_groups:
                        g["lr"] = lr
                    ent = p.ent_coef * frac if p.anneal_entropy else p.ent_coef
                    t0 = time.time()
                    if self._groups:  # cfg.overlap: GAE per half, then joined
                        rollout, adv, ret = self._collect_overlapped()
                        t1 = time.time()
                    else:
                        rollout = self._collect()
                        t1 = time.time()
                        adv, ret = self._gae(rollout)
                    update_stats = self._update(rollout, adv, ret, ent)
                    t2 = time.time()
                    self.update += 1
                    self.step += per_update
                    snapshot.take(self)  # the state a stop from now on saves
                    info: dict[str, float] = {"step": self.step, "update": self.update, "lr": lr, "ent_coef": ent}
                    info["steps_per_second"] = per_update / max(t2 - t0, 1e-9)
                    info["time/rollout_s"] = t1 - t0
                    info["time/update_s"] = t2 - t1
                    info["time/total_s"] = time.time() - t_start
                    info["reward_mean"] = float(rollout.rewards.mean())
                    # faults survived since this run started (on_game_error="restart")
                    info["game_errors"] = float(sum(env.num_game_errors for env in self.envs))
                    info["worker_restarts"] = float(sum(env.num_worker_restarts for env in self.envs))
                    for name, vals in rollout.episode_metrics.items():
                        a = np.asarray(vals, dtype=np.float64)
                        info[f"{name}_count"] = float(a.size)
                        info[f"{name}_mean"] = float(a.mean())
                        info[f"{name}_min"] = float(a.min())
                        info[f"{name}_max"] = float(a.max())
                    info.update(update_stats)
                    history.append(info)
                    prog.update(self.step, info)
                    if metrics is not None:
                        metrics.write(info)
                    if self.tb is not None:
                        self.tb.scalars({k: v for k, v in info.items() if k not in ("step",)}, self.step)
                    if (cfg.checkpoint_every and self.update % cfg.checkpoint_every == 0) or (
                            cfg.checkpoint_minutes and time.monotonic() - self._last_save >= 60 * cfg.checkpoint_minutes):
                        self.save()
            except KeyboardInterrupt:
                interrupted = True
            except BaseException as e:  # saved below, then raised again
                error = e
            finally:
                stops.start_saving()
                self._close_quietly(prog, metrics)
            if interrupted or error is not None:
                snapshot.restore(self)  # a partial rollout or update is discarded
            if interrupted:
                who = signal.Signals(stops.received).name if stops.received else "Ctrl-C"
                log.warning("interrupted by %s: saving the checkpoint of update %d (step %d)", who, self.update, self.step)
            try:
                path = self._save_all()
            except Exception as e:
                if error is None:
                    raise
                log.error("could not save the checkpoint after %s either: %s: %s", type(error).__name__, type(e).__name__, e)
                path = None
        result = TrainResult(self.step, self.update, time.time() - t_start, interrupted, self.out_dir, history, first_step,
                             stop_signal=(stops.received or signal.SIGINT) if interrupted else None)
        if error is None:
            return result
        if isinstance(error, _Diverged):
            saved = (f"the last good checkpoint was saved to {path} (update {self.update}, step {self.step}, finite weights)" if path
                     else "nothing was saved (no out_dir)")
            raise TrainingError(
                f"training diverged at update {self.update + 1} (step {self.step}): {error}; {saved}; lower ppo.lr (it was "
                f"{lr:.3g}), or check the game's rewards and features for huge values"
            ) from error.__cause__
        saved = f"saved the checkpoint of update {self.update} (step {self.step}) to {path}" if path else "nothing saved (no out_dir)"
        log.warning("stopped by %s at update %d: %s, metrics.csv and curve.png%s", type(error).__name__, self.update + 1, saved,
                    "; continue with --resume" if path else "")
        raise error

    def _close_quietly(self, prog: _Progress, metrics: _MetricsFile | None) -> None:
        """Close what the run opened; a failure here is logged, never lets the checkpoint go unsaved."""
        for what, close in (("the progress line", prog.close), *(("the games", env.close) for env in self.envs),
                            ("metrics.csv", metrics.close if metrics is not None else None),
                            ("TensorBoard", self.tb.close if self.tb is not None else None)):
            if close is None:
                continue
            try:
                close()
            except Exception as e:
                log.warning("closing %s failed: %s: %s", what, type(e).__name__, e)

    def _save_all(self) -> str | None:
        """Save the checkpoint and draw the curve (the end of every run); the agent's path."""
        if not self.out_dir:
            return None
        path = self.save()
        try:
            plot_curve(os.path.join(self.out_dir, METRICS_FILE), os.path.join(self.out_dir, CURVE_FILE))
        except Exception as e:  # a missing plotting library must not lose the trained agent
            log.warning("could not draw the learning curve: %s", e)
        return path


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(parts)``; one part as it is (the usual minibatch: one chunk, one action type), without the copy and
    the op in the graph a cat of one adds."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _check_pair(agent_path: str, agent_info: Mapping[str, Any], agent_tensors: Mapping[str, np.ndarray], optim_path: str,
                optim_meta: Mapping[str, str]) -> None:
    """Raise :class:`CheckpointError` unless the optimizer file was saved together with the agent file.

    The optimizer file records the step, update and weights digest of the agent saved with it
    (:meth:`Trainer.save`); files written before it recorded them are accepted.
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


_PANEL_LABELS = {"episode_return": "mean episode return (sum of rewards)", "episode_length": "mean episode length (decisions)"}


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
    fig.savefig(png_path, dpi=80)
    return fig


def train(game: Callable[..., Any], cfg: TrainConfig | None = None, out_dir: str | None = None, **kw: Any) -> TrainResult:
    """Train a policy for ``game``; see :class:`Trainer`.

    Example:
        >>> import gymloop as gl
        >>> from gymloop.train import TrainConfig, train
        >>> from gymloop.games.snake import snake
        >>> cfg = TrainConfig(steps=512, num_envs=16, rollout_steps=16)
        >>> cfg.ppo.minibatch_size = 128
        >>> train(snake, cfg).steps
        512
    """
    return Trainer(game, cfg or TrainConfig(), out_dir, **kw).train()


def evaluate(game: Callable[..., Any], policy: Policy | None = None, episodes: int = 100, num_envs: int = 64, seed: int = 10_000,
             greedy: bool = False, agents_per_game: int = 1, max_steps: int = 1_000_000) -> dict[str, float]:
    """Mean end-of-episode metrics of a policy (``None``: uniformly random legal actions).

    The episodes are those of :func:`gymloop.evaluation.evaluate_episodes`: exactly ``episodes``,
    each slot's quota fixed before playing (counting the first ``episodes`` to *end* would favour
    short episodes). Returns the mean of every metric reported at those episodes' ends
    (``episode_return``, ``episode_length`` and the game's own).

    Raises:
        ConfigError: ``episodes`` or ``num_envs`` is below 1.
    """
    choose = None if policy is None else _chooser(policy, seed, greedy)
    per_episode = evaluate_episodes(game, choose, episodes=episodes, num_envs=num_envs, seed=seed, agents_per_game=agents_per_game,
                                    max_steps=max_steps)
    return {k: float(np.mean(v)) for k, v in per_episode.items()}


def _chooser(policy: Policy, seed: int, greedy: bool) -> Callable[[Batch], dict[str, np.ndarray]]:
    """The actions ``policy`` chooses for a batch, sampled with its own generator seeded by ``seed``."""
    gen = torch.Generator().manual_seed(seed)

    def choose(b: Batch) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            out = policy(policy.pack(b), generator=gen, greedy=greedy)
        return {k: v.numpy() for k, v in out.actions.items()}

    return choose
