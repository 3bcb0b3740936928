"""``python -m gymloop.enn.train``: enn-trainer's PPO on a gymloop game, its agent read by ``gymloop eval``.

The training test needs enn-trainer (the entity-gym venv of ``.ci/run``); without it, the entry
point must say what to install.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

import gymloop as gl
from gymloop.cli import main as gymloop_main
from gymloop.enn.train import AGENT_FOLDER, main, train_with_enn

HAVE_ENN = importlib.util.find_spec("enn_trainer") is not None and importlib.util.find_spec("hyperstate") is not None
SMALL = ["--set", "rollout.num_envs=16", "--set", "optim.bs=256"]


@pytest.mark.skipif(not HAVE_ENN, reason="needs enn-trainer (the entity-gym venv)")
def test_enn_trainer_trains_a_bundled_game_and_gymloop_evaluates_its_agent(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["snake", "--out", str(out), "--steps", "2048", *SMALL]) == 0
    agent = out / AGENT_FOLDER
    assert {"config.ron", "state.ron", "state.agent.msgpack"} <= set(os.listdir(agent))
    assert f"gymloop eval snake --agent {agent}" in capsys.readouterr().out
    assert gymloop_main(["eval", "snake", "--agent", str(agent), "--episodes", "4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agents"]["agent"]["episode_length"]["n"] == 4
    assert type(gl.load(agent)).__name__ == "NeuralAgent"
    # a second run into the same folder replaces the agent
    assert main(["snake", "--out", str(out), "--steps", "1024", "--seed", "1", *SMALL]) == 0


@pytest.mark.skipif(not HAVE_ENN, reason="needs enn-trainer (the entity-gym venv)")
def test_a_field_enn_trainer_does_not_have_is_refused_before_training(tmp_path, capsys):
    assert main(["snake", "--out", str(tmp_path / "run"), "--steps", "1024", "--set", "optim.nonsense=3"]) == 2
    assert "enn-trainer refused the configuration ['optim.nonsense=3']" in capsys.readouterr().err
    with pytest.raises(gl.ConfigError, match="steps must be an int >= 1, got 0"):
        train_with_enn("snake", tmp_path / "run", steps=0)


@pytest.mark.skipif(HAVE_ENN, reason="checks the message without enn-trainer")
def test_without_enn_trainer_the_entry_point_says_what_to_install(tmp_path):
    with pytest.raises(gl.ConfigError, match="needs enn-trainer and hyperstate in this Python environment"):
        train_with_enn("snake", tmp_path / "run", steps=64)
