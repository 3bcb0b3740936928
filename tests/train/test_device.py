"""The training device (``TrainConfig.device``, ``gymloop train --device``): its forms and errors, every tensor of a
run on it, the per-step move (none on the CPU), checkpoints written from CPU copies, resume across devices.

These run without a GPU: the errors are those of a machine without one, the ``meta`` device stands in for
"another device" where a tensor left on the CPU would show (PyTorch refuses to mix the two), and the tests
marked ``cuda`` run only where PyTorch sees a GPU.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import train_games as tg  # noqa: E402
from support.train_games import tiny  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop.checkpoint import read_agent, read_safetensors, write_safetensors  # noqa: E402
from gymloop.errors import ConfigError, DeviceError  # noqa: E402
from gymloop.games.snake import snake  # noqa: E402
from gymloop.nn.config import NetConfig  # noqa: E402
from gymloop.nn.torch_policy import InputNorm, Inputs, Policy  # noqa: E402
from gymloop.train import TrainConfig  # noqa: E402
from gymloop.train.bc import BCConfig, train_bc  # noqa: E402
from gymloop.train.device import resolve_device  # noqa: E402
from gymloop.train.normalize import AdvantageNormalizer  # noqa: E402
from gymloop.train.ppo import Trainer, policy_chooser  # noqa: E402
from gymloop.train.rollout import Players, collect, gae, make_groups  # noqa: E402
from gymloop.train.run_dir import AGENT_FILE, OPTIM_FILE  # noqa: E402
from gymloop.train.update import Samples  # noqa: E402

CUDA = torch.cuda.is_available()
no_gpu = pytest.mark.skipif(CUDA, reason="the errors of a machine where PyTorch sees no GPU")
cuda = pytest.mark.skipif(not CUDA, reason="needs a GPU PyTorch sees")
DEVICES = ["cpu", *(["cuda"] if CUDA else [])]
ACCEPTED = r"use 'auto', 'cpu', 'cuda' or 'cuda:N'"


def on(device: str, steps: int = 512, game_cfg: TrainConfig | None = None) -> TrainConfig:
    cfg = game_cfg or tiny(steps)
    cfg.device = device
    return cfg


def tensors_of(x: object) -> list[torch.Tensor]:
    """Every tensor in a nest of dataclasses, dicts, lists and tuples."""
    if isinstance(x, torch.Tensor):
        return [x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [t for f in dataclasses.fields(x) for t in tensors_of(getattr(x, f.name))]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_of(v)]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors_of(v)]
    return []


# ---------------------------------------------------------------------- forms and errors
def test_cpu_and_auto_resolve_and_auto_is_the_default():
    assert TrainConfig().device == "auto" and BCConfig().device == "auto"
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == (torch.device("cuda", torch.cuda.current_device()) if CUDA else torch.device("cpu"))


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "tpu", "CUDA", "cuda:", "cpu:0", "", 0])
def test_an_unknown_device_names_the_accepted_forms(bad):
    with pytest.raises(DeviceError, match=ACCEPTED):
        resolve_device(bad)  # type: ignore[arg-type]
    if isinstance(bad, str):
        with pytest.raises(DeviceError, match=rf"^device={bad!r}: .*{ACCEPTED}"):
            TrainConfig(device=bad).check()
        with pytest.raises(DeviceError, match=rf"^bc.device={bad!r}: .*{ACCEPTED}"):
            BCConfig(device=bad).check()
        with pytest.raises(DeviceError, match=ACCEPTED):
            Trainer(tg.bandit, on(bad))
    else:
        with pytest.raises(ConfigError, match="device"):
            TrainConfig(device=bad).check()  # type: ignore[arg-type]


@no_gpu
@pytest.mark.parametrize("asked", ["cuda", "cuda:0", "cuda:3"])
def test_a_gpu_torch_does_not_see_is_an_error_before_any_game_starts(asked, monkeypatch):
    started = []
    monkeypatch.setattr("gymloop.train.ppo.make_groups", lambda *a, **k: started.append(a))
    want = (rf"device={asked!r} asks for a CUDA GPU, but PyTorch {re.escape(torch.__version__)}.*torch.cuda.is_available\(\)=False, "
            r"torch.cuda.device_count\(\)=0; train on the CPU with --device cpu.*--device auto")
    with pytest.raises(DeviceError, match=want):
        gl.train.train(tg.bandit, on(asked))
    assert not started
    with pytest.raises(DeviceError, match=rf"^bc.device={asked!r} asks for a CUDA GPU.*--device cpu"):
        train_bc([gl.record_trace("snake", gl.RandomAgent(seed=0), seed=0, max_steps=20)], BCConfig(epochs=1, device=asked))
    if not torch.version.cuda:
        with pytest.raises(DeviceError, match=r"\(CPU-only build\)"):
            resolve_device(asked)


@cuda
def test_a_gpu_index_past_the_last_is_an_error():
    n = torch.cuda.device_count()
    with pytest.raises(DeviceError, match=rf"asks for GPU {n}, .*indices 0 to {n - 1}"):
        resolve_device(f"cuda:{n}")


@no_gpu
def test_the_command_line_refuses_a_missing_gpu_and_an_unknown_device(tmp_path, capsys):
    from gymloop.cli import main

    base = ["train", "snake", "--out", str(tmp_path / "run"), "--steps", "512", "--eval-episodes", "0", "--quiet"]
    assert main([*base, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "device='cuda' asks for a CUDA GPU" in err and "torch.cuda.is_available()=False" in err and "--device cpu" in err
    assert main([*base, "--device", "gpu"]) == 2
    assert "'gpu' is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run" / AGENT_FILE)


# ---------------------------------------------------------------------- every tensor on the device
class _Recorder(torch.overrides.TorchFunctionMode):
    """Records the device of every tensor a torch function or method returns, and every copy a
    ``to``/``cpu``/``pin_memory`` call makes of a tensor without changing its dtype (a move)."""

    MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.pin_memory}

    def __init__(self) -> None:
        super().__init__()
        self.devices: dict[str, set[str]] = {}
        self.moves: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__qualname__", getattr(func, "__name__", str(func)))
        for t in tensors_of(out):
            self.devices.setdefault(t.device.type, set()).add(name)
        if func in self.MOVES and args and isinstance(out, torch.Tensor) and out is not args[0] and out.dtype == args[0].dtype:
            self.moves.append(f"{name}: {args[0].device} -> {out.device}")
        return out


@pytest.mark.parametrize("game", [tg.select, tg.two_types, tg.triage], ids=["select-entity", "two-action-types", "global-select"])
def test_a_run_given_cpu_creates_no_tensor_elsewhere_and_moves_nothing(game):
    """device="cpu" given explicitly: every tensor a training run creates (factories, ``to``, the
    network's and the update's operations) is a CPU tensor, and no batch is copied to move it."""
    rec = _Recorder()
    with rec:
        t = Trainer(game, on("cpu", 512))
        t.train()
    assert set(rec.devices) == {"cpu"}, {k: sorted(v)[:10] for k, v in rec.devices.items()}
    assert rec.moves == []
    assert t.device == torch.device("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_weights_normalizers_optimizer_and_generator_are_on_the_device(device, tmp_path):
    old = str(tmp_path / "old.safetensors")
    gl.neural.random_checkpoint(old, tg.select, seed=1)
    cfg = on(device, 256)
    cfg.net = NetConfig()  # (a warm start keeps the checkpoint's network)
    for init in (None, old):
        cfg.init_from = init
        t = Trainer(tg.select, dataclasses.replace(cfg), out_dir=str(tmp_path / f"run{init is None}"))
        t.train()
        want = resolve_device(device)
        everything = [*t.policy.parameters(), *t.policy.buffers(), *tensors_of(t.optim.state_dict()["state"])]
        assert {x.device for x in everything if x.dim() > 0} == {want}  # (the optimizer's step counts are CPU scalars)
        assert {x.device for x in t.policy.norms.buffers()} == {want}
        assert t.gen.device.type == want.type and t.policy.device == want


def test_the_per_step_move_targets_the_policy_device():
    """A policy on the meta device gets every input of a forward pass there, the actions too (a tensor
    left on the CPU would be a silent host computation on a GPU)."""
    for game in (tg.select, tg.triage, snake):
        with gl.VecEnv(game, num_envs=4, seed=0) as env:
            b = env.reset()
            pol = Policy(env.obs_space, env.action_space).to("meta")
            p = pol.pack(b)
            actions = {k: np.zeros(v.shape[0], np.int64) for k, v in b.actor_slot.items()}
            inp = pol.inputs(p, actions)
            assert isinstance(inp, Inputs) and {t.device.type for t in tensors_of(inp)} == {"meta"}


def test_inputs_moved_once_give_what_the_batch_gives():
    with gl.VecEnv(tg.select, num_envs=4, seed=0) as env:
        b = env.reset()
    pol = Policy(env.obs_space, env.action_space)
    actions = {k: np.zeros(v.shape[0], np.int64) for k, v in b.actor_slot.items()}
    a, c = pol(pol.pack(b), actions=actions), pol(pol.inputs(pol.pack(b), actions))
    assert all(torch.equal(a.logprob[k], c.logprob[k]) for k in actions) and torch.equal(a.value, c.value)
    with pytest.raises(ConfigError, match=r"give the actions to evaluate to Policy.inputs\(batch, actions\)"):
        pol(pol.inputs(pol.pack(b)), actions=actions)


@pytest.mark.parametrize("readout", [False, True])
def test_a_forward_pass_on_another_device_creates_nothing_on_the_cpu(readout, monkeypatch):
    """The forward pass on the meta device: PyTorch refuses to mix a CPU tensor into it, so a factory
    that forgot the device would fail here. (Meta tensors have no values: the normalizers' statistics,
    which read a count, are the identity; the readout's ``bincount`` has no meta kernel, so only the
    entity embedding and the heads run with it.)"""
    monkeypatch.setattr(InputNorm, "_compute_stats",
                        lambda self: (torch.zeros_like(self.mean, dtype=torch.float32), torch.ones_like(self.mean, dtype=torch.float32)))
    for game in (tg.select, tg.triage, tg.two_types):
        with gl.VecEnv(game, num_envs=4, seed=0) as env:
            b = env.reset()
            pol = Policy(env.obs_space, env.action_space, NetConfig(d_model=16, n_head=2, readout=readout)).to("meta")
            if readout:
                inp = pol.inputs(pol.pack(b))
                x = pol.encode(inp)
                assert x.device.type == "meta"
                continue
            out = pol(pol.pack(b))
            assert {t.device.type for t in tensors_of(out)} == {"meta"}
            given = {k: np.zeros(v.shape[0], np.int64) for k, v in b.actor_slot.items()}
            out = pol(pol.pack(b), actions=given)
            assert {t.device.type for t in tensors_of(out)} == {"meta"}


def test_a_warm_start_is_grown_on_the_cpu_and_put_on_the_device(tmp_path):
    from gymloop.train.warmstart import warm_start

    old = str(tmp_path / "old.safetensors")
    gl.neural.random_checkpoint(old, tg.select, seed=1)
    with gl.VecEnv(tg.select, num_envs=4, seed=0) as env:
        b = env.reset()
        pol, report = warm_start(read_agent(old), env.obs_space, env.action_space, b, device="meta")
        on_cpu, _ = warm_start(read_agent(old), env.obs_space, env.action_space, b)
    assert report.unchanged and pol.device.type == "meta" and on_cpu.device.type == "cpu"
    assert {t.device.type for t in [*pol.parameters(), *pol.buffers()]} == {"meta"}


def test_a_minibatch_goes_to_the_policy_device():
    cfg = tiny(256).resolved()
    groups = make_groups(tg.select, cfg, 8)
    try:
        env = groups[0].env
        pol = Policy(env.obs_space, env.action_space, cfg.net)
        pol.update_norms(pol.pack(groups[0].batch))
        players = Players(pol, [], np.ones(env.num_slots, dtype=bool), torch.Generator())
        r = gae(collect(groups, 4, players, 0)[0], cfg.ppo)
    finally:
        for g in groups:
            g.env.close()
    mb = Samples(r, torch.device("meta")).minibatch(np.arange(16), AdvantageNormalizer("max"), 512)
    assert {t.device.type for t in (mb.old_logprob, mb.advantages, mb.old_values, mb.returns)} == {"meta"}
    cpu = Samples(r).minibatch(np.arange(16), AdvantageNormalizer("max"), 512)
    assert cpu.advantages.dtype == torch.float32 and cpu.old_logprob.device.type == "cpu"


# ---------------------------------------------------------------------- numbers, checkpoints, resume
def test_cpu_given_explicitly_trains_the_same_weights_as_the_default(tmp_path):
    a = Trainer(tg.select, tiny(512))
    a.train()
    b = Trainer(tg.select, on("cpu", 512))
    b.train()
    assert a.device == b.device == torch.device("cpu")
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_the_checkpoint_records_the_device_and_holds_host_tensors(tmp_path):
    out = str(tmp_path / "run")
    Trainer(tg.bandit, tiny(512), out_dir=out).train()  # device "auto"
    af = read_agent(os.path.join(out, AGENT_FILE))
    assert af.info["device"] == ("cuda:0" if CUDA else "cpu")  # what the run resolved
    assert af.info["train_config"]["device"] == "auto"  # what it was asked
    assert all(isinstance(v, np.ndarray) for v in af.tensors.values())
    tensors, meta = read_safetensors(os.path.join(out, OPTIM_FILE), mmap=False)
    assert meta["torch_rng_device"] == ("cuda" if CUDA else "cpu")


def test_a_generator_saved_on_another_kind_of_device_resumes_seeded_from_it(tmp_path, caplog):
    """A run resumed on another kind of device (a GPU run on the CPU, here a checkpoint whose generator
    says it was a GPU's) cannot take the generator's state as it is (another algorithm): the new one is
    seeded from it, so the resumed run is still determined by its checkpoint."""
    out = str(tmp_path / "run")
    Trainer(tg.bandit, on("cpu", 512), out_dir=out).train()
    opath = os.path.join(out, OPTIM_FILE)
    tensors, meta = read_safetensors(opath, mmap=False)
    tensors = {k: np.array(v) for k, v in tensors.items()}
    tensors["torch_rng"] = np.arange(16, dtype=np.uint8)  # a CUDA generator's state: its seed and offset
    write_safetensors(opath, tensors, {**meta, "torch_rng_device": "cuda"})
    runs = []
    for _ in range(2):
        t = Trainer(tg.bandit, on("cpu", 512), out_dir=out, resume=True)  # (the budget reached: loaded, no update, saved)
        with caplog.at_level("INFO", logger="gymloop.train"):
            assert t.train().steps == 512
        runs.append(t.gen.get_state())
        write_safetensors(opath, tensors, {**meta, "torch_rng_device": "cuda"})
    assert torch.equal(runs[0], runs[1])
    assert "the sampling generator was saved on cuda and resumes on cpu" in caplog.text


@pytest.mark.parametrize("first, then", [("cpu", "auto"), *([("cuda", "cpu"), ("cpu", "cuda")] if CUDA else [])])
def test_resume_on_another_device(first, then, tmp_path):
    out = str(tmp_path / "run")
    Trainer(tg.select, on(first, 512), out_dir=out).train()
    saved = read_agent(os.path.join(out, AGENT_FILE)).tensors
    t = Trainer(tg.select, on(then, 512), out_dir=out, resume=True)  # (the budget reached: loaded, no update, saved)
    assert t.train().steps == 512 and t.policy.device == resolve_device(then)
    assert all(np.array_equal(v.cpu().numpy(), saved[k]) for k, v in t.policy.state_dict().items())
    result = Trainer(tg.select, on(then, 1024), out_dir=out, resume=True).train()
    assert result.first_step == 512 and result.steps == 1024
    assert read_agent(os.path.join(out, AGENT_FILE)).info["device"] == str(resolve_device(then))


# ---------------------------------------------------------------------- behaviour cloning and evaluation
@pytest.mark.parametrize("device", DEVICES)
def test_behaviour_cloning_and_evaluation_run_on_the_device(device, tmp_path):
    from gymloop.games.snake import GreedyAgent, snake

    traces = [gl.record_trace("snake", GreedyAgent(seed=s), seed=s, max_steps=60) for s in range(2)]
    path = str(tmp_path / "bc.safetensors")
    result = train_bc(traces, BCConfig(epochs=2, device=device), out_path=path)
    assert result.policy.device == resolve_device(device)
    assert read_agent(path).info["device"] == str(resolve_device(device))
    choose = policy_chooser(result.policy, seed=0)
    with gl.VecEnv(snake, num_envs=4, seed=0) as env:
        actions = choose(env.reset())
    assert all(isinstance(a, np.ndarray) for a in actions.values())
    scores = gl.train.ppo.evaluate(snake, result.policy, episodes=4, num_envs=4, max_steps=200)
    assert "episode_return" in scores


def test_the_pipeline_passes_the_device_to_behaviour_cloning():
    from gymloop.train.pipeline import bc_config

    assert bc_config(on("cpu", 512)).device == "cpu"
    assert json.loads(json.dumps(TrainConfig(device="cuda:1").to_dict()))["device"] == "cuda:1"
