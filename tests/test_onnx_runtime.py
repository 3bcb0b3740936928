"""gl.load(path, runtime="onnx"): the same agent through onnxruntime, the same choices and logits."""

from __future__ import annotations

import builtins
import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gymloop as gl
from gymloop.neural import random_checkpoint

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

TOL = 1e-5


class _Keep:
    """A random player that keeps copies of what it was shown."""

    def __init__(self, seed: int) -> None:
        self.inner = gl.RandomAgent(seed)
        self.seen: list[tuple[gl.Obs, tuple]] = []

    def act(self, obs: gl.Obs, *types: Any) -> Any:
        self.seen.append((copy.deepcopy(obs), types))
        return self.inner.act(obs, *types)

    def game_over(self, obs: gl.Obs, truncated: bool = False) -> None:
        pass


@pytest.mark.parametrize("name", ["snake", "tactics", "duel", "dispatch", "junction", "fires3", "skyfall"])
def test_logits_and_choices_equal_the_numpy_runtime(name: str, tmp_path: Path) -> None:
    from gymloop.games import find_game

    entry = find_game(name)
    assert entry is not None
    path = tmp_path / f"{name}.safetensors"
    random_checkpoint(path, entry.loop, seed=1, agents_per_game=entry.agents)
    keep = [_Keep(s) for s in range(entry.agents)]
    gl.run(entry.loop, keep[0] if entry.agents == 1 else keep, seed=0, max_steps=120)
    a_np = gl.load(path, seed=5, greedy=True)
    a_ox = gl.load(path, seed=5, greedy=True, runtime="onnx")
    assert a_ox.runtime == "onnx" and "runtime='onnx'" in repr(a_ox)
    n = 0
    for obs, types in keep[0].seen[::3]:
        for x, y in zip(a_np.logits(obs, *types), a_ox.logits(obs, *types)):
            assert x.shape == y.shape
            np.testing.assert_allclose(np.where(np.isinf(x), 0, x), np.where(np.isinf(y), 0, y), atol=TOL, rtol=TOL)
            assert (np.isinf(x) == np.isinf(y)).all()
        assert a_np.act(obs, *types) == a_ox.act(obs, *types)
        n += 1
    assert n >= 20


@pytest.mark.parametrize("name", ["triage", "triage_masked"])
def test_a_global_select_entity_equals_the_numpy_runtime(name: str, tmp_path: Path) -> None:
    import support.train_games as tg

    game = getattr(tg, name)
    path = tmp_path / f"{name}.safetensors"
    random_checkpoint(path, game, seed=3)
    keep = _Keep(0)
    gl.run(game, keep, seed=0, max_steps=60)
    a_np, a_ox = gl.load(path, greedy=True), gl.load(path, greedy=True, runtime="onnx")
    for obs, types in keep.seen:
        for x, y in zip(a_np.logits(obs, *types), a_ox.logits(obs, *types)):
            np.testing.assert_allclose(np.where(np.isinf(x), 0, x), np.where(np.isinf(y), 0, y), atol=TOL, rtol=TOL)
        x, y = a_np.act(obs, *types), a_ox.act(obs, *types)
        pairs = zip(x, y) if isinstance(x, tuple) else [(x, y)]
        assert all(u is v for u, v in pairs)  # the same patient object, the same enum member


def test_an_observation_without_entities_is_answered_by_both_runtimes(tmp_path: Path) -> None:
    from gymloop.games.suite.junction import Phase, Signal, junction

    path = tmp_path / "junction.safetensors"
    random_checkpoint(path, junction, seed=1)
    obs = gl.Obs().globals(Signal(True, 0, 3, 100))  # an empty crossing: no car on any road
    for runtime in ("numpy", "onnx"):
        agent = gl.load(path, greedy=True, runtime=runtime)
        assert agent.act(obs, Phase) in list(Phase)
        (lg,) = agent.logits(obs, Phase)
        assert lg.shape == (1, 2) and np.isfinite(lg).all()


def test_sampling_draws_the_same_choices_for_a_seed(tmp_path: Path) -> None:
    from gymloop.games.snake import snake

    path = tmp_path / "snake.safetensors"
    random_checkpoint(path, snake, seed=2)
    r1 = gl.run(snake, gl.load(path, seed=9), seed=4, max_episodes=3)
    r2 = gl.run(snake, gl.load(path, seed=9, runtime="onnx"), seed=4, max_episodes=3)
    assert [e.score for e in r1.episodes] == [e.score for e in r2.episodes]
    assert [e.length for e in r1.episodes] == [e.length for e in r2.episodes]


def test_forks_and_act_all_keep_the_runtime(tmp_path: Path) -> None:
    from gymloop.games.duel import duel

    path = tmp_path / "duel.safetensors"
    random_checkpoint(path, duel, agents_per_game=2)
    red = gl.load(path, seed=0, runtime="onnx")
    blue = red.fork(seed=1)
    assert blue.runtime == "onnx"
    r = gl.run(duel, [red, blue], seed=0, max_episodes=2)
    assert len(r.episodes) == 2


def test_an_unknown_runtime_is_refused(tmp_path: Path) -> None:
    from gymloop.games.snake import snake

    path = tmp_path / "snake.safetensors"
    random_checkpoint(path, snake)
    with pytest.raises(gl.ConfigError, match=r"runtime must be one of \['numpy', 'onnx'\], got 'torch'"):
        gl.load(path, runtime="torch")


def test_without_onnxruntime_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gymloop.games.snake import snake

    path = tmp_path / "snake.safetensors"
    random_checkpoint(path, snake)
    real_import = builtins.__import__

    def no_ort(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    with pytest.raises(gl.ConfigError, match=r"runtime='onnx' needs onnxruntime.*pip install 'gymloop\[onnx\]'"):
        gl.load(os.fspath(path), runtime="onnx")
