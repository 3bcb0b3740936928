"""The readout's keys and values folded into its queries (``torch_policy.absorb_keys``) give the numbers of the
keys and values computed per entity, and the same gradients, on every readout configuration and padding."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.policies import random_policy, synthetic_batch  # noqa: E402

from gymloop.nn import torch_policy  # noqa: E402
from gymloop.nn.config import NetConfig, RelposConfig  # noqa: E402
from gymloop.spaces import ActionDesc, ObsSpace  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

ACTS = {
    "Move": ActionDesc("Move", "categorical", ("UP", "DOWN", "LEFT")),
    "Target": ActionDesc("Target", "select_entity", (), ("Ally", "Enemy")),
    "Mode": ActionDesc("Mode", "global_categorical", ("CALM", "ALERT", "FLEE")),
    "Treat": ActionDesc("Treat", "global_select_entity", (), ("Enemy",)),
}
OBS = ObsSpace(entities={"Ally": ("x", "y", "hp"), "Enemy": ("y", "x", "kind"), "Wall": ("x", "y")}, globals=("turn",))
CONFIGS = [
    NetConfig(),  # the defaults: relpos with a relu value gate
    NetConfig(relpos=None, summary_mean=False),
    NetConfig(relpos=RelposConfig(value_gate=None, extent=[2, 2])),  # ungated relative values, the binned path
    NetConfig(n_layer=2, d_model=24, n_head=3, relpos=RelposConfig(value_gate="sigmoid")),
    NetConfig(n_head=1, relpos=None),
]


def _outputs(pol, packed, actions, absorb: bool, monkeypatch) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    monkeypatch.setattr(torch_policy, "ABSORB_KEYS", absorb)
    pol.zero_grad(set_to_none=True)
    out = pol(packed, actions=actions)
    outs = [out.value, *(out.logprob[k] for k in ACTS), *(out.entropy[k] for k in ACTS)]
    loss = out.value.square().sum() + sum(o.sum() for o in outs[1:])
    loss.backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in pol.parameters()]
    return outs, grads


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"h{c.n_head}-d{c.d_model}-l{c.n_layer}-{c.relpos}")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_folded_keys_give_the_computed_keys_numbers_and_gradients(cfg, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    pol = random_policy(OBS, ACTS, cfg, seed=seed)
    S = 24
    counts = {n: list(rng.integers(0, 5, S)) for n in OBS.entities}
    counts["Ally"][0] = counts["Enemy"][0] = counts["Wall"][0] = 0  # an observation without entities
    b = synthetic_batch(rng, OBS, ACTS, S, counts=counts)
    packed = pol.pack(b)
    with torch.no_grad():
        sampled = pol(packed, generator=torch.Generator().manual_seed(seed)).actions
    actions = {k: v.numpy() for k, v in sampled.items()}
    out_a, grad_a = _outputs(pol, packed, actions, True, monkeypatch)
    out_b, grad_b = _outputs(pol, packed, actions, False, monkeypatch)
    for a, b_ in zip(out_a, out_b):
        torch.testing.assert_close(a, b_, rtol=1e-4, atol=1e-5)
    for (name, _), a, b_ in zip(pol.named_parameters(), grad_a, grad_b):
        torch.testing.assert_close(a, b_, rtol=1e-3, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


def test_the_rule_folds_few_queries_per_observation():
    assert torch_policy.absorb_keys(1, 2, 32)  # snake: one actor, the default 2 heads of 16
    assert torch_policy.absorb_keys(0, 2, 32)  # the value query alone
    assert torch_policy.absorb_keys(100, 1, 32)  # one head: folding costs nothing more per query
    assert not torch_policy.absorb_keys(40, 2, 32)  # many actors per observation: project the entities once
    assert not torch_policy.absorb_keys(1, 2, 32, rows=512 * 6)  # few entities: the projections cost little
