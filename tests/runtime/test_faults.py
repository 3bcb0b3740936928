"""Games that fault, in this process: timeouts, every BaseException, on_game_error="restart" and its limit."""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time

import numpy as np
import pytest
from support import fault_games as fg
from support.stepping import steps as _steps

import gymloop as gl
from gymloop.runtime import alarm


def _env(how, bad_envs=(0,), n=4, **kw):
    bad = None if bad_envs is None else tuple(fg.first_seed(e) for e in bad_envs)
    game = functools.partial(fg.faulty, how=how, bad_seeds=bad)
    return gl.VecEnv(game, num_envs=n, seed=0, **kw)


@pytest.mark.parametrize("how", ["loop", "sleep"])
def test_a_game_that_never_asks_again_times_out_naming_its_copy(how):
    env = _env(how, bad_envs=(2, 3), step_timeout=0.5)
    env.reset()
    t = time.monotonic()
    with pytest.raises(gl.GameTimeoutError, match=r"game copy 2 did not ask for its next decision within step_timeout=0\.5 s") as ei:
        _steps(env, 3)
    assert time.monotonic() - t < 4  # each copy that times out gives the rest of the step a fresh budget
    assert "(1 other game copies failed in the same step: 3 (timed out))" in str(ei.value)
    assert ei.value.env_index == 2 and ei.value.seed == fg.first_seed(2)
    assert f"seed={fg.first_seed(2)}" in str(ei.value)
    assert "misbehave" in ei.value.original_traceback  # where it was
    with pytest.raises(gl.EnvStateError, match="call env.reset"):
        env.step(env.sample_actions())
    env.reset()  # everything starts again, the copy too
    env.close()
    assert signal.getsignal(signal.SIGALRM) is not alarm._handler


@pytest.mark.parametrize("how, name", [("exit", r"SystemExit: 3"), ("oops", r"Oops: not an Exception")])
def test_every_base_exception_from_a_game_is_a_game_error(how, name):
    with _env(how, bad_envs=(1,)) as env:
        env.reset()
        with pytest.raises(gl.GameError, match=rf"game copy 1 raised {name} \(replay it with gl.run\(game, agent, seed=") as ei:
            _steps(env, 3)
        assert type(ei.value) is gl.GameError
        assert (ei.value.env_index, ei.value.seed) == (1, fg.first_seed(1))


@pytest.mark.parametrize("how, match", [
    ("exit", r"game copy 3 raised SystemExit: 3"),
    ("loop", r"game copy 3 did not ask for its next decision within step_timeout=0\.5 s"),
])
def test_a_fault_before_the_first_decision_fails_the_reset(how, match):
    game = functools.partial(fg.faulty, how=how, bad_seeds=(fg.first_seed(3),), at=0)
    with gl.VecEnv(game, num_envs=4, seed=0, step_timeout=0.5) as env:
        with pytest.raises(gl.GameError, match=match) as ei:
            env.reset()
        assert (ei.value.env_index, ei.value.seed) == (3, fg.first_seed(3))


def test_keyboard_interrupt_passes_through_as_itself():
    with _env("interrupt", bad_envs=(0,)) as env:
        env.reset()
        with pytest.raises(KeyboardInterrupt):
            _steps(env, 3)
        env.reset()  # and the env can start again
        _steps(env, 1)


@pytest.mark.parametrize("how", ["raise", "exit", "loop"])
def test_restart_continues_counts_logs_and_truncates(how, caplog):
    env = _env(how, bad_envs=(1,), step_timeout=0.5, on_game_error="restart")
    with env, caplog.at_level(logging.WARNING, logger="gymloop"):
        env.reset()
        b1 = _steps(env, 2)
        assert not b1.truncated.any()
        b = _steps(env, 1)  # copy 1 faults at its 3rd decision and restarts
        assert env.num_game_errors == 1
        assert b.truncated.tolist() == [False, True, False, False]
        assert not b.terminated.any()
        # its open episode (three decisions, scores 0, 1, 2) ended; the fresh one has no reward yet
        assert (b.metrics["episode_length"][1], b.metrics["episode_return"][1]) == (3, 2)
        assert b.reward[1] == 0 and b.reward[0] == 1
        msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("game copy 1 failed and was restarted" in m and f"seed={fg.first_seed(1)}" in m for m in msgs), msgs
        for _ in range(10):  # the fresh seed behaves: stepping goes on
            b = env.step(env.sample_actions())
        assert env.num_game_errors == 1


def test_restart_past_the_limit_stops_with_a_game_error():
    env = _env("raise", bad_envs=None, n=4, on_game_error="restart")  # every copy fails at its 3rd decision
    env.reset()
    _steps(env, 2)
    with pytest.raises(gl.GameError, match=r"4 game faults within 60 s, more than game_error_limit=0\.5 of the 4 copies allows \(3\)"):
        env.step(env.sample_actions())
    assert env.num_game_errors == 4
    env.close()


def test_restart_gives_up_on_a_copy_that_fails_at_every_start():
    game = functools.partial(fg.faulty, how="raise", bad_seeds=None, at=0)
    with gl.VecEnv(game, num_envs=2, seed=0, on_game_error="restart", game_error_limit=None) as env:
        with pytest.raises(gl.GameError, match=r"failed before its first decision 4 times in a row"):
            env.reset()
        assert env.num_game_errors == 6  # 3 restarts of each copy before giving up


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "0.5", True])
def test_bad_game_error_limit_is_a_config_error(bad):
    with pytest.raises(gl.ConfigError, match="game_error_limit must be a positive finite share"):
        gl.VecEnv(fg.faulty, num_envs=2, game_error_limit=bad)


def test_the_alarm_leaves_the_callers_handler_and_timer_alone():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda s, f: fired.append(s))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        with _env("raise", bad_envs=(), step_timeout=1.0) as env:
            env.reset()
            _steps(env, 5)
            assert 4.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5.0  # the caller's timer runs on
        assert signal.getsignal(signal.SIGALRM) is not alarm._handler
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        time.sleep(0.1)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_stepping_from_another_thread_works_without_a_deadline():
    out = []

    def run():
        with _env("raise", bad_envs=(), step_timeout=0.5) as env:
            env.reset()
            out.append(_steps(env, 3).reward.shape)

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert out == [(4,)]


def test_close_is_bounded_when_a_finally_block_never_ends(caplog):
    env = gl.VecEnv(fg.hangs_in_finally, num_envs=2, seed=0, step_timeout=0.5)
    env.reset()
    t = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gymloop"):
        env.close()
    assert time.monotonic() - t < 2.0
    assert "did not finish closing in time" in caplog.text


# ---------------------------------------------------------------------- low-level environments
def _envs(how, bad_envs=(1,), **kw):
    return gl.VecEnv(functools.partial(fg.FaultyEnv, how=how, bad_seeds=tuple(fg.first_seed(e) for e in bad_envs)),
                     num_envs=3, seed=0, **kw)


def test_environment_that_sleeps_times_out_naming_its_copy():
    with _envs("sleep", step_timeout=0.5) as env:
        env.reset()
        with pytest.raises(gl.GameTimeoutError, match=r"environment copy 1 did not return within step_timeout=0\.5 s") as ei:
            _steps(env, 3)
        assert (ei.value.env_index, ei.value.seed) == (1, fg.first_seed(1))


def test_environment_that_exits_is_a_game_error():
    with _envs("exit") as env:
        env.reset()
        with pytest.raises(gl.GameError, match=r"environment copy 1 raised SystemExit: 3"):
            _steps(env, 3)


@pytest.mark.parametrize("how", ["raise", "sleep"])
def test_environment_restart_continues_and_truncates(how):
    with _envs(how, step_timeout=0.5, on_game_error="restart") as env:
        env.reset()
        _steps(env, 2)
        b = _steps(env, 1)
        assert b.truncated.tolist() == [False, True, False]
        assert b.reward.tolist() == [1.0, 0.0, 1.0]
        assert b.metrics["episode_length"][1] == 2
        assert env.num_game_errors == 1
        assert np.isfinite(_steps(env, 5).reward).all()
        assert env.num_game_errors == 1
