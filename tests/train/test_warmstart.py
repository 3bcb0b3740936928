"""Warm-starting training from an agent trained before the game grew (issue 4, item 2)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gymloop as gl
from gymloop.checkpoint import read_agent, write_agent
from gymloop.errors import CheckpointError
from gymloop.nn.config import NetConfig
from gymloop.nn.torch_policy import Policy, policy_info, policy_tensors
from gymloop.train import TrainConfig
from gymloop.train.ppo import Trainer
from gymloop.train.warmstart import warm_start


class Move(Enum):
    UP = 0
    DOWN = 1
    LEFT = 2
    RIGHT = 3


Move2 = Enum("Move", ["UP", "DOWN", "LEFT", "RIGHT", "STAY"])  # a later version adds a label


@gl.entity(name="Hero")
@dataclass
class Hero1:
    x: int
    y: int


@gl.entity(name="Gem")
@dataclass
class Gem1:
    x: int
    y: int


@gl.entity(name="Gem")
@dataclass
class Gem2:  # version 2: gems age
    x: int
    y: int
    age: float


@gl.entity(name="Rock")
@dataclass
class Rock:
    x: int
    y: int


@gl.entity(name="World")
@dataclass
class World:
    tick: float


def make_game(version: int, move: type = Move):
    """The same gem-collecting game at several versions (same states for the same seed)."""

    def game(agent, seed):
        rng = random.Random(seed)
        hx, hy = rng.randrange(6), rng.randrange(6)
        gems = [(rng.randrange(6), rng.randrange(6), rng.random()) for _ in range(3)]
        score = 0
        for t in range(30):
            if version == 1:
                ents = [Gem1(x, y) for x, y, _ in gems]
            else:
                ents = [Gem2(x, y, a + t) for x, y, a in gems]
            obs = gl.Obs(score=score).actor(Hero1(hx, hy)).entities(ents)
            if version >= 2:
                obs.globals(World(t * 0.5))
            if version >= 3:
                obs.entities([Rock(1, 1), Rock(4, 2)])
            m = agent.act(obs, move)
            dx, dy = {"UP": (0, 1), "DOWN": (0, -1), "LEFT": (-1, 0), "RIGHT": (1, 0)}.get(m.name, (0, 0))
            hx, hy = min(5, max(0, hx + dx)), min(5, max(0, hy + dy))
            if any((hx, hy) == (x, y) for x, y, _ in gems):
                score += 1
                gems = [g for g in gems if (g[0], g[1]) != (hx, hy)] + [(rng.randrange(6), rng.randrange(6), rng.random())]
        agent.game_over(gl.Obs(score=score), truncated=True)

    game.__name__ = f"gems_v{version}"
    return game


def _old_checkpoint(path, game, seed=0) -> None:
    """A v1 agent with large random weights (so its choices are far from uniform) and real norms."""
    torch.manual_seed(seed)
    with gl.VecEnv(game, num_envs=8, seed=seed) as env:
        b = env.reset()
        pol = Policy(env.obs_space, env.action_space, NetConfig())
        for _ in range(5):
            pol.update_norms(pol.pack(b))
            b = env.step(env.sample_actions())
    with torch.no_grad():
        for name, p in pol.named_parameters():
            if "weight" in name and p.dim() == 2:
                p.normal_(0, 0.12)
            elif "bias" in name:
                p.normal_(0, 0.2)
    write_agent(path, policy_tensors(pol), policy_info(pol, step=123))


def _batches(game, n=6, seed=3):
    out = []
    rng = np.random.default_rng(0)
    with gl.VecEnv(game, num_envs=5, seed=seed) as env:
        b = env.reset()
        for _ in range(n):
            out.append(b)
            acts = {"Move": rng.integers(0, 4, size=b.actor_index["Move"].shape[0])}
            b = env.step(acts)
    return out


def _forward(policy, b):
    with torch.no_grad():
        o = policy(policy.pack(b), generator=torch.Generator().manual_seed(0))
    return o


def test_new_features_start_at_zero_weight_and_behaviour_is_unchanged(tmp_path):
    path = str(tmp_path / "v1.safetensors")
    _old_checkpoint(path, make_game(1))
    af = read_agent(path)
    from gymloop.nn.torch_policy import policy_from_file

    old = policy_from_file(af)
    v1, v2 = _batches(make_game(1)), _batches(make_game(2))
    with gl.VecEnv(make_game(2), num_envs=4) as env:
        b0 = env.reset()
        new, report = warm_start(af, env.obs_space, env.action_space, b0)
    assert report.unchanged
    assert report.new_features == {"Gem": ["age", "tick"], "Hero": ["tick"]}
    w = new.state_dict()["embeds.Gem.0.weight"]
    assert torch.all(w[:, 2:] == 0)
    # the new columns' statistics come from the game (not identity): age grows with t
    assert float(new.norms["Gem"].mean[2]) > 0.1
    for b1, b2 in zip(v1, v2):
        o1, o2 = _forward(old, b1), _forward(new, b2)
        np.testing.assert_allclose(o2.logits["Move"].numpy(), o1.logits["Move"].numpy(), atol=1e-5)
        np.testing.assert_allclose(o2.value.numpy(), o1.value.numpy(), atol=1e-5)
        assert o1.logits["Move"].std() > 0.05  # the check is not vacuous: choices are far from uniform


def test_warm_started_training_run_keeps_step0_behaviour_and_then_learns_to_use_the_feature(tmp_path):
    path = str(tmp_path / "v1.safetensors")
    _old_checkpoint(path, make_game(1))
    cfg = TrainConfig(steps=2 * 64 * 8, num_envs=64, rollout_steps=8, init_from=path, seed=1)
    cfg.ppo.minibatch_size = 256
    tr = Trainer(make_game(2), cfg, out_dir=str(tmp_path / "run"))
    tr._setup()
    assert tr.warm_start_report.unchanged
    # the numpy agent of the warm-started policy plays v2 exactly like the old agent plays v1
    from gymloop.neural import load

    tr.save()
    a_old, a_new = load(path, seed=7), load(tmp_path / "run" / "agent.safetensors", seed=7)
    moves: dict[str, list] = {"old": [], "new": []}

    class Spy:
        def __init__(self, inner, log):
            self.inner, self.log = inner, log

        def act(self, obs, *types):
            m = self.inner.act(obs, *types)
            self.log.append(m.name)
            return m

        def game_over(self, obs, truncated=False):
            self.inner.game_over(obs, truncated)

    r1 = gl.run(make_game(1), Spy(a_old, moves["old"]), seed=5)
    r2 = gl.run(make_game(2), Spy(a_new, moves["new"]), seed=5)
    assert moves["old"] == moves["new"] and len(moves["old"]) == 30
    assert len(set(moves["old"])) > 1
    assert r1.scores == r2.scores
    tr.env.close()
    tr.tb.close()
    res = Trainer(make_game(2), cfg, out_dir=str(tmp_path / "run2")).train()
    assert res.steps >= cfg.steps
    after = read_agent(tmp_path / "run2" / "agent.safetensors")
    assert np.abs(after.tensors["embeds.Gem.0.weight"][:, 2:]).max() > 0  # training uses the new inputs
    assert after.info["obs_space"]["entities"]["Gem"] == ["x", "y", "age"]


def test_new_entity_types_and_labels_are_reported(tmp_path):
    path = str(tmp_path / "v1.safetensors")
    _old_checkpoint(path, make_game(1))
    af = read_agent(path)
    with gl.VecEnv(make_game(3, Move2), num_envs=4) as env:
        b0 = env.reset()
        new, report = warm_start(af, env.obs_space, env.action_space, b0)
    assert not report.unchanged
    assert report.new_entity_types == ["Rock"]
    assert report.new_labels == {"Move": ["STAY"]}
    bias = new.state_dict()["heads.Move.bias"]
    assert float(bias[4]) < float(bias[:4].min()) - 10  # the new label starts (almost) never chosen
    assert "new entity types ['Rock']" in str(report)


def test_removed_feature_or_label_is_refused_naming_it(tmp_path):
    path = str(tmp_path / "v2.safetensors")
    _old_checkpoint(path, make_game(2))
    af = read_agent(path)
    with gl.VecEnv(make_game(1), num_envs=2) as env:
        b0 = env.reset()
        with pytest.raises(CheckpointError, match=r"global features \['tick'\].*'Gem' features \['age'\]"):
            warm_start(af, env.obs_space, env.action_space, b0)
    path5 = str(tmp_path / "v1_5.safetensors")
    _old_checkpoint(path5, make_game(1, Move2))
    with gl.VecEnv(make_game(1), num_envs=2) as env:
        b0 = env.reset()
        with pytest.raises(CheckpointError, match=r"'Move' labels \['STAY'\]"):
            warm_start(read_agent(path5), env.obs_space, env.action_space, b0)


def test_init_from_a_missing_file_fails_at_start(tmp_path):
    cfg = TrainConfig(steps=64, num_envs=8, rollout_steps=8, init_from=str(tmp_path / "nope.safetensors"))
    cfg.ppo.minibatch_size = 64
    with pytest.raises(CheckpointError, match="nope.safetensors"):
        Trainer(make_game(2), cfg).train()


def test_cli_init_from(tmp_path, capsys):
    from gymloop.cli import main
    from gymloop.games.snake import snake
    from gymloop.neural import random_checkpoint

    old = str(tmp_path / "old.safetensors")
    random_checkpoint(old, snake)
    rc = main(["train", "snake", "--steps", "512", "--num-envs", "32", "--init-from", old, "--out", str(tmp_path / "o"),
               "--eval-episodes", "0", "--quiet", "--set", "ppo.minibatch_size=256"])
    assert rc == 0
    assert read_agent(tmp_path / "o" / "agent.safetensors").info["step"] >= 512
