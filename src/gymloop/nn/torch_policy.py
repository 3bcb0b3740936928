"""The entity-transformer policy in PyTorch (training side).

Architecture (rogue-net family): per entity type a running input normalizer, then
``Linear → ReLU → LayerNorm`` (a learned vector for featureless types); pre-LayerNorm transformer
blocks over the entities of each observation (padding masked; optional relative-position keys and
values on named position features); a categorical head per action type on actor embeddings
(composite actions are categorical over their product), a pointer head per select-entity action
(actor query against candidate keys); masks as ``-inf`` logits; a value head on the mean of the
final entity embeddings (global features reach it through every entity).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..checkpoint import agent_document
from ..spaces import ActionDesc, ObsSpace, Spaces
from .config import NetConfig, RelposConfig
from .heads import POINTER, head_of, summary_actions
from .inputs import FrameIndex, Packed, actor_rows, pack

__all__ = ["Inputs", "Policy", "InputNorm", "PolicyOutput", "host_to"]

#: An attention product whose broadcast intermediate has at most this many elements (2 MB) is
#: computed as an elementwise product and a sum. Written as a batched matrix product, attention
#: over a few entities with heads of 16 is thousands of tiny matrices, which run 2-5x slower on a
#: CPU (forward and backward, alone); in a whole training step the gain fades as the intermediate
#: outgrows the caches (about even at 512 observations of 33 entities), so larger ones use the
#: matrix product.
BROADCAST_MAX = 1 << 19

#: The readout's relative-position keys, with ``L`` entities and ``P`` relative positions: each
#: query gathers its ``L`` keys when ``L * RELPOS_GATHER_RATIO < P``, else it takes the products
#: with all ``P`` keys (one matrix product) and picks its ``L``. Forward and backward, one readout
#: of 512 observations with the default 441 positions: the gather is 15-25% faster at 3 to 6
#: entities, even at 10 to 33, 13-18% slower at 40 to 60.
RELPOS_GATHER_RATIO = 32


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``q @ k^T`` per observation and head: ``(S, H, Q, d)``, ``(S, H, L, d)`` -> ``(S, H, Q, L)``."""
    S, H, Q, d = q.shape
    if S * H * Q * k.shape[2] * d <= BROADCAST_MAX:
        return (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)
    return q @ k.transpose(-2, -1)


def _scores_rel(q: torch.Tensor, rk: torch.Tensor) -> torch.Tensor:
    """Queries against per-query keys (relative positions): ``(S, H, Q, d)``, ``(S, Q, L, d)`` -> ``(S, H, Q, L)``."""
    S, H, Q, d = q.shape
    if S * H * Q * rk.shape[2] * d <= BROADCAST_MAX:
        return (q.unsqueeze(3) * rk.unsqueeze(1)).sum(-1)
    return torch.einsum("shqd,sqld->shql", q, rk)


def _mix_rel(att: torch.Tensor, rv: torch.Tensor) -> torch.Tensor:
    """Attention over per-query values: ``(S, H, Q, L)``, ``(S, Q, L, d)`` -> ``(S, H, Q, d)``."""
    S, H, Q, L = att.shape
    if S * H * Q * L * rv.shape[-1] <= BROADCAST_MAX:
        return (att.unsqueeze(-1) * rv.unsqueeze(1)).sum(3)
    return torch.einsum("shql,sqld->shqd", att, rv)


def _mix(att: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``att @ v`` per observation and head: ``(S, H, Q, L)``, ``(S, H | 1, L, d)`` -> ``(S, H, Q, d)``."""
    S, H, Q, L = att.shape
    if S * H * Q * L * v.shape[-1] <= BROADCAST_MAX:
        return (att.unsqueeze(-1) * v.unsqueeze(2)).sum(3)
    return att @ v


class InputNorm(nn.Module):
    """Running mean/variance of input features (batched Chan et al. update), clipped output.

    Statistics change only through :meth:`update`; the forward pass never updates them.
    """

    count: torch.Tensor  # buffers (register_buffer), float64
    mean: torch.Tensor
    squares_sum: torch.Tensor

    def __init__(self, n: int, clip: float = 5.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("count", torch.tensor(0.0, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("squares_sum", torch.zeros(n, dtype=torch.float64))
        self.generation = 0  # bumped whenever the statistics change (update, load_state_dict): stats() recomputes
        self.register_load_state_dict_post_hook(_statistics_loaded)

    @torch.no_grad()
    def update(self, x: np.ndarray) -> None:
        if x.shape[0] == 0:
            return
        self.generation += 1
        xd = torch.from_numpy(np.asarray(x, dtype=np.float64)).to(self.mean.device)
        n = float(xd.shape[0])
        mean = xd.mean(0)
        sq = ((xd - mean) ** 2).sum(0)
        if self.count.item() == 0:
            self.mean.copy_(mean)
            self.squares_sum.copy_(sq)
            self.count.fill_(n)
        else:
            c = self.count.item()
            delta = mean - self.mean
            self.mean += delta * n / (n + c)
            self.squares_sum += sq + delta.square() * n * c / (n + c)
            self.count += n

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, standard deviation) as float32; sd 0 → 1, identity before 2 samples.

        Computed again only when a statistic changed (:meth:`update` and ``load_state_dict`` bump
        :attr:`generation`; moving the module makes new buffers): every forward pass asks for them.
        """
        buffers = (self.count, self.mean, self.squares_sum)
        cached = self.__dict__.get("_stats")
        if cached is not None and cached[0] == self.generation and all(a is b for a, b in zip(cached[1], buffers)):
            return cached[2]
        with torch.inference_mode(False):  # (asked inside a rollout's inference mode too: the cache serves training)
            out = self._compute_stats()
        self.__dict__["_stats"] = (self.generation, buffers, out)
        return out

    def _compute_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.count.item()
        if c <= 1:
            return torch.zeros_like(self.mean, dtype=torch.float32), torch.ones_like(self.mean, dtype=torch.float32)
        sd = torch.sqrt(self.squares_sum / (c - 1))
        sd[sd == 0] = 1.0
        return self.mean.float(), sd.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, sd = self.stats()
        return torch.clamp((x - mean) / sd, -self.clip, self.clip)


def _statistics_loaded(module: InputNorm, incompatible_keys: Any) -> None:
    """``load_state_dict`` wrote an :class:`InputNorm`'s statistics: its cached ``stats()`` are stale."""
    module.generation += 1


class Relpos(nn.Module):
    """Relative-position keys and values (shared by every block)."""

    strides: torch.Tensor  # buffers (register_buffer)
    extent_t: torch.Tensor

    def __init__(self, cfg: RelposConfig, d_model: int, d_head: int) -> None:
        super().__init__()
        self.cfg = cfg
        strides, positions = [], 1
        for e in cfg.extent:
            strides.append(positions)
            positions *= 2 * e + 1
        self.register_buffer("strides", torch.tensor(strides, dtype=torch.float32))
        self.register_buffer("extent_t", torch.tensor(cfg.extent, dtype=torch.float32))
        self.keys = nn.Embedding(positions, d_head)
        self.values = nn.Embedding(positions, d_head)
        nn.init.normal_(self.keys.weight, std=0.05)
        nn.init.normal_(self.values.weight, std=0.2)
        self.value_gate = nn.Linear(d_model, d_head) if cfg.value_gate else None

    def rel_index(self, rel: torch.Tensor) -> torch.Tensor:
        """Embedding index of relative positions ``(..., P)`` (clamped to the extent)."""
        rel = torch.maximum(torch.minimum(rel, self.extent_t), -self.extent_t) + self.extent_t
        return (rel * self.strides).sum(-1).round().long()

    @staticmethod
    def rows(table: nn.Embedding, idx: torch.Tensor) -> torch.Tensor:
        """``table(idx)``: the rows of ``idx``, shaped ``(*idx.shape, dim)``, taken with ``index_select``, whose
        backward (an ``index_add``) is about 3x faster on a CPU than the embedding's."""
        return table.weight.index_select(0, idx.reshape(-1)).view(*idx.shape, table.embedding_dim)

    def indices(self, pos: torch.Tensor) -> torch.Tensor:
        return self.rel_index(pos.unsqueeze(2) - pos.unsqueeze(1))  # (S, Lq, Lk): query minus key

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        value_gate = self.value_gate
        assert value_gate is not None  # callers check relpos.value_gate first
        g = value_gate(x)
        kind = self.cfg.value_gate
        if kind == "relu":
            return F.relu(g)
        if kind == "gelu":
            return F.gelu(g)
        if kind == "sigmoid":
            return torch.sigmoid(g)
        return g


class _BlockParams(nn.Module):
    """The parameters of a transformer block and its output half (:meth:`_finish`)."""

    def __init__(self, d: int, n_head: int, relpos: Relpos | None, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.key = nn.Linear(d, d)
        self.query = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d))
        self.n_head = n_head
        self.relpos = relpos

    def _finish(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Output projection, residual, then the MLP with its residual."""
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class Block(_BlockParams):
    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, rk: Any, rv: Any) -> torch.Tensor:
        S, L, C = x.shape
        H = self.n_head
        h = self.ln1(x)
        q = self.query(h).view(S, L, H, C // H).transpose(1, 2)
        k = self.key(h).view(S, L, H, C // H).transpose(1, 2)
        v = self.value(h).view(S, L, H, C // H).transpose(1, 2)
        att = _scores(q, k) * (1.0 / math.sqrt(C // H))
        if rk is not None:
            att = att + _scores_rel(q, rk) * (1.0 / math.sqrt(rk.shape[-1]))
        if pad is not None:
            att = att.masked_fill(pad, -1e9)
        att = F.softmax(att, dim=-1)
        y = _mix(att, v)
        if rv is not None:
            vals = rv
            relpos = self.relpos
            assert relpos is not None  # rk and rv come from it
            if relpos.value_gate is not None:
                vals = rv * relpos.gate(h).unsqueeze(1)
            y = y + _mix_rel(att, vals)
        return self._finish(x, y.transpose(1, 2).reshape(S, L, C))


#: Whether the readout folds its key and value projections into its queries (:class:`_KeysValues`):
#: ``None`` chooses per forward pass (:func:`absorb_keys`); ``True``/``False`` force one way (tests).
ABSORB_KEYS: bool | None = None
#: The fewest entity rows (observations x padded entities) the readout folds its keys for: below,
#: the folded path's few more operations cost more than the projections they save. Forward and
#: backward of the default readout, 512 observations of one actor: folded 0.77x the time of the
#: computed keys at 3 entities, 0.97x at 9, even at 12, 1.15x at 16, 1.4-1.6x at 24-32.
FOLD_MIN_ROWS = 512 * 12


def absorb_keys(queries: int, n_head: int, d: int, rows: int = FOLD_MIN_ROWS) -> bool:
    """Whether the readout scores its ``queries`` actor queries (per observation, plus the value query)
    against the entities' normalized embeddings instead of their keys (:class:`_KeysValues`), for
    ``rows`` entity rows (observations x padded entities).

    Per entity, the keys and values cost two ``d x d`` projections; folded into the queries, each
    query costs ``n_head`` times its share of ``d`` instead: cheaper while ``(queries + 1) * (n_head - 1) < d``
    and there are at least :data:`FOLD_MIN_ROWS` rows (one actor per observation with the default
    2 heads of 16: a snake update of long snakes takes about 1.3x less CPU time).
    :data:`ABSORB_KEYS` overrides the choice.
    """
    if ABSORB_KEYS is not None:
        return ABSORB_KEYS
    return (queries + 1) * (n_head - 1) < d and rows >= FOLD_MIN_ROWS


class _KeysValues:
    """The readout's attention over its entities' keys and values, either computed or folded into the queries.

    With ``h`` the entities' normalized embeddings, a head's key is ``Wk h + bk`` and its value
    ``Wv h + bv``. Folded (``absorb``): a query ``q`` scores ``(q Wk) . h + q . bk``, and since a
    head's attention sums to 1 its output is ``Wv (sum of attention * h) + bv``; the same numbers up to
    rounding, without projecting every entity (:func:`absorb_keys` says when that is cheaper).
    """

    def __init__(self, blk: _BlockParams, h: torch.Tensor, absorb: bool) -> None:
        S, L, C = h.shape
        self.h, self.H, self.absorb = h, blk.n_head, absorb
        self.dh = C // self.H
        if absorb:
            self.wk, self.wv = blk.key.weight.view(self.H, self.dh, C), blk.value.weight.view(self.H, self.dh, C)
            self.bk, self.bv = blk.key.bias.view(self.H, self.dh), blk.value.bias.view(self.H, self.dh)
        else:
            self.k = blk.key(h).view(S, L, self.H, self.dh)
            self.v = blk.value(h).view(S, L, self.H, self.dh)

    def shared_scores(self, q0: torch.Tensor) -> torch.Tensor:
        """Unscaled scores of one query per head shared by every observation: ``(H, dh)`` -> ``(S, L, H)``."""
        if not self.absorb:  # elementwise products (see BROADCAST_MAX), entities on dim 1
            return (self.k * q0).sum(-1)
        S, L, C = self.h.shape
        a0 = torch.einsum("hd,hdc->ch", q0, self.wk)
        return (self.h.reshape(S * L, C) @ a0).view(S, L, self.H) + (q0 * self.bk).sum(-1)

    def shared_mix(self, att0: torch.Tensor, mean: bool, keep: torch.Tensor | None) -> torch.Tensor:
        """The attention-weighted values of :meth:`shared_scores`' attention ``(S, L, H)``, plus with
        ``mean`` the mean value over the entities ``keep`` marks 1 (``(S, L)``; ``None``: all). ``(S, C)``."""
        S, L, C = self.h.shape
        if not self.absorb:
            v = self.v.reshape(S, L, C)
            y0 = (att0.unsqueeze(-1) * self.v).sum(1).reshape(S, C)
            if mean and keep is None:
                y0 = y0 + v.mean(1)
            elif mean and keep is not None:
                k = keep.view(S, L, 1)
                y0 = y0 + (v * k).sum(1) / k.sum(1).clamp(min=1.0)
            return y0
        hb = att0.transpose(1, 2) @ self.h  # (S, H, C)
        bias = self.bv.unsqueeze(0)
        if mean and keep is None:
            hb = hb + self.h.mean(1, keepdim=True)
            bias = 2 * bias
        elif mean and keep is not None:  # (no entity: no mean, nor its bias)
            k = keep.view(S, L, 1)
            n = k.sum(1)
            hb = hb + ((self.h * k).sum(1) / n.clamp(min=1.0)).unsqueeze(1)
            bias = bias * (1 + (n > 0).to(bias.dtype)).view(S, 1, 1)
        return (torch.einsum("shc,hdc->shd", hb, self.wv) + bias).reshape(S, C)

    def scores(self, q: torch.Tensor) -> torch.Tensor:
        """Unscaled scores of per-observation queries: ``(S, H, Q, dh)`` -> ``(S, H, Q, L)``."""
        if not self.absorb:
            return _scores(q, self.k.transpose(1, 2))
        S, H, Q, _ = q.shape
        qh = torch.einsum("shqd,hdc->shqc", q, self.wk).reshape(S, 1, H * Q, -1)  # (every head against the same h)
        scores = _scores(qh, self.h.unsqueeze(1)).view(S, H, Q, -1)
        return scores + (q * self.bk.view(1, H, 1, self.dh)).sum(-1, keepdim=True)

    def mix(self, att: torch.Tensor) -> torch.Tensor:
        """The attention-weighted values: ``(S, H, Q, L)`` -> ``(S, H, Q, dh)``."""
        if not self.absorb:
            return _mix(att, self.v.transpose(1, 2))
        S, H, Q, L = att.shape
        hb = _mix(att.reshape(S, 1, H * Q, L), self.h.unsqueeze(1)).view(S, H, Q, -1)  # (S, H, Q, C)
        return torch.einsum("shqc,hdc->shqd", hb, self.wv) + self.bv.view(1, self.H, 1, self.dh)


class Readout(_BlockParams):
    """The last block, evaluated only at the rows whose output is used.

    The same parameters and math as :class:`Block`, restricted to query rows: every actor (for the
    action heads) and one learned value query per observation (for the value head; it has no
    position, so no relative-position terms).
    """

    def __init__(self, d: int, n_head: int, relpos: Relpos | None, mlp_ratio: int = 4, summary_mean: bool = True,
                 summary_count: bool = False, norm_clip: float = 5.0) -> None:
        super().__init__(d, n_head, relpos, mlp_ratio)
        self.value_query = nn.Parameter(torch.zeros(d))
        self.summary_mean = summary_mean
        # net.summary_count: the observation's entity count, normalized, times this vector is added to the summary
        # after the block (attention and means cannot count; the block's weights, shared with the actors, stay out of it)
        self.count_embed = nn.Parameter(torch.zeros(d)) if summary_count else None
        self.count_norm = InputNorm(1, norm_clip) if summary_count else None

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, rows: torch.Tensor, positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Final embeddings of the given flat ``rows`` and of each observation's value query.

        Args:
            x: ``(S, L, d)`` embeddings; pad: ``(S, L)`` True at padding (``None``: no padding); rows: ``(n,)`` flat indices
            into ``S * L``; positions: ``(S, L, P)`` raw positions or ``None``.
        """
        S, L, C = x.shape
        H = self.n_head
        dh = C // H
        h = self.ln1(x)
        if L == 1 and (self.relpos is None or positions is None):
            return self._one_key(x, h, pad, rows)
        n = rows.shape[0]
        # queries laid out per observation, (S, Q, ...), so keys and values need no gather
        slot = torch.div(rows, L, rounding_mode="floor")
        counts = torch.bincount(slot, minlength=S)
        Q = int(counts.max()) if n else 0
        kv = _KeysValues(self, h, absorb_keys(Q, H, C, S * L))
        scale = 1.0 / math.sqrt(dh)
        # value query: one per observation, shared by every observation
        vq = self.value_query.view(1, C)
        q0 = self.query(self.ln1(vq)).view(H, dh)
        att0 = kv.shared_scores(q0) * scale  # (S, L, H): entities on dim 1
        if pad is not None:
            att0 = att0.masked_fill(pad.unsqueeze(-1), -1e9)
        att0 = att0.softmax(1)
        keep = None if pad is None else (~pad).to(h.dtype)
        y0 = kv.shared_mix(att0, self.summary_mean, keep)
        value_emb = self._finish(vq.expand(S, C), y0)
        if self.count_norm is not None and self.count_embed is not None:
            entities = x.new_full((S, 1), float(L)) if pad is None else (~pad).sum(1, keepdim=True).to(x.dtype)
            value_emb = value_emb + self.count_norm(entities) * self.count_embed
        if n == 0:
            return x.new_zeros((0, C)), value_emb
        first = torch.cumsum(counts, 0) - counts
        dest = slot * Q + (torch.arange(n, device=rows.device) - first[slot])
        xq = x.reshape(S * L, C)[rows]
        hq = h.reshape(S * L, C)[rows]
        q = x.new_zeros((S * Q, C)).index_copy(0, dest, self.query(hq)).view(S, Q, H, dh)
        att = kv.scores(q.transpose(1, 2)) * scale  # (S, H, Q, L)
        relpos = self.relpos
        rv = idx = None
        if relpos is not None and positions is not None:
            pq = x.new_zeros((S * Q, positions.shape[-1])).index_copy(0, dest, positions.reshape(S * L, -1)[rows])
            rel = pq.view(S, Q, 1, -1) - positions.unsqueeze(1)  # (S, Q, L, P): query minus key
            idx = relpos.rel_index(rel)  # (S, Q, L)
            if L * RELPOS_GATHER_RATIO < relpos.keys.num_embeddings:
                # few entities against many relative positions: each query's L keys, gathered
                att = att + _scores_rel(q.transpose(1, 2), relpos.rows(relpos.keys, idx)) * scale
            else:
                # q . keys[idx] computed as (q @ keys^T)[idx]: dense products instead of an
                # (S, Q, L, d_head) gather whose backward is a slow scatter
                qk = torch.einsum("sqhd,pd->shqp", q, relpos.keys.weight)
                att = att + qk.gather(3, idx.unsqueeze(1).expand(S, H, Q, L)) * scale
            if relpos.value_gate is not None:
                rv = relpos.rows(relpos.values, idx) * relpos.gate(h).unsqueeze(1)  # (S, Q, L, dh)
        if pad is not None:
            att = att.masked_fill(pad.view(S, 1, 1, L), -1e9)
        att = att.softmax(-1)
        y = kv.mix(att)  # (S, H, Q, dh)
        if rv is not None:
            y = y + _mix_rel(att, rv)
        elif idx is not None and relpos is not None:  # (idx is set only with relpos)
            # ungated relative values: bin the attention by relative position, then one matmul
            bins = att.new_zeros((S, H, Q, relpos.values.num_embeddings))
            bins = bins.scatter_add(3, idx.unsqueeze(1).expand(S, H, Q, L), att)
            y = y + bins @ relpos.values.weight
        y = y.transpose(1, 2).reshape(S * Q, C)[dest]
        return self._finish(xq, y), value_emb

    def _one_key(self, x: torch.Tensor, h: torch.Tensor, pad: torch.Tensor | None, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` where every observation has one entity (or none) and no relative positions: each query
        attends to one key with weight 1 whatever the scores, so the attention is the key's value (the same numbers;
        the queries and keys, whose gradients would be zeros, are left out of the graph)."""
        S, _L, C = x.shape
        v = self.value(h).reshape(S, C)
        y0 = v
        if self.summary_mean:  # (the mean of one value, or of none: see forward)
            y0 = y0 + (v if pad is None else v * (~pad).to(v.dtype).view(S, 1))
        value_emb = self._finish(self.value_query.view(1, C).expand(S, C), y0)
        if self.count_norm is not None and self.count_embed is not None:  # (one entity, or none)
            entities = x.new_ones((S, 1)) if pad is None else (~pad).to(x.dtype).view(S, 1)
            value_emb = value_emb + self.count_norm(entities) * self.count_embed
        if rows.shape[0] == 0:
            return x.new_zeros((0, C)), value_emb
        return self._finish(x.reshape(S, C)[rows], v[rows]), value_emb


def host_to(device: torch.device) -> Callable[[np.ndarray], torch.Tensor]:
    """The function that puts a host array on ``device``: on the CPU ``torch.from_numpy`` (the array's
    memory, no copy); on a GPU through pinned memory, without waiting for the copy (``non_blocking``)."""
    if device.type == "cpu":
        return torch.from_numpy
    if device.type == "cuda":
        return lambda a: torch.from_numpy(a).pin_memory().to(device, non_blocking=True)
    return lambda a: torch.from_numpy(a).to(device)  # (the meta device of the tests)


@dataclass
class Inputs:
    """A packed batch's arrays as the tensors a forward pass reads, on the policy's device (:meth:`Policy.inputs`):
    ``S`` slots of at most ``L`` entities (as :class:`~gymloop.nn.inputs.Packed`)."""

    S: int
    L: int
    feats: dict[str, torch.Tensor]  # per entity type present with features: its rows' raw features
    parts: list[tuple[str, int]]  # the entity types present, in network order, with their numbers of rows
    order: torch.Tensor | None  # the flat destination (in S * L) of every row of parts, type after type (None: no row)
    pad: torch.Tensor | None  # (S, L) bool, True at padding (None: no padding)
    valid: torch.Tensor | None  # (S, L) bool, True at real entities (only for a policy without a readout)
    positions: torch.Tensor | None  # (S, L, P) raw position features (relative positions), or None
    rows: torch.Tensor | None  # with a readout: the distinct actor rows (flat indices) it computes
    #: per action type each actor's row: in ``rows`` with a readout, else in ``S * L``; a summary action's: the slot
    actors: dict[str, torch.Tensor]
    #: per categorical action type the masked-out choices (None: none); per select-entity action with actors each
    #: candidate's mask
    masks: dict[str, torch.Tensor | None]
    #: per select-entity action with actors: the candidates' flat rows, the actor of each, the candidates per actor
    cand: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    actions: dict[str, torch.Tensor] | None = None  # the actions to evaluate (int64 per action type); None: sample


@dataclass
class PolicyOutput:
    """What a forward pass gives for a batch (per action type, actors in batch order)."""

    actions: dict[str, torch.Tensor]
    logprob: dict[str, torch.Tensor]
    entropy: dict[str, torch.Tensor]
    value: torch.Tensor
    logits: dict[str, torch.Tensor]


class Policy(nn.Module):
    """Entity-transformer policy and value function for one observation/action space.

    Args:
        obs_space: entity types and features (and global features).
        action_space: action types by name.
        cfg: network hyperparameters.
    """

    def __init__(self, obs_space: ObsSpace, action_space: dict[str, ActionDesc], cfg: NetConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or NetConfig()
        cfg.check()
        self.cfg = cfg
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.entity_names = list(obs_space.entities)
        # action types answered from the observation summary (no actor entity)
        self.summary_actions = summary_actions(self.action_space)
        d = cfg.d_model
        ng = len(obs_space.globals)
        self.norms = nn.ModuleDict()
        self.embeds = nn.ModuleDict()
        self.featureless = nn.ParameterDict()
        for name, feats in obs_space.entities.items():
            nf = len(feats) + ng
            if nf:
                self.norms[name] = InputNorm(nf, cfg.norm_clip)
                self.embeds[name] = nn.Sequential(nn.Linear(nf, d), nn.ReLU(), nn.LayerNorm(d))
            else:
                self.featureless[name] = nn.Parameter(torch.randn(1, d))
        rp = cfg.resolve_relpos({k: tuple(v) for k, v in obs_space.entities.items()})
        self.frame = FrameIndex.of(cfg.resolve_frame({k: tuple(v) for k, v in obs_space.entities.items()}), obs_space.entities)
        self.relpos_cfg = rp
        self.relpos = Relpos(rp, d, d // cfg.n_head) if rp else None
        self.position_idx = (
            {n: [list(f).index(p) for p in rp.position_features] for n, f in obs_space.entities.items()} if rp else None
        )
        n_full = cfg.n_layer - 1 if cfg.readout else cfg.n_layer
        self.blocks = nn.ModuleList([Block(d, cfg.n_head, self.relpos, cfg.mlp_ratio) for _ in range(n_full)])
        self.readout = Readout(d, cfg.n_head, self.relpos, cfg.mlp_ratio, cfg.summary_mean, cfg.summary_count,
                               cfg.norm_clip) if cfg.readout else None
        self.heads = nn.ModuleDict()
        self.qproj = nn.ModuleDict()
        self.kproj = nn.ModuleDict()
        linear_heads: list[nn.Linear] = []  # self.heads' values, in its order
        for name, a in self.action_space.items():
            if head_of(a) == POINTER:  # actor query . candidate key
                self.qproj[name] = nn.Linear(d, cfg.d_qk)
                self.kproj[name] = nn.Linear(d, cfg.d_qk)
            else:  # a linear head on the actor's embedding (or on the observation summary)
                head = nn.Linear(d, a.n)
                self.heads[name] = head
                linear_heads.append(head)
        self.value_head = nn.Linear(d, 1)
        self.apply(self._init)
        for head in linear_heads:
            nn.init.orthogonal_(head.weight, 0.01)
            nn.init.zeros_(head.bias)
        nn.init.orthogonal_(self.value_head.weight, 1.0)
        nn.init.zeros_(self.value_head.bias)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    @property
    def spaces(self) -> Spaces:
        """The policy's observation and action spaces as one :class:`~gymloop.spaces.Spaces` value."""
        return Spaces(self.obs_space, self.action_space)

    # ------------------------------------------------------------------ inputs
    @property
    def device(self) -> torch.device:
        """The device the policy's weights are on (``policy.to(device)`` moves them, with the normalizers' statistics)."""
        return self.value_head.weight.device

    def pack(self, b: Any) -> Packed:
        return pack(b, self.entity_names, self.position_idx, summary_actions=self.summary_actions, frame=self.frame)

    def update_norms(self, p: Packed) -> None:
        """Fold the features of a batch into the running normalization statistics."""
        for name, x in p.feats.items():
            if name in self.norms:
                cast(InputNorm, self.norms[name]).update(x)  # a ModuleDict's items are typed nn.Module
        if self.readout is not None and self.readout.count_norm is not None:
            self.readout.count_norm.update(p.lengths.reshape(-1, 1))

    def inputs(self, p: Packed, actions: Mapping[str, np.ndarray] | None = None) -> Inputs:
        """A packed batch (and the actions to evaluate, if any) as the tensors a forward pass reads, on the
        policy's device: the one place a batch goes from the host to the device, each array once (through
        pinned memory to a GPU, without waiting: :func:`host_to`); on the CPU the tensors share the arrays'
        memory (nothing is copied)."""
        put = host_to(self.device)
        feats: dict[str, torch.Tensor] = {}
        parts: list[tuple[str, int]] = []
        order = []
        for name in self.entity_names:
            dest = p.dest[name]
            if dest.size == 0:
                continue
            if name in self.embeds:
                feats[name] = put(p.feats[name])
            parts.append((name, dest.size))
            order.append(dest)
        summary = self.summary_actions
        actors: dict[str, torch.Tensor] = {}
        rows = None
        if self.readout is not None:
            uniq, where = actor_rows(p, [n for n in self.action_space if n not in summary])
            rows = put(uniq)
            actors.update((n, put(w)) for n, w in where.items())
        else:
            for n in self.action_space:
                if n not in summary:
                    actors[n] = put(p.actors[n])
        for n in summary:
            actors[n] = put(p.actors[n])
        masks: dict[str, torch.Tensor | None] = {}
        cand: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        for name, a in self.action_space.items():
            m = p.masks[name]
            if head_of(a) == POINTER:
                if p.actors[name].size:
                    masks[name] = put(m)
                    cand[name] = (put(p.cand[name]), put(p.cand_seg[name]), put(p.n_cand[name]))
            else:
                masks[name] = None if m.all() else put(~m)  # (no choice masked: no masking ops)
        given = None
        if actions is not None:
            given = {n: put(np.asarray(actions[n], dtype=np.int64)) for n in self.action_space}
        return Inputs(
            S=p.S, L=p.L, feats=feats, parts=parts, order=put(np.concatenate(order)) if order else None,
            pad=None if p.valid.all() else put(~p.valid), valid=put(p.valid) if self.readout is None else None,
            positions=put(p.positions) if p.positions is not None else None, rows=rows, actors=actors, masks=masks, cand=cand,
            actions=given,
        )

    # ------------------------------------------------------------------ forward
    def encode(self, p: Packed | Inputs) -> torch.Tensor:
        """Final entity embeddings, ``(S, L, d_model)``."""
        inp = self.inputs(p) if isinstance(p, Packed) else p
        d = self.cfg.d_model
        parts = []
        for name, n in inp.parts:
            x = inp.feats.get(name)
            if x is not None:
                parts.append(self.embeds[name](self.norms[name](x)))
            else:
                parts.append(self.featureless[name].expand(n, d))
        flat = torch.zeros(inp.S * inp.L, d, device=self.device)
        if parts and inp.order is not None:  # (in place: the zeros are not needed twice; autograd takes the gradient of the parts through it)
            flat.index_copy_(0, inp.order, torch.cat(parts))
        x = flat.view(inp.S, inp.L, d)
        pad = None if inp.pad is None else inp.pad.view(inp.S, 1, 1, inp.L)
        rk = rv = None
        if self.blocks and self.relpos is not None and inp.positions is not None:
            idx = self.relpos.indices(inp.positions)
            rk = self.relpos.rows(self.relpos.keys, idx)
            rv = self.relpos.rows(self.relpos.values, idx)
        for blk in self.blocks:
            x = blk(x, pad, rk, rv)
        return x

    def forward(self, p: Packed | Inputs, actions: Mapping[str, np.ndarray] | None = None, generator: torch.Generator | None = None,
                greedy: bool = False) -> PolicyOutput:
        """Sample (or evaluate the given) actions; returns log-probs, entropies and values, on the policy's device.

        ``p``: a packed batch (moved to the device here, :meth:`inputs`) or its :class:`Inputs`, which
        then carry the actions to evaluate. ``generator``: on the policy's device.
        """
        if isinstance(p, Packed):
            inp = self.inputs(p, actions)
        elif actions is not None:
            from ..errors import ConfigError

            raise ConfigError("Policy.forward got Inputs and actions: give the actions to evaluate to Policy.inputs(batch, actions)")
        else:
            inp = p
        x = self.encode(inp)
        S, L, d = x.shape
        flat = x.reshape(S * L, d)
        actor_emb: dict[str, torch.Tensor] = {}
        summary = self.summary_actions
        if self.readout is not None and inp.rows is not None:
            emb, vemb = self.readout(x, inp.pad, inp.rows, inp.positions)
            value = self.value_head(vemb).squeeze(-1)
            for n in self.action_space:
                if n not in summary:
                    actor_emb[n] = emb[inp.actors[n]]
        else:
            valid = cast(torch.Tensor, inp.valid).to(x.dtype)  # (set without a readout)
            vemb = (x * valid.unsqueeze(-1)).sum(1) / valid.sum(1, keepdim=True).clamp(min=1.0)
            value = self.value_head(vemb).squeeze(-1)
            for n in self.action_space:
                if n not in summary:
                    actor_emb[n] = flat[inp.actors[n]]
        for n in summary:  # the value head's per-observation summary, at each deciding slot
            actor_emb[n] = vemb[inp.actors[n]]
        out = PolicyOutput({}, {}, {}, value, {})
        for name, a in self.action_space.items():
            given = None if inp.actions is None else inp.actions[name]
            if head_of(a) == POINTER:
                given, lp, ent, logp = self._select(name, flat, actor_emb[name], inp, given, generator, greedy)
                out.logits[name] = logp
            else:
                logits = self.heads[name](actor_emb[name])
                masked = inp.masks[name]
                if masked is not None:
                    logits = logits.masked_fill(masked, float("-inf"))
                logp = torch.log_softmax(logits, -1)
                if given is None:
                    if greedy:
                        given = logp.argmax(-1)
                    elif logits.shape[0]:
                        given = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
                    else:
                        given = torch.zeros(0, dtype=torch.long, device=logits.device)
                lp = logp.gather(1, given.view(-1, 1)).squeeze(1) if logits.shape[0] else logits.new_zeros(0)
                pr = logp.exp()
                ent = -(pr * (logp if masked is None else logp.masked_fill(masked, 0.0))).sum(-1)
                out.logits[name] = logp
            out.actions[name] = given
            out.logprob[name] = lp
            out.entropy[name] = ent
        return out

    def _select(self, name: str, flat: torch.Tensor, actor_emb: torch.Tensor, inp: Inputs, given: Any, gen: Any, greedy: bool) -> tuple:
        n_act = actor_emb.shape[0]
        if n_act == 0:
            z = flat.new_zeros(0)
            return torch.zeros(0, dtype=torch.long, device=flat.device), z, z, z
        cand, seg, nc = inp.cand[name]
        q = self.qproj[name](actor_emb)
        k = self.kproj[name](flat[cand])
        logits = (q[seg] * k).sum(-1) * (1.0 / math.sqrt(self.cfg.d_qk))
        mask = cast(torch.Tensor, inp.masks[name])  # (set for a select-entity action with actors)
        logits = logits.masked_fill(~mask, float("-inf"))
        mx = logits.new_full((n_act,), float("-inf")).scatter_reduce(0, seg, logits, "amax", include_self=True)
        z = logits.new_zeros(n_act).index_add(0, seg, (logits - mx[seg]).exp())
        logp = logits - (mx + z.log())[seg]
        starts = torch.cumsum(nc, 0) - nc
        if given is None:
            if greedy:
                score = logp
            else:
                u = torch.rand(logp.shape, generator=gen, device=logp.device).clamp_(1e-20, 1.0)
                score = logp - torch.log(-torch.log(u))
            best = logp.new_full((n_act,), float("-inf")).scatter_reduce(0, seg, score, "amax", include_self=True)
            is_best = (score == best[seg]) & mask
            pos = torch.arange(logp.shape[0], device=logp.device)
            first = seg.new_full((n_act,), logp.shape[0]).scatter_reduce(
                0, seg, torch.where(is_best, pos, logp.shape[0]), "amin", include_self=True
            )
            given = first - starts
        lp = logp[starts + given]
        pr = logp.exp()
        ent = -logp.new_zeros(n_act).index_add(0, seg, pr * logp.masked_fill(~mask, 0.0))
        return given, lp, ent, logp

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ---------------------------------------------------------------------- checkpoints
def policy_tensors(policy: Policy) -> dict[str, np.ndarray]:
    """The policy's weights and normalization statistics as numpy arrays."""
    return {k: v.detach().cpu().numpy().copy() for k, v in policy.state_dict().items()}


def policy_info(policy: Policy, **extra: Any) -> dict[str, Any]:
    """The agent document of ``policy`` (see :func:`gymloop.checkpoint.agent_document`)."""
    return agent_document(policy.spaces, policy.cfg.to_dict(), **extra)


def policy_from_file(af: Any) -> Policy:
    """Rebuild a :class:`Policy` from an :class:`~gymloop.checkpoint.AgentFile` (shapes checked)."""
    from ..errors import CheckpointError
    from .config import NetConfig

    sp = af.spaces
    obs, acts = sp.obs, sp.actions
    try:
        cfg = NetConfig.from_dict(af.info["net"])
    except TypeError as e:
        raise CheckpointError(f"{af.path}: network config is malformed: {e}") from None
    pol = Policy(obs, acts, cfg)
    sd = pol.state_dict()
    missing = sorted(set(sd) - set(af.tensors))
    unexpected = sorted(set(af.tensors) - set(sd))
    if missing or unexpected:
        raise CheckpointError(f"{af.path}: weights do not match the metadata: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for k, v in sd.items():
        t = af.tensors[k]
        if tuple(t.shape) != tuple(v.shape):
            raise CheckpointError(f"{af.path}: tensor {k!r} has shape {tuple(t.shape)} but the metadata implies {tuple(v.shape)}")
        sd[k] = torch.from_numpy(np.array(t, dtype=np.float64 if v.dtype == torch.float64 else np.float32))
    pol.load_state_dict(sd)
    return pol
