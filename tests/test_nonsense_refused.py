"""Nonsense that used to be accepted silently, now refused with a typed error naming the fix.

Agent files of an unknown architecture or with weights that are not float32, a training run of
zero game copies, behaviour cloning or replay from a trace of another game.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest

import gymloop as gl
from gymloop.checkpoint import read_safetensors, write_safetensors
from gymloop.cli import main
from gymloop.games.registry import same_game
from gymloop.games.snake import snake
from gymloop.games.tactics import tactics
from gymloop.neural import random_checkpoint


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    p = tmp_path_factory.mktemp("agent") / "a.safetensors"
    random_checkpoint(p, snake)
    return p


def _forge(agent, out, tensors=None, **doc_changes):
    t, meta = read_safetensors(agent)
    doc = {**json.loads(meta["gymloop"]), **doc_changes}
    write_safetensors(out, tensors(t) if tensors else t, {**meta, "gymloop": json.dumps(doc)})  # re-signed
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.float16])
def test_weights_that_are_not_float32_are_refused(agent, tmp_path, dtype):
    bad = _forge(agent, tmp_path / "b.safetensors",
                 lambda t: {k: (v.astype(dtype) if v.dtype == np.float32 else v) for k, v in t.items()})
    with pytest.raises(gl.CheckpointError, match=rf"tensor '.*' is {np.dtype(dtype)}, expected float32"):
        gl.load(bad)
    lib = tmp_path / "lib.safetensors"
    with pytest.raises(gl.CheckpointError, match=rf"is {np.dtype(dtype)}, expected float32"):
        gl.pack_library(lib, {"b": bad})


def test_an_unknown_architecture_is_refused(agent, tmp_path):
    bad = _forge(agent, tmp_path / "b.safetensors", arch="mystery-net")
    with pytest.raises(gl.CheckpointError, match=r"the network architecture 'mystery-net' is not one this gymloop runs"):
        gl.load(bad)
    pytest.importorskip("onnx")
    from gymloop.export import to_onnx

    with pytest.raises(gl.CheckpointError, match="mystery-net"):
        to_onnx(bad, tmp_path / "b.onnx")
    assert not (tmp_path / "b.onnx").exists()


def test_zero_game_copies_are_refused_not_taken_for_automatic(tmp_path, capsys):
    assert main(["train", "snake", "--num-envs", "0", "--steps", "64", "--out", str(tmp_path / "run")]) == 2
    assert "num_envs=0 is out of range: expected >= 1, or None (automatic)" in capsys.readouterr().err


def test_behaviour_cloning_from_another_games_trace_is_refused():
    pytest.importorskip("torch")
    from gymloop.train.bc import BCConfig, train_bc

    trace = gl.record_trace(tactics, gl.RandomAgent(seed=0), seed=0, max_steps=20)
    with pytest.raises(gl.TraceError, match=r"recorded with the game 'tactics', not 'snake'; clone an agent from traces of the game"):
        train_bc([trace], BCConfig(epochs=1), game_name="snake")


def test_replay_of_a_trace_of_another_game_is_refused():
    trace = gl.record_trace(snake, gl.RandomAgent(seed=0), seed=0, max_steps=5)
    trace.game = "os:system"
    with pytest.raises(gl.TraceError, match=r"recorded with the game 'os:system', not 'snake'"):
        gl.replay(trace, snake)


def test_same_game_compares_function_names_across_modules():
    assert same_game("mygame:coin", "__main__:coin") and same_game("snake", "gymloop.games.snake:snake")
    assert not same_game("os:system", "snake") and not same_game("a:coin", "a:coins")


def test_a_renamed_feature_or_entity_type_in_the_metadata_is_named(agent, tmp_path):
    from gymloop.nn.config import RelposConfig

    rel = tmp_path / "rel.safetensors"
    random_checkpoint(rel, snake, relpos=RelposConfig(position_features=["x", "y"], extent=[4, 4]))

    def head_px(doc):
        doc["obs_space"]["entities"]["Head"] = ["px", "y"]
        doc["net"]["relpos"] = "auto"
        return doc

    t, meta = read_safetensors(rel)
    bad = tmp_path / "bad.safetensors"
    write_safetensors(bad, t, {**meta, "gymloop": json.dumps(head_px(json.loads(meta["gymloop"])))})
    with pytest.raises(gl.CheckpointError, match=r"relative-position encoding .*\{'Head': \['x'\]\} lack them; was a position feature renamed\?"):
        gl.load(bad)
    t, meta = read_safetensors(agent)
    doc = json.loads(meta["gymloop"])
    doc["obs_space"]["entities"]["Apple"] = doc["obs_space"]["entities"].pop("Food")
    write_safetensors(bad, t, {**meta, "gymloop": json.dumps(doc)})
    with pytest.raises(gl.CheckpointError, match=r"the weights embed the entity types \['Food'\] and the metadata names \['Apple'\] instead"):
        gl.load(bad)


@dataclass
class Marker:
    v: float


class Flip(Enum):
    A = 0
    B = 1


def _never_asks(agent, seed):
    """A game whose episodes end before any decision (as a bad option can make them)."""
    while True:
        agent.game_over(gl.Obs(score=0))


def test_a_game_that_never_asks_for_a_decision_stops_with_an_error_instead_of_hanging():
    from gymloop.obs import EMPTY_EPISODES

    with pytest.raises(gl.EnvStateError, match=f"ended {EMPTY_EPISODES} episodes in a row without asking for a decision"):
        gl.run(_never_asks, gl.RandomAgent(0), seed=0, max_steps=10)
    with pytest.raises(gl.GameError, match=f"ended {EMPTY_EPISODES} episodes in a row without asking for a decision"):
        gl.VecEnv(_never_asks, num_envs=2, seed=0).reset()
    # an occasional empty episode is fine: the count starts again at every decision
    seen = []

    def sometimes(agent, seed):
        while True:
            for _ in range(EMPTY_EPISODES - 1):
                agent.game_over(gl.Obs(score=0))
            seen.append(agent.act(gl.Obs(score=0).actor(Marker(1.0)), Flip))
            agent.game_over(gl.Obs(score=1))

    r = gl.run(sometimes, gl.RandomAgent(0), seed=0, max_steps=3)
    assert r.steps == 3 and len(seen) == 3
    env = gl.VecEnv(sometimes, num_envs=1, seed=0)
    env.reset()
    for _ in range(3):
        env.step(env.sample_actions())
    env.close()
