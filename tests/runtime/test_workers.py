"""Process workers: identical batches, shared memory hand-off, errors and shutdown."""

from __future__ import annotations

import functools
import gc
import os
import sys

import numpy as np
import pytest
from support import workers_games as wg
from support.stepping import trajectory

import gymloop as gl
from gymloop.checker import _same
from gymloop.games.snake import snake

pytestmark = pytest.mark.slow


def _trajectory(game, workers, n=12, steps=40, **kw):
    return trajectory(game, steps, n=n, workers=workers, **kw)


@pytest.mark.parametrize("game", [snake, wg.rich], ids=["snake", "rich"])
def test_workers_give_bit_identical_batches(game):
    a = _trajectory(game, 0)
    b = _trajectory(game, 2)
    c = _trajectory(game, 3)
    assert len(a) == len(b) == len(c)
    for i, (x, y, z) in enumerate(zip(a, b, c)):
        assert _same(x, y), f"batch {i} differs between workers=0 and workers=2"
        assert _same(x, z), f"batch {i} differs between workers=0 and workers=3"
    assert any(bt.terminated.any() or bt.truncated.any() for bt in a)


def test_worker_batches_do_not_alias_shared_memory():
    env = gl.VecEnv(snake, num_envs=8, workers=2, seed=0)
    try:
        b0 = env.reset()
        heads = b0.entities["Head"].copy()
        env.step(env.sample_actions())
        np.testing.assert_array_equal(b0.entities["Head"], heads)
        assert b0.entities["Head"].base is None or not isinstance(b0.entities["Head"].base, memoryview)
    finally:
        env.close()


def test_batch_outgrowing_shared_memory_is_handled():
    a = _trajectory(wg.growing, 0, n=2, steps=12)
    b = _trajectory(wg.growing, 2, n=2, steps=12)
    assert a[-1].entities["Foe"].shape[0] > 60000  # far past the initial segment size
    for x, y in zip(a, b):
        assert _same(x, y)


def test_game_error_in_worker_carries_env_and_seed_and_close_still_works():
    env = gl.VecEnv(wg.crashy, num_envs=16, workers=2, seed=0)
    env.reset()
    with pytest.raises(gl.GameError, match=r"game copy \d+ raised RuntimeError: boom at seed") as ei:
        for _ in range(5):
            env.step(env.sample_actions())
    err = ei.value
    assert err.seed % 5 == 0
    assert 0 <= err.env_index < 16
    assert "boom at seed" in err.original_traceback
    with pytest.raises(gl.EnvStateError, match="call env.reset"):
        env.step(env.sample_actions())
    env.close()
    env.close()


def test_close_runs_finally_blocks_in_workers_and_frees_shared_memory(tmp_path):
    before = wg.segments_in_use()
    env = gl.VecEnv(functools.partial(wg.with_finally, path=str(tmp_path)), num_envs=6, workers=2, seed=0)
    env.reset()
    env.step(env.sample_actions())
    used = wg.segments_in_use() - before
    pids = [w.pid for w in env._state.backend.workers]
    env.close()
    assert len(list(tmp_path.glob("closed-*"))) == 6
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)  # ended and reaped
    assert used and not used & wg.shm_names()  # its segments were removed


def test_garbage_collection_closes_workers(tmp_path):
    env = gl.VecEnv(functools.partial(wg.with_finally, path=str(tmp_path)), num_envs=4, workers=2, seed=0)
    env.reset()
    pids = [w.pid for w in env._state.backend.workers]
    del env
    gc.collect()
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)  # ended and reaped
    assert len(list(tmp_path.glob("closed-*"))) == 4


def test_dead_worker_is_reported():
    env = gl.VecEnv(wg.dies, num_envs=4, workers=2, seed=0)
    env.reset()
    with pytest.raises(gl.WorkerError, match=r"worker process 1 \(game copies 2\.\.3, pid \d+\) died \(exit code 3\)") as ei:
        env.step(env.sample_actions())
    assert (ei.value.worker, ei.value.env_indices) == (1, range(2, 4))
    env.close()


def test_unpicklable_game_is_refused_with_spawn():
    def local_game(agent, seed):  # pragma: no cover - never runs
        pass

    with pytest.raises(gl.ConfigError, match="must be picklable"):
        gl.VecEnv(local_game, num_envs=2, workers=2).reset()


def test_more_workers_than_envs_is_refused():
    with pytest.raises(gl.ConfigError, match="at most one worker per game copy"):
        gl.VecEnv(snake, num_envs=2, workers=3)


def test_actions_outgrowing_shared_memory_are_handled():
    a = _trajectory(wg.many_actors, 0, n=4, steps=5)
    b = _trajectory(wg.many_actors, 2, n=4, steps=5)
    for x, y in zip(a, b):
        assert _same(x, y)
    assert a[-1].reward.max() > 0


def test_unguarded_script_gets_an_error_naming_the_main_guard(tmp_path):
    """A script that builds a workers VecEnv at top level (no __main__ guard): the worker re-imports
    it; both sides say what to do, and no shared memory is leaked."""
    import subprocess

    script = tmp_path / "noguard.py"
    script.write_text(
        "import gymloop as gl\n"
        "from gymloop.games.snake import snake\n"
        "def g(agent, seed):\n"
        "    return snake(agent, seed)\n"
        "env = gl.VecEnv(g, num_envs=4, workers=2)\n"
        "env.reset()\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0
    assert 'guard the script\'s top level with `if __name__ == "__main__":`' in r.stderr
    assert "died while starting" in r.stderr
    assert "leaked shared_memory" not in r.stderr
