"""Behaviour cloning: train the policy to take the actions recorded in traces.

The traces (:mod:`gymloop.trace`) of a human, a scripted or any other agent hold every decision's
observation as a batch and the choice taken. :func:`train_bc` trains the same
:class:`~gymloop.nn.torch_policy.Policy` PPO trains (same spaces, same packing, same input
normalization) by maximizing the log-probability of the recorded choices under the game's masks
(a cross-entropy per actor and action type; for a select-entity action over the actor's
candidates). Then it fits the value head's last layer to the demonstrations' discounted returns
(least squares on the trained features, which leaves the policy unchanged; a value loss during
cloning, even at a small weight, pulled the shared layers away from the policy), so that PPO can
continue from the cloned weights (``gymloop train GAME --demos DIR --steps N``) without a wildly
wrong value function. The checkpoint it writes plays with :func:`gymloop.load` like any trained
agent.

The traces' spaces are merged by name (entity and action types sorted by name, as a
:class:`~gymloop.VecEnv` orders them); traces that disagree on a type raise
:class:`~gymloop.errors.TraceError` naming both files.

Example:
    >>> import gymloop as gl
    >>> from gymloop.games.snake import GreedyAgent
    >>> from gymloop.train.bc import BCConfig, train_bc
    >>> traces = [gl.record_trace("snake", GreedyAgent(seed=s), seed=s, max_steps=100) for s in range(2)]
    >>> result = train_bc(traces, BCConfig(epochs=2))
    >>> result.decisions, len(result.history)
    (200, 2)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..batch import Batch, stack, take
from ..checkpoint import write_agent
from ..errors import ConfigError, TraceError, TrainingError
from ..files import make_folder
from ..games.registry import same_game
from ..nn.torch_policy import Policy, policy_info, policy_tensors
from ..trace import Trace, load_trace, load_traces, merge_spaces, relayout
from .config import BCConfig
from .device import resolve_device
from .optim import make_adam

__all__ = ["BCConfig", "BCResult", "demo_returns", "train_bc"]

log = logging.getLogger("gymloop.train")


@dataclass
class BCResult:
    """Outcome of :func:`train_bc`.

    Attributes:
        policy: the trained policy.
        traces: traces used; decisions: decisions (slots) trained on.
        history: per epoch ``epoch``, ``loss`` (mean negative log-likelihood of the recorded
            choices, every actor and action type weighted alike), ``agreement`` (fraction of
            recorded choices that are the policy's most probable one) and ``seconds``.
        seconds: wall time of the whole call.
        value_r2: the fraction of the returns' variance the fitted value head explains (NaN
            without ``fit_value``).
        path: the checkpoint written, or ``None``.
    """

    policy: Policy
    traces: int
    decisions: int
    history: list[dict[str, float]]
    seconds: float
    value_r2: float = float("nan")
    path: str | None = None

    @property
    def agreement(self) -> float:
        """The last epoch's agreement with the recorded choices."""
        return self.history[-1]["agreement"] if self.history else float("nan")


def demo_returns(trace: Trace, gamma: float) -> np.ndarray:
    """Discounted return after each decision of a trace, ``(decisions,)`` float32.

    A decision's reward is the change of its seat's score until that seat's next decision or
    episode end; returns do not cross episode ends (nor the end of the recording).
    """
    N = trace.num_decisions
    reward = np.zeros(N)
    link = np.full(N, -1, dtype=np.int64)
    pending: dict[int, int] = {}
    score = trace.score
    ends = list(zip(trace.episode_after, trace.episodes))
    e = 0
    for k in range(N + 1):
        while e < len(ends) and ends[e][0] == k:
            p = pending.pop(ends[e][1].agent, None)
            if p is not None:
                reward[p] = ends[e][1].score - score[p]
            e += 1
        if k == N:
            break
        seat = int(trace.agent[k])
        p = pending.get(seat)
        if p is not None:
            reward[p] = score[k] - score[p]
            link[p] = k
        pending[seat] = k
    ret = np.zeros(N)
    for k in range(N - 1, -1, -1):
        ret[k] = reward[k] + (gamma * ret[link[k]] if link[k] >= 0 else 0.0)
    return ret.astype(np.float32)


def _as_traces(traces: str | os.PathLike | Sequence[Trace | str | os.PathLike]) -> list[Trace]:
    if isinstance(traces, (str, os.PathLike)):
        return load_traces(traces)
    out = [t if isinstance(t, Trace) else load_trace(t) for t in traces]
    if not out:
        raise ConfigError("behaviour cloning needs at least one trace")
    return out


def train_bc(
    traces: str | os.PathLike | Sequence[Trace | str | os.PathLike],
    cfg: BCConfig | None = None,
    out_path: str | os.PathLike | None = None,
    game_name: str = "",
) -> BCResult:
    """Train a policy by behaviour cloning on recorded traces (see the module docstring).

    Args:
        traces: a folder of ``*.trace.safetensors`` files, one file, or a list of
            :class:`~gymloop.trace.Trace` objects or paths.
        cfg: hyperparameters (checked first).
        out_path: write the agent checkpoint there (``None``: nothing is written).
        game_name: recorded in the checkpoint (``""``: the traces' game, when they agree on one); a
            trace of another game is refused.

    Returns:
        A :class:`BCResult` with the policy and per-epoch loss and agreement.

    Raises:
        ConfigError: a bad configuration, or no trace / no decision to learn from
            (:class:`~gymloop.errors.DeviceError`: ``cfg.device`` names a GPU PyTorch does not see).
        TraceError: a trace file is invalid, was recorded with another game than ``game_name``, or
            two traces disagree on a type.
        TrainingError: the loss or its gradient became NaN or infinite.
    """
    cfg = cfg or BCConfig()
    cfg.check()
    device = resolve_device(cfg.device, "bc.device")
    trs = _as_traces(traces)
    if game_name:
        for t in trs:
            if not same_game(t.game, game_name):
                raise TraceError(
                    f"trace {t.path or '?'} was recorded with the game {t.game!r}, not {game_name!r}; clone an agent from "
                    f"traces of the game it is for (record them with gymloop run {game_name} --trace-dir DIR)"
                )
    elif len({t.game for t in trs}) == 1:
        game_name = trs[0].game
    space = merge_spaces([t.spaces for t in trs], [t.path or f"trace {i}" for i, t in enumerate(trs)])
    batch = stack([relayout(t.batch, t.spaces, space) for t in trs])
    names = list(space.actions)
    actions = {n: np.concatenate([t.actions[n] if n in t.actions else np.zeros(0, np.int64) for t in trs]) for n in names}
    N = batch.num_slots
    if not sum(a.size for a in actions.values()):
        raise ConfigError(f"the {len(trs)} trace(s) hold no decision to learn from; record longer runs")

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    policy = Policy(space.obs, space.action_space, cfg.net).to(device)  # (built on the CPU: the same weights on every device)
    policy.update_norms(policy.pack(batch))
    optim = make_adam(policy.parameters(), cfg.lr)
    mb = min(cfg.minibatch_size, N)
    steps_total = cfg.epochs * -(-N // mb)
    step = 0
    history: list[dict[str, float]] = []
    t_start = time.time()
    policy.train()
    for epoch in range(cfg.epochs):
        t0 = time.time()
        perm = rng.permutation(N)
        sums = {"loss": 0.0, "agreement": 0.0}
        n_choices = 0
        for i in range(0, N, mb):
            for g in optim.param_groups:
                g["lr"] = cfg.lr * (1.0 - 0.9 * step / steps_total)
            slots = np.sort(perm[i : i + mb])
            sub, sel = take(batch, slots)
            p = policy.pack(sub)
            out = policy(p, actions={n: actions[n][sel[n]] for n in names})
            lps, agree = [], []
            for n in names:
                lp = out.logprob[n]
                if lp.numel() == 0:
                    continue
                lps.append(lp)
                if not space.actions[n].kind.selects_entities:
                    best = out.logits[n].max(-1).values
                else:
                    seg = torch.from_numpy(p.cand_seg[n]).to(device)
                    best = lp.new_full((lp.shape[0],), float("-inf")).scatter_reduce(0, seg, out.logits[n], "amax")
                agree.append((lp >= best).float())
            if not lps:
                continue
            loss = -torch.cat(lps).mean()
            if not torch.isfinite(loss):
                raise TrainingError(f"behaviour cloning: the loss became {loss.item()} in epoch {epoch + 1}; lower bc.lr")
            optim.zero_grad(set_to_none=True)
            loss.backward()
            norm = optim.step(max_grad_norm=cfg.max_grad_norm)  # (clips, then updates; nothing when not finite)
            if norm is not None and not torch.isfinite(norm):
                raise TrainingError(
                    f"behaviour cloning: the gradient's norm became {norm.item()} in epoch {epoch + 1} (the loss was "
                    f"{loss.item():.4g}); the weights are the last finite ones; lower bc.lr or bc.max_grad_norm"
                )
            step += 1
            k = int(sum(x.numel() for x in lps))
            n_choices += k
            sums["loss"] += loss.item() * k
            sums["agreement"] += float(torch.cat(agree).sum())
        info = {k: v / max(n_choices, 1) for k, v in sums.items()}
        info.update(epoch=epoch + 1, seconds=time.time() - t0)
        history.append(info)
        log.info("behaviour cloning epoch %d/%d: loss %.4f, agreement %.3f", epoch + 1, cfg.epochs, info["loss"], info["agreement"])
    policy.eval()
    r2 = _fit_value(policy, batch, np.concatenate([demo_returns(t, cfg.gamma) for t in trs])) if cfg.fit_value else float("nan")
    path = None
    if out_path is not None:
        path = os.fspath(out_path)
        d = os.path.dirname(path)
        if d:
            make_folder(d, "the agent's folder")
        bc_info = {"traces": len(trs), "decisions": N, "history": history, "value_r2": r2,
                   "config": {k: v for k, v in asdict(cfg).items() if k != "net"}}
        write_agent(path, policy_tensors(policy), policy_info(policy, step=0, update=0, game=game_name, behaviour_cloning=bc_info,
                                                              device=str(device)))
    return BCResult(policy, len(trs), N, history, time.time() - t_start, r2, path)


def _fit_value(policy: Policy, batch: Batch, returns: np.ndarray, chunk: int = 1024) -> float:
    """Least-squares fit of the value head (its last linear layer) to ``returns``; returns R²."""
    feats: list[torch.Tensor] = []
    hook = policy.value_head.register_forward_hook(lambda m, inp, out: feats.append(inp[0].detach()))
    try:
        with torch.no_grad():
            for i in range(0, batch.num_slots, chunk):
                sub, _ = take(batch, np.arange(i, min(i + chunk, batch.num_slots)))
                policy(policy.pack(sub), greedy=True)
    finally:
        hook.remove()
    X = torch.cat(feats).double().cpu().numpy()
    A = np.concatenate([X, np.ones((X.shape[0], 1))], axis=1)
    y = returns.astype(np.float64)
    w = np.linalg.solve(A.T @ A + 1e-3 * np.eye(A.shape[1]), A.T @ y)  # a little ridge: features may be collinear
    with torch.no_grad():
        policy.value_head.weight.copy_(torch.from_numpy(w[:-1]).view(1, -1))
        policy.value_head.bias.fill_(float(w[-1]))
    var = float(y.var())
    return float(1.0 - np.mean((A @ w - y) ** 2) / var) if var > 0 else float("nan")
