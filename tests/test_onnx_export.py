"""ONNX export (issue 13, items 1-2): onnxruntime's outputs equal the numpy runtime's on the same observations.

Checkpoints: every bundled game (untrained networks built from the game's spaces: random weights are
as good as trained ones for parity), variants exercising full blocks with every relative-position
value gate and the rogue-net layout, a global decision, and the enn-trainer fixtures. Observations
are random: entity counts per type drawn by Hypothesis (0 and 1 included), raw features with
positions beyond the relative-position extent, random actors, candidates and masks.

References: probabilities and logits from :meth:`NumpyPolicy.logits_one` (``gl.load``'s path) and
from :meth:`NumpyPolicy.forward` on the packed observation (the batch path, which also gives the value).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gymloop as gl
from gymloop.errors import CheckpointError, ExportError, GymloopError
from gymloop.nn.config import NetConfig, RelposConfig
from gymloop.nn.heads import POINTER, SUMMARY, head_of
from gymloop.nn.inputs import add_choices, add_select, pack_entities
from gymloop.nn.numpy_policy import OBS_SUMMARY, NumpyPolicy
from gymloop.nn.single import SummaryCandidates

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from gymloop.export import FORMAT, onnx_io, policy_to_onnx, to_onnx  # noqa: E402

# one pytest-xdist worker runs this module (its module-scoped fixture is set up once)
pytestmark = pytest.mark.xdist_group("onnx")

ENN = Path(__file__).parent / "fixtures" / "enn"
TOL = 1e-5


# ---------------------------------------------------------------------- checkpoints
def _games() -> dict:
    from support.train_games import global_and_actor, rovers, triage, triage_masked

    from gymloop.games.duel import duel
    from gymloop.games.snake import snake
    from gymloop.games.tactics import tactics

    return {
        "snake": (snake, {}, 1),
        "duel": (duel, {}, 2),
        "tactics": (tactics, {}, 1),
        "global_and_actor": (global_and_actor, {"n_layer": 2}, 1),
        # full blocks with relative positions, each value gate; the rogue-net layout (mean summary)
        "snake_gelu_2layers": (snake, {"n_layer": 2, "relpos": RelposConfig(value_gate="gelu")}, 1),
        "snake_sigmoid_nohead4": (snake, {"n_layer": 3, "n_head": 4, "relpos": RelposConfig(value_gate="sigmoid")}, 1),
        "duel_full_linear": (duel, {"n_layer": 2, "readout": False, "relpos": RelposConfig(value_gate="linear")}, 2),
        "snake_full_nogate": (snake, {"n_layer": 2, "readout": False, "relpos": RelposConfig(value_gate=None)}, 1),
        "snake_norelpos": (snake, {"n_layer": 2, "relpos": None}, 1),
        "tactics_full": (tactics, {"n_layer": 2, "readout": False}, 1),
        # the readout's summary by attention alone (checkpoints written before net.summary_mean)
        "global_attention_summary": (global_and_actor, {"n_layer": 2, "summary_mean": False}, 1),
        # net.frame="auto": the rocks in the rover's heading frame (readout, and full blocks)
        "rovers": (rovers, {}, 1),
        "rovers_full": (rovers, {"n_layer": 2, "readout": False}, 1),
        # a global select-entity: the summary's query against the candidates' keys (no actors input; beside an
        # actor-bound type; the mean summary of full blocks)
        "triage": (triage, {"n_layer": 2}, 1),
        "triage_masked": (triage_masked, {}, 1),
        "triage_masked_full": (triage_masked, {"n_layer": 2, "readout": False}, 1),
    }


GAME_CASES = list(_games())
ENN_CASES = ["xor", "multisnake", "cherrypick"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


_built: dict[str, tuple] = {}


def _case(name: str, workdir: Path) -> tuple[NumpyPolicy, object, str]:
    """``(policy, onnxruntime session, checkpoint path)`` of a case (built once per module)."""
    if name not in _built:
        if name in ENN_CASES:
            src = str(ENN / name / "checkpoint")
        else:
            from gymloop.neural import random_checkpoint

            game, net, agents = _games()[name]
            src = str(workdir / f"{name}.safetensors")
            random_checkpoint(src, game, seed=len(name), agents_per_game=agents, **net)
            _shake(src, seed=len(name))
        out = workdir / f"{name}.onnx"
        to_onnx(src, out)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        _built[name] = (gl.load(src).policy, ort.InferenceSession(str(out), so), src)
    return _built[name]


def _shake(path: str, seed: int) -> None:
    """Replace a fresh network's weights by larger random ones (init leaves relative positions,
    biases and LayerNorms near zero or one, where a wrong sign or index could hide)."""
    from gymloop.checkpoint import read_agent, write_agent

    rng = np.random.default_rng(seed)
    af = read_agent(path)
    out = {}
    for k, t in af.tensors.items():
        t = np.array(t)
        if k.startswith("norms.") or k.endswith(("strides", "extent_t")):
            out[k] = t
        elif ".count_norm." in k:  # the summary's entity count (net.summary_count): mean 3, deviation 2 over 10 samples
            out[k] = {"count": np.array(10.0), "mean": np.array([3.0]), "squares_sum": np.array([36.0])}[k.rsplit(".", 1)[1]].astype(t.dtype)
        elif k.endswith(("ln1.weight", "ln2.weight", ".2.weight")) and t.ndim == 1:
            out[k] = (1 + 0.3 * rng.normal(size=t.shape)).astype(t.dtype)
        else:
            out[k] = (rng.normal(size=t.shape) * (0.5 if t.ndim == 1 else 1.0 / np.sqrt(t.shape[-1]))).astype(t.dtype)
    write_agent(path, out, {k: v for k, v in af.info.items() if k not in ("format_version", "checksum")})


# ---------------------------------------------------------------------- random observations
def _observation(policy: NumpyPolicy, counts: list[int], seed: int) -> dict:
    """A random observation for ``policy``: per-type raw features, globals, actors, masks, candidates."""
    rng = np.random.default_rng(seed)
    names = policy.entity_names
    pos_cols = policy.position_idx or {}
    feats = {}
    for n, c in zip(names, counts):
        nf = len(policy.entity_features[n])
        x = (rng.normal(size=(c, nf)) * 3).astype(np.float32)
        for col in pos_cols.get(n, []):
            x[:, col] = rng.integers(-14, 15, size=c)  # beyond the extent (10) too: clamped offsets
        feats[n] = x
    L = sum(counts)
    starts = np.cumsum([0] + counts[:-1])
    g = (rng.normal(size=len(policy.global_features)) * 2).astype(np.float32)
    n_act = int(rng.integers(1, min(L, 4) + 1))
    actors = np.sort(rng.choice(L, size=n_act, replace=False)).astype(np.int64)
    masks, cands = {}, {}
    for name, a in policy.action_space.items():
        if a.kind.selects_entities:
            among = [t for t in names if a.among_any or not a.among or t in a.among]
            rows = [r for t in among for r in range(starts[names.index(t)], starts[names.index(t)] + counts[names.index(t)])]
            cands[name] = np.array(rows, dtype=np.int64)
            m = rng.random((n_act if a.kind.actor_bound else 1, len(rows))) < 0.6
        else:
            m = rng.random((n_act if a.kind.actor_bound else 1, a.n)) < 0.6
        if m.shape[1]:
            m[np.arange(m.shape[0]), rng.integers(0, m.shape[1], size=m.shape[0])] = True  # at least one legal choice
        masks[name] = m
    return {"feats": feats, "globals": g, "actors": actors, "masks": masks, "cands": cands, "counts": counts}


def _feeds(io: dict, ob: dict) -> dict:
    f = {e["input"]: ob["feats"][e["name"]] for e in io["entities"]}
    if io["globals"]["input"]:
        f["globals"] = ob["globals"]
    if io["actors"]:
        f["actors"] = ob["actors"]
    for a in io["actions"]:
        f[a["mask"]] = ob["masks"][a["name"]]
        if a["candidates"]:
            f[a["candidates"]] = ob["cands"][a["name"]]
    return f


def _softmax(lg: np.ndarray) -> np.ndarray:
    m = lg.max(-1, keepdims=True)
    e = np.exp(lg - m)
    return e / e.sum(-1, keepdims=True)


def _reference_one(policy: NumpyPolicy, ob: dict) -> dict[str, np.ndarray]:
    """Logits of every action type from ``logits_one`` (what ``gl.load``'s agents compute)."""
    parts = []
    for t, n in enumerate(policy.entity_names):
        if ob["counts"][t]:
            featureless = policy.embeds[t][0] == "featureless"
            parts.append((t, ob["counts"][t] if featureless else ob["feats"][n]))
    reqs = []
    for name, a in policy.action_space.items():
        cand = OBS_SUMMARY if head_of(a) == SUMMARY else ob["cands"].get(name)
        if cand is not None and not a.kind.actor_bound and a.kind.selects_entities:
            cand = SummaryCandidates(cand)
        reqs.append((name, ob["masks"][name], cand))
    g = ob["globals"] if policy.global_features else None
    return dict(zip(policy.action_space, policy.logits_one(parts, g, ob["actors"], reqs)))


def _reference_batch(policy: NumpyPolicy, ob: dict) -> tuple[dict[str, np.ndarray], float]:
    """Log-probabilities (as ``(rows, choices)``) and the value from the batch forward pass of one slot."""
    counts = np.array([ob["counts"]], dtype=np.int64)
    rows = {n: ob["feats"][n] for n in policy.entity_names}
    p = pack_entities(rows, counts, ob["globals"][None, :], policy.entity_names, policy.position_idx, policy.frame)
    rows_of = {}
    for name, a in policy.action_space.items():
        actors = ob["actors"] if a.kind.actor_bound else np.zeros(1, np.int64)  # a global kind's row is the slot
        rows_of[name] = actors.size
        if head_of(a) == POINTER:
            c = ob["cands"][name]
            k = actors.size
            add_select(p, name, actors, np.tile(c, k), np.full(k, c.size, np.int64), ob["masks"][name].ravel())
        else:
            add_choices(p, name, actors, ob["masks"][name])
    out = policy.forward(p)
    logp = {n: (v.reshape(rows_of[n], -1) if policy.action_space[n].kind.selects_entities else v) for n, v in out.logp.items()}
    assert out.value is not None
    return logp, float(out.value[0])


def _check(name: str, workdir: Path, counts: list[int], seed: int) -> None:
    policy, sess, _ = _case(name, workdir)
    io = json.loads(sess.get_modelmeta().custom_metadata_map["gymloop.io"])
    counts = list(counts)
    if sum(counts) == 0:
        counts[0] = 1
    for a in policy.action_space.values():  # a select-entity action needs a candidate (gl.load refuses none)
        if a.kind.selects_entities:
            among = [t for t, n in enumerate(policy.entity_names) if a.among_any or not a.among or n in a.among]
            if not sum(counts[t] for t in among):
                counts[among[0]] = 1
    ob = _observation(policy, counts, seed)
    res = dict(zip(io["outputs"], sess.run(io["outputs"], _feeds(io, ob))))
    ref = _reference_one(policy, ob)
    logp, value = _reference_batch(policy, ob)
    for a in io["actions"]:
        n = a["name"]
        lg, pr = res[a["logits"]], res[a["probs"]]
        assert lg.shape == ref[n].shape == pr.shape, (n, lg.shape, ref[n].shape)
        assert np.array_equal(np.isinf(lg), ~ob["masks"][n]), f"{name}: masked logits of {n} are not exactly the masked choices"
        legal = ob["masks"][n]
        np.testing.assert_allclose(lg[legal], ref[n][legal], atol=1e-4, rtol=1e-5, err_msg=f"{name}: logits of {n}")
        np.testing.assert_allclose(pr, _softmax(ref[n]), atol=TOL, err_msg=f"{name}: probs of {n} vs logits_one")
        np.testing.assert_allclose(pr, np.exp(logp[n]), atol=TOL, err_msg=f"{name}: probs of {n} vs forward")
        np.testing.assert_allclose(pr.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(res["value"], [value], atol=1e-4, rtol=1e-5, err_msg=f"{name}: value")


# ---------------------------------------------------------------------- parity
_counts = st.lists(st.integers(0, 5), min_size=8, max_size=8)


@pytest.mark.parametrize("name", GAME_CASES + ENN_CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=_counts, seed=st.integers(0, 2**32 - 1))
def test_parity_with_numpy_runtime(name: str, workdir: Path, counts: list[int], seed: int) -> None:
    policy = _case(name, workdir)[0]
    _check(name, workdir, counts[: len(policy.entity_names)], seed)


@pytest.mark.parametrize("name", ["snake", "tactics", "multisnake", "cherrypick", "xor", "global_and_actor", "rovers", "triage_masked"])
def test_parity_one_entity_and_empty_types(name: str, workdir: Path) -> None:
    """Exactly one entity in all (the rest of the types empty), for each type in turn."""
    policy = _case(name, workdir)[0]
    T = len(policy.entity_names)
    for t in range(T):
        counts = [0] * T
        counts[t] = 1
        if any(a.kind.selects_entities for a in policy.action_space.values()):
            counts = [1] * T  # a select-entity action needs a candidate: one entity of every type
            counts[t] = 0 if T > 1 else 1
        _check(name, workdir, counts, seed=t)


def test_parity_of_a_played_observation(workdir: Path) -> None:
    """A real snake observation through gl.load's agent and through the model: the same probabilities."""
    from gymloop.games.snake import Body, Food, Head, Move

    policy, sess, src = _case("snake", workdir)
    agent = gl.load(src)
    head, body, food = Head(x=3, y=4), [Body(x=3, y=3), Body(x=3, y=2)], Food(x=7, y=1)
    obs = gl.Obs().actor(head, masks={Move: [Move.UP, Move.LEFT, Move.RIGHT]}).entities(body).entities([food])
    parts, g, rows, reqs, _ = agent.encoder.prepare_one(obs, (Move,))
    (lg,) = policy.logits_one(parts, g, rows, reqs)
    feeds = {"entities.Head": np.array([[3, 4]], np.float32), "entities.Body": np.array([[3, 3], [3, 2]], np.float32),
             "entities.Food": np.array([[7, 1]], np.float32), "actors": np.array([3]),
             "mask.Move": np.array([[m in (Move.UP, Move.LEFT, Move.RIGHT) for m in Move]])}
    assert policy.entity_names == ["Body", "Food", "Head"]  # the concatenation: Body rows 0-1, Food 2, Head 3
    (probs,) = sess.run(["probs.Move"], feeds)
    np.testing.assert_allclose(probs, _softmax(lg), atol=TOL)
    assert probs[0, list(Move).index(Move.DOWN)] == 0.0


# ---------------------------------------------------------------------- the model's contract
def test_metadata_describes_inputs_and_outputs(workdir: Path) -> None:
    policy, sess, src = _case("tactics", workdir)
    meta = sess.get_modelmeta().custom_metadata_map
    io = json.loads(meta["gymloop.io"])
    assert meta["gymloop.format"] == FORMAT == io["format"]
    assert meta["gymloop.version"] == gl.__version__
    assert meta["gymloop.source"] == os.path.basename(src)
    assert json.loads(meta["gymloop.obs_space"])["entities"] == {n: list(f) for n, f in policy.entity_features.items()}
    acts = json.loads(meta["gymloop.action_space"])
    assert {n: a["kind"] for n, a in acts.items()} == {n: a.kind.tag for n, a in policy.action_space.items()}
    assert io == onnx_io(policy)
    assert [i.name for i in sess.get_inputs()] == io["inputs"]
    assert [o.name for o in sess.get_outputs()] == io["outputs"]
    kinds = {a["name"]: (a["kind"], a["candidates"], a["mask_rows"]) for a in io["actions"]}
    assert kinds["Target"] == ("select_entity", "candidates.Target", "actors")
    order = [a for a in io["actions"] if a["kind"] == "categorical" and len(a["labels"]) > 5]
    assert order, "tactics' composite Order has the product of its fields as labels"
    shapes = {i.name: i.shape for i in sess.get_inputs()}
    assert shapes["entities.Unit"][0] == "n_Unit" and shapes["actors"] == ["n_actors"]


def test_global_decision_has_one_mask_row(workdir: Path) -> None:
    _, sess, _ = _case("global_and_actor", workdir)
    io = json.loads(sess.get_modelmeta().custom_metadata_map["gymloop.io"])
    guess = next(a for a in io["actions"] if a["name"] == "Guess")
    assert guess["kind"] == "global_categorical" and guess["mask_rows"] == 1
    shapes = {i.name: i.shape for i in sess.get_inputs()}
    assert shapes["mask.Guess"] == [1, 3]


def test_global_select_entity_has_one_mask_row_and_candidates(workdir: Path) -> None:
    """A global select-entity (issue 34 item 6): one mask row, a candidates input, no actors input when
    no action type is actor-bound; a played observation gives gl.load's probabilities."""
    from support.train_games import Patient, Treat

    policy, sess, src = _case("triage", workdir)
    io = json.loads(sess.get_modelmeta().custom_metadata_map["gymloop.io"])
    (treat,) = io["actions"]
    assert (treat["kind"], treat["mask_rows"], treat["candidates"]) == ("global_select_entity", 1, "candidates.Treat")
    assert io["actors"] is None and "actors" not in io["inputs"]
    shapes = {i.name: i.shape for i in sess.get_inputs()}
    assert shapes["mask.Treat"] == [1, "n_candidates_Treat"] and shapes["candidates.Treat"] == ["n_candidates_Treat"]
    agent = gl.load(src)
    ps = [Patient(0.2, True), Patient(0.9, True), Patient(0.5, False)]
    obs = gl.Obs().entities(ps).mask(Treat, ps[:2])
    (lg,) = agent.logits(obs, Treat)
    feeds = {"entities.Patient": np.array([[0.2, 1], [0.9, 1], [0.5, 0]], np.float32), "mask.Treat": np.array([[True, True, False]]),
             "candidates.Treat": np.arange(3)}
    (probs,) = sess.run(["probs.Treat"], feeds)
    assert lg.shape == probs.shape == (1, 3) and probs[0, 2] == 0.0
    np.testing.assert_allclose(probs, _softmax(lg), atol=TOL)


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_no_torch_needed_and_deterministic(workdir: Path) -> None:
    """Exporting needs no torch (a fresh interpreter exports without importing it), and exporting
    twice gives the same bytes (no timestamps, no randomness)."""
    src = _case("snake", workdir)[2]
    a, b = workdir / "a.onnx", workdir / "b.onnx"
    code = ("import sys; from gymloop.export import to_onnx; to_onnx(sys.argv[1], sys.argv[2]); "
            "assert 'torch' not in sys.modules, 'the export imported torch'")
    subprocess.run([sys.executable, "-c", code, str(src), str(a)], check=True, timeout=120)
    to_onnx(src, b)
    assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------------- bad input
def test_not_an_agent_is_a_checkpoint_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.safetensors"
    bad.write_text("these are my notes, not an agent")
    with pytest.raises(CheckpointError, match="notes.safetensors"):
        to_onnx(bad, tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


def test_missing_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="nowhere.safetensors"):
        to_onnx(tmp_path / "nowhere.safetensors", tmp_path / "out.onnx")


def test_corrupt_file_is_a_checkpoint_error(workdir: Path, tmp_path: Path) -> None:
    src = Path(_case("snake", workdir)[2])
    data = bytearray(src.read_bytes())
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CheckpointError, match="cut.safetensors"):
        to_onnx(cut, tmp_path / "out.onnx")
    data[-8:] = b"\xff" * 8  # flipped weight bytes: the checksum no longer matches
    flipped = tmp_path / "flipped.safetensors"
    flipped.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="flipped.safetensors"):
        to_onnx(flipped, tmp_path / "out.onnx")


def test_unknown_network_part_is_refused(workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A network field this exporter does not know (and set away from its default) is named, not ignored."""
    src = _case("snake", workdir)[2]
    orig = NetConfig.to_dict
    monkeypatch.setattr(NetConfig, "to_dict", lambda self: {**orig(self), "final_norm": True})
    with pytest.raises(ExportError, match=r"snake\.safetensors.*net\.final_norm=True"):
        to_onnx(src, tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()
    monkeypatch.setattr(NetConfig, "to_dict", lambda self: {**orig(self), "final_norm": None})  # at its default: fine
    to_onnx(src, tmp_path / "out.onnx")


def test_unknown_value_gate_is_refused(workdir: Path) -> None:
    src = _case("snake", workdir)[2]
    policy = NumpyPolicy.from_file(src)
    assert policy.relpos is not None
    policy.relpos.gate_kind = "swish"
    with pytest.raises(ExportError, match=r"snake\.safetensors.*value gate 'swish'"):
        policy_to_onnx(policy)


def test_export_error_is_a_gymloop_error() -> None:
    assert issubclass(ExportError, GymloopError)


# ---------------------------------------------------------------------- the CLI
def test_cli_export(workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gymloop.cli import main

    src = _case("snake", workdir)[2]
    out = tmp_path / "snake.onnx"
    assert main(["export", src, "--onnx", str(out)]) == 0
    said = capsys.readouterr().out
    assert str(out) in said and "entities.Head" in said
    sess = ort.InferenceSession(str(out))
    assert "probs.Move" in [o.name for o in sess.get_outputs()]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 5)
    assert main(["export", str(bad), "--onnx", str(tmp_path / "x.onnx")]) == 2
    assert "bad.safetensors" in capsys.readouterr().err


@pytest.mark.slow
def test_speed_benchmark_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/onnx_speed.py --quick``: checks parity on played observations, then prints the table."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "onnx_speed.py"
    monkeypatch.syspath_prepend(str(path.parent))  # the script imports benchmarks/results.py, as when run from there
    spec = importlib.util.spec_from_file_location("onnx_speed", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| snake |" in out and "| tactics |" in out
