"""gymloop's Adam: the same updates as torch.optim.Adam, its state layout both ways, no torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gymloop.train.optim import Adam  # noqa: E402

SHAPES = [(8, 4), (4,), (3, 8), (1,), (2, 3, 5)]


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in SHAPES]


def _grads(step: int, skip: set[int] = frozenset()) -> list[torch.Tensor | None]:
    g = torch.Generator().manual_seed(1000 + step)
    return [None if i in skip else torch.randn(s, generator=g) for i, s in enumerate(SHAPES)]


def _step(opt, params, grads) -> None:
    for p, gr in zip(params, grads):
        p.grad = None if gr is None else gr.clone()
    opt.step()


@pytest.mark.parametrize("lr", [1e-3, 0.3])
def test_updates_equal_torch_optim_adam_also_when_a_parameter_skips_steps(lr):
    ours, theirs = _params(), _params()
    a = Adam(ours, lr=lr, eps=1e-5)
    b = torch.optim.Adam(theirs, lr=lr, eps=1e-5)
    for step in range(12):
        skip = {1, 3} if step in (2, 3, 7) else {4} if step == 0 else set()  # parameter 4 starts a step late
        grads = _grads(step, skip)
        _step(a, ours, grads)
        _step(b, theirs, grads)
        if step == 6:  # the annealed learning rate, as the trainer sets it
            a.param_groups[0]["lr"] = b.param_groups[0]["lr"] = lr / 2
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    assert [float(sa[i]["step"]) for i in range(5)] == [float(sb[i]["step"]) for i in range(5)] == [12, 9, 12, 9, 11]


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_step_with_max_grad_norm_equals_clip_grad_norm_then_torch_adam(max_norm):
    """Clipped on the flat gradient (one norm, one scaling), also on the path where a parameter skips a step."""
    ours, theirs = _params(), _params()
    a = Adam(ours, lr=0.05)
    b = torch.optim.Adam(theirs, lr=0.05)
    for step in range(8):
        grads = _grads(step, {2} if step == 3 else set())
        for ps in (ours, theirs):
            for p, gr in zip(ps, grads):
                p.grad = None if gr is None else gr.clone() * 3
        norm = a.step(max_grad_norm=max_norm)
        want = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
        b.step()
        torch.testing.assert_close(norm, want, rtol=1e-5, atol=1e-6)
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_gradient_norm_is_returned_and_nothing_is_updated(bad):
    params = _params()
    a = Adam(params, lr=0.1)
    before = [p.detach().clone() for p in params]
    for p, gr in zip(params, _grads(0)):
        p.grad = gr
    params[1].grad[0] = bad
    norm = a.step(max_grad_norm=1.0)
    assert norm is not None and not torch.isfinite(norm)
    assert all(torch.equal(p, q) for p, q in zip(params, before))
    assert a.state_dict()["state"] == {}  # no step counted
    assert a.step() is None  # without max_grad_norm: no norm


def test_state_dict_round_trips_through_torch_optim_adam_both_ways():
    ours, theirs = _params(), _params()
    a = Adam(ours, lr=1e-2, eps=1e-5)
    for step in range(3):
        _step(a, ours, _grads(step))
    for p, q in zip(ours, theirs):
        q.data.copy_(p.data)
    b = torch.optim.Adam(theirs, lr=1.0)
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # torch takes ours (hyperparameters included) ... (a state_dict's
    # tensors are the live ones, as torch's are: copied, or both optimizers would move the same moments)
    assert b.param_groups[0]["lr"] == 1e-2
    for step in range(3, 6):
        grads = _grads(step)
        _step(a, ours, grads)
        _step(b, theirs, grads)
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)
    c = Adam(_params(5), lr=0.5)
    c.load_state_dict(copy.deepcopy(b.state_dict()))  # ... and ours takes torch's
    assert c.param_groups[0]["lr"] == 1e-2 and c.param_groups[0]["eps"] == 1e-5
    for x, y in zip(c.state_dict()["state"].values(), b.state_dict()["state"].values()):
        assert float(x["step"]) == float(y["step"]) == 6
        assert torch.equal(x["exp_avg"], y["exp_avg"]) and torch.equal(x["exp_avg_sq"], y["exp_avg_sq"])


def test_a_parameter_never_updated_has_no_state_and_is_left_alone():
    ps = _params()
    before = ps[2].detach().clone()
    a = Adam(ps, lr=0.1)
    _step(a, ps, _grads(0, skip={2}))
    assert 2 not in a.state_dict()["state"] and set(a.state_dict()["state"]) == {0, 1, 3, 4}
    assert torch.equal(ps[2].detach(), before)
    a.zero_grad()
    assert all(p.grad is None for p in ps)


def test_a_parameter_never_given_a_gradient_keeps_the_one_flat_update(monkeypatch):
    """A parameter that never gets a gradient (a hidden entity type's embedding) does not send every step to the
    per-parameter path: the flat update leaves it alone and the others move as torch.optim.Adam moves them."""
    ours, theirs = _params(), _params()
    a = Adam(ours, lr=0.05)
    b = torch.optim.Adam(theirs, lr=0.05)
    before = ours[3].detach().clone()

    def per_parameter_path(*args, **kw):
        raise AssertionError("the per-parameter path ran")

    for step in range(6):
        grads = _grads(step, {3})
        for ps in (ours, theirs):
            for p, gr in zip(ps, grads):
                p.grad = None if gr is None else gr.clone() * 3
        with monkeypatch.context() as m:
            m.setattr(torch.nn.utils, "clip_grad_norm_", per_parameter_path)
            norm = a.step(max_grad_norm=1.0)
        torch.testing.assert_close(norm, torch.nn.utils.clip_grad_norm_(theirs, 1.0), rtol=1e-5, atol=1e-6)
        b.step()
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert torch.equal(ours[3].detach(), before) and 3 not in a.state_dict()["state"]
    ours[3].grad = torch.ones(SHAPES[3])  # its first gradient, at step 7: its own step 1, as torch counts it
    for p in (ours[i] for i in range(5) if i != 3):
        p.grad = torch.ones(p.shape)
    a.step()
    assert [float(a.state_dict()["state"][i]["step"]) for i in range(5)] == [7, 7, 7, 1, 7]


def test_a_state_for_other_parameters_is_refused_by_name():
    a = Adam(_params(), lr=0.1)
    _step(a, a.params, _grads(0))
    sd = a.state_dict()
    with pytest.raises(ValueError, match="for 5 parameters, this optimizer has 4"):
        Adam(_params()[:4], lr=0.1).load_state_dict(sd)
    other = [torch.nn.Parameter(torch.zeros(s)) for s in [(8, 4), (5,), (3, 8), (1,), (2, 3, 5)]]
    with pytest.raises(ValueError, match=r"parameter 1: exp_avg has shape \(4,\), the parameter \(5,\)"):
        Adam(other, lr=0.1).load_state_dict(sd)
    sd["param_groups"][0]["amsgrad"] = True
    with pytest.raises(ValueError, match="amsgrad=True; this Adam only implements amsgrad=False"):
        Adam(_params(), lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="given twice"):
        p = _params()[0]
        Adam([p, p], lr=0.1)


@pytest.mark.slow  # a fresh interpreter: ~3 s
def test_training_does_not_import_torch_dynamo():
    code = (
        "import sys, gymloop as gl\n"
        "from gymloop.train import TrainConfig\n"
        "from gymloop.train.ppo import Trainer\n"
        "from gymloop.nn import NetConfig\n"
        "from gymloop.games.snake_envs import SnakeEnv\n"
        "Trainer(SnakeEnv, TrainConfig(steps=512, num_envs=16, net=NetConfig(d_model=16, n_head=2))).train()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
