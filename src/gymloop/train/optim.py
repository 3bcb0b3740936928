"""The optimizer the trainers use: Adam, written here rather than taken from ``torch.optim``.

``torch.optim``'s optimizers import ``torch._dynamo`` the first time one is built (their
``add_param_group`` is wrapped to keep the compiler out), which costs about 1.8 CPU-seconds: as
much as a whole short training run of a small game. :class:`Adam` computes the same update, mostly
as single operations on flat buffers that hold every parameter's moments, and imports nothing; its
:meth:`~Adam.state_dict` has
``torch.optim.Adam``'s layout: a state saved by ``torch.optim.Adam`` resumes here, and a state saved
here loads into ``torch.optim.Adam``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, cast

import torch

__all__ = ["Adam", "make_adam"]

#: ``torch.optim.Adam`` options :class:`Adam` does not implement, with the value it behaves as.
_FIXED = {"weight_decay": 0.0, "amsgrad": False, "maximize": False}
#: the other keys ``torch.optim.Adam`` keeps in a parameter group (written for it to load ours).
_TORCH_KEYS = {"foreach": None, "capturable": False, "differentiable": False, "fused": None, "decoupled_weight_decay": False}


class Adam:
    """Adam (Kingma & Ba) over one group of parameters; the update is ``torch.optim.Adam``'s.

    Args:
        params: the parameters to optimize (a parameter whose ``grad`` is ``None`` at a
            :meth:`step` is left alone, and its moments start at its first gradient).
        lr: the learning rate; the trainers anneal it through ``param_groups[0]["lr"]``.
        betas: the moments' decay rates.
        eps: added to the second moment's square root.

    Example:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        >>> opt = Adam([w], lr=0.1)
        >>> (w ** 2).sum().backward()
        >>> opt.step()
        >>> [round(x, 4) for x in w.tolist()]  # the first step moves each weight by lr, against its gradient
        [0.9, -1.9]
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params: list[torch.Tensor] = list(params)
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError("Adam: a parameter is given twice")
        if len({(p.dtype, p.device) for p in self.params}) > 1:
            raise ValueError("Adam: the parameters must share one dtype and device")
        self.param_groups: list[dict[str, Any]] = [{"lr": float(lr), "betas": (float(betas[0]), float(betas[1])), "eps": float(eps),
                                                     "params": self.params}]
        self._steps = [0] * len(self.params)
        # the moments, the gradients and the update live in flat buffers (with per-parameter views into them): the
        # gradients are copied in and the update added out per parameter, every other op is one op on a flat tensor
        like = self.params[0] if self.params else torch.zeros(0)
        n = sum(p.numel() for p in self.params)
        self._m, self._v, self._g, self._u = (torch.zeros(n, dtype=like.dtype, device=like.device) for _ in range(4))
        self._exp_avg, self._exp_avg_sq, self._grad_views, self._update_views = (self._views(b) for b in (self._m, self._v, self._g, self._u))

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """``flat`` as one view per parameter, shaped like it."""
        sizes = [p.numel() for p in self.params]
        return [part.view(p.shape) for part, p in zip(flat.split(sizes), self.params)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the parameters' gradients (set them to ``None``, or zero them in place)."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self, max_grad_norm: float | None = None) -> torch.Tensor | None:
        """One Adam update of every parameter that has a gradient.

        Args:
            max_grad_norm: first scale the gradients so that their joint L2 norm is at most this, as
                ``torch.nn.utils.clip_grad_norm_`` does (the update uses the scaled gradients; the
                parameters' ``grad`` are left as they are, except on the slow path, when the
                parameters with a gradient are at different steps: ``clip_grad_norm_`` scales them).

        Returns:
            With ``max_grad_norm``: the gradients' joint norm before scaling. When it is not finite,
            nothing is updated (the caller decides what a diverged step means). Without: ``None``.
        """
        g = self.param_groups[0]
        lr, (b1, b2), eps = float(g["lr"]), g["betas"], float(g["eps"])
        grads = [p.grad for p in self.params]
        have = [i for i, x in enumerate(grads) if x is not None]
        steps = {self._steps[i] for i in have}
        norm = None
        # the usual case, one flat update: every parameter with a gradient at the same step, and any without one
        # never updated yet (a hidden entity type's embedding, an action never asked for): its moments and its part
        # of the flat gradient are zeros, so the update leaves it as it is and its step count stays 0
        if len(steps) == 1 and all(n == 0 for n, x in zip(self._steps, grads) if x is None):
            if len(have) == len(grads):
                torch.cat([cast(torch.Tensor, x).reshape(-1) for x in grads], out=self._g)
            else:
                for i in have:
                    self._grad_views[i].copy_(cast(torch.Tensor, grads[i]))
            if max_grad_norm is not None:  # one norm and one scaling of the flat gradient
                norm = torch.linalg.vector_norm(self._g)
                if not torch.isfinite(norm):
                    return norm
                self._g.mul_(torch.clamp(max_grad_norm / (norm + 1e-6), max=1.0))
            n = steps.pop() + 1
            self._steps = [0 if x is None else n for x in grads]
            self._m.lerp_(self._g, 1 - b1)
            self._v.mul_(b2).addcmul_(self._g, self._g, value=1 - b2)
            torch.sqrt(self._v, out=self._u)
            self._u.div_(math.sqrt(1 - b2**n)).add_(eps)
            torch.div(self._m, self._u, out=self._u)
            self._u.mul_(-lr / (1 - b1**n))
            for p, u in zip(self.params, self._update_views):
                p.add_(u)
            return norm
        if max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(self.params, max_grad_norm)
            if not torch.isfinite(norm):
                return norm
        idx = [i for i, x in enumerate(grads) if x is not None]  # some parameters without a gradient, or steps that differ
        if not idx:
            return norm
        for i in idx:
            self._steps[i] += 1
        for i in idx:
            p, grad, m, v, n = self.params[i], cast(torch.Tensor, grads[i]), self._exp_avg[i], self._exp_avg_sq[i], self._steps[i]
            m.lerp_(grad, 1 - b1)
            v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = v.sqrt().div_(math.sqrt(1 - b2**n)).add_(eps)
            p.addcdiv_(m, denom, value=-lr / (1 - b1**n))
        return norm

    def state_dict(self) -> dict[str, Any]:
        """The moments and step counts in ``torch.optim.Adam``'s layout (tensors not copied)."""
        state: dict[int, dict[str, torch.Tensor]] = {}
        for i, n in enumerate(self._steps):
            if n:  # like torch.optim.Adam: no state for a parameter never updated
                state[i] = {"step": torch.tensor(float(n)), "exp_avg": self._exp_avg[i], "exp_avg_sq": self._exp_avg_sq[i]}
        g = self.param_groups[0]
        group = {"lr": g["lr"], "betas": g["betas"], "eps": g["eps"], **_FIXED, **_TORCH_KEYS, "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` (ours, or ``torch.optim.Adam``'s for the same parameters).

        Raises:
            ValueError: a state for other parameters (their number or a moment's shape differs)
                or with options this Adam does not implement (amsgrad, weight decay, maximize).
            KeyError, TypeError: not an optimizer state.
        """
        groups = list(sd["param_groups"])
        if len(groups) != 1:
            raise ValueError(f"the state has {len(groups)} parameter groups, expected 1")
        (g,) = groups
        if len(g["params"]) != len(self.params):
            raise ValueError(f"the state is for {len(g['params'])} parameters, this optimizer has {len(self.params)}")
        for key, want in _FIXED.items():
            if g.get(key, want) != want:
                raise ValueError(f"the state has {key}={g[key]!r}; this Adam only implements {key}={want!r}")
        position = {pid: i for i, pid in enumerate(g["params"])}
        steps = [0] * len(self.params)
        moments: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for pid, st in sd["state"].items():
            if pid not in position:
                raise ValueError(f"the state has moments for parameter {pid!r}, which its group does not list")
            i = position[pid]
            p = self.params[i]
            for name in ("exp_avg", "exp_avg_sq"):
                t = st[name]
                if not torch.is_tensor(t) or tuple(t.shape) != tuple(p.shape):
                    got = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
                    raise ValueError(f"parameter {i}: {name} has shape {got}, the parameter {tuple(p.shape)}")
            s = st["step"]
            steps[i] = int(s.item() if torch.is_tensor(s) else s)
            moments[i] = (st["exp_avg"], st["exp_avg_sq"])
        b1, b2 = g["betas"]
        self.param_groups[0].update(lr=float(g["lr"]), betas=(float(b1), float(b2)), eps=float(g["eps"]))
        with torch.no_grad():
            self._m.zero_()
            self._v.zero_()
            self._g.zero_()  # (a parameter at step 0 has a zero part of the flat gradient: see step())
            for i, (m, v) in moments.items():
                self._exp_avg[i].copy_(m)
                self._exp_avg_sq[i].copy_(v)
        self._steps = steps


def make_adam(params: Iterable[torch.nn.Parameter], lr: float) -> Adam:
    """The trainers' optimizer: :class:`Adam` with eps 1e-5."""
    return Adam(params, lr=lr, eps=1e-5)
