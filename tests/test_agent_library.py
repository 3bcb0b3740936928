"""Agent libraries: folders and archives of many agents, lazy, memory-mapped (issue 4, item 3)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.policies import count_calls

import gymloop as gl
from gymloop.agent_library import AgentLibrary, _agent_checksum, library, pack_library
from gymloop.checkpoint import SafetensorsFile, read_safetensors, write_safetensors
from gymloop.errors import CheckpointError
from gymloop.games.snake import snake

pytest.importorskip("torch")  # writing the checkpoints needs torch; reading them does not

from gymloop.neural import random_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def agents_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("agents")
    os.makedirs(d / "bots")
    random_checkpoint(d / "easy.safetensors", snake, seed=1)
    random_checkpoint(d / "bots" / "hard.safetensors", snake, seed=2)
    random_checkpoint(d / "bots" / "wild.safetensors", snake, seed=3)
    write_safetensors(d / "bots" / "optimizer.safetensors", {"x": np.zeros(3, np.float32)})  # not an agent: skipped
    (d / "notes.txt").write_text("not an agent")
    return d


@pytest.fixture(scope="module")
def archive(agents_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("arch") / "snakes.safetensors"
    pack_library(path, agents_dir)
    return path


def _probs(agent, seed=0):
    """The agent's policy outputs on a few snake batches."""
    with gl.VecEnv(snake, num_envs=3, seed=seed) as env:
        b = env.reset()
        out = agent.policy.forward(agent.policy.pack(b))
    return out.logp["Move"], out.value


def test_folder_lists_agents_by_relative_path_and_skips_other_files(agents_dir):
    lib = library(agents_dir)
    assert lib.kind == "folder"
    assert lib.names() == ["bots/hard", "bots/wild", "easy"]
    assert len(lib) == 3 and "bots/hard" in lib and "optimizer" not in lib and "bots/optimizer" not in lib
    assert list(lib) == lib.names()
    assert set(lib.info("easy")["obs_space"]["entities"]) == {"Head", "Body", "Food"}


def test_archive_matches_the_source_files_exactly(agents_dir, archive):
    lib = library(archive)
    assert lib.kind == "archive" and lib.names() == ["bots/hard", "bots/wild", "easy"]
    for name, file in [("easy", "easy.safetensors"), ("bots/hard", "bots/hard.safetensors")]:
        a = lib.load(name, seed=0)
        b = gl.load(agents_dir / file, seed=0)
        la, va = _probs(a)
        lb, vb = _probs(b)
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(va, vb)
        ra = gl.run(snake, a, seed=4, max_steps=50)
        rb = gl.run(snake, b, seed=4, max_steps=50)
        assert ra.scores == rb.scores and ra.steps == rb.steps
    assert lib.info("bots/wild")["step"] == 0


def test_archive_is_lazy_memory_mapped_and_shares_one_policy_per_name(archive):
    lib = library(archive)
    assert lib._policies == {} and lib._archive._data is None  # opening read only the header
    a1 = lib.load("bots/hard", seed=1)
    a2 = lib.load("bots/hard", seed=2)
    assert a1.policy is a2.policy and list(lib._policies) == ["bots/hard"]
    data = lib._archive._data
    assert isinstance(data, np.memmap)
    bias = a1.policy.value_b
    assert np.shares_memory(bias, data)  # weights stored as used are views of the file, not copies
    # one forward pass serves both agents of one name
    obs = [gl.Obs(score=0).actor(snake_head(2, 3)), gl.Obs(score=0).actor(snake_head(5, 5))]
    with count_calls(a1.policy, "logits") as calls:
        from gymloop.games.snake import Move

        moves = gl.act_all([(a1, obs[0], Move), (a2, obs[1], Move)])
    assert len(moves) == 2 and all(isinstance(m, Move) for m in moves) and len(calls) == 1


def snake_head(x, y):
    from gymloop.games.snake import Head

    return Head(x, y)


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_hundreds_of_agents_open_fast_and_load_one(tmp_path, agents_dir):
    src = agents_dir / "easy.safetensors"
    pack_library(tmp_path / "npcs.safetensors", {f"npc{i:03d}": src for i in range(300)})
    lib = library(tmp_path / "npcs.safetensors")
    assert len(lib) == 300 and lib.names()[:2] == ["npc000", "npc001"]
    a = lib.load("npc123", seed=0)
    assert gl.run(snake, a, seed=0, max_steps=5).steps == 5
    assert list(lib._policies) == ["npc123"]


def test_missing_name_lists_the_names_that_exist(archive, agents_dir):
    for lib in (library(archive), library(agents_dir)):
        with pytest.raises(CheckpointError, match=r"no agent 'bots/hardd' \(did you mean 'bots/hard' or 'bots/wild'\?\); it has 3: bots/hard, bots/wild, easy"):
            lib.load("bots/hardd")
        with pytest.raises(CheckpointError, match=r"no agent 'zzz'; it has 3: bots/hard, bots/wild, easy$"):
            lib.info("zzz")


def test_long_name_lists_are_cut_with_a_count(tmp_path, agents_dir):
    src = agents_dir / "easy.safetensors"
    pack_library(tmp_path / "many.safetensors", {f"n{i:03d}": src for i in range(50)})
    with pytest.raises(CheckpointError, match=r"it has 50: n000, .*n039, \.\.\. 10 more"):
        library(tmp_path / "many.safetensors").load("x")


def test_library_and_agent_files_are_not_confused(archive, agents_dir):
    with pytest.raises(CheckpointError, match=r"an agent library, not a single agent; open it with gl.library"):
        gl.load(archive)
    with pytest.raises(CheckpointError, match=r"a single agent checkpoint, not a library; load it with gl.load"):
        library(agents_dir / "easy.safetensors")
    with pytest.raises(CheckpointError, match="not a gymloop agent library"):
        library(agents_dir / "bots" / "optimizer.safetensors")
    with pytest.raises(CheckpointError, match="no such folder or file"):
        library(agents_dir / "nowhere")


def test_unknown_library_version_and_malformed_entries(tmp_path, archive):
    tensors, meta = read_safetensors(archive)
    import json

    doc = json.loads(meta["gymloop_library"])
    for change, match in [
        (lambda d: d.update(format_version=99), "unknown agent library format version 99"),
        (lambda d: d.pop("agents"), "lacks its 'agents' table"),
        (lambda d: d["agents"]["easy"].pop("id"), "entry of agent 'easy' is malformed"),
        (lambda d: d["agents"]["easy"]["info"].update(format_version=7), "agent 'easy': unknown checkpoint format version 7"),
    ]:
        d = json.loads(json.dumps(doc))
        change(d)
        bad = tmp_path / "bad.safetensors"
        write_safetensors(bad, tensors, {**meta, "gymloop_library": json.dumps(d)})
        with pytest.raises(CheckpointError, match=match):
            library(bad)


def test_weights_disagreeing_with_metadata_are_refused_at_load(tmp_path, archive):
    tensors, meta = read_safetensors(archive)
    aid = next(k.split("/")[0] for k in tensors)
    victim = next(k for k in tensors if k.startswith(aid + "/") and k.endswith("value_head.weight"))
    tensors = dict(tensors)
    tensors[victim] = np.zeros((1, 7), np.float32)
    bad = tmp_path / "bad.safetensors"
    write_safetensors(bad, tensors, meta)
    lib = library(bad)
    name = next(n for n in lib.names() if lib._keys[n] and lib._keys[n][0].startswith(aid + "/"))
    with pytest.raises(CheckpointError, match=rf"agent {name!r} is corrupt: its metadata and weights do not match the checksum"):
        lib.load(name)  # an edit without a new checksum: corrupt
    # a forged library (checksum recomputed): the shapes are still checked against the metadata
    doc = json.loads(meta["gymloop_library"])
    ent = doc["agents"][name]
    ent["checksum"] = _agent_checksum(name, ent["info"], {k.partition("/")[2]: v for k, v in tensors.items() if k.startswith(aid + "/")})
    write_safetensors(bad, tensors, {**meta, "gymloop_library": json.dumps(doc)})
    with pytest.raises(CheckpointError, match=r"'value_head.weight' has shape \(1, 7\) but the metadata implies \(1, \d+\) \(net.d_model="):
        library(bad).load(name)


def test_pack_refuses_what_is_not_an_agent(tmp_path, agents_dir):
    with pytest.raises(CheckpointError, match="not a gymloop agent"):
        pack_library(tmp_path / "x.safetensors", {"opt": agents_dir / "bots" / "optimizer.safetensors"})
    with pytest.raises(CheckpointError, match="agent name .. is not a valid library name"):
        pack_library(tmp_path / "x.safetensors", {"": agents_dir / "easy.safetensors"})
    assert not os.path.exists(tmp_path / "x.safetensors")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupted_or_truncated_archives_raise_checkpoint_error_only(tmp_path_factory, archive, data):
    raw = bytearray(archive.read_bytes())
    hl = int.from_bytes(raw[:8], "little")
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, min(len(raw) - 1, 8 + hl + 64)))
            raw[i] = data.draw(st.integers(0, 255))
    p = tmp_path_factory.mktemp("fz") / "a.safetensors"
    p.write_bytes(bytes(raw))
    try:
        lib = library(p)
        for n in lib.names():
            lib.load(n)
    except CheckpointError:
        pass


def test_folder_library_of_trainer_outputs(tmp_path, agents_dir):
    run = tmp_path / "runs" / "snake1"
    os.makedirs(run)
    shutil.copy(agents_dir / "easy.safetensors", run / "agent.safetensors")
    write_safetensors(run / "optimizer.safetensors", {"state.0.exp_avg": np.zeros(2, np.float32)})
    lib = AgentLibrary(tmp_path / "runs")
    assert lib.names() == ["snake1/agent"]
    assert "AgentLibrary(" in repr(lib) and "1 agents" in repr(lib)
    assert isinstance(SafetensorsFile(run / "agent.safetensors").keys(), list)


def test_cli_library_pack_and_list(tmp_path, agents_dir, capsys):
    from gymloop.cli import main

    out = tmp_path / "lib.safetensors"
    assert main(["library", "pack", str(agents_dir), "--out", str(out)]) == 0
    assert "packed 3 agents" in capsys.readouterr().out
    assert main(["library", "list", str(out)]) == 0
    text = capsys.readouterr().out
    assert "archive, 3 agents" in text and "bots/wild" in text and "actions=[Move]" in text
    assert main(["library", "pack", str(agents_dir)]) == 2
    assert "needs --out FILE" in capsys.readouterr().err
    assert main(["library", "list", str(tmp_path / "none")]) == 2
    assert "no such folder or file" in capsys.readouterr().err


def test_enn_trainer_checkpoints_in_a_folder_library_and_packed(tmp_path):
    pytest.importorskip("msgpack")
    fx = os.path.join(os.path.dirname(__file__), "fixtures", "enn")
    lib_dir = tmp_path / "lib"
    os.makedirs(lib_dir)
    shutil.copytree(os.path.join(fx, "cherrypick", "checkpoint"), lib_dir / "cherry")
    shutil.copy(os.path.join(fx, "xor", "xor.roguenet"), lib_dir / "xor.roguenet")
    lib = library(lib_dir)
    assert lib.names() == ["cherry", "xor"]
    direct = gl.load(os.path.join(fx, "cherrypick", "checkpoint")).policy
    assert lib.policy("cherry").action_space == direct.action_space
    pack_library(tmp_path / "enn.safetensors", lib_dir)
    packed = library(tmp_path / "enn.safetensors")
    assert packed.names() == ["cherry", "xor"]
    a, b = packed.policy("xor"), lib.policy("xor")
    for t_a, t_b in zip(a.embeds, b.embeds):
        for x, y in zip(t_a[1:], t_b[1:]):
            np.testing.assert_array_equal(x, y)
    assert packed.info("xor")["action_space"] == lib.info("xor")["action_space"]
    assert "__global__" in packed.info("xor")["obs_space"]["entities"]  # xor's global action token


def test_pack_refuses_what_is_not_a_folder_of_agents(tmp_path, agents_dir, archive):
    empty = tmp_path / "empty"
    empty.mkdir()
    for src, match in [
        (archive, "is a file; expected a folder of agent checkpoints"),
        (agents_dir / "easy.safetensors", "is a file; expected a folder"),
        (tmp_path / "nowhere", "is no such folder"),
        (empty, "holds no agent checkpoints"),
    ]:
        with pytest.raises(CheckpointError, match=match):
            pack_library(tmp_path / "out.safetensors", src)
    with pytest.raises(CheckpointError, match="no agents given"):
        pack_library(tmp_path / "out.safetensors", {})
    (tmp_path / "metrics.csv").write_text("a,b\n1,2\n")
    with pytest.raises(CheckpointError, match="agent 'b': .*metrics.csv: not an agent checkpoint"):
        pack_library(tmp_path / "out.safetensors", {"b": tmp_path / "metrics.csv"})
    assert not (tmp_path / "out.safetensors").exists()
