"""The three snakes (game loop, low-level SnakeEnv, GymSnakeEnv) follow identical rules."""

from __future__ import annotations

import pickle
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gymloop as gl
from gymloop.bench import VARIANTS, format_table, run_benchmarks
from gymloop.games import snake as snake_mod
from gymloop.games.snake import SIZE, Move, snake
from gymloop.runtime.seeding import derive_seed

gymnasium = pytest.importorskip("gymnasium")

from gymloop.games.snake_envs import GymSnakeEnv, SnakeEnv  # noqa: E402 - GymSnakeEnv needs gymnasium

DELTAS = ((0, 1), (0, -1), (-1, 0), (1, 0))  # UP, DOWN, LEFT, RIGHT
BATCH_FIELDS = (
    "num_slots", "entities", "counts", "globals", "actor_slot", "actor_index", "masks", "num_candidates",
    "reward", "terminated", "truncated", "active", "metrics", "candidate_types",
)


# ------------------------------------------------------------------------------------- helpers
def assert_same_batch(a: gl.Batch, b: gl.Batch, where: str) -> None:
    """Bit-identical batches: same keys, dtypes, shapes and values (NaN == NaN in metrics)."""
    for f in BATCH_FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, dict):
            assert x.keys() == y.keys(), f"{where}: batch.{f} keys {sorted(x)} != {sorted(y)}"
            items = [(f"{f}[{k!r}]", x[k], y[k]) for k in x]
        else:
            items = [(f, x, y)]
        for name, u, v in items:
            if isinstance(u, np.ndarray):
                assert u.dtype == v.dtype and u.shape == v.shape, f"{where}: {name} {u.dtype}{u.shape} != {v.dtype}{v.shape}"
                assert np.array_equal(u, v, equal_nan=u.dtype.kind == "f"), f"{where}: {name} differs:\n{u}\n{v}"
            else:
                assert u == v, f"{where}: {name} {u!r} != {v!r}"


def per_env(batch: gl.Batch, name: str) -> list[np.ndarray]:
    """The rows of entity type ``name`` of each slot."""
    ends = np.cumsum(batch.counts[name])
    return np.split(batch.entities[name].astype(int), ends[:-1])


def mostly_safe_moves(batch: gl.Batch, rng: np.random.Generator, risk: float = 0.05) -> np.ndarray:
    """Random moves that avoid walls and the body, except a random one with probability ``risk``."""
    heads, bodies = batch.entities["Head"].astype(int), per_env(batch, "Body")
    out = np.empty(batch.num_slots, dtype=np.int64)
    for i, ((hx, hy), body) in enumerate(zip(heads, bodies)):
        taken = set(map(tuple, body.tolist()))
        ok = [m for m, (dx, dy) in enumerate(DELTAS)
              if 0 <= hx + dx < SIZE and 0 <= hy + dy < SIZE and (hx + dx, hy + dy) not in taken]
        out[i] = rng.choice(ok) if ok and rng.random() >= risk else rng.integers(4)
    return out


def cells(rows: np.ndarray | list) -> list[tuple[int, int]]:
    return sorted(map(tuple, np.asarray(rows, dtype=int).reshape(-1, 2).tolist()))


def grid_state(obs: np.ndarray) -> tuple:
    """(head, body cells, food cells) read back from GymSnakeEnv's grid."""
    head = [tuple(c) for c in np.argwhere(obs[..., 0] == 1).tolist()]
    assert len(head) == 1, f"the grid must hold exactly one head, got {head}"
    return head[0], cells(np.argwhere(obs[..., 1] == 1)), cells(np.argwhere(obs[..., 2] == 1))


# ------------------------------------------------------------------- VecEnv(snake) vs VecEnv(SnakeEnv)
def test_vecenv_batches_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snake_mod, "MAX_STEPS", 40)  # short episodes: truncations happen too
    n = 12
    loop = gl.VecEnv(snake, num_envs=n, seed=7)
    low = gl.VecEnv(SnakeEnv, num_envs=n, seed=7)
    rng = np.random.default_rng(0)
    try:
        a, b = loop.reset(), low.reset()
        assert low.obs_space == loop.obs_space
        assert low.action_space == loop.action_space
        assert_same_batch(a, b, "reset")
        ends = {"terminated": 0, "truncated": 0, "grew": 0, "length metric": 0}
        for t in range(250):
            moves = mostly_safe_moves(a, rng)
            a, b = loop.step({"Move": moves}), low.step({"Move": moves.copy()})
            assert_same_batch(a, b, f"step {t}")
            ends["terminated"] += int(a.terminated.sum())
            ends["truncated"] += int(a.truncated.sum())
            ends["grew"] += int((a.reward > 0).sum())
            ends["length metric"] += int(np.isfinite(a.metrics.get("length", [np.nan])).sum())
        # the comparison covered deaths, time limits, growth and the episode metric
        assert min(ends.values()) > 0, ends
    finally:
        loop.close()
        low.close()


def _reset_again(steps: int) -> None:
    loop = gl.VecEnv(snake, num_envs=3, seed=1)
    low = gl.VecEnv(SnakeEnv, num_envs=3, seed=1)
    rng = np.random.default_rng(3)
    try:
        assert_same_batch(loop.reset(), low.reset(), "first reset")
        for _ in range(steps):
            moves = rng.integers(0, 4, 3)
            assert_same_batch(loop.step({"Move": moves}), low.step({"Move": moves}), "step")
        assert_same_batch(loop.reset(), low.reset(), f"second reset after {steps} steps")
    finally:
        loop.close()
        low.close()


def test_vecenv_reset_again_before_any_episode_ended() -> None:
    _reset_again(0)  # both reseed copy i with derive_seed(seed, i, 1)


def test_vecenv_reset_again_after_episodes_ended() -> None:
    _reset_again(60)  # random snakes die within 60 steps


# ------------------------------------------------------------------- VecEnv(snake) vs GymSnakeEnv
def test_gym_snake_follows_the_game_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snake_mod, "MAX_STEPS", 30)
    n, seed = 6, 11
    loop = gl.VecEnv(snake, num_envs=n, seed=seed)
    gyms = [GymSnakeEnv() for _ in range(n)]
    rng = np.random.default_rng(1)
    try:
        batch = loop.reset()
        obs = [g.reset(seed=derive_seed(seed, i, 0))[0] for i, g in enumerate(gyms)]  # the loop's seeds
        episodes = 0
        for t in range(200):
            heads, bodies, foods = batch.entities["Head"].astype(int), per_env(batch, "Body"), per_env(batch, "Food")
            for i in range(n):
                assert grid_state(obs[i]) == (tuple(heads[i]), cells(bodies[i]), cells(foods[i])), f"step {t}, env {i}"
            moves = mostly_safe_moves(batch, rng, risk=0.1)
            batch = loop.step({"Move": moves})
            for i, g in enumerate(gyms):
                o, r, term, trunc, info = g.step(moves[i])
                assert (r, term, trunc) == (batch.reward[i], batch.terminated[i], batch.truncated[i]), f"step {t}, env {i}"
                if term or trunc:
                    episodes += 1
                    assert info == {"length": batch.metrics["length"][i]}
                    o, _ = g.reset()  # no seed: the next episode of the same stream, like the loop
                else:
                    assert info == {}
                obs[i] = o
        assert episodes > n
    finally:
        loop.close()


# ------------------------------------------------------------------- gl.run(snake) vs both envs
class Replay:
    """A scripted agent: plays a fixed list of moves and records what it sees."""

    def __init__(self, moves: list[int]) -> None:
        self.moves = iter(moves)
        self.trace: list[tuple] = []

    def act(self, obs: gl.Obs, *action_types: object) -> Move:
        ents = obs.entity_list()
        head = obs.actor_list[0]
        body = [(e.x, e.y) for e in ents if type(e).__name__ == "Body"]
        food = [(e.x, e.y) for e in ents if type(e).__name__ == "Food"]
        self.trace.append(("obs", (head.x, head.y), sorted(body), sorted(food), obs.score))
        return list(Move)[next(self.moves)]

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        self.trace.append(("end", obs.score, truncated, obs.metrics["length"]))


def test_run_replay_matches_snake_env_and_gym(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snake_mod, "MAX_STEPS", 12)  # random walks reach it: truncations too
    seed = 5
    moves = np.random.default_rng(2).integers(0, 4, 400).tolist()
    agent = Replay(moves)
    result = gl.run(snake, agent, seed=seed, max_steps=len(moves))
    assert {e.truncated for e in result.episodes} == {True, False}

    def replay_env() -> list[tuple]:
        env, trace = SnakeEnv(), []
        o = env.reset(seed)
        for m in moves:
            body, food, (head,) = o.entities["Body"], o.entities["Food"], o.entities["Head"]
            assert o.actors == {"Move": [len(body) + len(food)]}
            trace.append(("obs", tuple(head), cells(body), cells(food), 1 + len(body)))
            o = env.act({"Move": np.array([m])})
            if o.terminated or o.truncated:
                assert o.terminated != o.truncated
                trace.append(("end", o.metrics["length"], o.truncated, o.metrics["length"]))
                o = env.reset(12345)  # right after an episode end: continues the stream
        return trace

    def replay_gym() -> list[tuple]:
        env, trace = GymSnakeEnv(), []
        o, _ = env.reset(seed=seed)
        for m in moves:
            head, body, food = grid_state(o)
            trace.append(("obs", head, body, food, 1 + len(body)))
            o, r, term, trunc, info = env.step(m)
            if term or trunc:
                trace.append(("end", info["length"], trunc, info["length"]))
                o, _ = env.reset()
        return trace

    assert replay_env() == agent.trace
    assert replay_gym() == agent.trace


# ------------------------------------------------------------------- each env on its own
def test_check_env_passes_for_gym_snake() -> None:
    from gymnasium.utils.env_checker import check_env

    env_id = "gymloop-test/Snake-v0"
    gymnasium.register(id=env_id, entry_point="gymloop.games.snake_envs:GymSnakeEnv", max_episode_steps=None)
    try:
        env = gymnasium.make(env_id).unwrapped  # with a spec: the render-mode and double-close checks run too
        check_env(env)
        env.close()
    finally:
        del gymnasium.registry[env_id]
    assert GymSnakeEnv().observation_space.shape == (SIZE, SIZE, 3)


def test_snake_env_reset_is_seeded_and_in_place_restart_continues() -> None:
    def first(env: SnakeEnv, seed: int) -> dict:
        return dict(env.reset(seed).entities)

    env = SnakeEnv()
    start = first(env, 3)
    safe = 0 if start["Head"][0][1] < SIZE - 1 else 1  # UP, or DOWN at the top wall
    assert not env.act({"Move": np.array([safe])}).terminated
    assert first(env, 3) == start  # a reset in the middle of an episode reseeds
    assert first(SnakeEnv(), 3) == start
    g = snake_mod.SnakeGame(3)
    while True:  # play until the episode ends, then the next reset continues the stream
        o = env.act({"Move": np.array([0])})
        g.step(Move.UP)
        if o.terminated or o.truncated:
            break
    g.reset()
    o = env.reset(999)
    assert o.entities["Head"] == [[g.head.x, g.head.y]]
    assert o.entities["Food"] == [[f.x, f.y] for f in g.food]


def test_errors() -> None:
    env = SnakeEnv()
    with pytest.raises(gl.EnvStateError, match="before reset"):
        env.act({"Move": np.array([0])})
    env.reset(0)
    with pytest.raises(gl.InvalidActionError, match=r"Move must be in \[0, 4\)"):
        env.act({"Move": np.array([4])})
    with pytest.raises(gl.InvalidActionError, match="expects"):
        env.act({"Fire": np.array([0])})
    with pytest.raises(gl.ConfigError, match="max_steps must be"):
        SnakeEnv(max_steps=0)
    g = GymSnakeEnv()
    with pytest.raises(gymnasium.error.ResetNeeded, match="before reset"):
        g.step(0)
    g.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must be an int in \[0, 4\)"):
        g.step(-1)
    with pytest.raises(gl.ConfigError, match="render_mode"):
        GymSnakeEnv(render_mode="human")


def test_gym_snake_is_picklable_by_reference_and_imported_lazily() -> None:
    assert pickle.loads(pickle.dumps(GymSnakeEnv)) is GymSnakeEnv  # AsyncVectorEnv with spawn needs it
    code = "import sys, gymloop.games.snake_envs; assert 'gymnasium' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_gym_vector_envs_run_the_gym_snake() -> None:
    envs = gymnasium.vector.SyncVectorEnv([GymSnakeEnv] * 3)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (3, SIZE, SIZE, 3)
        for _ in range(50):
            obs, rew, term, trunc, info = envs.step(envs.action_space.sample())
        assert rew.dtype == np.float64 and obs.dtype == np.float32
    finally:
        envs.close()


# ------------------------------------------------------------------- the benchmark
@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_run_benchmarks_quick() -> None:
    rows = run_benchmarks(quick=True)
    assert [r["key"] for r in rows] == list(VARIANTS)
    for r in rows:
        if r["key"] == "loop_w2" and r["steps_per_s"] is None:  # process workers unavailable: reported
            assert r["note"]
            continue
        assert r["steps_per_s"] > 0, r
    scale = rows[-1]
    assert scale["rss_mb"] > 0 and scale["num_envs"] == 200
    assert set(rows[0]["ratios"]) == {"vs SyncVectorEnv", "Agent API vs low-level"}
    table = format_table(rows)
    assert table.count("\n") >= len(rows) + 2 and "AsyncVectorEnv" in table


def _tracking_bench(monkeypatch: pytest.MonkeyPatch, fail_call: int | None = None, exc: type = RuntimeError) -> dict:
    """Patch gymloop.bench to count timed runs (call ``fail_call`` raises ``exc``) and env opens/closes."""
    import gymloop.bench as bench

    seen = {"calls": 0, "opened": 0, "closed": 0}
    real_time_run, real_gym_vec, real_close = bench._time_run, bench._gym_vec, gl.VecEnv.close

    def time_run(step, batch, seconds):  # type: ignore[no-untyped-def]
        seen["calls"] += 1
        if seen["calls"] == fail_call:
            raise exc("boom")
        return real_time_run(step, batch, seconds)

    def gym_vec(kind, n):  # type: ignore[no-untyped-def]
        envs = real_gym_vec(kind, n)
        seen["opened"] += 1
        real = envs.close

        def close(**kw):  # type: ignore[no-untyped-def]
            seen["closed"] += 1
            return real(**kw)

        envs.close = close
        return envs

    def vec_close(self):  # type: ignore[no-untyped-def]
        seen["closed"] += 1
        return real_close(self)

    real_init = gl.VecEnv.__init__

    def vec_init(self, *a, **kw):  # type: ignore[no-untyped-def]
        real_init(self, *a, **kw)
        seen["opened"] += 1

    monkeypatch.setattr(bench, "_time_run", time_run)
    monkeypatch.setattr(bench, "_gym_vec", gym_vec)
    monkeypatch.setattr(gl.VecEnv, "close", vec_close)
    monkeypatch.setattr(gl.VecEnv, "__init__", vec_init)
    return seen


def test_run_benchmarks_interleaved_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _tracking_bench(monkeypatch)
    keys = ("loop_w0", "env_w0", "gym_sync")
    rows = run_benchmarks(seconds=0.01, repeats=3, num_envs=4, variants=keys)
    assert seen["calls"] == 9 and seen["opened"] == seen["closed"] == 3
    by = {r["key"]: r for r in rows}
    for r in rows:
        assert len(r["runs"]) == 3 and r["steps_per_s"] == statistics.median(r["runs"])
    for den, label in (("gym_sync", "vs SyncVectorEnv"), ("env_w0", "Agent API vs low-level")):
        per = by["loop_w0"]["ratio_runs"][label]
        assert per == [a / b for a, b in zip(by["loop_w0"]["runs"], by[den]["runs"])]
        assert by["loop_w0"]["ratios"][label] == statistics.median(per)
    assert "x (" in format_table(rows) and "same round" in format_table(rows)


def test_run_benchmarks_failing_variant_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 variants, 3 rounds; the 5th timed run (round 2) raises: that variant is n/a, not timed in round 3
    seen = _tracking_bench(monkeypatch, fail_call=5)
    rows = run_benchmarks(seconds=0.01, repeats=3, num_envs=4, variants=("loop_w0", "env_w0", "gym_sync"))
    assert seen["calls"] == 8 and seen["opened"] == seen["closed"] == 3
    failed = [r for r in rows if r["steps_per_s"] is None]
    assert len(failed) == 1 and failed[0]["note"] == "RuntimeError: boom" and failed[0]["runs"] == []
    assert all(len(r["runs"]) == 3 for r in rows if r is not failed[0])
    assert None in rows[0]["ratios"].values()
    assert "n/a" in format_table(rows)


def test_run_benchmarks_construction_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import gymloop.bench as bench

    seen = _tracking_bench(monkeypatch)
    real = bench._gym_vec

    def gym_vec(kind, n):  # type: ignore[no-untyped-def]
        if kind == "sync":
            raise OSError("no gym here")
        return real(kind, n)

    monkeypatch.setattr(bench, "_gym_vec", gym_vec)
    rows = run_benchmarks(seconds=0.01, repeats=2, num_envs=4, variants=("loop_w0", "gym_sync"))
    assert [r["steps_per_s"] is None for r in rows] == [False, True]
    assert rows[1]["note"] == "OSError: no gym here" and len(rows[0]["runs"]) == 2
    assert rows[0]["ratios"] == {"vs SyncVectorEnv": None}
    assert seen["calls"] == 2 and seen["opened"] == seen["closed"] == 1


def test_run_benchmarks_closes_envs_on_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _tracking_bench(monkeypatch, fail_call=2, exc=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        run_benchmarks(seconds=0.01, repeats=2, num_envs=4, variants=("loop_w0", "env_w0", "gym_sync"))
    assert seen["opened"] == seen["closed"] == 3


def test_run_benchmarks_rejects_unknown_variant() -> None:
    with pytest.raises(gl.ConfigError, match="unknown benchmark variant"):
        run_benchmarks(variants=["nope"])


def test_throughput_script_quick() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "throughput.py"
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "-q", "--only", "loop_w0", "env_w0"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert "low-level SnakeEnv" in out and "steps/s" in out
