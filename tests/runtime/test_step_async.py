"""``VecEnv.step_async`` / ``step_wait`` (issue 12): a step in two halves, the same batches and errors as ``step``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from support.fault_games import faulty, first_seed

import gymloop as gl
from gymloop.checker import _same
from gymloop.games.tactics import tactics


def _run(split: bool, steps: int = 8, **kw):
    env = gl.VecEnv(tactics, num_envs=4, seed=5, **kw)
    rng = np.random.default_rng(0)
    try:
        out = [env.reset()]
        for _ in range(steps):
            a = gl.vector.sample_legal(out[-1], env.spaces, rng)
            if split:
                env.step_async(a)
                out.append(env.step_wait())
            else:
                out.append(env.step(a))
    finally:
        env.close()
    return out


@pytest.mark.parametrize("workers", [0, 2], ids=["local", "process"])
def test_step_async_then_step_wait_gives_the_batches_of_step(workers):
    a, b = _run(True, workers=workers), _run(False, workers=workers)
    assert len(a) == len(b) == 9
    assert all(_same(x, y) for x, y in zip(a, b))


def test_step_async_misuse_is_an_env_state_error():
    with gl.VecEnv(tactics, num_envs=2, seed=0) as env:
        with pytest.raises(gl.errors.EnvStateError, match="before reset"):
            env.step_async({})
        env.reset()
        with pytest.raises(gl.errors.EnvStateError, match="without a pending step_async"):
            env.step_wait()
        env.step_async(env.sample_actions())
        with pytest.raises(gl.errors.EnvStateError, match="while a step_async.. is pending"):
            env.step(env.sample_actions())
        with pytest.raises(gl.errors.EnvStateError, match="while a step_async.. is pending"):
            env.step_async(env.sample_actions())
        b = env.step_wait()
        assert b.num_slots == 2
        env.step_async(env.sample_actions())
        first = env.reset()  # a pending step is waited for and dropped
        assert first.num_slots == 2
        env.step(env.sample_actions())


def test_step_async_refuses_bad_actions_at_once():
    with gl.VecEnv(tactics, num_envs=2, seed=0) as env:
        env.reset()
        with pytest.raises(gl.errors.InvalidActionError, match="unknown action type"):
            env.step_async({"Nope": np.zeros(2, dtype=np.int64)})
        env.step_async(env.sample_actions())  # nothing was pending: a good step goes on
        env.step_wait()


def test_step_wait_raises_and_counts_faults_as_step():
    bad = first_seed(1)
    game = functools.partial(faulty, bad_seeds={bad}, at=2)
    with gl.VecEnv(game, num_envs=3, seed=0, step_timeout=2.0) as env:
        env.reset()
        env.step_async(env.sample_actions())
        env.step_wait()
        env.step_async(env.sample_actions())
        with pytest.raises(gl.errors.GameError, match="Oops|raise") as e:
            env.step_wait()
        assert e.value.env_index == 1
        with pytest.raises(gl.errors.EnvStateError, match="earlier step"):
            env.step_async(env.sample_actions())
    with gl.VecEnv(game, num_envs=3, seed=0, on_game_error="restart", game_error_limit=None) as env:
        env.reset()
        for _ in range(3):
            env.step_async(env.sample_actions())
            env.step_wait()
        assert env.num_game_errors == 1
