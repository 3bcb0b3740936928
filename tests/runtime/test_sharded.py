"""The sharded-backend base: a backend that only says how a call travels gets the protocol and the faults."""

from __future__ import annotations

import numpy as np
import pytest

import gymloop as gl
from gymloop.checker import _same
from gymloop.games.snake import snake
from gymloop.runtime.backend import BackendConfig, register_backend, shard_sizes
from gymloop.runtime.faults import first_error, gave_up
from gymloop.runtime.sharded import Call, ShardedBackend, ShardHandle, remote_executor


class _Shard(ShardHandle):
    def __init__(self, index: int, lo: int, n: int, c: BackendConfig, fixed=None, generation=0, restart_base=0) -> None:
        super().__init__(index, lo, n, c.agents_per_game)
        self.ex = remote_executor(
            c.game, lo, n, c.agents_per_game, c.seed, c.declared, c.is_env, c.step_timeout, c.on_game_error, fixed,
            generation, restart_base, on_timeout=lambda: None,
        )
        self.heard = True

    def where(self) -> str:
        return f"test shard {self.index} (game copies {self.envs.start}..{self.envs.stop - 1})"


class InProcessShards(ShardedBackend):
    """Shards in this process, stepped when their answers are read; ``kill`` loses one at its next answer."""

    shard_word = "test shard"
    instances: list[InProcessShards] = []

    def __init__(self, config: BackendConfig) -> None:
        super().__init__(config)
        lo = 0
        for i, n in enumerate(shard_sizes(config.num_envs, config.workers)):
            self.shards.append(_Shard(i, lo, n, config))
            lo += n
        self.kill: set[int] = set()
        InProcessShards.instances.append(self)

    def _send(self, shard, call, arg):
        return call, arg

    def _send_step(self, shard, actions):
        return None, actions

    def _receive(self, shard, answer):
        if shard.index in self.kill:
            self.kill.discard(shard.index)
            raise shard.lose(f"{shard.where()} died")
        call, arg = answer
        ex = shard.ex
        if call is None:
            return ex.step(arg)
        if call is Call.START:
            ex.start()
            return ex.discover()
        if call is Call.BUILD:
            ex.set_spaces(arg)
            return ex.build()
        return ex.reset()

    def _respawn(self, i, restart_base=0):
        old = self.shards[i]
        old.ex.close_games()
        new = _Shard(old.index, old.envs.start, len(old.envs), self.config, self._fixed, self._generation, restart_base)
        self.shards[i] = new
        return new

    def close(self):
        for s in self.shards:
            s.ex.close_games()


register_backend("in-process-shards", InProcessShards)


def _batches(**kw) -> list[gl.Batch]:
    """A reset, 20 steps of fixed actions, a second reset and 3 steps of 7 snake copies."""
    with gl.VecEnv(snake, num_envs=7, seed=5, **kw) as env:
        out = [env.reset()]
        for t in range(23):
            if t == 20:
                out.append(env.reset())
            out.append(env.step({"Move": np.full(out[-1].actor_slot["Move"].shape[0], t % 4)}))
    return out


def test_a_transport_alone_gives_the_same_batches_as_one_process():
    got, want = _batches(backend="in-process-shards", workers=3), _batches(workers=0)
    assert len(got) == len(want) and all(_same(x, y) for x, y in zip(got, want))


def test_a_lost_shard_fails_the_call_after_the_others_and_the_next_reset_starts_it_again():
    env = gl.VecEnv(snake, num_envs=6, seed=1, workers=3, backend="in-process-shards")
    try:
        b = env.reset()
        backend = InProcessShards.instances[-1]
        backend.kill = {1, 2}
        with pytest.raises(gl.WorkerError, match=r"test shard 1 .* died\n\(also failed in this call: test shard 2"):
            env.step(env.sample_actions())
        assert all(s.reported for s in backend.shards[1:])
        old = backend.shards[1]
        b = env.reset()
        assert backend.shards[1] is not old and b.num_slots == 6
    finally:
        env.close()


def test_restart_workers_restarts_a_lost_shard_within_the_step_up_to_the_limit():
    env = gl.VecEnv(snake, num_envs=4, seed=1, workers=2, backend="in-process-shards", restart_workers=True)
    try:
        env.reset()
        backend = InProcessShards.instances[-1]
        for k in range(3):
            backend.kill = {1}
            b = env.step(env.sample_actions())
            assert b.truncated.tolist() == [False, False, True, True]
            assert env.num_worker_restarts == k + 1
            assert backend.shards[1].ex.restarts[0] == ((k + 1) << 32) + 1  # fresh seeds for its copies
        backend.kill = {1}
        with pytest.raises(gl.WorkerError, match=r"not started again: 3 test shard restarts within 60 s .*a test shard"):
            env.step(env.sample_actions())
    finally:
        env.close()


def test_fault_messages():
    errs = [
        gl.GameError("game copy 1 raised A\nmore", env_index=1, seed=0),
        gl.WorkerError("worker 2 died\nmore", worker=2, env_indices=range(2, 4)),
    ]
    assert str(first_error(errs)).endswith("(also failed in this call: worker 2 died)")
    e = gave_up(gl.GameError("x", env_index=0, seed=0), 4, before_first_decision=True)
    assert "failed before its first decision 4 times in a row, with fresh seeds" in str(e)
