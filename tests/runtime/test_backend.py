"""The backend interface: backends by name, a third backend added by one file, space discovery."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest
from support.stepping import trajectory

import gymloop as gl
from gymloop.checker import _same
from gymloop.games import snake as snake_mod
from gymloop.games.snake import snake
from gymloop.games.snake_envs import SnakeEnv
from gymloop.runtime.backend import (
    Backend,
    BackendConfig,
    ShardExecutor,
    backend_names,
    discover_spaces,
    make_executor,
    register_backend,
    shard_sizes,
)
from gymloop.runtime.executor import Executor


# ---------------------------------------------------------------------- a third backend, in this file alone
class FakeBackend(Backend):
    """Two in-process shards stepped one after the other: the whole protocol, no transport."""

    instances: list[FakeBackend] = []

    @classmethod
    def check_config(cls, config: BackendConfig) -> None:
        if config.num_envs < 2:
            raise gl.ConfigError("backend='fake' needs two game copies")

    def __init__(self, config: BackendConfig) -> None:
        c = config
        self.is_env = c.is_env
        lo = 0
        self.shards = []
        for n in shard_sizes(c.num_envs, 2):
            self.shards.append(make_executor(c.game, lo, n, c.agents_per_game, c.seed, c.declared, c.is_env))
            lo += n
        self.spaces = None
        self.closes = 0
        self.counts: list[list[int]] = []
        FakeBackend.instances.append(self)

    def _concat(self, parts: list[gl.Batch]) -> gl.Batch:
        self.counts = [
            np.concatenate([[0], np.cumsum([p.actor_slot[name].shape[0] for p in parts])]).tolist()
            for name in self.spaces.actions
        ]
        return gl.Batch.concat(parts, copy=True)

    def reset(self):
        if self.spaces is None:
            found = []
            for ex in self.shards:
                ex.start()
                found.append(ex.discover())
            fixed, self.spaces = discover_spaces(found, self.is_env)
            parts = []
            for ex in self.shards:
                ex.set_spaces(fixed)
                parts.append(ex.build())
        else:
            parts = [ex.reset() for ex in self.shards]
        return self._concat(parts), self.spaces

    def step(self, actions):
        c = self.counts
        parts = [
            ex.step([actions[a][c[a][i] : c[a][i + 1]] for a in range(len(actions))]) for i, ex in enumerate(self.shards)
        ]
        return self._concat(parts)

    def close(self):
        self.closes += 1
        for ex in self.shards:
            ex.close_games()


register_backend("fake", FakeBackend)


#: 30 steps, a second reset (spaces stay fixed, a new generation of seeds) and 5 steps more
_trajectory = functools.partial(trajectory, steps=30, again=5)


def _assert_same(a, b, what):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert _same(x, y), f"batch {i} differs: {what}"


@pytest.mark.parametrize("game", [snake, SnakeEnv], ids=["game-loop", "environment"])
def test_a_backend_registered_from_one_file_runs_the_vecenv(game):
    FakeBackend.instances.clear()
    fake = _trajectory(game, backend="fake")
    assert len(FakeBackend.instances) == 1 and FakeBackend.instances[0].closes == 1
    _assert_same(_trajectory(game), fake, "backend='fake' vs the default")
    assert "fake" in backend_names()


def test_process_backend_with_one_worker_matches_local():
    _assert_same(_trajectory(snake), _trajectory(snake, workers=1, backend="process"), "process(workers=1) vs local")
    _assert_same(_trajectory(SnakeEnv), _trajectory(SnakeEnv, workers=1, backend="process"), "environments")


def test_backend_none_keeps_the_choice_by_workers():
    assert gl.VecEnv(snake, 2).backend_name == "local"
    assert gl.VecEnv(snake, 2, workers=1).backend_name == "local"
    assert gl.VecEnv(snake, 2, workers=2).backend_name == "process"
    assert gl.VecEnv(snake, 2, workers=2, backend="process").backend_name == "process"


def test_unknown_backend_name_lists_the_known_ones():
    with pytest.raises(gl.ConfigError, match=r"unknown backend 'proces'; the known backends are \[.*'local'.*'process'.*\]; did you mean 'process'\?"):
        gl.VecEnv(snake, 2, backend="proces")
    with pytest.raises(gl.ConfigError, match=r"unknown backend 3"):
        gl.VecEnv(snake, 2, backend=3)


def test_backend_and_workers_that_conflict():
    with pytest.raises(gl.ConfigError, match=r"backend='local' runs every game in this process, but workers=2"):
        gl.VecEnv(snake, 4, workers=2, backend="local")
    with pytest.raises(gl.ConfigError, match=r"backend='process' needs workers >= 1"):
        gl.VecEnv(snake, 4, workers=0, backend="process")
    with pytest.raises(gl.ConfigError, match=r"backend='fake' needs two game copies"):
        gl.VecEnv(snake, 1, backend="fake")


def test_a_lazy_backend_is_imported_on_first_use_only():
    register_backend("lazy-fake", "test_backend_lazy_missing:Nothing")
    try:
        assert "lazy-fake" in backend_names()
        with pytest.raises(gl.ConfigError, match=r"backend 'lazy-fake' could not be loaded"):
            gl.VecEnv(snake, 2, backend="lazy-fake")
        register_backend("lazy-fake", f"{__name__}:FakeBackend")
        env = gl.VecEnv(snake, 2, backend="lazy-fake")
        env.reset()
        assert isinstance(env._state.backend, FakeBackend)
        env.close()
    finally:
        from gymloop.runtime import backend as bk

        bk._LAZY.pop("lazy-fake", None)
        bk._REGISTRY.pop("lazy-fake", None)


def test_backends_close_idempotently():
    for kw in ({}, {"backend": "fake"}, {"workers": 1, "backend": "process"}):
        env = gl.VecEnv(snake, 2, **kw)
        env.reset()
        b = env._state.backend
        b.close()
        b.close()
        env.close()
        env.close()


# ---------------------------------------------------------------------- the shared discovery step
def test_executors_implement_the_shard_interface():
    cfg = dict(game=snake, env_lo=0, n=2, apg=1, seed=0, declared=None)
    assert isinstance(make_executor(**cfg, is_env=False), ShardExecutor)
    assert isinstance(make_executor(**{**cfg, "game": SnakeEnv}, is_env=True), ShardExecutor)


def test_discover_spaces_does_not_depend_on_the_layout():
    def found(lo, n):
        ex = Executor(snake, lo, n, 1, 0)
        ex.start()
        try:
            return ex.discover()
        finally:
            ex.close_games()

    one, s1 = discover_spaces([found(0, 6)], False)
    three, s3 = discover_spaces([found(0, 2), found(2, 2), found(4, 2)], False)
    assert one == three
    assert s1.obs_space == s3.obs_space and s1.action_space == s3.action_space


def test_discover_spaces_of_environments_must_agree():
    a = make_executor(SnakeEnv, 0, 1, 1, 0, None, True)
    a.start()
    fixed, spaces = discover_spaces([a.discover(), a.discover()], True)
    assert fixed is spaces and sorted(spaces.obs_space.entities) == ["Body", "Food", "Head"]

    class Other(SnakeEnv):
        def obs_space(self):
            return gl.ObsSpace(entities={"Head": ("x", "y")})

    b = make_executor(Other, 1, 1, 1, 0, None, True)
    b.start()
    with pytest.raises(gl.SchemaError, match=r"environment copies report different spaces"):
        discover_spaces([a.discover(), b.discover()], True)


# ---------------------------------------------------------------------- EnvExecutor honours `declared`
def test_environment_declared_types_matching_its_spaces_are_accepted():
    env = gl.VecEnv(SnakeEnv, 2, entity_types=[snake_mod.Head, snake_mod.Food], action_types=[snake_mod.Move])
    batch = env.reset()
    assert batch.num_slots == 2
    env.close()


@dataclass
class Head:
    x: int
    y: int
    z: int


@dataclass
class Ghost:
    x: int


def test_environment_declared_types_that_disagree_are_errors():
    with pytest.raises(gl.SchemaError, match=r"declared entity type 'Head' has features \['x', 'y', 'z'\]"):
        gl.VecEnv(SnakeEnv, 2, entity_types=[Head]).reset()
    with pytest.raises(gl.SchemaError, match=r"declared entity type 'Ghost' is not in the environment's obs_space"):
        gl.VecEnv(SnakeEnv, 2, entity_types=[Ghost]).reset()

    from enum import Enum

    class Move(Enum):
        UP = 0
        DOWN = 1

    with pytest.raises(gl.SchemaError, match=r"declared action type 'Move' is .*, but the environment's action_space\(\) has"):
        gl.VecEnv(SnakeEnv, 2, action_types=[Move]).reset()


# ---------------------------------------------------------------------- the pipe's opcodes
def test_pipe_opcodes_are_named_single_bytes():
    from gymloop.runtime.workers import Op

    assert len({op.value for op in Op}) == len(Op)
    assert all(len(op.tag) == 1 for op in Op)


@pytest.mark.slow
def test_environments_in_worker_processes_match_local():
    _assert_same(_trajectory(SnakeEnv), _trajectory(SnakeEnv, workers=2), "environments, workers=2")
    _assert_same(_trajectory(snake), _trajectory(snake, workers=3, backend="process"), "snake, workers=3")


def test_a_plain_factory_function_is_a_backend_too():
    register_backend("fake-fn", lambda config: FakeBackend(config))
    try:
        env = gl.VecEnv(snake, 1, backend="fake-fn")  # no check_config: every configuration accepted
        assert isinstance(env._make_backend(), FakeBackend)
    finally:
        from gymloop.runtime import backend as bk

        bk._REGISTRY.pop("fake-fn", None)
