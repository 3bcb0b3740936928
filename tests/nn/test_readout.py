"""The readout block where every observation has one entity or none: the shortcut gives the numbers the general
attention gives (the same batch with a second, padded entity slot), and their gradients."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from gymloop.nn.torch_policy import Readout  # noqa: E402


@given(st.lists(st.booleans(), min_size=1, max_size=12), st.booleans(), st.integers(0, 2**31 - 1))
@settings(max_examples=30, deadline=None)
def test_one_entity_per_observation_gives_the_general_attentions_numbers_and_gradients(has_entity, summary_mean, seed):
    torch.manual_seed(seed % 10_000)
    d, S = 8, len(has_entity)
    block = Readout(d, 2, None, summary_mean=summary_mean)
    with torch.no_grad():  # (a value query away from zero: the general path's scores then matter)
        block.value_query.normal_()
    x1 = torch.randn(S, 1, d)
    present = torch.tensor(has_entity)
    x1 = x1 * present.view(S, 1, 1)  # (an observation without entities: a zero row, as the encoder leaves it)
    rows = torch.nonzero(present).view(-1)  # (flat indices into S * L: with L = 1 the observation's index)
    pad1 = None if present.all() else ~present.view(S, 1)
    x2 = torch.cat([x1, torch.zeros(S, 1, d)], 1).detach().requires_grad_(True)  # a second slot, always padding
    x1 = x1.detach().requires_grad_(True)
    pad2 = torch.cat([~present.view(S, 1), torch.ones(S, 1, dtype=torch.bool)], 1)

    emb1, val1 = block(x1, pad1, rows, None)
    emb2, val2 = block(x2, pad2, rows * 2, None)
    torch.testing.assert_close(emb1, emb2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(val1, val2, rtol=1e-5, atol=1e-6)

    shared = [block.value.weight, block.ln1.weight, block.value_query, block.proj.weight]  # (the query and key are not used)
    g1, *p1 = torch.autograd.grad(emb1.square().sum() + val1.sum(), [x1, *shared])
    g2, *p2 = torch.autograd.grad(emb2.square().sum() + val2.sum(), [x2, *shared])
    for a, b in zip(p1, p2):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # (an observation without entities attends evenly to its two padding slots, one slot with L = 1: their sum)
    expected = torch.where(present.view(S, 1), g2[:, 0], g2[:, 0] + g2[:, 1])
    torch.testing.assert_close(g1[:, 0], expected, rtol=1e-4, atol=1e-5)
