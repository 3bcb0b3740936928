"""Workers that freeze or die, and games that fault inside workers: nothing hangs, errors name the copies."""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support import fault_games as fg
from support import workers_games as wg
from support.stepping import steps as _steps

import gymloop as gl

pytestmark = pytest.mark.slow

N = 4  # with workers=2: copies 0-1 in this process, 2-3 in worker process 1


def _env(how="raise", bad_envs=(), **kw):
    bad = None if bad_envs is None else tuple(fg.first_seed(e) for e in bad_envs)
    kw.setdefault("step_timeout", 0.5)
    return gl.VecEnv(functools.partial(fg.faulty, how=how, bad_seeds=bad), num_envs=N, workers=2, seed=0, **kw)


def _exists(pid):
    """The process is alive or a zombie (not yet reaped)."""
    return os.path.exists(f"/proc/{pid}")


def _worker(env):
    (w,) = env._state.backend.workers
    return w


def test_frozen_worker_fails_the_step_in_time_and_close_is_quick():
    before = wg.segments_in_use()
    env = _env()
    env.reset()
    used = wg.segments_in_use() - before
    pid = _worker(env).pid
    os.kill(pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        with pytest.raises(gl.WorkerError, match=r"worker process 1 \(game copies 2\.\.3, pid \d+\) did not answer within "
                           r"step_timeout=0\.5 s .*it was killed\. Pass restart_workers=True") as ei:
            env.step(env.sample_actions())
        assert time.monotonic() - t < 3
        assert (ei.value.worker, ei.value.env_indices) == (1, range(2, 4))
        t = time.monotonic()
        env.close()
        assert time.monotonic() - t < 2
        assert not _exists(pid)
        assert used and not used & wg.shm_names()  # its segments were removed
    finally:
        if _exists(pid):
            os.kill(pid, signal.SIGKILL)


def test_close_with_a_frozen_worker_takes_under_two_seconds():
    env = _env()
    env.reset()
    pid = _worker(env).pid
    os.kill(pid, signal.SIGSTOP)
    t = time.monotonic()
    env.close()
    assert time.monotonic() - t < 2
    assert not _exists(pid)  # ended and reaped


@pytest.mark.parametrize("close", [True, False], ids=["close", "no-close"])
def test_the_interpreter_exits_with_a_frozen_worker(tmp_path, close):
    script = tmp_path / "frozen.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        import gymloop as gl
        from support import fault_games as fg

        if __name__ == "__main__":
            env = gl.VecEnv(fg.faulty, num_envs=4, workers=2, seed=0)
            env.reset()
            w = env._state.backend.workers[0].proc
            os.kill(w.pid, signal.SIGSTOP)
            print("stopped", w.pid, flush=True)
            if {close!r}:
                t = time.monotonic()
                env.close()
                print("closed in", time.monotonic() - t, flush=True)
            # the interpreter must exit (with or without close)
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    if close:
        assert float(out[out.index("in") + 1]) < 2
    with pytest.raises(ProcessLookupError):
        os.kill(int(out[1]), 0)
    assert "leaked" not in r.stderr


@pytest.mark.parametrize("how", ["loop", "sleep"])
def test_a_game_in_a_worker_that_never_asks_again_times_out_naming_its_copy(how):
    with _env(how, bad_envs=(3,)) as env:
        env.reset()
        with pytest.raises(gl.GameTimeoutError, match=r"game copy 3 did not ask for its next decision within step_timeout=0\.5 s") as ei:
            _steps(env, 3)
        assert (ei.value.env_index, ei.value.seed) == (3, fg.first_seed(3))
        assert _worker(env).proc.is_alive()  # its own deadline caught it: the worker was not killed


def test_a_game_in_a_worker_that_hangs_before_its_first_decision_fails_the_first_reset():
    game = functools.partial(fg.faulty, how="sleep", bad_seeds=(fg.first_seed(2),), at=0)
    env = gl.VecEnv(game, num_envs=N, workers=2, seed=0, step_timeout=0.5)
    with pytest.raises(gl.GameTimeoutError, match=r"game copy 2 did not ask for its next decision") as ei:
        env.reset()
    assert (ei.value.env_index, ei.value.seed) == (2, fg.first_seed(2))
    env.close()


def test_sys_exit_in_a_worker_game_is_a_game_error():
    with _env("exit", bad_envs=(2,)) as env:
        env.reset()
        with pytest.raises(gl.GameError, match=r"game copy 2 raised SystemExit: 3") as ei:
            _steps(env, 3)
        assert (ei.value.env_index, ei.value.seed) == (2, fg.first_seed(2))
        env.reset()  # the worker kept serving
        _steps(env, 1)


def test_reset_after_a_worker_was_killed_is_a_worker_error_then_starts_again():
    env = _env()
    env.reset()
    proc = _worker(env).proc
    proc.kill()
    proc.join(5)
    with pytest.raises(gl.WorkerError, match=r"worker process 1 \(game copies 2\.\.3, pid \d+\) died \(killed by signal SIGKILL\).*restart_workers=True") as ei:
        env.reset()
    assert ei.value.env_indices == range(2, 4)
    env.reset()  # a fresh start
    _steps(env, 2)
    env.close()


def test_step_after_a_worker_died_is_a_worker_error_and_reset_starts_it_again():
    env = _env()
    env.reset()
    proc = _worker(env).proc
    proc.kill()
    proc.join(5)
    with pytest.raises(gl.WorkerError, match=r"worker process 1 .* died"):
        env.step(env.sample_actions())
    env.reset()
    assert _steps(env, 2).reward.shape == (N,)
    assert env.num_worker_restarts == 0
    env.close()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_restart_workers_goes_on_within_the_step(how, caplog):
    env = _env(restart_workers=True)
    with env, caplog.at_level(logging.WARNING, logger="gymloop"):
        env.reset()
        _steps(env, 2)
        pid = _worker(env).pid
        os.kill(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        b = env.step(env.sample_actions())
        assert env.num_worker_restarts == 1
        assert b.truncated.tolist() == [False, False, True, True]
        assert not _exists(pid)  # ended and reaped: no zombie left
        assert _worker(env).proc.is_alive() and _worker(env).pid != pid
        assert "worker process 1 (game copies 2..3" in caplog.text and "started again" in caplog.text
        b = _steps(env, 3)
        assert not b.truncated.any()
        assert env.num_worker_restarts == 1


def test_replaced_workers_leave_no_fd_process_or_segment_behind():
    def fds():
        return len(os.listdir("/proc/self/fd"))

    with _env() as warm:  # starts what lives as long as this process (multiprocessing's resource tracker)
        warm.reset()
    before, mapped = fds(), wg.segments_in_use()
    pids, used = [], set()
    with _env(restart_workers=True) as env:
        env.reset()
        with_one_worker = fds()
        for _ in range(3):
            used |= wg.segments_in_use() - mapped
            pids.append(_worker(env).pid)
            os.kill(pids[-1], signal.SIGKILL)
            _steps(env, 2)
        used |= wg.segments_in_use() - mapped
        assert env.num_worker_restarts == 3
        assert fds() == with_one_worker  # the replaced workers' pipes, sentinels and segments are all closed
    assert fds() == before
    assert len(used) >= 4 and not used & set(os.listdir("/dev/shm"))  # every segment it used was removed
    assert not any(_exists(p) for p in pids)


def test_restart_workers_at_reset_starts_a_dead_worker_again():
    with _env(restart_workers=True) as env:
        env.reset()
        proc = _worker(env).proc
        proc.kill()
        proc.join(5)
        b = env.reset()
        assert env.num_worker_restarts == 1
        assert b.reward.shape == (N,) and _worker(env).proc.is_alive()
        _steps(env, 2)


def test_restart_workers_gives_up_on_a_worker_that_keeps_dying():
    with _env("die", bad_envs=None, restart_workers=True) as env:  # every copy in the worker kills it
        env.reset()
        with pytest.raises(gl.WorkerError, match=r"died \(exit code 7\).*\n\(not started again: 3 worker restarts within 60 s"):
            _steps(env, 30)
        assert env.num_worker_restarts == 3


@pytest.mark.parametrize("how", ["raise", "loop"])
def test_restart_in_a_worker_is_counted_here(how):
    with _env(how, bad_envs=(0, 3), on_game_error="restart") as env:
        env.reset()
        b = _steps(env, 3)
        assert env.num_game_errors == 2
        assert b.truncated.tolist() == [True, False, False, True]
        _steps(env, 3)
        assert env.num_game_errors == 2


def test_a_game_that_kills_its_worker_is_a_worker_error():
    with _env("die", bad_envs=(2,)) as env:
        env.reset()
        with pytest.raises(gl.WorkerError, match=r"worker process 1 .* died \(exit code 7\)"):
            _steps(env, 3)
