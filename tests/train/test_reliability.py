"""Training loses nothing on any exit, agent and optimizer are one unit, bad configurations are
clear errors (issue 10: items 2 and 4's configuration half)."""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from support import train_games as tg  # noqa: E402
from support.train_games import tiny  # noqa: E402

import gymloop as gl  # noqa: E402
from gymloop._ranges import describe  # noqa: E402
from gymloop.checkpoint import read_agent  # noqa: E402
from gymloop.cli import _config_keys, _parse_overrides, main  # noqa: E402
from gymloop.nn import config as net_config  # noqa: E402
from gymloop.train import TrainConfig, guards, ppo, rollout, run_dir, update  # noqa: E402
from gymloop.train import config as train_config  # noqa: E402
from gymloop.train.ppo import Trainer  # noqa: E402

PER_UPDATE = 32 * 8  # tiny(): 32 copies x 8 steps


@pytest.fixture(autouse=True)
def quick_curve(request, monkeypatch):
    """Drawing curve.png costs ~0.3 s a run: the tests here check that it is written, one draws it for real."""
    if request.node.name != "test_cli_game_error_exits_2_and_replaces_an_older_run_in_out":
        def stub(csv_path, png_path, random_level=None):
            with open(png_path, "wb") as f:
                f.write(b"curve of " + csv_path.encode())

        monkeypatch.setattr(run_dir, "plot_curve", stub)


def agent_at(out: str) -> dict:
    return read_agent(os.path.join(out, "agent.safetensors")).info


def metric_steps(out: str) -> list[int]:
    with open(os.path.join(out, "metrics.csv"), newline="") as f:
        return [int(float(r["step"])) for r in csv.DictReader(f)]


def all_finite(out: str) -> bool:
    return all(np.isfinite(np.asarray(v)).all() for v in read_agent(os.path.join(out, "agent.safetensors")).tensors.values())


# ---------------------------------------------------------------------- errors during training
def test_a_game_raising_saves_the_last_completed_update_then_raises(tmp_path):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit_crashes, tiny(4096), out_dir=out, game_name="bandit_crashes")
    with pytest.raises(gl.GameError, match="planned crash"):
        t.train()
    assert t.env.closed
    info = agent_at(out)
    assert (info["update"], info["step"]) == (2, 2 * PER_UPDATE)  # the third rollout was cut short: discarded
    assert metric_steps(out) == [PER_UPDATE, 2 * PER_UPDATE]
    assert os.path.getsize(os.path.join(out, "curve.png")) > 0
    # the pair is one unit: resuming it is accepted (and fails again at the same planned crash)
    with pytest.raises(gl.GameError):
        Trainer(tg.bandit_crashes, tiny(4096), out_dir=out, resume=True).train()


def test_cli_game_error_exits_2_and_replaces_an_older_run_in_out(tmp_path, capsys):
    out = str(tmp_path / "cli")
    args = ["--out", out, "--quiet", "--eval-episodes", "0", "--set", "num_envs=32", "--set", "rollout_steps=8",
            "--set", "ppo.minibatch_size=128"]
    assert main(["train", "support.train_games:bandit", "--steps", "768", *args]) == 0  # an older run: 3 updates
    assert agent_at(out)["step"] == 768 and metric_steps(out)[-1] == 768
    rc = main(["train", "support.train_games:bandit_crashes", "--steps", "4096", *args])
    assert rc == 2
    assert "planned crash" in capsys.readouterr().err
    # the new run's checkpoint beside the new run's metrics, not the old agent
    assert (agent_at(out)["game"], agent_at(out)["step"]) == ("support.train_games:bandit_crashes", 2 * PER_UPDATE)
    assert metric_steps(out) == [PER_UPDATE, 2 * PER_UPDATE]
    with open(os.path.join(out, "curve.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"  # drawn from the new run's metrics


@pytest.mark.parametrize("error", [
    gl.WorkerError("worker 1 did not answer within 60 s (step_timeout); env copies 0-15", worker=1, env_indices=range(16)),
    gl.GameTimeoutError("env 3 did not ask for a decision within 60 s", env_index=3, seed=7),
    OSError("disk on fire"),
], ids=["worker-error", "timeout", "any-exception"])
def test_a_worker_error_timeout_or_any_exception_saves_then_raises_it(tmp_path, monkeypatch, error):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(4096), out_dir=out)
    orig = Trainer._collect
    calls = {"n": 0}

    def failing(self):
        calls["n"] += 1
        if calls["n"] == 3:
            self.env.step(self.env.sample_actions())  # mid-rollout: the games moved on, the policy did not
            raise error
        return orig(self)

    monkeypatch.setattr(Trainer, "_collect", failing)
    with pytest.raises(type(error)) as got:
        t.train()
    assert got.value is error  # raised again as it came
    assert agent_at(out)["update"] == 2 and metric_steps(out) == [PER_UPDATE, 2 * PER_UPDATE]
    assert os.path.exists(os.path.join(out, "curve.png")) and t.env.closed


def test_a_stop_mid_update_saves_the_state_of_the_last_completed_update(tmp_path, monkeypatch):
    one = str(tmp_path / "one")
    Trainer(tg.bandit, tiny(PER_UPDATE), out_dir=one).train()  # exactly one update
    out = str(tmp_path / "cut")
    t = Trainer(tg.bandit, tiny(4096), out_dir=out)
    orig_update = Trainer._update

    def update_then_stop(self, *a):
        if self.update == 1:  # the second update: change the weights half-way, then Ctrl-C
            self.optim.step()
            raise KeyboardInterrupt
        return orig_update(self, *a)

    monkeypatch.setattr(Trainer, "_update", update_then_stop)
    r = t.train()
    assert r.interrupted and r.updates == 1 and r.stop_signal == signal.SIGINT
    a, b = read_agent(os.path.join(one, "agent.safetensors")), read_agent(os.path.join(out, "agent.safetensors"))
    assert a.tensors.keys() == b.tensors.keys()
    assert all(np.array_equal(a.tensors[k], b.tensors[k]) for k in a.tensors)  # bit-identical to the run of one update
    oa, _ = gl.checkpoint.read_safetensors(os.path.join(one, "optimizer.safetensors"))
    ob, _ = gl.checkpoint.read_safetensors(os.path.join(out, "optimizer.safetensors"))
    assert all(np.array_equal(oa[k], ob[k]) for k in oa if k.startswith("state."))


def test_sigterm_in_process_stops_like_ctrl_c_and_restores_the_handler(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    before = signal.getsignal(signal.SIGTERM)
    t = Trainer(tg.bandit, tiny(4096), out_dir=out)
    orig = Trainer._collect
    calls = {"n": 0}

    def terminated(self):
        calls["n"] += 1
        if calls["n"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at once; this is never finished
        return orig(self)

    monkeypatch.setattr(Trainer, "_collect", terminated)
    r = t.train()
    assert r.interrupted and r.stop_signal == signal.SIGTERM and r.updates == 2
    assert agent_at(out)["update"] == 2 and metric_steps(out) == [PER_UPDATE, 2 * PER_UPDATE]
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
def test_sigterm_to_cli_train_with_workers_saves_and_resume_continues(tmp_path):
    out = str(tmp_path / "run")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(here), "src"), here]))
    cmd = [sys.executable, "-m", "gymloop", "train", "support.train_games:bandit", "--workers", "2", "--out", out, "--quiet",
           "--eval-episodes", "0", "--set", "num_envs=32", "--set", "rollout_steps=8", "--set", "ppo.minibatch_size=128"]
    proc = subprocess.Popen([*cmd, "--steps", "100000000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            path = os.path.join(out, "metrics.csv")
            if os.path.exists(path) and len(metric_steps(out)) >= 3:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    done = agent_at(out)["step"]
    assert done >= 3 * PER_UPDATE and metric_steps(out)[-1] == done
    assert os.path.exists(os.path.join(out, "curve.png"))
    target = done + 2 * PER_UPDATE
    res = subprocess.run([*cmd, "--steps", str(target), "--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    steps = metric_steps(out)
    assert steps == sorted(set(steps)) and steps[-1] == target and steps == list(range(PER_UPDATE, target + 1, PER_UPDATE))


def _worker_pids(pid: int) -> list[int]:
    """The gymloop worker processes a process started (not multiprocessing's resource tracker)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and "resource_tracker" not in cmdline:
            out.append(int(d))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stop", "kill-restart"])  # (a killed worker without restart: a WorkerError like "stop")
def test_cli_train_with_a_frozen_or_killed_worker_saves_and_exits(tmp_path, how):
    """The issue's rows: a frozen worker stalled training forever; a killed one lost the run. Now a frozen
    worker is a WorkerError after the step timeout, either is saved and exits 2, and with
    --on-game-error restart a killed worker is started again and the run goes on to the end."""
    out = str(tmp_path / "run")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(here), "src"), here]))
    steps = 60 * PER_UPDATE if how == "kill-restart" else 100_000_000
    cmd = [sys.executable, "-m", "gymloop", "train", "support.train_games:bandit", "--workers", "2", "--out", out, "--quiet",
           "--eval-episodes", "0", "--steps", str(steps), "--step-timeout", "1", "--set", "num_envs=32",
           "--set", "rollout_steps=8", "--set", "ppo.minibatch_size=128"]
    if how == "kill-restart":
        cmd += ["--on-game-error", "restart"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(os.path.join(out, "metrics.csv")) and len(metric_steps(out)) >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        (worker,) = _worker_pids(proc.pid)
        os.kill(worker, signal.SIGSTOP if how == "stop" else signal.SIGKILL)
        t = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "kill-restart":
        assert proc.returncode == 0, err
        assert agent_at(out)["step"] == steps and metric_steps(out)[-1] == steps
        with open(os.path.join(out, "metrics.csv"), newline="") as f:
            assert float(list(csv.DictReader(f))[-1]["worker_restarts"]) == 1
        return
    assert proc.returncode == 2, err
    assert ("did not answer within step_timeout=1 s" if how == "stop" else "died (killed by signal SIGKILL)") in err
    assert took < 20
    done = agent_at(out)["step"]
    assert done >= 3 * PER_UPDATE and metric_steps(out)[-1] == done
    assert os.path.exists(os.path.join(out, "curve.png"))
    assert not os.path.exists(f"/proc/{worker}")  # the frozen worker was killed and reaped


# ---------------------------------------------------------------------- metrics after a resume
def test_resume_drops_metric_rows_written_after_the_checkpoint(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    Trainer(tg.bandit, tiny(3 * PER_UPDATE), out_dir=out).train()  # checkpoint at update 3
    # a run killed (SIGKILL, power cut) after 2 more updates, before it could save them
    monkeypatch.setattr(Trainer, "_save_all", lambda self: None)
    Trainer(tg.bandit, tiny(5 * PER_UPDATE), out_dir=out, resume=True).train()
    monkeypatch.undo()
    assert agent_at(out)["update"] == 3 and len(metric_steps(out)) == 5
    r = Trainer(tg.bandit, tiny(6 * PER_UPDATE), out_dir=out, resume=True).train()
    assert r.first_step == 3 * PER_UPDATE
    assert metric_steps(out) == [k * PER_UPDATE for k in range(1, 7)]  # each step once
    # TensorBoard too: the last run's file starts with a session start after the checkpoint's step, which drops the
    # killed run's updates 4 and 5 from its file (TensorBoard's own reader does the same, tested where it is installed)
    from gymloop.train.tensorboard import read_folder

    tb = read_folder(os.path.join(out, "tb"))
    assert tb["update"] == [(k * PER_UPDATE, float(k)) for k in range(1, 7)]
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return
    acc = EventAccumulator(os.path.join(out, "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("update")] == [(k * PER_UPDATE, float(k)) for k in range(1, 7)]


# ---------------------------------------------------------------------- agent and optimizer: one unit
def test_resume_refuses_an_agent_and_optimizer_of_different_saves(tmp_path):
    out = str(tmp_path / "run")
    agent, optim = os.path.join(out, "agent.safetensors"), os.path.join(out, "optimizer.safetensors")
    Trainer(tg.bandit, tiny(2 * PER_UPDATE), out_dir=out).train()
    shutil.copy(agent, tmp_path / "old_agent")
    Trainer(tg.bandit, tiny(4 * PER_UPDATE), out_dir=out, resume=True).train()
    shutil.copy(tmp_path / "old_agent", agent)  # a kill between the optimizer's write and the agent's
    with pytest.raises(gl.CheckpointError, match=r"agent.safetensors and .*optimizer.safetensors are not one checkpoint.*"
                                                 r"update 4 vs 2; step 1024 vs 512; weights .* vs .*delete .*optimizer.safetensors"):
        Trainer(tg.bandit, tiny(8 * PER_UPDATE), out_dir=out, resume=True).train()
    os.remove(optim)  # the fix the message gives: the agent resumes with a fresh optimizer state
    r = Trainer(tg.bandit, tiny(3 * PER_UPDATE), out_dir=out, resume=True).train()
    assert r.first_step == 2 * PER_UPDATE and r.steps == 3 * PER_UPDATE


def test_resume_refuses_an_agent_whose_weights_changed_since_the_optimizer_was_saved(tmp_path):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(PER_UPDATE), out_dir=out)
    t.train()
    with torch.no_grad():
        next(t.policy.parameters()).add_(1.0)
    gl.checkpoint.write_agent(os.path.join(out, "agent.safetensors"), gl.nn.torch_policy.policy_tensors(t.policy), agent_at(out))
    with pytest.raises(gl.CheckpointError, match=r"not one checkpoint.*weights [0-9a-f]+ vs [0-9a-f]+"):
        Trainer(tg.bandit, tiny(2 * PER_UPDATE), out_dir=out, resume=True).train()


def test_save_writes_the_optimizer_before_the_agent(tmp_path, monkeypatch):
    order = []
    monkeypatch.setattr(run_dir, "write_safetensors", lambda path, *a, **k: order.append(os.path.basename(path)))
    monkeypatch.setattr(run_dir, "write_agent", lambda path, *a, **k: order.append(os.path.basename(path)))
    t = Trainer(tg.bandit, tiny(PER_UPDATE), out_dir=str(tmp_path / "run"))
    t._setup()
    t.save()
    t.env.close()
    t.tb.close()
    assert order == ["optimizer.safetensors", "agent.safetensors"]


def test_resume_without_the_optimizer_file_says_so(tmp_path, caplog):
    out = str(tmp_path / "run")
    Trainer(tg.bandit, tiny(PER_UPDATE), out_dir=out).train()
    os.remove(os.path.join(out, "optimizer.safetensors"))
    with caplog.at_level(logging.WARNING, logger="gymloop.train"):
        Trainer(tg.bandit, tiny(2 * PER_UPDATE), out_dir=out, resume=True).train()
    assert "optimizer state starts afresh" in caplog.text


# ---------------------------------------------------------------------- periodic checkpoints
def test_time_based_and_update_based_checkpoints(tmp_path, monkeypatch):
    saves = []
    orig = Trainer.save
    monkeypatch.setattr(Trainer, "save", lambda self, *a: saves.append(self.update) or orig(self, *a))
    assert TrainConfig().checkpoint_minutes > 0  # on by default
    cfg = tiny(4 * PER_UPDATE)
    cfg.checkpoint_minutes = 1e-9  # due after every update
    Trainer(tg.bandit, cfg, out_dir=str(tmp_path / "a")).train()
    assert saves == [1, 2, 3, 4, 4]  # (and the final save)
    saves.clear()
    cfg.checkpoint_minutes, cfg.checkpoint_every = 0, 3
    Trainer(tg.bandit, cfg, out_dir=str(tmp_path / "b")).train()
    assert saves == [3, 4]


# ---------------------------------------------------------------------- divergence
def test_a_huge_learning_rate_stops_with_training_error_and_finite_weights(tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(gl.TrainingError, match=r"diverged at update 1 \(step 0\).*last good checkpoint was saved.*lower ppo.lr"):
        Trainer(tg.two_types, tiny(4096, lr=1e10), out_dir=out).train()
    assert all_finite(out) and agent_at(out)["update"] == 0


@pytest.mark.parametrize("module, where, what", [(update, "evaluate", "updating the network"),
                                                 (rollout.Players, "act", "choosing actions")], ids=["update", "act"])
def test_a_pytorch_error_becomes_training_error_naming_the_update(tmp_path, monkeypatch, module, where, what):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(4096), out_dir=out)
    orig = getattr(module, where)

    def broken(*a, **k):
        if t.update == 2:
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        return orig(*a, **k)

    monkeypatch.setattr(module, where, guards.torch_errors(what)(broken))
    with pytest.raises(gl.TrainingError, match=rf"diverged at update 3 \(step 512\): PyTorch failed while {what}: RuntimeError: "
                                               r"probability tensor.*saved to .*update 2.*lower ppo.lr") as got:
        t.train()
    assert isinstance(got.value.__cause__, RuntimeError)
    assert agent_at(out)["update"] == 2 and all_finite(out)


def test_non_finite_weights_after_an_update_are_caught(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    t = Trainer(tg.bandit, tiny(4096), out_dir=out)
    orig = Trainer._update

    def overflow(self, *a):
        stats = orig(self, *a)
        if self.update == 1:
            with torch.no_grad():
                next(self.policy.parameters()).mul_(float("inf"))
            if not guards.all_finite(list(self.policy.state_dict().values())):
                raise guards.Diverged("the weights or normalization statistics became non-finite")
        return stats

    monkeypatch.setattr(Trainer, "_update", overflow)
    with pytest.raises(gl.TrainingError, match=r"diverged at update 2 .*non-finite.*update 1"):
        t.train()
    assert all_finite(out) and agent_at(out)["update"] == 1


def test_all_finite_sees_one_bad_element():
    ts = [torch.zeros(3, 4), torch.ones(5), torch.zeros(2, dtype=torch.int64)]
    assert guards.all_finite(ts)
    for bad in (float("nan"), float("inf"), -float("inf")):
        ts[1][3] = bad
        assert not guards.all_finite(ts)


# ---------------------------------------------------------------------- the games' reliability settings
def test_reliability_settings_reach_the_vecenv_and_the_metrics(tmp_path, monkeypatch):
    seen = {}
    orig = rollout.VecEnv

    def spy(*a, **k):
        seen.update(k)
        return orig(*a, **k)

    monkeypatch.setattr(rollout, "VecEnv", spy)
    cfg = tiny(PER_UPDATE)
    assert (cfg.step_timeout, cfg.on_game_error) == (60.0, "raise")
    cfg.step_timeout, cfg.on_game_error = 5.0, "restart"
    r = Trainer(tg.bandit, cfg).train()
    assert (seen["step_timeout"], seen["on_game_error"], seen["restart_workers"]) == (5.0, "restart", True)
    assert r.history[-1]["game_errors"] == 0 and r.history[-1]["worker_restarts"] == 0


def test_cli_step_timeout_and_on_game_error_flags(monkeypatch, capsys):
    seen = []

    def refuse(self, game, cfg, **kw):
        seen.append(cfg)
        raise gl.ConfigError("stop here")

    monkeypatch.setattr(ppo.Trainer, "__init__", refuse)
    assert main(["train", "support.train_games:bandit", "--step-timeout", "2.5", "--on-game-error", "restart", "--quiet"]) == 2
    assert main(["train", "support.train_games:bandit", "--step-timeout", "none", "--quiet"]) == 2
    assert (seen[0].step_timeout, seen[0].on_game_error, seen[1].step_timeout, seen[1].on_game_error) == (2.5, "restart", None, "raise")
    assert main(["train", "support.train_games:bandit", "--step-timeout", "soon"]) == 2
    assert "--step-timeout expects a number of seconds or 'none', got 'soon'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "support.train_games:bandit", "--on-game-error", "ignore"])


# ---------------------------------------------------------------------- configuration ranges
SPEC_MODULES = [(train_config, ("TrainConfig", "PPOConfig", "BCConfig")), (net_config, ("NetConfig", "RelposConfig"))]


@pytest.mark.parametrize("module, names", SPEC_MODULES, ids=["train", "net"])
def test_every_field_has_a_checked_range_and_the_reference_shows_that_range(module, names):
    for name in names:
        cls = getattr(module, name)
        assert set(module.SPECS[name]) == {f.name for f in dataclasses.fields(cls)}, name
        assert module.RANGES[name] == describe(module.SPECS[name])


@pytest.mark.parametrize("item, match", [
    # the issue's --set fuzzing: bare tracebacks before
    ("ppo.lr=nan", r"ppo.lr=nan is not finite: expected > 0, finite, or None \(automatic\); set ppo.lr within that range"),
    ("ppo.lr=inf", r"ppo.lr=inf is not finite"),
    ("ppo.max_grad_norm=nan", r"ppo.max_grad_norm=nan is not finite: expected > 0"),
    ("net.norm_clip=nan", r"net.norm_clip=nan is not finite: expected > 0"),
    ("ppo.chunk_size=0", r"ppo.chunk_size=0 is out of range: expected >= 1; .*e.g. 512 \(the default\)"),
    ("ppo.chunk_size=-1", r"ppo.chunk_size=-1 is out of range"),
    ("seed=-1", r"seed=-1 is out of range: expected \[0, 2\*\*63 - 1\]"),
    # ... and wrong values accepted before
    ("ppo.clip_coef=-1", r"ppo.clip_coef=-1.0 is out of range: expected > 0"),
    ("ppo.ent_coef=-5", r"ppo.ent_coef=-5.0 is out of range: expected >= 0"),
    ("ppo.max_grad_norm=-1", r"ppo.max_grad_norm=-1.0 is out of range"),
    ("net.norm_clip=-1", r"net.norm_clip=-1.0 is out of range"),
    ("checkpoint_every=-1", r"checkpoint_every=-1 is out of range: expected >= 0"),
    # more of the same kind
    ("ppo.gamma=nan", r"ppo.gamma=nan is not finite"),
    ("ppo.vf_coef=-inf", r"ppo.vf_coef=-inf is not finite"),
    ("checkpoint_minutes=inf", r"checkpoint_minutes=inf is not finite"),
    ("step_timeout=0", r"step_timeout=0.0 is out of range: expected > 0 seconds"),
    ("on_game_error=ignore", r"on_game_error='ignore' is not one of the choices: expected \"raise\", \"restart\"; set on_game_error to one"),
    ("threads=100000", r"threads=100000 is out of range: expected \[1, 1024\]"),
    ("num_envs=1000000000", r"the rollout of num_envs=1000000000 .* is more than"),
    ("workers=64", r"workers=64 is more than num_envs=32"),
    ("batch_size=4", r"unknown config field 'batch_size' \(did you mean ppo.minibatch_size\?\)"),
    ("ppo.learning_rate=1e-3", r"unknown config field 'ppo.learning_rate' \(did you mean ppo.lr\?\)"),
    ("n_epochs=4", r"unknown config field 'n_epochs' \(did you mean ppo.epochs"),
    ("total_timesteps=4", r"unknown config field 'total_timesteps' \(did you mean steps"),
    ("__doc__=x", r"unknown config field '__doc__'"),
    ("net.relpos=left", r"net.relpos must be a RelposConfig, 'auto' or None, got 'left'"),
])
def test_bad_set_values_are_config_errors_naming_the_field_and_range(item, match):
    cfg = tiny(4096)
    with pytest.raises(gl.ConfigError, match=match):
        _parse_overrides(cfg, [item])
        cfg.check()


def test_bad_values_from_python_are_config_errors_too():
    for change in (dict(num_envs=2.5), dict(seed=True), dict(steps="100"), dict(opponents="a.safetensors"), dict(init_from=3)):
        cfg = TrainConfig(**change)  # type: ignore[arg-type]
        with pytest.raises(gl.ConfigError, match=f"{next(iter(change))}="):
            cfg.check()
    cfg = TrainConfig()
    cfg.ppo.norm_adv = "yes"  # type: ignore[assignment]
    with pytest.raises(gl.ConfigError, match="ppo.norm_adv='yes' is a str, not True or False"):
        Trainer(tg.bandit, cfg)


KEYS = _config_keys(TrainConfig()) + ["bogus", "ppo.bogus", "net.relpos.extent", "ppo", ""]
VALUES = st.one_of(
    st.sampled_from(["nan", "-nan", "inf", "-inf", "0", "-0", "-1", "1", "2", "0.5", "1e10", "1e-10", "1e400", "-1e400", "true",
                     "false", "none", "auto", "None", "", " ", "3.0", "1_000", "9" * 30, "0x10", "raise", "restart", "x=y"]),
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(KEYS), VALUES), min_size=1, max_size=4))
def test_set_fuzzing_gives_only_config_errors(pairs):
    cfg = TrainConfig(steps=100_000)
    try:
        _parse_overrides(cfg, [f"{k}={v}" for k, v in pairs])
        cfg.check()
    except gl.ConfigError:
        return
    r = cfg.resolved()  # a configuration check() accepts resolves, and its shape fits
    num_envs, epochs, mb = r.shape()
    assert r.batch_size % mb == 0 and num_envs >= 1 and epochs >= 1
