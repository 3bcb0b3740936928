"""What keeps a run's state safe whatever ends it: the snapshot of the last completed update
(:class:`Snapshot`), the stop signals (:class:`StopSignals`: SIGTERM stops like Ctrl-C; a second
signal waits for the save) and the divergence guards (:class:`Diverged`, raised by
:func:`torch_errors` and the finiteness checks of :func:`all_finite`).
"""

from __future__ import annotations

import copy
import functools
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from ..errors import GymloopError, TrainingError
from ..nn.torch_policy import Policy
from .normalize import AdvantageNormalizer, RewardScaler, StepSize
from .optim import Adam

__all__ = ["Diverged", "Snapshot", "StopSignals", "TrainState", "all_finite", "torch_errors"]

log = logging.getLogger("gymloop.train")


class TrainState(Protocol):
    """What a run's state is made of: what a :class:`Snapshot` copies and a checkpoint saves
    (:class:`~gymloop.train.ppo.Trainer` has it)."""

    policy: Policy
    optim: Adam
    gen: torch.Generator
    rng: np.random.Generator
    adv_norm: AdvantageNormalizer
    step_size: StepSize
    step: int
    update: int

    @property
    def reward_scalers(self) -> list[RewardScaler | None]:
        """The reward scaler of each environment group (``None`` without ``ppo.scale_rewards``)."""
        ...


class Diverged(TrainingError):
    """Raised inside an update or a rollout when the numbers stop being finite (or PyTorch fails on
    them); :meth:`~gymloop.train.ppo.Trainer.train` restores the last completed update, saves it and raises a
    :class:`TrainingError` naming the update and the fix."""


def torch_errors(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn an error PyTorch raises inside the decorated method (a ``RuntimeError`` or ``ValueError``
    that is no :class:`GymloopError`: NaN logits, overflowing weights, ...) into :class:`Diverged`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except (RuntimeError, ValueError) as e:
                if isinstance(e, GymloopError):
                    raise
                raise Diverged(f"PyTorch failed while {what}: {type(e).__name__}: {e}") from e

        return inner

    return wrap


def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite: one pass over them all, one sync."""
    floats = [t.detach().reshape(-1) for t in tensors if t.is_floating_point()]
    if not floats:
        return True
    return bool(torch.isfinite(torch.cat(floats)).all())


class StopSignals:
    """While training: SIGTERM stops the run like Ctrl-C (the last completed update is saved); while
    saving on the way out, SIGINT and SIGTERM wait for the files to be written.

    Handlers can only be installed from the main thread; elsewhere SIGTERM keeps its own handler.
    The previous handlers are restored on exit.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.saving = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
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


class Snapshot:
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
        self.scalers: list[dict[str, Any] | None] = []  # per environment group
        self.adv_norm: dict[str, Any] = {}  # the running advantage statistics
        self.step_size: dict[str, Any] = {}  # the learning rate's factor
        self.step = 0
        self.update = 0

    @staticmethod
    def _live(t: TrainState) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
        live = {f"p.{k}": v for k, v in t.policy.state_dict().items()}
        sd = t.optim.state_dict()
        for i, st in sd["state"].items():
            for name, v in st.items():
                live[f"o.{i}.{name}"] = v if torch.is_tensor(v) else torch.tensor(v)
        return live, sd["param_groups"]

    def take(self, t: TrainState) -> None:
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
        self.scalers = [None if sc is None else sc.state() for sc in t.reward_scalers]
        self.adv_norm = t.adv_norm.state()
        self.step_size = t.step_size.state()
        self.step, self.update = t.step, t.update

    def restore(self, t: TrainState) -> None:
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
        for sc, saved in zip(t.reward_scalers, self.scalers):
            if sc is not None and saved is not None:
                sc.load(saved)
        if self.adv_norm:
            t.adv_norm.load(self.adv_norm)
        if self.step_size:
            t.step_size.load(self.step_size)
        t.step, t.update = self.step, self.update
