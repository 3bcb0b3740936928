"""Numpy inference equals the torch policy: parity on random inputs, the checkpoint path, erf/GELU.

Every case writes a random torch policy to a checkpoint and reads it back with
:class:`~gymloop.nn.numpy_policy.NumpyPolicy` (the path a trained agent takes), then compares both
forward passes on batches Hypothesis generates (random entity counts per type and slot, slots with
no entity or no actor, several actors per slot, masks).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from support.policies import random_policy, synthetic_batch, write_policy

import gymloop as gl  # noqa: E402
from gymloop.checkpoint import read_agent, read_safetensors, write_agent, write_safetensors  # noqa: E402
from gymloop.nn.config import NetConfig, RelposConfig  # noqa: E402
from gymloop.nn.numpy_policy import NumpyPolicy, erf, expected_shapes, gelu, segment_argmax  # noqa: E402
from gymloop.nn.torch_policy import Policy, policy_info, policy_tensors  # noqa: E402
from gymloop.spaces import ActionDesc, ObsSpace  # noqa: E402

# ---------------------------------------------------------------------- spaces and configurations
ACTS = {
    "Move": ActionDesc("Move", "categorical", ("UP", "DOWN", "LEFT")),
    "Steer": ActionDesc("Steer", "categorical", tuple(f"dir={d},thrust={t}" for d in ("L", "R") for t in ("OFF", "HALF", "FULL"))),
    "Target": ActionDesc("Target", "select_entity", (), ("Ally", "Enemy")),
    "Mode": ActionDesc("Mode", "global_categorical", ("CALM", "ALERT", "FLEE")),  # from the observation summary
    # the summary's query against the candidates' keys (a global select-entity: no actor entity)
    "Treat": ActionDesc("Treat", "global_select_entity", (), ("Enemy",)),
}
# entity types with position features x/y (relpos possible), one with extra features, globals
POSITIONAL = ObsSpace(
    entities={"Ally": ("x", "y", "hp"), "Enemy": ("y", "x", "kind.is_A", "kind.is_B"), "Wall": ("x", "y")},
    globals=("turn", "left"),
)
# one entity type with a heading: the egocentric frame (net.frame="auto") puts the others in its frame
HEADED = ObsSpace(
    entities={"Ally": ("x", "y", "heading", "hp"), "Enemy": ("y", "x", "kind.is_A", "kind.is_B"), "Wall": ("x", "y")},
    globals=("turn",),
)
# a featureless entity type (no relpos, no globals)
FEATURELESS = ObsSpace(entities={"Ally": ("x", "y", "hp"), "Enemy": ("hp",), "Token": ()})

CASES = [
    ("positional", NetConfig()),  # the defaults: readout, one layer, relpos auto (relu gate)
    ("positional", NetConfig(readout=False)),
    ("positional", NetConfig(n_layer=2, relpos=RelposConfig(value_gate="gelu", extent=[3, 4]))),
    ("positional", NetConfig(n_layer=3, d_model=24, n_head=3, relpos=RelposConfig(value_gate="sigmoid"))),
    ("positional", NetConfig(n_layer=2, readout=False, relpos=RelposConfig(value_gate=None))),
    ("positional", NetConfig(n_layer=2, relpos=RelposConfig(value_gate=None, extent=[2, 2]))),
    ("positional", NetConfig(n_layer=3, readout=False, relpos=RelposConfig(value_gate="linear"))),
    ("positional", NetConfig(n_layer=2, relpos=None, mlp_ratio=3, d_qk=8)),
    ("positional", NetConfig(n_layer=0, readout=False, relpos=None)),
    ("featureless", NetConfig(relpos=None)),
    ("featureless", NetConfig(relpos=None, readout=False, n_layer=2)),
    ("featureless", NetConfig(relpos=None, n_layer=3)),
    ("headed", NetConfig()),  # frame and relpos (relpos on the raw positions)
    ("headed", NetConfig(relpos=None, readout=False, n_layer=2)),
]
SPACES = {"positional": POSITIONAL, "featureless": FEATURELESS, "headed": HEADED}

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


_cache: dict[int, tuple[Policy, NumpyPolicy]] = {}
_tmp = tempfile.TemporaryDirectory()


def policies(i: int) -> tuple[Policy, NumpyPolicy]:
    """Case ``i``'s torch policy and the numpy policy read back from its checkpoint (cached)."""
    if i not in _cache:
        space, cfg = CASES[i]
        pol = random_policy(SPACES[space], ACTS, cfg, seed=i)
        path = os.path.join(_tmp.name, f"case{i}.safetensors")
        write_policy(path, pol)
        _cache[i] = (pol, NumpyPolicy.from_file(path))
    return _cache[i]


@st.composite
def batch_specs(draw):
    """(case index, slots, per-type counts, per-action actor lists, seed for values and masks)."""
    i = draw(st.integers(0, len(CASES) - 1))
    obs = SPACES[CASES[i][0]]
    S = draw(st.integers(1, 5))
    counts = {n: draw(st.lists(st.integers(0, 4), min_size=S, max_size=S)) for n in obs.entities}
    total = [sum(counts[n][s] for n in obs.entities) for s in range(S)]
    actors = {
        a: [sorted(draw(st.sets(st.integers(0, max(0, total[s] - 1)), max_size=min(3, total[s])))) for s in range(S)]
        for a in ACTS
    }
    return i, S, counts, actors, draw(st.integers(0, 2**32 - 1))


def torch_out(pol: Policy, p, greedy: bool = True):
    with torch.no_grad():
        return pol(p, greedy=greedy)


def assert_parity(out, nout, acts=ACTS) -> None:
    v, nv = out.value.numpy(), nout.value
    assert nv.dtype == np.float32 and nv.shape == v.shape
    np.testing.assert_allclose(nv, v, rtol=0, atol=1e-5)
    for name in acts:
        lp, nlp = out.logits[name].numpy(), nout.logp[name]
        assert nlp.shape == lp.shape, name
        assert np.array_equal(np.isneginf(nlp), np.isneginf(lp)), f"{name}: masked choices differ"
        fin = np.isfinite(lp)
        assert np.isfinite(nlp[fin]).all()
        np.testing.assert_allclose(nlp[fin], lp[fin], rtol=0, atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.exp(nlp), np.exp(lp), rtol=0, atol=1e-5, err_msg=name)


# ---------------------------------------------------------------------- parity
@pytest.mark.slow  # 300 drawn batches: ~2.5 s (the fast tier keeps the large-batch parity test below)
@settings(max_examples=300)
@given(batch_specs())
def test_numpy_forward_equals_torch(spec):
    i, S, counts, actors, seed = spec
    pol, npol = policies(i)
    obs = SPACES[CASES[i][0]]
    b = synthetic_batch(np.random.default_rng(seed), obs, ACTS, S, counts, actors)
    p = npol.pack(b)
    out = torch_out(pol, pol.pack(b))
    nout = npol.forward(p)
    assert_parity(out, nout)
    # greedy choices agree (up to exact ties, where both pick the first maximum of equal values)
    acts, _ = npol.sample(p, greedy=True)
    for name, a in ACTS.items():
        mine, theirs = acts[name], out.actions[name].numpy()
        assert mine.shape == theirs.shape
        lp = out.logits[name].numpy()
        if not a.kind.selects_entities:
            best = lp.max(-1) if lp.shape[0] else lp[:, 0]
            chosen = lp[np.arange(len(mine)), mine]
        else:
            nc = p.n_cand[name]
            starts = np.cumsum(nc) - nc
            best = np.maximum.reduceat(lp, starts) if nc.size else lp[:0]
            chosen = lp[starts + mine]
        np.testing.assert_allclose(np.exp(chosen), np.exp(best), atol=1e-5)


def test_parity_on_a_large_batch_uses_the_vectorized_erf():
    pol, npol = policies(1)  # readout=False: every entity goes through the MLP
    b = synthetic_batch(np.random.default_rng(7), POSITIONAL, ACTS, 64)
    assert_parity(torch_out(pol, pol.pack(b)), npol.forward(npol.pack(b)))


# three cases in the fast tier (readout with relpos; blocks with gated relpos; the frame), every case in the slow one
@pytest.mark.parametrize("i", [i if i in (0, 2, 12) else pytest.param(i, marks=pytest.mark.slow) for i in range(len(CASES))])
def test_attention_as_matrix_products_equals_the_broadcast_path(i, monkeypatch):
    """Large batches take the matrix-product path of the attention (``BROADCAST_MAX``); its outputs
    and gradients are the broadcast path's (parity with numpy above runs the broadcast path)."""
    import gymloop.nn.torch_policy as tp

    pol, _ = policies(i)
    p = pol.pack(synthetic_batch(np.random.default_rng(i), SPACES[CASES[i][0]], ACTS, 24))

    def run():
        pol.zero_grad(set_to_none=True)
        out = pol(p, greedy=True)
        loss = out.value.square().sum() + sum(torch.nan_to_num(v, neginf=0.0).square().sum() for v in out.logits.values())
        loss.backward()
        return out, {n: q.grad.clone() for n, q in pol.named_parameters() if q.grad is not None}

    out, grads = run()
    monkeypatch.setattr(tp, "BROADCAST_MAX", 0)
    out_mm, grads_mm = run()
    torch.testing.assert_close(out_mm.value, out.value, rtol=0, atol=1e-5)
    for name in ACTS:
        torch.testing.assert_close(out_mm.logits[name], out.logits[name], rtol=0, atol=1e-4)
    assert grads.keys() == grads_mm.keys() and grads
    scale = max(float(g.abs().max()) for g in grads.values())  # (some gradients are exactly 0 in theory, e.g. key biases)
    for n in grads:
        torch.testing.assert_close(grads_mm[n], grads[n], rtol=0, atol=1e-5 * scale, msg=n)

# the cases with a readout and relative positions: the defaults and the ungated values in the fast tier
@pytest.mark.parametrize("i", [i if i in (0, 5) else pytest.param(i, marks=pytest.mark.slow) for i in (0, 2, 3, 5, 12)])
def test_the_readouts_two_ways_to_relative_position_keys_agree(i, monkeypatch):
    """The readout gathers each query's relative-position keys or takes products with all of them and
    picks (``RELPOS_GATHER_RATIO``): the same outputs and gradients either way."""
    import gymloop.nn.torch_policy as tp

    pol, _ = policies(i)
    p = pol.pack(synthetic_batch(np.random.default_rng(i), SPACES[CASES[i][0]], ACTS, 24))

    def run(ratio):
        monkeypatch.setattr(tp, "RELPOS_GATHER_RATIO", ratio)
        pol.zero_grad(set_to_none=True)
        out = pol(p, greedy=True)
        loss = out.value.square().sum() + sum(torch.nan_to_num(v, neginf=0.0).square().sum() for v in out.logits.values())
        loss.backward()
        return out, {n: q.grad.clone() for n, q in pol.named_parameters() if q.grad is not None}

    out, grads = run(10**9)  # (L * ratio >= P: the products with every key)
    out_g, grads_g = run(0)  # (never: each query's keys gathered)
    torch.testing.assert_close(out_g.value, out.value, rtol=0, atol=1e-5)
    for name in ACTS:
        torch.testing.assert_close(out_g.logits[name], out.logits[name], rtol=0, atol=1e-4)
    assert grads.keys() == grads_g.keys() and grads
    scale = max(float(g.abs().max()) for g in grads.values())
    for n in grads:
        torch.testing.assert_close(grads_g[n], grads[n], rtol=0, atol=1e-5 * scale, msg=n)


def test_every_case_runs_and_slots_without_entities_have_a_value():
    for i in range(len(CASES)):
        pol, npol = policies(i)
        obs = SPACES[CASES[i][0]]
        counts = {n: [0, 2, 0] for n in obs.entities}
        actors = {a: [[], [0, 3], []] for a in ACTS}
        b = synthetic_batch(np.random.default_rng(i), obs, ACTS, 3, counts, actors)
        nout = npol.forward(npol.pack(b))
        assert_parity(torch_out(pol, pol.pack(b)), nout)
        assert np.isfinite(nout.value).all()


def test_norm_stats_follow_input_norm():
    pol, npol = policies(0)
    for t, name in enumerate(npol.entity_names):
        mean, sd = pol.norms[name].stats()
        e = npol.embeds[t]
        assert e[0] == "embed"
        np.testing.assert_array_equal(e[1], mean.numpy())
        np.testing.assert_array_equal(e[2], sd.numpy())


def test_identity_norm_before_two_samples(tmp_path):
    pol = Policy(POSITIONAL, ACTS, NetConfig())  # count 0: mean 0, sd 1
    path = tmp_path / "fresh.safetensors"
    write_policy(path, pol)
    npol = NumpyPolicy.from_file(path)
    b = synthetic_batch(np.random.default_rng(0), POSITIONAL, ACTS, 4)
    assert_parity(torch_out(pol, pol.pack(b)), npol.forward(npol.pack(b)))


def test_expected_shapes_are_the_state_dict_shapes():
    for space, cfg in CASES:
        pol = Policy(SPACES[space], ACTS, cfg)
        info = policy_info(pol)
        assert expected_shapes(info) == {k: tuple(v.shape) for k, v in pol.state_dict().items()}


@pytest.mark.slow  # 2-5 s: out of the fast tier, which must stay under a minute
def test_sampling_is_seeded_and_follows_the_probabilities():
    _, npol = policies(0)
    b = synthetic_batch(np.random.default_rng(3), POSITIONAL, ACTS, 1, {"Ally": [2], "Enemy": [3], "Wall": [1]}, {a: [[0]] for a in ACTS})
    p = npol.pack(b)
    a1, _ = npol.sample(p, np.random.default_rng(5))
    a2, _ = npol.sample(p, np.random.default_rng(5))
    assert all(np.array_equal(a1[k], a2[k]) for k in a1)
    n = 3000
    rng = np.random.default_rng(0)
    draws = np.array([npol.sample(p, rng)[0]["Move"][0] for _ in range(n)])
    probs = np.exp(npol.forward(p).logp["Move"][0])
    freq = np.bincount(draws, minlength=3) / n
    np.testing.assert_allclose(freq, probs, atol=0.03)
    assert probs[~p.masks["Move"][0]].sum() == 0 and freq[~p.masks["Move"][0]].sum() == 0


def test_segment_argmax_takes_the_first_maximum_of_each_segment():
    score = np.array([1.0, 3.0, 3.0, -np.inf, 0.5, 2.0, 2.0, 7.0], dtype=np.float32)
    nc = np.array([3, 2, 1, 2])
    assert segment_argmax(score, nc).tolist() == [1, 1, 0, 1]


# ---------------------------------------------------------------------- erf and GELU
def test_erf_matches_math_erf_in_both_paths():
    small = np.linspace(-7, 7, 301)
    large = np.concatenate([np.linspace(-9, 9, 200_001), [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0]])
    for x in (small, large):
        ref = np.array([math.erf(v) for v in x])
        assert np.abs(erf(x) - ref).max() < 2e-10
    assert erf(np.array([np.inf, -np.inf])).tolist() == [1.0, -1.0]


def test_erf32_matches_math_erf_within_float32_rounding():
    from gymloop.nn.numpy_ops import erf32

    x = np.concatenate([np.linspace(-12, 12, 200_001), [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0]]).astype(np.float32)
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    out = erf32(x)
    assert out.dtype == np.float32 and np.abs(out - ref).max() < 6e-7
    assert erf32(np.array([np.inf, -np.inf], dtype=np.float32)).tolist() == [1.0, -1.0]
    assert np.isnan(erf32(np.array([np.nan], dtype=np.float32))).all()


def test_gelu_matches_torch_in_both_paths():
    for n in (64, 10_000):
        x = (np.random.default_rng(n).normal(size=n) * 4).astype(np.float32)
        ref = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(gelu(x.copy()), ref, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------- bad checkpoints
@pytest.fixture()
def good(tmp_path):
    pol, _ = policies(0)
    path = tmp_path / "good.safetensors"
    write_policy(path, pol)
    return path, pol


def test_truncated_file(good, tmp_path):
    path, _ = good
    data = path.read_bytes()
    for cut in (4, 200, len(data) - 100):
        bad = tmp_path / f"cut{cut}.safetensors"
        bad.write_bytes(data[:cut])
        with pytest.raises(gl.CheckpointError, match="truncated|does not fit|outside the file"):
            NumpyPolicy.from_file(bad)


def test_corrupt_header_and_garbage(tmp_path):
    bad = tmp_path / "garbage.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!" + b"\x00" * 64)
    with pytest.raises(gl.CheckpointError, match="not valid JSON"):
        NumpyPolicy.from_file(bad)
    with pytest.raises(gl.CheckpointError, match="cannot read checkpoint"):
        NumpyPolicy.from_file(tmp_path / "missing.safetensors")


def test_foreign_safetensors_file(tmp_path):
    path = tmp_path / "foreign.safetensors"
    write_safetensors(path, {"w": np.zeros((2, 2), np.float32)}, {"format": "pt"})
    with pytest.raises(gl.CheckpointError, match="not a gymloop agent"):
        NumpyPolicy.from_file(path)


def test_unknown_format_version(good, tmp_path):
    path, _ = good
    tensors, meta = read_safetensors(path)
    import json

    doc = json.loads(meta["gymloop"])
    doc["format_version"] = 99
    bad = tmp_path / "v99.safetensors"
    write_safetensors(bad, {k: np.array(v) for k, v in tensors.items()}, {"gymloop": json.dumps(doc)})
    with pytest.raises(gl.CheckpointError, match="unknown checkpoint format version 99"):
        NumpyPolicy.from_file(bad)


def test_metadata_disagreeing_with_weight_shapes(good, tmp_path):
    path, pol = good
    info = policy_info(pol, step=0)
    tensors = policy_tensors(pol)
    cases = [
        ("d_model", dict(info, net=dict(info["net"], d_model=64)), tensors, "has shape .* metadata implies"),
        ("feature", dict(info, obs_space={**info["obs_space"], "entities": {**info["obs_space"]["entities"], "Wall": ["x", "y", "z"]}}), tensors, r"'norms.Wall.mean' has shape \(4,\) but the metadata implies \(5,\)"),
        ("label", dict(info, action_space={**info["action_space"], "Move": {"kind": "categorical", "labels": ["A", "B"], "among": []}}), tensors, r"'heads.Move.weight' has shape \(3, 32\)"),
        ("missing", info, {k: v for k, v in tensors.items() if k != "value_head.bias"}, r"missing \['value_head.bias'\]"),
        ("unexpected", info, dict(tensors, extra=np.zeros(3, np.float32)), r"unexpected \['extra'\]"),
        ("n_layer", dict(info, net=dict(info["net"], n_layer=2)), tensors, "missing"),
        ("config", dict(info, net=dict(info["net"], bogus=1)), tensors, "network config is malformed"),
        ("kind", dict(info, action_space={**info["action_space"], "Move": {"kind": "weird", "labels": ["A"]}}), tensors, "unknown kind 'weird'"),
    ]
    for what, inf, ts, match in cases:
        bad = tmp_path / f"{what}.safetensors"
        write_agent(bad, ts, inf)
        with pytest.raises(gl.CheckpointError, match=match):
            NumpyPolicy.from_file(bad)
    bad = tmp_path / "nan.safetensors"
    write_agent(bad, dict(tensors, **{"value_head.bias": np.array([np.nan], np.float32)}), info)
    with pytest.raises(gl.CheckpointError, match="'value_head.bias' contains NaN"):
        NumpyPolicy.from_file(bad)
    # a relpos buffer that disagrees with the metadata's extent
    bad = tmp_path / "extent.safetensors"
    write_agent(bad, dict(tensors, **{"relpos.extent_t": np.array([3.0, 3.0], np.float32)}), info)
    with pytest.raises(gl.CheckpointError, match="relpos strides/extent"):
        NumpyPolicy.from_file(bad)


def test_checkpoint_round_trip_through_read_agent(good):
    path, pol = good
    af = read_agent(path)
    npol = NumpyPolicy(af.tensors, af.info, af.path)
    b = synthetic_batch(np.random.default_rng(1), POSITIONAL, ACTS, 3)
    assert_parity(torch_out(pol, pol.pack(b)), npol.forward(npol.pack(b)))


def test_module_does_not_import_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gymloop.nn.numpy_policy, gymloop.neural\n"
        "assert sys.modules['torch'] is None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_input_norm_statistics_are_recomputed_after_every_change():
    from gymloop.nn.torch_policy import InputNorm

    norm = InputNorm(2)
    assert norm.stats()[1].tolist() == [1.0, 1.0]  # identity before two samples
    norm.update(np.array([[0.0, 1.0], [2.0, 3.0]]))
    mean, sd = norm.stats()
    assert mean.tolist() == [1.0, 2.0] and norm.stats()[0] is mean  # cached until something changes
    other = InputNorm(2)
    other.update(np.array([[10.0, 10.0], [14.0, 10.0]]))
    norm.load_state_dict(other.state_dict())
    assert norm.stats()[0].tolist() == [12.0, 10.0] and norm.stats()[1].tolist()[1] == 1.0
    holder = torch.nn.Sequential(norm)  # loaded through a parent module too
    holder.load_state_dict({f"0.{k}": v * 0 for k, v in InputNorm(2).state_dict().items()})
    assert norm.stats()[0].tolist() == [0.0, 0.0]
    moved = norm.to(torch.float64)  # (same buffers: nothing to recompute)
    assert moved.stats()[0].tolist() == [0.0, 0.0]
