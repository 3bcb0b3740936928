"""enn-trainer / rogue-net checkpoints as gymloop agents (``gymloop.enn``, ``gl.load``).

The fixtures in ``tests/fixtures/enn`` are real enn-trainer 0.1.16 checkpoints with rogue-net 0.1.9's
outputs on recorded observations (see their README); the import must reproduce those outputs.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gymloop as gl
from gymloop import enn
from gymloop.enn import reader as enn_reader
from gymloop.errors import CheckpointError, ConfigError, InvalidObservationError
from gymloop.neural import NeuralAgent

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "enn"
NAMES = ["xor", "multisnake", "cherrypick"]
P_TOL, LOGP_TOL, V_TOL = 1e-5, 1e-4, 1e-5


@cache
def reference(name: str) -> dict:
    return json.loads((FIX / name / "reference.json").read_text())


def source(name: str, kind: str) -> Path:
    return FIX / name / "checkpoint" if kind == "folder" else FIX / name / f"{name}.roguenet"


def enn_obs(case: dict) -> enn.EnnObservation:
    m = case["masks"]
    return enn.EnnObservation(
        entities=case["entities"],
        global_features=case["global_features"],
        actors={a: v["actors"] for a, v in m.items()},
        actees={a: v["actees"] for a, v in m.items() if "actees" in v},
        masks={a: v.get("mask") for a, v in m.items()},
    )


def assert_matches(case: dict, logprobs: dict, value: float | None) -> None:
    for a, ref_lp in case["logprobs"].items():
        lp = np.asarray(logprobs[a], dtype=np.float64)
        want = np.array([[-math.inf if x is None else x for x in row] for row in ref_lp], dtype=np.float64)
        assert lp.shape == want.shape, a
        np.testing.assert_allclose(np.exp(lp), np.array(case["probs"][a]), rtol=0, atol=P_TOL)
        fin = np.isfinite(want)
        assert (np.isfinite(lp) == fin).all()
        np.testing.assert_allclose(lp[fin], want[fin], rtol=0, atol=LOGP_TOL)
    if value is not None:
        assert abs(value - case["value"]) <= V_TOL


def copy_ckpt(tmp: Path, name: str = "xor") -> Path:
    d = tmp / f"{name}-ckpt"
    shutil.copytree(FIX / name / "checkpoint", d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def write_tar(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for fn, data in files.items():
            ti = tarfile.TarInfo(fn)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


# ---------------------------------------------------------------------- reproducing rogue-net
@pytest.mark.parametrize("kind", ["folder", "archive"])
@pytest.mark.parametrize("name", NAMES)
def test_reproduces_rogue_net_outputs(name, kind):
    policy = enn.load_policy(source(name, kind))
    ref = reference(name)
    assert policy.entity_names[: len(ref["obs_space"])] == list(ref["obs_space"])
    assert {k: list(v) for k, v in policy.entity_features.items() if k != enn.GLOBAL_ENTITY} == ref["obs_space"]
    assert list(policy.global_features) == ref["global_features"]
    obs = [enn_obs(c) for c in ref["cases"]]
    for case, o in zip(ref["cases"], obs):  # one observation at a time, as the references were made
        out = enn.forward(policy, [o])[0]
        assert_matches(case, out.logprobs, out.value)
    for case, out in zip(ref["cases"], enn.forward(policy, obs)):  # all in one padded batch
        assert_matches(case, out.logprobs, out.value)


def test_checkpoint_metadata():
    policy = enn.load_policy(source("multisnake", "folder"))
    info = policy.info
    assert info["arch"] == "rogue-net" and info["step"] == reference("multisnake")["step"] == 16384
    assert info["enn"]["config_version"] == 4 and info["enn"]["env"]["id"] == "MultiSnake"
    assert policy.cfg.readout is False and policy.cfg.mlp_ratio == 4 and policy.cfg.d_model == 32
    assert policy.relpos_cfg.extent == [10, 10] and policy.relpos_cfg.value_gate == "relu"
    assert policy.action_space["move"].labels == ("up", "down", "left", "right")
    xor = enn.load_policy(source("xor", "archive"))
    assert xor.entity_names == ["Input", "__global__"] and xor.entity_features["__global__"] == ()
    assert xor.info["enn"]["global_actions"] == ["output"]
    cherry = enn.load_policy(source("cherrypick", "folder"))
    assert cherry.action_space["Pick Cherry"].among == ("Cherry", "Player")
    assert enn.load_policy(source("cherrypick", "folder"), among={"Pick Cherry": ["Cherry"]}).action_space["Pick Cherry"].among == ("Cherry",)


def test_converted_checkpoint_loads_in_numpy_and_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from gymloop.checkpoint import read_agent
    from gymloop.nn.torch_policy import policy_from_file

    for name in NAMES:
        out = tmp_path / f"{name}.safetensors"
        enn.convert(source(name, "archive"), out)
        ref = reference(name)
        obs = [enn_obs(c) for c in ref["cases"]]
        policy = gl.load(out).policy
        for case, o in zip(ref["cases"], enn.forward(policy, obs)):
            assert_matches(case, o.logprobs, o.value)
        tp = policy_from_file(read_agent(out))
        p = enn.pack(policy, obs)
        with torch.no_grad():
            res = tp.forward(p, greedy=True)
        for s, case in enumerate(ref["cases"]):
            assert abs(float(res.value[s]) - case["value"]) <= V_TOL
        for a, desc in policy.action_space.items():
            lp = res.logits[a].numpy()
            o = 0
            for case, ob in zip(ref["cases"], obs):
                n = len(ob.actors[a])
                k = len(desc.labels) if desc.kind == "categorical" else len(ob.actees[a])
                got = lp[o : o + n] if desc.kind == "categorical" else lp[o : o + n * k].reshape(n, k)
                o += n if desc.kind == "categorical" else n * k
                np.testing.assert_allclose(got, np.array(case["logprobs"][a]), rtol=0, atol=LOGP_TOL)


# ---------------------------------------------------------------------- gl.load and Python games
@gl.entity(name="SnakeHead")
@dataclass
class Head:
    x: int
    y: int
    color: int


@gl.entity(name="SnakeBody")
@dataclass
class Segment:
    x: int
    y: int
    color: int


@gl.entity(name="Food")
@dataclass
class Apple:
    x: int
    y: int
    color: int


@dataclass
class Clock:
    step: int


Move = Enum("move", ["up", "down", "left", "right"])  # enn-trainer's action name and labels


@gl.entity(name="Cherry")
@dataclass
class Cherry:
    quality: float


@dataclass
class Player:
    pass


Pick = gl.SelectEntity("Pick Cherry", among=Cherry)


@gl.entity(name="Input")
@dataclass
class Bit:
    is_set: float


@dataclass
class Flags:
    negate: float


Output = Enum("output", [("0", 0), ("1", 1)])


def snake_obs(case: dict) -> tuple[gl.Obs, list[Head]]:
    e = case["entities"]
    heads = [Head(*map(int, r)) for r in e["SnakeHead"]]
    actors = [heads[i] for i in case["masks"]["move"]["actors"]]  # SnakeHead rows come first in entity-gym's order
    obs = (
        gl.Obs()
        .globals(Clock(int(case["global_features"][0])))
        .entities([Apple(*map(int, r)) for r in e["Food"]])
        .entities([Segment(*map(int, r)) for r in e["SnakeBody"]])
        .actors(actors)
    )
    return obs, actors


def cherry_obs(case: dict) -> tuple[gl.Obs, list[Cherry]]:
    cherries = [Cherry(r[0]) for r in case["entities"]["Cherry"]]
    assert case["masks"]["Pick Cherry"]["actees"] == list(range(len(cherries)))
    return gl.Obs().entities(cherries).actor(Player()), cherries


def xor_obs(case: dict) -> gl.Obs:
    bits = [Bit(r[0]) for r in case["entities"]["Input"]]
    return gl.Obs().globals(Flags(case["global_features"][0])).entities(bits).actor(enn.GlobalToken())


def replay(cases: list, make_obs, action_type, answers: list):
    """A game loop showing the recorded observations one after another."""

    def game(agent, seed):
        for c in cases:
            answers.append(agent.act(make_obs(c), action_type))

    return game


def softmax(lg: np.ndarray) -> np.ndarray:
    e = np.exp(lg - lg.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("kind", ["folder", "archive"])
def test_multisnake_agent_plays_a_python_game(kind):
    agent = gl.load(source("multisnake", kind), greedy=True)
    assert isinstance(agent, NeuralAgent)
    cases = reference("multisnake")["cases"]
    for c in cases:
        obs, _ = snake_obs(c)
        np.testing.assert_allclose(softmax(agent.logits(obs, Move)[0]), c["probs"]["move"], rtol=0, atol=P_TOL)
    answers: list = []
    result = gl.run(replay(cases, lambda c: snake_obs(c)[0], Move, answers), agent, seed=0)
    assert result.steps == len(cases)
    for c, ans in zip(cases, answers):
        assert [m.name for m in ans] == [Move(i + 1).name for i in np.argmax(c["probs"]["move"], axis=1)]


def test_cherrypick_agent_selects_the_same_cherry():
    @gl.game(entities=[Cherry, Player], actions=[Pick])
    def cherry_game(agent, seed):  # pragma: no cover - only declared
        ...

    cases = reference("cherrypick")["cases"]
    agents = [
        gl.load(source("cherrypick", "archive"), greedy=True, game=cherry_game),  # candidate types from the game
        enn.load(source("cherrypick", "folder"), greedy=True, among={"Pick Cherry": ["Cherry"]}),
    ]
    for agent in agents:
        assert agent.policy.action_space["Pick Cherry"].among == ("Cherry",)
        for c in cases:
            obs, _ = cherry_obs(c)
            np.testing.assert_allclose(softmax(agent.logits(obs, Pick)[0]), c["probs"]["Pick Cherry"], rtol=0, atol=P_TOL)
        answers: list = []
        observed: list = []

        def make(c, observed=observed):
            obs, cherries = cherry_obs(c)
            observed.append(cherries)
            return obs

        assert gl.run(replay(cases, make, Pick, answers), agent, seed=0).steps == len(cases)
        for c, cherries, ans in zip(cases, observed, answers):
            assert ans is cherries[int(np.argmax(c["probs"]["Pick Cherry"][0]))]
    # without among= or game=, the candidate types are those the game's action offers
    plain = gl.load(source("cherrypick", "folder"), greedy=True)
    for c in cases:
        obs, _ = cherry_obs(c)
        np.testing.assert_allclose(softmax(plain.logits(obs, Pick)[0]), c["probs"]["Pick Cherry"], rtol=0, atol=P_TOL)
    with pytest.raises(ConfigError, match="no select-entity action 'Pick'"):
        enn.load(source("cherrypick", "folder"), among={"Pick": ["Cherry"]})
    with pytest.raises(ConfigError, match=r"entity types \['Apple'\]"):
        enn.load_policy(source("cherrypick", "folder"), among={"Pick Cherry": ["Apple"]})


def test_xor_agent_answers_through_the_global_token():
    agent = gl.load(source("xor", "folder"), greedy=True)
    cases = reference("xor")["cases"]
    for c in cases:
        np.testing.assert_allclose(softmax(agent.logits(xor_obs(c), Output)[0]), c["probs"]["output"], rtol=0, atol=P_TOL)
    answers: list = []
    assert gl.run(replay(cases, xor_obs, Output, answers), agent, seed=0).steps == len(cases)
    for c, ans in zip(cases, answers):
        assert ans is Output[str(int(np.argmax(c["probs"]["output"][0])))]


def test_loaded_agents_share_one_policy_and_sample_reproducibly():
    a = gl.load(source("multisnake", "folder"), seed=1)
    b = gl.load(source("multisnake", "folder"), seed=1)
    assert a.policy is b.policy
    assert gl.load(source("multisnake", "archive")).policy is not a.policy
    case = reference("multisnake")["cases"][5]
    picks_a = [a.act(snake_obs(case)[0], Move) for _ in range(20)]
    picks_b = [gl.act_all([(b, snake_obs(case)[0], Move)])[0] for _ in range(20)]  # the batched path
    assert picks_a == picks_b


def test_importing_and_loading_need_neither_msgpack_at_import_nor_torch():
    code = (
        "import sys, gymloop as gl\n"
        "assert 'msgpack' not in sys.modules\n"
        "import gymloop.enn\n"
        "assert 'msgpack' not in sys.modules\n"
        f"agent = gl.load({str(source('xor', 'archive'))!r})\n"
        "assert 'torch' not in sys.modules and 'msgpack' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_msgpack_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "msgpack", None)  # import msgpack raises ImportError
    with pytest.raises(CheckpointError, match=r"pip install 'gymloop\[enn\]'"):
        enn.read_checkpoint(source("xor", "folder"))


def test_entity_gym_inputs_are_checked():
    policy = enn.load_policy(source("multisnake", "folder"))
    case = reference("multisnake")["cases"][0]
    good = enn_obs(case)
    with pytest.raises(InvalidObservationError, match="needs \\(n, 3\\) features"):
        enn.forward(policy, [enn.EnnObservation({"SnakeHead": [[1.0, 2.0]]}, [0.0])])
    with pytest.raises(InvalidObservationError, match="0 global features, the network has 1"):
        enn.forward(policy, [enn.EnnObservation(good.entities, [])])
    with pytest.raises(InvalidObservationError, match="unknown entity types"):
        enn.forward(policy, [enn.EnnObservation({"Wall": [[0.0]]}, [0.0])])
    with pytest.raises(InvalidObservationError, match="actor index for action .move. out of range: 99; the observation has 4 entities"):
        enn.forward(policy, [enn.EnnObservation(good.entities, [0.0], {"move": [99]})])
    bad = [
        ({"actors": {"move": [0.5]}}, "must be a list of entity indices"),
        ({"actors": {"move": [[0], [1, 2]]}}, "must be a list of entity indices"),
        ({"actors": {"mvoe": [0]}}, r"actors given for \['mvoe'\], which are not among the network's actions \['move'\]"),
        ({"actors": {"move": [0]}, "actees": {"move": [1]}}, r"actees given for \['move'\]"),
        ({"actors": {"move": [0]}, "masks": {"move": [[True, False]]}}, r"mask of action 'move' has shape \(1, 2\); expected \(1, 4\)"),
        ({"actors": {"move": [0]}, "masks": {"move": [[False] * 4]}}, "allows no choice to actor 0"),
        ({"global_features": [math.nan]}, "global features must be finite"),
        ({"entities": {"SnakeHead": [[1, 2, 3], [1, 2]]}}, "must be numbers in a rectangular array"),
        ({"entities": {"SnakeHead": [[1, 2, math.inf]]}}, "features of entity type 'SnakeHead' must be finite"),
    ]
    for change, match in bad:
        fields = {"entities": good.entities, "global_features": [0.0]} | change
        with pytest.raises(InvalidObservationError, match=match):
            enn.forward(policy, [enn.EnnObservation(**fields)])
    out = enn.forward(policy, [enn.EnnObservation(good.entities, [0.0], {"move": [0]}, masks={"move": [[True, False, False, False]]})])
    assert np.isfinite(out[0].logprobs["move"]).tolist() == [[True, False, False, False]]
    assert enn.forward(policy, []) == []


# ---------------------------------------------------------------------- bad input
def test_truncated_msgpack(tmp_path):
    d = copy_ckpt(tmp_path)
    w = d / "state.agent.msgpack"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"state\.agent\.msgpack: not a valid msgpack document: truncated or corrupt"):
        gl.load(d)


def test_corrupted_and_truncated_archives(tmp_path):
    data = (FIX / "xor" / "xor.roguenet").read_bytes()
    bad = tmp_path / "bad.roguenet"
    bad.write_bytes(data[:100] + b"\xff" * 60 + data[160:])  # the first header's checksum fails
    with pytest.raises(CheckpointError, match=r"not a readable \.roguenet \(tar\) archive"):
        gl.load(bad)
    cut = tmp_path / "cut.roguenet"
    cut.write_bytes(data[:20000])  # inside state.agent.msgpack's data
    with pytest.raises(CheckpointError, match="truncated"):
        gl.load(cut)
    junk = tmp_path / "junk.roguenet"
    junk.write_text("not an archive at all")
    with pytest.raises(CheckpointError, match="not a readable .roguenet"):
        gl.load(junk)
    with pytest.raises(CheckpointError, match="(?i)no such file"):
        gl.load(tmp_path / "missing.roguenet")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.roguenet")  # opening it would block
        with pytest.raises(CheckpointError, match="not a regular file"):
            gl.load(tmp_path / "pipe.roguenet")


def test_archive_members(tmp_path):
    ck = FIX / "xor" / "checkpoint"
    files = {f: (ck / f).read_bytes() for f in ("config.ron", "state.ron", "state.agent.msgpack")}
    nested = tmp_path / "nested.tar"  # members matched by file name; the content makes it an archive
    write_tar(nested, {f"run/{k}": v for k, v in files.items()} | {"run/state.optimizer.msgpack": b"\x80"})
    assert enn.is_enn_checkpoint(nested)
    assert gl.load(nested).policy.entity_names == ["Input", "__global__"]
    lacking = tmp_path / "lacking.roguenet"
    write_tar(lacking, {k: v for k, v in files.items() if k != "state.ron"})
    with pytest.raises(CheckpointError, match="the archive lacks state.ron"):
        gl.load(lacking)
    twice = tmp_path / "twice.roguenet"
    write_tar(twice, files | {"x/config.ron": files["config.ron"]})
    with pytest.raises(CheckpointError, match="holds config.ron twice"):
        gl.load(twice)


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, linkname
    return ti


@pytest.mark.parametrize(
    ("member", "match"),
    [
        (_member("evil", tarfile.SYMTYPE, "/etc/passwd"), "'evil' is a symbolic link"),
        (_member("config.ron", tarfile.SYMTYPE, "../../config.ron"), "'config.ron' is a symbolic link"),
        (_member("hard", tarfile.LNKTYPE, "state.ron"), "'hard' is a hard link"),
        (_member("pipe", tarfile.FIFOTYPE), "'pipe' is a device or fifo"),
        (_member("tty", tarfile.CHRTYPE), "'tty' is a device or fifo"),
        (_member("sparse", tarfile.GNUTYPE_SPARSE), "'sparse' is a sparse file"),
        (_member("../escape.txt"), r"name '\.\./escape\.txt' is absolute or leaves the archive"),
        (_member("run/../../config.ron"), "leaves the archive"),
        (_member("/etc/cron.d/job"), "is absolute"),
        (_member("..\\windows.txt"), "leaves the archive"),
    ],
)
def test_archive_members_no_checkpoint_holds_are_refused(tmp_path, member, match):
    path = tmp_path / "x.roguenet"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        tf.addfile(member, io.BytesIO(b"") if member.isreg() else None)
        for fn, data in _XOR.items():
            ti = tarfile.TarInfo(fn)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    with pytest.raises(CheckpointError, match=match):
        gl.load(path)


def test_archive_reading_is_bounded(tmp_path, monkeypatch):
    pax = tmp_path / "pax.roguenet"  # a pax header record tarfile would read whole into memory
    with tarfile.open(pax, "w", format=tarfile.PAX_FORMAT) as tf:
        for fn, data in _XOR.items():
            ti = tarfile.TarInfo(fn)
            ti.size = len(data)
            ti.pax_headers = {"comment": "x" * (2 * 1024 * 1024)} if fn == "state.ron" else {}
            tf.addfile(ti, io.BytesIO(data))
    with pytest.raises(CheckpointError, match="a tar header record larger than 1048576 bytes"):
        gl.load(pax)
    many = tmp_path / "many.roguenet"
    write_tar(many, {f"junk/{i}": b"" for i in range(1100)} | _XOR)
    with pytest.raises(CheckpointError, match="more than 1024 archive members"):
        gl.load(many)
    monkeypatch.setitem(enn_reader._LIMITS, "state.ron", 100)
    with pytest.raises(CheckpointError, match=r"archive member 'state\.ron' is larger than 100 bytes"):
        enn.read_checkpoint(source("xor", "archive"))
    with pytest.raises(CheckpointError, match=r"state\.ron: larger than 100 bytes"):
        enn.read_checkpoint(source("xor", "folder"))


def test_folder_missing_state_ron(tmp_path):
    d = copy_ckpt(tmp_path)
    (d / "state.ron").unlink()
    with pytest.raises(CheckpointError, match="lacks state.ron"):
        gl.load(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="lacks config.ron, state.ron, state.agent.msgpack"):
        gl.load(tmp_path / "empty")


def test_unknown_config_version(tmp_path):
    d = copy_ckpt(tmp_path)
    edit(d / "config.ron", "version: 4,", "version: 99,")
    with pytest.raises(CheckpointError, match="unknown TrainConfig format version 99"):
        gl.load(d)
    edit(d / "config.ron", "version: 99,", "")
    with pytest.raises(CheckpointError, match="has no format version"):
        gl.load(d)


def test_weights_disagreeing_with_the_config(tmp_path):
    d = copy_ckpt(tmp_path)
    edit(d / "config.ron", "d_model: 16,", "d_model: 32,")
    with pytest.raises(CheckpointError, match=r"'embedding\.embeddings\.Input\.1\.weight' has shape \(16, 2\) but the config and spaces imply \(32, 2\)"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "b")
    edit(d / "state.ron", '"is_set",', '"is_set",\n                    "extra",')
    with pytest.raises(CheckpointError, match=r"Input\.0\.mean' has shape \(2,\) but .* imply \(3,\)"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "c")
    edit(d / "config.ron", "n_layer: 1,", "n_layer: 2,")
    with pytest.raises(CheckpointError, match=r"lack 'backbone\.blocks\.1\.ln1\.weight'"):
        gl.load(d)


def _repack(path: Path, change) -> None:
    doc = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    change(doc)
    path.write_bytes(msgpack.packb(doc, use_bin_type=True))


def test_weights_file_problems(tmp_path):
    def reshape(doc):
        t = doc["auxiliary_heads.value.weight"]
        t[b"shape"] = [16, 1]

    cases = [
        (reshape, r"'auxiliary_heads\.value\.weight' has shape \(16, 1\) but the config and spaces imply \(1, 16\)"),
        (lambda doc: doc.pop("auxiliary_heads.value.bias"), r"lack 'auxiliary_heads\.value\.bias'"),
        (lambda doc: doc.update(extra=doc["auxiliary_heads.value.bias"]), r"unexpected tensors \['extra'\]"),
        (lambda doc: doc["auxiliary_heads.value.bias"].update({b"dtype": "|O"}), "only little-endian numeric dtypes"),
        (lambda doc: doc["auxiliary_heads.value.bias"].update({b"data": b"\x00"}), "needs 4 bytes"),
        (lambda doc: doc.update({"auxiliary_heads.value.bias": [1, 2]}), "not an encoded tensor"),
        (lambda doc: doc["auxiliary_heads.value.bias"].update({b"data": np.float32([np.nan]).tobytes()}), "NaN or infinite"),
    ]
    for i, (change, match) in enumerate(cases):
        d = copy_ckpt(tmp_path / str(i))
        _repack(d / "state.agent.msgpack", change)
        with pytest.raises(CheckpointError, match=match):
            gl.load(d)
    d = copy_ckpt(tmp_path / "list")
    (d / "state.agent.msgpack").write_bytes(msgpack.packb([1, 2, 3]))
    with pytest.raises(CheckpointError, match="not a weights table; not a rogue-net agent"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "relpos", "multisnake")
    _repack(d / "state.agent.msgpack", lambda doc: doc["backbone.blocks.1.attn.relpos_encoding.keys.weight"].update(
        {b"data": b"\x00" * len(doc["backbone.blocks.1.attn.relpos_encoding.keys.weight"][b"data"])}))
    with pytest.raises(CheckpointError, match="differs from 'backbone.relpos_encoding.keys.weight'"):
        gl.load(d)


_pk = msgpack.packb
_T = {b"__tensor__": "torch", b"dtype": "<f4", b"shape": [1], b"data": b"\0\0\0\0"}  # one encoded tensor


def _raw_map(*items: bytes) -> bytes:
    """A msgpack map of already-packed keys and values (which may repeat)."""
    return bytes([0x80 | len(items) // 2]) + b"".join(items)


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (b"", "empty file"),
        (_pk([1, 2]), "not a map, not a weights table"),
        (_pk({"w": msgpack.ExtType(1, b"")}), "msgpack extension type 1; extension types are not read"),
        (_pk({"w": msgpack.ExtType(1, b"code")}), "exceeds max_ext_len"),
        (_pk({"w": msgpack.Timestamp(0)}), "exceeds max_ext_len"),
        (_pk({1: _T}), "weight name 1 is not a string"),
        (_pk({"w": {1: 2}}), "int is not allowed for map key"),
        (_pk({"w": {(1, 2): 2}}), "not allowed for map key"),
        (_raw_map(_pk("w"), _pk(_T), _pk("w"), _pk(_T)), "tensor 'w' appears twice"),
        (_raw_map(_pk("w"), _raw_map(*(_pk(x) for kv in (list(_T.items()) + [(b"dtype", "<f8")]) for x in kv))), "duplicate keys"),
        (_pk({"w": [[[[]]]]}), "nested maps or lists where"),
        (_pk({"w": _T | {b"shape": [[1]]}}), "nested maps or lists where"),
        (_pk({"w": _T}) + b"\xc0", "1 bytes after the weights table"),
        (_pk({"w" * 70_000: _T}), "exceeds max_str_len"),
        (_pk({"w": _T | {b"shape": [1] * 9}}), "exceeds max_array_len"),
        (b"\xdf\xff\xff\xff\xff", "a weights table of 4294967295 entries"),
        (_pk({"w": _T})[:-2], "truncated or corrupt"),
        (_pk({"w": _T | {b"dtype": b"<f4", "dtype": "<f4"}}), "not a hyperstate-encoded tensor"),
        (_pk({"w": _T | {b"dtype": ["<f4"], b"shape": 1}}), r"has dtype \['<f4'\]; only little-endian numeric dtypes"),
    ],
)
def test_weights_are_unpacked_within_bounds(tmp_path, blob, match):
    d = copy_ckpt(tmp_path)
    (d / "state.agent.msgpack").write_bytes(blob)
    with pytest.raises(CheckpointError, match=match):
        enn.read_checkpoint(d)


_mp_scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=6) | st.binary(max_size=12)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=3))
)
_mp_tensors = st.fixed_dictionaries(
    {b"__tensor__": st.sampled_from(["torch", "numpy", "pickle"]), b"dtype": st.sampled_from(["<f4", "<i8", "|b1", "|O", ">f4", "<V4"]),
     b"shape": st.lists(st.integers(-1, 3), max_size=3), b"data": st.binary(max_size=40)},
)
_mp_values = st.recursive(
    _mp_scalars | _mp_tensors,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=3) | st.binary(max_size=3) | st.integers(-(2**63), 2**64 - 1), inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=8), _mp_values, max_size=4) | _mp_values)
def test_msgpack_documents_read_or_raise_checkpoint_errors(doc):
    try:
        weights = enn_reader._read_weights(msgpack.packb(doc, use_bin_type=True), "w.msgpack")
    except CheckpointError:
        return
    assert isinstance(doc, dict) and all(isinstance(v, np.ndarray) for v in weights.values())


def test_files_that_are_not_enn_agents(tmp_path):
    d = copy_ckpt(tmp_path)
    (d / "config.ron").write_text('Foo(a: 1)')
    with pytest.raises(CheckpointError, match="holds a Foo struct, not an enn-trainer TrainConfig"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "b")
    edit(d / "state.ron", 'agent: "<blob:msgpack>"', 'agent: "weights.pt"')
    with pytest.raises(CheckpointError, match="not a '<blob:msgpack>' reference"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "c")
    (d / "state.ron").write_bytes(b"\xff\xfe binary")
    with pytest.raises(CheckpointError, match="not UTF-8 text"):
        gl.load(d)
    d = copy_ckpt(tmp_path / "d")
    edit(d / "state.ron", "GlobalCategoricalActionSpace(", "MultiDiscreteActionSpace(")
    with pytest.raises(CheckpointError, match="unknown action space MultiDiscreteActionSpace"):
        gl.load(d)
    # a gymloop checkpoint is not mistaken for an archive, and vice versa
    out = tmp_path / "agent.safetensors"
    enn.convert(source("xor", "folder"), out)
    assert not enn.is_enn_checkpoint(out)
    shutil.copy(out, tmp_path / "agent.roguenet")
    with pytest.raises(CheckpointError, match="not a readable .roguenet"):
        gl.load(tmp_path / "agent.roguenet")


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("pooling: None,", 'pooling: Some("mean"),', "net.pooling='mean'"),
        ("translation: None,", "translation: TranslationConfig(reference_entity: \"SnakeHead\"),", "net.translation"),
        ("scale: 1.0,", "scale: 2.0,", "scale=2.0"),
        ("per_entity_values: false,", "per_entity_values: true,", "per_entity_values=True"),
        ("interpolate: false,", "interpolate: true,", "interpolate=True"),
        ('value_gate: "relu",', 'value_gate: "tanh",', "value_gate 'tanh'"),
        ("extent: [\n                10,", "extent: [\n                100000000000000000000,", r"more than 2\*\*24 relative"),
        ("d_qk: 16,", "d_qk: 16,\n        dropout_everywhere: true,", r"net has fields \['dropout_everywhere'\]"),
        ('"x",\n                "y",', '"x",\n                "step",', r"lacking: .*'SnakeHead': \['step'\]"),
    ],
)
def test_unsupported_rogue_net_options_are_named(tmp_path, old, new, match):
    d = copy_ckpt(tmp_path, "multisnake")
    edit(d / "config.ron", old, new)
    with pytest.raises(CheckpointError, match=match):
        gl.load(d)


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('"SnakeHead": Entity(\n', '"SnakeHead": Entity(\n                visible_to: [],\n', r"entity type 'SnakeHead' has fields \['visible_to'\]"),
        ("obs_space: ObsSpace(\n", "obs_space: ObsSpace(\n        relative: true,\n", r"obs_space has fields \['relative'\]"),
        ("CategoricalActionSpace(\n", "CategoricalActionSpace(\n            default: 0,\n", r"action 'move' has fields \['default'\]"),
    ],
)
def test_unknown_fields_of_the_spaces_are_named(tmp_path, old, new, match):
    d = copy_ckpt(tmp_path, "multisnake")
    edit(d / "state.ron", old, new)
    with pytest.raises(CheckpointError, match=match):
        gl.load(d)


def test_relpos_extent_is_checked_without_quadratic_work():
    rp = enn.RonStruct("RelposEncodingConfig", {"extent": [1] * 3_000_000, "position_features": ["x", "y"]})
    with pytest.raises(CheckpointError, match=r"implies more than 2\*\*24 relative positions"):
        enn_reader._read_relpos(rp, 4, "config.ron")  # the product of 3e6 factors would take minutes


def test_a_separate_value_network_is_reported(tmp_path, caplog):
    d = copy_ckpt(tmp_path)
    edit(d / "config.ron", "vf_net: None,", "vf_net: Some(RogueNetConfig(d_model: 16)),")
    with caplog.at_level(logging.WARNING, logger="gymloop.enn"):
        policy = enn.load_policy(d)
    assert "separate value network (vf_net), which is not imported" in caplog.text
    assert policy.info["enn"]["separate_value_network"] is True
    assert enn.load_policy(source("xor", "folder")).info["enn"]["separate_value_network"] is False


def test_scale_one_written_as_an_integer_is_accepted(tmp_path):
    d = copy_ckpt(tmp_path, "multisnake")
    edit(d / "config.ron", "scale: 1.0,", "scale: 1,")
    assert gl.load(d).policy.relpos_cfg is not None


# ---------------------------------------------------------------------- RON
def test_ron_parser():
    v = enn.parse_ron(
        """// a comment
        State(
            /* nested /* block */ comment */
            step: 0x10, ratio: -1.5e3, big: 1_000, on: true, off: false, opt: Some(3), none: None,
            text: "tab\\t quote\\" uni\\u{1F600} \\u00e9", raw: r#"a "raw" string"#, ch: '\\n',
            unit: Relu, empty: Empty(), tup: (1, "a"), named: Pair(1, 2), map: {"k": [1, 2,], (1, 2): ()},
            r#type: inf,
        )"""
    )
    assert isinstance(v, enn.RonStruct) and v.name == "State"
    assert (v["step"], v["ratio"], v["big"], v["on"], v["off"], v["opt"], v["none"]) == (16, -1500.0, 1000, True, False, 3, None)
    assert v["text"] == 'tab\t quote" uni\U0001f600 \u00e9' and v["raw"] == 'a "raw" string' and v["ch"] == "\n"
    assert v["unit"] == {} and v["unit"].name == "Relu" and v["empty"].name == "Empty"
    assert v["tup"] == (1, "a") and isinstance(v["named"], enn.RonTuple) and v["named"].name == "Pair"
    assert v["map"] == {"k": [1, 2], (1, 2): ()} and v["type"] == math.inf
    assert repr(enn.parse_ron("A(b: [1], c: P(2))")) == "A(b: [1], c: P(2,))"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("State(step: 1", "line 1, column 14: unexpected end of text"),
        ("(a: 1, a: 2)", "duplicate field 'a'"),
        ('{"a": 1, "a": 2}', "duplicate map key 'a'"),
        ("(a: 1) trailing", "unexpected 't' after the value"),
        ('"unterminated', "unterminated string"),
        ("[1,, 2]", "unexpected ','"),
        ("(a: 1 b: 2)", r"expected ',' or '\)'"),
        ('"bad \\q escape"', r"unknown escape \\q"),
        ('"\\ud800"', "not a Unicode scalar value"),
        ("12abc", "malformed number"),
        ("#![enable(implicit_some)]\n(a: 1)", "extensions"),
        ("[" * 100 + "]" * 100, "nested deeper than 64"),
        ("/* open comment", "unterminated block comment"),
        ("{[1]: 2}", "map keys must be"),
        ("'ab'", "one character"),
        ("", "unexpected end of text"),
        ("1" * 5000, "a number literal of 5000 characters"),
        ("-0x" + "f" * 300, "a number literal of 303 characters"),
        ("{([1]): 2}", "map keys must be strings, numbers or tuples"),
        ("{(1, A(b: 2)): 3}", "map keys must be strings, numbers or tuples"),
        ("[Some]", "Some needs its value in parentheses"),
    ],
)
def test_ron_errors_name_line_and_column(text, match):
    with pytest.raises(CheckpointError, match=match):
        enn.parse_ron(text, "t.ron")


def test_ron_input_size_is_bounded():
    with pytest.raises(CheckpointError, match="4194305 characters of RON, more than the 4194304"):
        enn.parse_ron(" " * (4 * 1024 * 1024) + "1", "t.ron")
    with pytest.raises(CheckpointError, match="4194305 bytes of RON"):
        enn.parse_ron(b"1" * (4 * 1024 * 1024 + 1), "t.ron")


def _to_ron(v) -> str:
    """A small RON writer for round trips (strings as JSON strings, which RON reads)."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, enn.RonStruct):
        return f"{v.name or ''}({', '.join(f'{k}: {_to_ron(x)}' for k, x in v.items())})"
    if isinstance(v, list):
        return "[" + ", ".join(map(_to_ron, v)) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_to_ron(k)}: {_to_ron(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


_idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in ("true", "false", "None", "Some", "inf", "NaN")
)
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    | st.builds(enn.RonStruct, st.none() | _idents, st.dictionaries(_idents, inner, max_size=4)).filter(
        lambda v: v.name or v  # "()" is the unit value, not an anonymous struct
    ),
    max_leaves=12,
)


@settings(max_examples=200)
@given(_values)
def test_ron_round_trip(v):
    back = enn.parse_ron(_to_ron(v))
    assert back == v
    if isinstance(v, enn.RonStruct):
        assert back.name == v.name


@settings(max_examples=300)
@given(
    st.text(alphabet=st.sampled_from(list('()[]{}:,"\'/*#r_ aZ09.-+e\\\n')), max_size=40)
    | st.text(max_size=40)
    | st.builds(str.__add__, st.sampled_from(["", "-", "0x", "[", "{1: "]), st.text("0123456789_.e", min_size=200, max_size=400))
)
def test_ron_parser_fuzz_raises_only_checkpoint_errors(text):
    try:
        enn.parse_ron(text)
    except CheckpointError:
        pass


# ---------------------------------------------------------------------- fuzzing whole checkpoints
_XOR = {f: (FIX / "xor" / "checkpoint" / f).read_bytes() for f in ("config.ron", "state.ron", "state.agent.msgpack")}
_XOR_TAR = (FIX / "xor" / "xor.roguenet").read_bytes()


@settings(max_examples=150)
@given(
    target=st.sampled_from(["config.ron", "state.ron", "state.agent.msgpack", "archive"]),
    cut=st.booleans(),
    data=st.data(),
)
def test_corrupted_bytes_load_or_raise_checkpoint_error(target, cut, data):
    blob = _XOR_TAR if target == "archive" else _XOR[target]
    if cut:
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        b = bytearray(blob)
        for _ in range(data.draw(st.integers(1, 4))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        blob = bytes(b)
    with tempfile.TemporaryDirectory() as tmp:
        if target == "archive":
            path = os.path.join(tmp, "x.roguenet")
            with open(path, "wb") as f:
                f.write(blob)
        else:
            path = os.path.join(tmp, "ckpt")
            os.mkdir(path)
            for fn, content in _XOR.items():
                with open(os.path.join(path, fn), "wb") as f:
                    f.write(blob if fn == target else content)
        try:
            policy = enn.load_policy(path)
        except CheckpointError:
            return
        with np.errstate(all="ignore"):  # corrupt but finite weights may overflow
            out = enn.forward(policy, [enn_obs(reference("xor")["cases"][0])])[0]  # whatever loaded also runs
        assert out.logprobs["output"].shape == (1, 2)
