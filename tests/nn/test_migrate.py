"""Older agent documents are brought to the current format in one step, and a load resolves once."""

import os

import numpy as np
import pytest

pytest.importorskip("torch")

import gymloop.checkpoint as checkpoint  # noqa: E402
import gymloop.nn.numpy_policy as numpy_policy  # noqa: E402
from gymloop.games.snake import snake  # noqa: E402
from gymloop.neural import random_checkpoint  # noqa: E402
from gymloop.nn.config import NetConfig  # noqa: E402
from gymloop.nn.migrate import FORMAT_VERSION, current_document  # noqa: E402
from gymloop.nn.numpy_policy import NumpyPolicy  # noqa: E402

LEGACY = os.path.join(os.path.dirname(__file__), "..", "fixtures", "legacy", "snake.safetensors")


def test_a_version_1_document_gets_the_options_its_first_files_lack_and_nothing_else_changes():
    old = {"format_version": 1, "net": {"d_model": 16, "readout": True}, "step": 3}
    new = current_document(old)
    assert new["net"] == {"d_model": 16, "readout": True, "summary_mean": False, "summary_count": False, "frame": None,
                          "relpos_1d": False}
    assert new["step"] == 3 and old["net"] == {"d_model": 16, "readout": True}  # the input is left as it is
    full = {"format_version": FORMAT_VERSION, "net": NetConfig().to_dict()}
    assert current_document(full) == full
    assert current_document({"format_version": 99, "net": {}}) == {"format_version": 99, "net": {}}  # refused later, by name


def test_the_legacy_fixture_reads_as_the_current_format():
    af = checkpoint.read_agent(LEGACY)
    raw = checkpoint.SafetensorsFile(LEGACY).metadata["gymloop"]
    assert "summary_mean" not in raw and af.info["net"]["summary_mean"] is False
    assert NetConfig.from_dict(af.info["net"]) == af.net.cfg


def test_loading_an_agent_resolves_its_document_once(monkeypatch, tmp_path):
    path = str(tmp_path / "a.safetensors")
    random_checkpoint(path, snake)
    calls = []
    for mod in (checkpoint, numpy_policy):
        real = mod.resolve
        monkeypatch.setattr(mod, "resolve", lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    pol = NumpyPolicy.from_file(path)
    assert len(calls) == 1
    af = checkpoint.read_agent(path)
    again = NumpyPolicy(af.tensors, af.info, af.path)  # without the resolved spec: resolved here
    assert len(calls) == 3 and again.entity_names == pol.entity_names
    np.testing.assert_array_equal(again.value_w, pol.value_w)
