"""The egocentric frame (``net.frame``): positions seen from one entity, rotated into its heading."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gymloop.errors import ConfigError
from gymloop.nn.config import FrameConfig, NetConfig
from gymloop.nn.inputs import FrameIndex, pack_entities
from gymloop.nn.migrate import current_document

# entity-gym's Minefield: a vehicle with a heading, mines and a target with positions
MINEFIELD = {"Vehicle": ("x_pos", "y_pos", "direction", "step"), "Mine": ("x_pos", "y_pos"), "Target": ("x_pos", "y_pos")}
NAMES = list(MINEFIELD)


def test_auto_finds_the_one_type_with_position_and_heading():
    assert NetConfig().resolve_frame(MINEFIELD) == FrameConfig("Vehicle", ["x_pos", "y_pos"], "direction")
    assert NetConfig(frame=None).resolve_frame(MINEFIELD) is None


@pytest.mark.parametrize("ents", [
    {"SnakeHead": ("x", "y", "color"), "Food": ("x", "y", "color")},  # positions, no heading: left alone
    {"Ship": ("x", "y", "heading"), "Rock": ("x", "y", "angle")},  # two types with a heading: ambiguous
    {"Ship": ("x", "y", "heading")},  # nothing else to put in its frame
    {"Ship": ("x", "z", "heading"), "Rock": ("x", "z")},  # no recognized position pair
])
def test_auto_stays_off_where_the_reference_is_not_clear(ents):
    assert NetConfig().resolve_frame(ents) is None


def test_explicit_frame_naming_a_missing_feature_or_type_is_a_config_error():
    with pytest.raises(ConfigError, match=r"'Vehicle' lacks the features \['yaw'\]"):
        NetConfig(frame=FrameConfig("Vehicle", ["x_pos", "y_pos"], "yaw")).resolve_frame(MINEFIELD)
    with pytest.raises(ConfigError, match=r"net.frame.reference='Car' is not an entity type"):
        NetConfig(frame=FrameConfig("Car", ["x_pos", "y_pos"])).resolve_frame(MINEFIELD)
    with pytest.raises(ConfigError, match="position_features must name 2 features"):
        NetConfig(frame=FrameConfig("Vehicle", ["x_pos"])).check()
    with pytest.raises(ConfigError, match="net.frame must be a FrameConfig, 'auto' or None"):
        NetConfig(frame="on").check()


def test_checkpoints_written_before_the_frame_load_without_it_and_new_ones_round_trip():
    old = NetConfig().to_dict()
    del old["frame"]
    assert NetConfig.from_dict(current_document({"format_version": 1, "net": old})["net"]).frame is None
    cfg = NetConfig(frame=FrameConfig("Vehicle", ["x_pos", "y_pos"], None))
    assert NetConfig.from_dict(cfg.to_dict()) == cfg
    assert NetConfig.from_dict(NetConfig().to_dict()).frame == "auto"


def _pack(vehicles, targets, counts):
    frame = FrameIndex.of(NetConfig().resolve_frame(MINEFIELD), MINEFIELD)
    rows = {"Vehicle": np.array(vehicles, np.float32).reshape(-1, 4), "Mine": np.zeros((0, 2), np.float32),
            "Target": np.array(targets, np.float32).reshape(-1, 2)}
    return pack_entities(rows, np.array(counts), np.zeros((len(counts), 0), np.float32), NAMES, None, frame)


def test_other_entities_are_offsets_in_the_reference_heading():
    # slot 0: vehicle at (1, 1) facing +y; target straight ahead 2 units. slot 1: at (0, 0) facing +x;
    # target 5 units to its left (+y). slot 2: no vehicle: the target keeps its raw position.
    p = _pack([[1, 1, math.pi / 2, 7], [0, 0, 0, 3]], [[1, 3], [0, 5], [4, -2]], [[1, 0, 1], [1, 0, 1], [0, 0, 1]])
    np.testing.assert_allclose(p.feats["Target"], [[2, 0], [0, 5], [4, -2]], atol=1e-6)
    np.testing.assert_allclose(p.feats["Vehicle"], [[1, 1, math.pi / 2, 7], [0, 0, 0, 3]], rtol=1e-6)  # its own features kept


def test_the_frame_is_rotation_invariant():
    """Turning the whole scene around the vehicle (its heading too) changes nothing the network sees."""
    rng = np.random.default_rng(0)
    veh, tgt = rng.uniform(-100, 100, 2), rng.uniform(-100, 100, (3, 2))
    h = rng.uniform(0, 2 * math.pi)
    seen = []
    for turn in (0.0, 1.0, 2.5):
        c, s = math.cos(turn), math.sin(turn)
        d = tgt - veh
        turned = veh + np.stack([c * d[:, 0] - s * d[:, 1], s * d[:, 0] + c * d[:, 1]], 1)
        seen.append(_pack([[*veh, h + turn, 0]], turned, [[1, 0, 3]]).feats["Target"])
    np.testing.assert_allclose(seen[1], seen[0], atol=1e-3)
    np.testing.assert_allclose(seen[2], seen[0], atol=1e-3)


def test_a_network_with_a_frame_exports_to_onnx_with_the_frame_in_the_graph(tmp_path):
    """onnxruntime's probabilities equal the numpy runtime's with the frame, and differ from what the
    same weights give without it (random-observation parity is in tests/test_onnx_export.py)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from support.policies import random_policy, write_policy

    from gymloop.export import to_onnx
    from gymloop.nn.numpy_policy import NumpyPolicy
    from gymloop.spaces import ActionDesc, ObsSpace

    obs = ObsSpace(entities={k: v for k, v in MINEFIELD.items()})
    acts = {"move": ActionDesc("move", "categorical", ("left", "forward", "right"))}
    write_policy(tmp_path / "framed.safetensors", random_policy(obs, acts, NetConfig(relpos=None)))
    to_onnx(tmp_path / "framed.safetensors", tmp_path / "framed.onnx")
    feeds = {"entities.Vehicle": np.array([[10.0, -20.0, 0.7, 3.0]], np.float32), "entities.Mine": np.array([[0.0, 0.0]], np.float32),
             "entities.Target": np.array([[40.0, 5.0]], np.float32), "actors": np.array([0]), "mask.move": np.ones((1, 3), bool)}
    got = ort.InferenceSession(str(tmp_path / "framed.onnx")).run(["probs.move"], feeds)[0]
    pol = NumpyPolicy.from_file(tmp_path / "framed.safetensors")
    parts = [(NAMES.index(t), feeds[f"entities.{t}"]) for t in NAMES]

    def probs() -> np.ndarray:
        (lg,) = pol.logits_one(parts, None, np.array([0]), [("move", np.ones((1, 3), bool), None)])
        e = np.exp(lg - lg.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    np.testing.assert_allclose(got, probs(), atol=1e-5)
    pol.frame = None  # the same weights, positions as given
    assert not np.allclose(got, probs(), atol=1e-3)
